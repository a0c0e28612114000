#include "runtime/directory_names.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "transit/progress.hpp"

namespace transit::rt {
namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting lookup reads the entry again: a name published while
// it waits is seen within this (a read is one openat, a few microseconds).
constexpr std::chrono::milliseconds look_every{10};
// A wait longer than this (49 days) is cut to it: the clock cannot overflow.
constexpr std::chrono::milliseconds longest_wait{std::uint64_t{1} << 32};

std::string holder(std::string_view name, const NameEntry& e) {
    const std::string_view pid = std::string_view(e.owner).substr(0, e.owner.find(' '));
    return fmt::format("the name \"{}\" is published by rank {} of job {} (process {})", name,
                       e.rank, e.job_id, pid);
}

// The checks of the pml, again: this service is also used on its own (tests,
// tools), and a name becomes a file name.
bool valid(std::string_view name, std::string& why) {
    why = name_problem(name);
    return why.empty();
}

}  // namespace

DirectoryNames::DirectoryNames(std::string dir, std::string job_id, Rank rank)
    : dir_(std::move(dir)),
      job_id_(std::move(job_id)),
      rank_(rank),
      mark_(process_mark(::getpid())) {}

DirectoryNames::~DirectoryNames() {
    if (mine_.empty()) return;
    std::string why;
    const NameDirectory::Lock lock(dir_, why);
    for (const std::string& name : mine_) {
        NameEntry e;
        if (dir_.read(name, e) == NameDirectory::Found::live && e.owner == mark_)
            dir_.remove(lock, name);
    }
}

bool DirectoryNames::usable(std::string& why) {
    if (!dir_.open(why)) return false;
    if (!swept_) {
        // What processes killed outright left, once per process life here.
        const NameDirectory::Lock lock(dir_, why);
        if (!lock.held()) return false;
        dir_.sweep(lock);
        swept_ = true;
    }
    return true;
}

void DirectoryNames::clean(std::string_view name) {
    std::string why;
    const NameDirectory::Lock lock(dir_, why);
    NameEntry e;
    // Read again under the lock: a publisher may have taken the name since.
    if (lock.held() && dir_.read(name, e) != NameDirectory::Found::live) dir_.remove(lock, name);
}

Status DirectoryNames::publish_name(std::string_view name, std::string_view value,
                                    std::string& why) {
    if (!valid(name, why)) return Status::bad_param;
    if (value.find('\0') != std::string_view::npos) {
        why = "the value holds a NUL byte";
        return Status::bad_param;
    }
    if (!usable(why)) return Status::error;
    const NameDirectory::Lock lock(dir_, why);
    if (!lock.held()) return Status::error;
    NameEntry e;
    switch (dir_.read(name, e)) {
        case NameDirectory::Found::live:
            why = holder(name, e);
            return Status::exists;
        case NameDirectory::Found::gone:
        case NameDirectory::Found::invalid:
            dir_.remove(lock, name);  // its owner is gone: the name is free
            break;
        case NameDirectory::Found::absent:
            break;
    }
    const NameEntry mine{mark_, job_id_, rank_, false, true, std::string(value)};
    if (!dir_.place(lock, name, mine, why)) {
        // Another keeper that ignored the lock may have won the link.
        if (dir_.read(name, e) == NameDirectory::Found::live) {
            why = holder(name, e);
            return Status::exists;
        }
        return Status::error;
    }
    mine_.emplace(name);
    return Status::success;
}

Status DirectoryNames::lookup_name(std::string_view name, std::chrono::milliseconds wait,
                                   std::string& value, std::string& why) {
    if (!valid(name, why)) return Status::bad_param;
    if (!usable(why)) return Status::error;
    wait = std::clamp(wait, std::chrono::milliseconds(0), longest_wait);
    const auto until = Clock::now() + wait;
    auto next_look = Clock::now();
    for (unsigned idle = 0;;) {
        if (const auto now = Clock::now(); now >= next_look) {
            NameEntry e;
            const NameDirectory::Found found = dir_.read(name, e);
            // A name kept for its job only (transit_run's namespace range)
            // is not ours to see.
            if (found == NameDirectory::Found::live && (!e.job_scope || e.job_id == job_id_)) {
                value = std::move(e.value);
                return Status::success;
            }
            if (found == NameDirectory::Found::gone || found == NameDirectory::Found::invalid)
                clean(name);
            if (wait.count() == 0) {
                why =
                    fmt::format("no process published the name \"{}\" (in {})", name, dir_.path());
                return Status::not_found;
            }
            if (now >= until) {
                why = fmt::format("no process published the name \"{}\" within {} ms (in {})", name,
                                  wait.count(), dir_.path());
                return Status::timeout;
            }
            next_look = now + look_every;
        }
        // Serve peers while waiting, as a fence does.
        idle = progress_engine().progress() > 0 ? 0 : idle + 1;
        if (idle > 64) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

Status DirectoryNames::unpublish_name(std::string_view name, std::string& why) {
    if (!valid(name, why)) return Status::bad_param;
    if (!usable(why)) return Status::error;
    const NameDirectory::Lock lock(dir_, why);
    if (!lock.held()) return Status::error;
    NameEntry e;
    switch (dir_.read(name, e)) {
        case NameDirectory::Found::live:
            break;
        case NameDirectory::Found::gone:
        case NameDirectory::Found::invalid:
            dir_.remove(lock, name);
            [[fallthrough]];
        case NameDirectory::Found::absent:
            why = fmt::format("the name \"{}\" is not published", name);
            return Status::not_found;
    }
    if (e.owner != mark_) {
        why = holder(name, e) + ", not by this process";
        return Status::access_denied;
    }
    dir_.remove(lock, name);
    if (const auto it = mine_.find(name); it != mine_.end()) mine_.erase(it);
    return Status::success;
}

}  // namespace transit::rt
