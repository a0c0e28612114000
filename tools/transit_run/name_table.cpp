#include "name_table.hpp"

#include <unistd.h>

#include <fmt/format.h>

namespace transit::run {
namespace {

NameTable::Entry from_kept(rt::NameEntry&& e) {
    NameTable::Entry out;
    out.value = std::move(e.value);
    out.job_id = std::move(e.job_id);
    out.rank = e.rank;
    out.scope = e.job_scope ? NameTable::Scope::job : NameTable::Scope::node;
    out.per_process = e.per_process;
    out.launcher = std::move(e.owner);
    return out;
}

}  // namespace

NameTable::NameTable(std::string dir, std::string job_id)
    : dir_(std::move(dir)), job_id_(std::move(job_id)), mark_(rt::process_mark(::getpid())) {}

// The directory is opened (made) on first use, and must be this user's alone:
// names lead clients to servers.  What launchers killed outright left goes.
bool NameTable::ready(std::string& why) {
    if (ready_) return true;
    if (!dir_.open(why)) return false;
    const rt::NameDirectory::Lock lock(dir_, why);
    if (!lock.held()) return false;
    dir_.sweep(lock);
    ready_ = true;
    return true;
}

std::optional<NameTable::Entry> NameTable::live(const std::string& name) const {
    rt::NameEntry e;
    if (dir_.read(name, e) != rt::NameDirectory::Found::live) return std::nullopt;
    return from_kept(std::move(e));
}

NameTable::Result NameTable::publish(const std::vector<std::pair<std::string, std::string>>& data,
                                     const Entry& how, std::string& why) {
    std::lock_guard guard(mutex_);
    for (const auto& [name, value] : data)
        if (name.empty() || name.size() > max_name) {
            why = fmt::format("a name of {} bytes (1 to {})", name.size(), max_name);
            return Result::bad_name;
        }
    if (!ready(why)) return Result::failed;
    const rt::NameDirectory::Lock lock(dir_, why);
    if (!lock.held()) return Result::failed;
    for (const auto& [name, value] : data) {
        rt::NameEntry e;
        switch (dir_.read(name, e)) {
            case rt::NameDirectory::Found::live:
                why =
                    fmt::format("\"{}\" is published by rank {} of job {}", name, e.rank, e.job_id);
                return Result::duplicate;
            case rt::NameDirectory::Found::gone:
            case rt::NameDirectory::Found::invalid:
                dir_.remove(lock, name);  // names nothing
                break;
            case rt::NameDirectory::Found::absent:
                break;
        }
    }
    rt::NameEntry entry{mark_, job_id_, how.rank, how.scope == Scope::job, how.per_process, {}};
    for (const auto& [name, value] : data) {
        entry.value = value;
        if (!dir_.place(lock, name, entry, why)) return Result::failed;
        mine_[name] = {entry.rank, entry.per_process};
    }
    return Result::ok;
}

std::optional<NameTable::Entry> NameTable::find(const std::string& name) {
    std::lock_guard guard(mutex_);
    std::string why;
    if (name.empty() || name.size() > max_name || !ready(why)) return std::nullopt;
    std::optional<Entry> e = live(name);
    if (e && e->scope == Scope::job && e->job_id != job_id_) return std::nullopt;
    return e;
}

NameTable::Result NameTable::unpublish(const std::string& name, unsigned rank, std::string& why) {
    std::lock_guard guard(mutex_);
    if (name.empty() || name.size() > max_name) return Result::not_found;
    if (!ready(why)) return Result::failed;
    const rt::NameDirectory::Lock lock(dir_, why);
    if (!lock.held()) return Result::failed;
    const std::optional<Entry> e = live(name);
    if (!e || (e->scope == Scope::job && e->job_id != job_id_)) {
        why = fmt::format("\"{}\" is not published", name);
        return Result::not_found;
    }
    if (e->launcher != mark_ || e->rank != rank) {
        why = fmt::format("\"{}\" was published by rank {} of job {}", name, e->rank, e->job_id);
        return Result::not_owner;
    }
    dir_.remove(lock, name);
    mine_.erase(name);
    return Result::ok;
}

void NameTable::remove_if_ours(const rt::NameDirectory::Lock& lock, const std::string& name) {
    const std::optional<Entry> e = live(name);
    if (e && e->launcher == mark_) dir_.remove(lock, name);
}

void NameTable::forget_rank(unsigned rank, bool per_process_only) {
    std::lock_guard guard(mutex_);
    if (!ready_) return;
    std::string why;
    const rt::NameDirectory::Lock lock(dir_, why);
    for (auto it = mine_.begin(); it != mine_.end();) {
        const auto [owner, per_process] = it->second;
        if (owner != rank || (per_process_only && !per_process)) {
            ++it;
            continue;
        }
        remove_if_ours(lock, it->first);
        it = mine_.erase(it);
    }
}

void NameTable::forget_all() {
    std::lock_guard guard(mutex_);
    if (!ready_) return;
    std::string why;
    const rt::NameDirectory::Lock lock(dir_, why);
    for (const auto& [name, owner] : mine_) remove_if_ours(lock, name);
    mine_.clear();
}

}  // namespace transit::run
