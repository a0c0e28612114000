#include "name_table.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "debris.hpp"

namespace transit::run {
namespace {

std::string hex_of(const std::string& name) {
    std::string out;
    for (const char c : name) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
    return out;
}

// Held while a name file is checked and changed: two launchers publishing
// one name at once must not both find it free.
class DirLock {
  public:
    explicit DirLock(const std::string& dir)
        : fd_(::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
        if (fd_ >= 0) ::flock(fd_, LOCK_EX);
    }
    ~DirLock() {
        if (fd_ >= 0) ::close(fd_);  // closing lets the lock go
    }
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;
    bool held() const noexcept { return fd_ >= 0; }

  private:
    int fd_;
};

// Whether the launcher "<pid> <start time>" still runs.
bool alive(const std::string& mark) {
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(mark.data(), mark.data() + mark.size(), pid);
    return ec == std::errc() && pid > 0 && process_mark(pid) == mark;
}

}  // namespace

NameTable::NameTable(std::string base, std::string job_id)
    : dir_(fmt::format("{}/transit-names-{}", base, ::getuid())),
      job_id_(std::move(job_id)),
      mark_(process_mark(::getpid())) {}

// The directory is made on first use, and must be this user's alone: names
// lead clients to servers.
bool NameTable::ready(std::string& why) {
    if (ready_) return true;
    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
        why = fmt::format("cannot create {}: {}", dir_, std::strerror(errno));
        return false;
    }
    struct stat st {};
    if (::lstat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
        (st.st_mode & 077) != 0) {
        why = fmt::format("{} is not a directory of this user's alone (mode 0700)", dir_);
        return false;
    }
    ready_ = true;
    sweep_dead();
    return true;
}

std::string NameTable::path_of(const std::string& name) const {
    return dir_ + "/" + hex_of(name);
}

// Lines: launcher mark, job id, rank, scope, persistence; then the value.
std::optional<NameTable::Entry> NameTable::read(const std::string& path) const {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    Entry e;
    std::string rank, scope, persistence;
    if (!std::getline(in, e.launcher) || !std::getline(in, e.job_id) || !std::getline(in, rank) ||
        !std::getline(in, scope) || !std::getline(in, persistence))
        return std::nullopt;
    std::ostringstream rest;
    rest << in.rdbuf();
    e.value = rest.str();
    if (std::from_chars(rank.data(), rank.data() + rank.size(), e.rank).ec != std::errc())
        return std::nullopt;
    e.scope = scope == "job" ? Scope::job : Scope::node;
    e.per_process = persistence == "process";
    return e;
}

bool NameTable::write(const std::string& path, const Entry& e, std::string& why) const {
    const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << e.launcher << '\n'
            << e.job_id << '\n'
            << e.rank << '\n'
            << (e.scope == Scope::job ? "job" : "node") << '\n'
            << (e.per_process ? "process" : "job") << '\n'
            << e.value;
        if (!out.flush()) {
            why = fmt::format("cannot write {}", tmp);
            ::unlink(tmp.c_str());
            return false;
        }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        why = fmt::format("cannot rename {}: {}", tmp, std::strerror(errno));
        ::unlink(tmp.c_str());
        return false;
    }
    return true;
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
    const DirLock lock(dir_);
    if (!lock.held()) {
        why = fmt::format("cannot lock {}: {}", dir_, std::strerror(errno));
        return Result::failed;
    }
    for (const auto& [name, value] : data) {
        const std::optional<Entry> e = read(path_of(name));
        if (e && alive(e->launcher)) {
            why = fmt::format("\"{}\" is published by rank {} of job {}", name, e->rank, e->job_id);
            return Result::duplicate;
        }
    }
    Entry entry = how;
    entry.job_id = job_id_;
    entry.launcher = mark_;
    for (const auto& [name, value] : data) {
        entry.value = value;
        if (!write(path_of(name), entry, why)) return Result::failed;
        mine_[name] = {entry.rank, entry.per_process};
    }
    return Result::ok;
}

std::optional<NameTable::Entry> NameTable::find(const std::string& name) {
    std::lock_guard guard(mutex_);
    std::string why;
    if (name.empty() || name.size() > max_name || !ready(why)) return std::nullopt;
    std::optional<Entry> e = read(path_of(name));
    if (!e || !alive(e->launcher)) return std::nullopt;
    if (e->scope == Scope::job && e->job_id != job_id_) return std::nullopt;
    return e;
}

NameTable::Result NameTable::unpublish(const std::string& name, unsigned rank, std::string& why) {
    std::lock_guard guard(mutex_);
    if (name.empty() || name.size() > max_name) return Result::not_found;
    if (!ready(why)) return Result::failed;
    const DirLock lock(dir_);
    const std::optional<Entry> e = read(path_of(name));
    if (!e || !alive(e->launcher) || (e->scope == Scope::job && e->job_id != job_id_)) {
        why = fmt::format("\"{}\" is not published", name);
        return Result::not_found;
    }
    if (e->launcher != mark_ || e->rank != rank) {
        why = fmt::format("\"{}\" was published by rank {} of job {}", name, e->rank, e->job_id);
        return Result::not_owner;
    }
    ::unlink(path_of(name).c_str());
    mine_.erase(name);
    return Result::ok;
}

void NameTable::remove_if_ours(const std::string& name) {
    const std::string path = path_of(name);
    const std::optional<Entry> e = read(path);
    if (e && e->launcher == mark_) ::unlink(path.c_str());
}

void NameTable::forget_rank(unsigned rank, bool per_process_only) {
    std::lock_guard guard(mutex_);
    if (!ready_) return;
    const DirLock lock(dir_);
    for (auto it = mine_.begin(); it != mine_.end();) {
        const auto [owner, per_process] = it->second;
        if (owner != rank || (per_process_only && !per_process)) {
            ++it;
            continue;
        }
        remove_if_ours(it->first);
        it = mine_.erase(it);
    }
}

void NameTable::forget_all() {
    std::lock_guard guard(mutex_);
    if (!ready_) return;
    const DirLock lock(dir_);
    for (const auto& [name, owner] : mine_) remove_if_ours(name);
    mine_.clear();
}

// Files of launchers that are gone (killed outright): they name nothing.
void NameTable::sweep_dead() {
    const DirLock lock(dir_);
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string file = f.path().filename().string();
        if (file.starts_with(".") || file.find(".tmp-") != std::string::npos) continue;
        const std::optional<Entry> e = read(f.path().string());
        if (e && !alive(e->launcher)) ::unlink(f.path().c_str());
    }
}

}  // namespace transit::run
