#include "transit/btl/util/leftovers.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <mqueue.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "transit/btl/util/process_watch.hpp"

namespace transit::btl::util {
namespace {

constexpr std::string_view kind_names[] = {"file", "posix_mq", "posix_shm"};

std::string_view name_of(LeftoverKind kind) {
    return kind_names[static_cast<std::size_t>(kind)];
}

[[noreturn]] void fail(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), "leftovers: " + what);
}

// The directory exists, is a directory (not a link), is this user's and
// closed to others.
bool trusted_directory(const std::string& dir) {
    struct stat st {};
    return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
           (st.st_mode & 077) == 0;
}

// A component name as it may appear in a file name.
std::string file_safe(std::string_view owner) {
    std::string out(owner);
    for (char& c : out) {
        const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '_' || c == '.';
        if (!keep) c = '_';
    }
    return out.empty() ? std::string("_") : out;
}

void check_name(LeftoverKind kind, std::string_view name) {
    if (name.empty() || name.front() != '/' || name.find('\n') != std::string_view::npos)
        throw std::invalid_argument("leftovers: a name must start with '/' and hold no newline");
    if (kind != LeftoverKind::file &&
        (name.size() < 2 || name.find('/', 1) != std::string_view::npos))
        throw std::invalid_argument("leftovers: a queue or shared-memory name is \"/name\"");
}

// Removes one listed object; false when it could not be (and is still there).
bool remove_object(std::string_view kind, const std::string& name) noexcept {
    int rc = -1;
    if (kind == name_of(LeftoverKind::file)) {
        // Only a file of this user: the path was listed by one of its processes,
        // but what is there now may be anyone's.
        struct stat st {};
        if (::lstat(name.c_str(), &st) != 0) return errno == ENOENT;
        if (st.st_uid != ::geteuid()) return true;  // not ours to remove: forgotten
        rc = ::unlink(name.c_str());
    } else if (kind == name_of(LeftoverKind::posix_mq)) {
        rc = ::mq_unlink(name.c_str());
    } else if (kind == name_of(LeftoverKind::posix_shm)) {
        rc = ::shm_unlink(name.c_str());
    } else {
        return true;  // a kind this build does not know: left alone, forgotten
    }
    return rc == 0 || errno == ENOENT;
}

// "<pid>-<start time>-<owner>" -> pid, start time and owner; false if not one.
bool parse_list_name(std::string_view file, pid_t& pid, std::uint64_t& start, std::string& owner) {
    const char* end = file.data() + file.size();
    const auto [after_pid, e1] = std::from_chars(file.data(), end, pid);
    if (e1 != std::errc() || pid <= 0 || after_pid == end || *after_pid != '-') return false;
    const auto [after_start, e2] = std::from_chars(after_pid + 1, end, start);
    if (e2 != std::errc() || after_start == end || *after_start != '-') return false;
    owner.assign(after_start + 1, end);
    return !owner.empty();
}

}  // namespace

std::string leftovers_directory() {
    return "/dev/shm/transit-leftovers-" + std::to_string(::geteuid()) + "-" +
           std::to_string(pid_namespace());
}

Leftovers::Leftovers(std::string_view owner) {
    const std::string dir = leftovers_directory();
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail("cannot create " + dir);
    if (!trusted_directory(dir)) {
        errno = EPERM;
        fail(dir + " is not a directory of this user closed to others");
    }
    const pid_t me = ::getpid();
    path_ = dir + "/" + std::to_string(me) + "-" + std::to_string(process_start_time(me)) + "-" +
            file_safe(owner);
}

Leftovers::~Leftovers() {
    if (!path_.empty() && lines_.empty()) ::unlink(path_.c_str());
}

Leftovers::Leftovers(Leftovers&& other) noexcept
    : path_(std::exchange(other.path_, {})), lines_(std::move(other.lines_)) {}

Leftovers& Leftovers::operator=(Leftovers&& other) noexcept {
    if (this != &other) {
        if (!path_.empty() && lines_.empty()) ::unlink(path_.c_str());
        path_ = std::exchange(other.path_, {});
        lines_ = std::move(other.lines_);
    }
    return *this;
}

void Leftovers::add(LeftoverKind kind, std::string_view name) {
    check_name(kind, name);
    std::string line = std::string(name_of(kind)) + " " + std::string(name) + "\n";
    const int fd =
        ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) fail("cannot open " + path_);
    const ssize_t n = ::write(fd, line.data(), line.size());
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size())) {
        errno = n < 0 ? err : ENOSPC;
        fail("cannot write " + path_);
    }
    line.pop_back();
    lines_.push_back(std::move(line));
}

void Leftovers::forget(LeftoverKind kind, std::string_view name) noexcept {
    for (auto it = lines_.begin(); it != lines_.end(); ++it) {
        const std::string_view l(*it);
        const std::string_view k = name_of(kind);
        if (l.size() == k.size() + 1 + name.size() && l.starts_with(k) && l[k.size()] == ' ' &&
            l.substr(k.size() + 1) == name) {
            lines_.erase(it);
            rewrite();
            return;
        }
    }
}

// The list as lines_ has it: written beside and renamed over, so a process
// killed meanwhile leaves the old list or the new one, never half of one.
void Leftovers::rewrite() noexcept {
    if (lines_.empty()) {
        ::unlink(path_.c_str());
        return;
    }
    try {
        const std::string next = path_ + ".next";
        const int fd =
            ::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) return;
        std::string all;
        for (const std::string& l : lines_) all += l + "\n";
        const bool written =
            ::write(fd, all.data(), all.size()) == static_cast<ssize_t>(all.size());
        ::close(fd);
        if (!written || ::rename(next.c_str(), path_.c_str()) != 0) ::unlink(next.c_str());
    } catch (...) {
        // Out of memory: the old list stays; its extra names are harmless.
    }
}

std::vector<std::string> remove_leftovers_of_gone_processes() noexcept {
    std::vector<std::string> removed;
    try {
        const std::string dir = leftovers_directory();
        if (!trusted_directory(dir)) return removed;
        DIR* d = ::opendir(dir.c_str());
        if (d == nullptr) return removed;
        std::vector<std::string> names;
        while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
        ::closedir(d);
        for (const std::string& file : names) {
            pid_t pid = 0;
            std::uint64_t start = 0;
            std::string owner;
            const std::string path = dir + "/" + file;
            if (file.ends_with(".next")) {
                // A rewrite cut short: its process's list is the other file.
                if (parse_list_name(file.substr(0, file.size() - 5), pid, start, owner) &&
                    process_gone(pid, start))
                    ::unlink(path.c_str());
                continue;
            }
            if (!parse_list_name(file, pid, start, owner) || !process_gone(pid, start)) continue;
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0) continue;
            std::string text;
            char buf[4096];
            for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
                text.append(buf, static_cast<std::size_t>(n));
            ::close(fd);
            bool all_removed = true;
            for (std::size_t at = 0; at < text.size();) {
                std::size_t end = text.find('\n', at);
                if (end == std::string::npos) end = text.size();
                const std::string line = text.substr(at, end - at);
                at = end + 1;
                const std::size_t space = line.find(' ');
                if (space == std::string::npos) continue;
                const std::string name = line.substr(space + 1);
                if (!remove_object(std::string_view(line).substr(0, space), name)) {
                    all_removed = false;
                    continue;
                }
                removed.push_back(owner + ": " + line);
            }
            if (all_removed) ::unlink(path.c_str());
        }
    } catch (...) {
        // Out of memory: what was removed stays removed; the rest waits for the next sweep.
    }
    return removed;
}

}  // namespace transit::btl::util
