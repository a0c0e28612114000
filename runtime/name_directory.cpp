#include "runtime/name_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

namespace transit::rt {
namespace {

// A holder of the lock keeps it for one check and one link: this long means
// it is stopped (SIGSTOP) or stuck, and the caller gets an error, not a hang.
constexpr std::chrono::seconds lock_limit{5};

constexpr std::string_view temp_prefix = ".tmp-";

// Closes a descriptor on every way out.
class Fd {
  public:
    explicit Fd(int fd) noexcept : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const noexcept { return fd_; }

  private:
    int fd_;
};

std::string first_line(const std::string& path) {
    const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return {};
    char buf[1024];
    const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
    if (n <= 0) return {};
    const std::string_view text(buf, static_cast<std::size_t>(n));
    return std::string(text.substr(0, text.find('\n')));
}

bool all_digits(std::string_view s) {
    if (s.empty() || s.size() > 20) return false;
    for (const char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// "<pid> <start time>", both decimal.
bool valid_mark(std::string_view mark) {
    const std::size_t sp = mark.find(' ');
    return sp != std::string_view::npos && all_digits(mark.substr(0, sp)) &&
           all_digits(mark.substr(sp + 1));
}

bool mark_alive(std::string_view mark) {
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(mark.data(), mark.data() + mark.size(), pid);
    return ec == std::errc() && pid > 0 && process_mark(pid) == mark;
}

bool printable_word(std::string_view s) {
    for (const char c : s)
        if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) >= 0x7f)
            return false;
    return true;
}

// Lines: owner mark, job id, rank, scope, persistence; then the value.
std::string encode(const NameEntry& e) {
    return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", e.owner, e.job_id, e.rank,
                       e.job_scope ? "job" : "node", e.per_process ? "process" : "job", e.value);
}

// Every field checked: the file's bytes are another process's.
std::optional<NameEntry> decode(std::string_view text) {
    std::string_view lines[5];
    for (std::string_view& line : lines) {
        const std::size_t nl = text.find('\n');
        if (nl == std::string_view::npos) return std::nullopt;
        line = text.substr(0, nl);
        text.remove_prefix(nl + 1);
    }
    NameEntry e;
    if (!valid_mark(lines[0])) return std::nullopt;
    if (lines[1].empty() || lines[1].size() > NameDirectory::max_job_id ||
        !printable_word(lines[1]))
        return std::nullopt;
    const auto [end, ec] =
        std::from_chars(lines[2].data(), lines[2].data() + lines[2].size(), e.rank);
    if (ec != std::errc() || end != lines[2].data() + lines[2].size()) return std::nullopt;
    if (lines[3] != "job" && lines[3] != "node") return std::nullopt;
    if (lines[4] != "process" && lines[4] != "job") return std::nullopt;
    if (text.find('\0') != std::string_view::npos) return std::nullopt;
    e.owner = lines[0];
    e.job_id = lines[1];
    e.job_scope = lines[3] == "job";
    e.per_process = lines[4] == "process";
    e.value = text;
    return e;
}

bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

// The pid in a temporary file's name ".tmp-<pid>-<start>-<n>", 0 when not one.
std::string temp_owner(std::string_view file) {
    if (!file.starts_with(temp_prefix)) return {};
    file.remove_prefix(temp_prefix.size());
    const std::size_t dash = file.find('-');
    if (dash == std::string_view::npos) return {};
    const std::size_t dash2 = file.find('-', dash + 1);
    if (dash2 == std::string_view::npos) return {};
    std::string mark(file.substr(0, dash2));
    mark[dash] = ' ';
    return valid_mark(mark) ? mark : std::string{};
}

}  // namespace

std::string process_mark(pid_t pid) {
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) return {};
    std::string_view rest = std::string_view(stat).substr(close + 1);
    std::string_view state, start;
    // Field 3 is the state, field 22 the start time.
    for (int field = 3; field <= 22; ++field) {
        while (rest.starts_with(' ')) rest.remove_prefix(1);
        const std::size_t sp = rest.find(' ');
        const std::string_view value = rest.substr(0, sp);
        if (value.empty()) return {};
        if (field == 3) state = value;
        if (field == 22) start = value;
        rest.remove_prefix(sp == std::string_view::npos ? rest.size() : sp);
    }
    if (state == "Z" || state == "X") return {};
    return fmt::format("{} {}", pid, start);
}

std::string name_file(std::string_view name) {
    std::string out;
    out.reserve(name.size() * 2);
    for (const char c : name)
        fmt::format_to(std::back_inserter(out), "{:02x}", static_cast<unsigned char>(c));
    return out;
}

std::string NameDirectory::default_path() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string base = tmp && *tmp ? tmp : "/tmp";
    return fmt::format("{}/transit-names-{}", base, ::getuid());
}

NameDirectory::~NameDirectory() {
    if (fd_ >= 0) ::close(fd_);
}

bool NameDirectory::open(std::string& why) {
    if (fd_ >= 0) return true;
    const std::string fix =
        "remove it, or choose another directory (parameter runtime_names_dir, or $TMPDIR)";
    if (::mkdir(path_.c_str(), 0700) != 0 && errno != EEXIST) {
        why = fmt::format("cannot create the name directory {}: {}", path_, std::strerror(errno));
        return false;
    }
    // O_NOFOLLOW: a symbolic link planted under the expected name (by another
    // user, in a shared /tmp) is refused, never followed.
    const int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        struct stat st {};
        if (::lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            why = fmt::format("the name directory {} is a symbolic link: {}", path_, fix);
        else if (err == ENOTDIR)
            why = fmt::format("the name directory {} is not a directory: {}", path_, fix);
        else
            why = fmt::format("cannot open the name directory {}: {}", path_, std::strerror(err));
        return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ::close(fd);
        why = fmt::format("the name directory {} is not a directory: {}", path_, fix);
        return false;
    }
    if (st.st_uid != ::getuid()) {
        ::close(fd);
        why = fmt::format("the name directory {} belongs to uid {}, not to this user (uid {}): {}",
                          path_, st.st_uid, ::getuid(), fix);
        return false;
    }
    if ((st.st_mode & 07777) != 0700) {
        ::close(fd);
        why = fmt::format(
            "the name directory {} has mode {:04o}, not 0700 (others could plant "
            "names in it): {}",
            path_, st.st_mode & 07777, fix);
        return false;
    }
    fd_ = fd;
    return true;
}

NameDirectory::Lock::Lock(const NameDirectory& dir, std::string& why) {
    const int fd =
        ::openat(dir.fd_, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) {
        why = fmt::format("cannot open {}/.lock: {}", dir.path_, std::strerror(errno));
        return;
    }
    const auto until = std::chrono::steady_clock::now() + lock_limit;
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() > until) {
            why = errno == EWOULDBLOCK
                      ? fmt::format("another process has held {}/.lock for {} s", dir.path_,
                                    lock_limit.count())
                      : fmt::format("cannot lock {}/.lock: {}", dir.path_, std::strerror(errno));
            ::close(fd);
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    fd_ = fd;
}

NameDirectory::Lock::~Lock() {
    if (fd_ >= 0) ::close(fd_);  // closing lets the lock go
}

NameDirectory::Found NameDirectory::read(std::string_view name, NameEntry& entry) const {
    // O_NOFOLLOW and O_NONBLOCK: neither a link nor a FIFO put in the
    // directory leads the read anywhere else or stops it.
    const Fd fd(::openat(fd_, name_file(name).c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (fd.get() < 0) return errno == ENOENT ? Found::absent : Found::invalid;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::getuid() ||
        st.st_size < 0 || static_cast<std::size_t>(st.st_size) > max_entry)
        return Found::invalid;
    std::string text(max_entry + 1, '\0');
    std::size_t got = 0;
    while (got < text.size()) {
        const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Found::invalid;
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    if (got > max_entry) return Found::invalid;
    text.resize(got);
    std::optional<NameEntry> e = decode(text);
    if (!e) return Found::invalid;
    if (!mark_alive(e->owner)) return Found::gone;
    entry = std::move(*e);
    return Found::live;
}

bool NameDirectory::place(const Lock& lock, std::string_view name, const NameEntry& entry,
                          std::string& why) {
    if (!lock.held()) return false;
    const std::string bytes = encode(entry);
    if (bytes.size() > max_entry) {
        why = fmt::format("the value is too long ({} bytes, at most {})", entry.value.size(),
                          max_entry - (bytes.size() - entry.value.size()));
        return false;
    }
    std::string mark = process_mark(::getpid());
    mark[mark.find(' ')] = '-';
    const std::string temp = fmt::format("{}{}-{}", temp_prefix, mark, temp_serial_++);
    const std::string file = name_file(name);
    {
        const Fd fd(::openat(fd_, temp.c_str(),
                             O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (fd.get() < 0 || !write_all(fd.get(), bytes)) {
            why = fmt::format("cannot write {}/{}: {}", path_, temp, std::strerror(errno));
            if (fd.get() >= 0) ::unlinkat(fd_, temp.c_str(), 0);
            return false;
        }
    }
    // link(), unlike rename(), never replaces: were a keeper to ignore the
    // lock, two publishers still could not both have the name.
    const int rc = ::linkat(fd_, temp.c_str(), fd_, file.c_str(), 0);
    const int err = errno;
    ::unlinkat(fd_, temp.c_str(), 0);
    if (rc != 0) {
        why = err == EEXIST ? fmt::format("the name \"{}\" is already published", name)
                            : fmt::format("cannot link {}/{}: {}", path_, file, std::strerror(err));
        return false;
    }
    return true;
}

void NameDirectory::remove(const Lock& lock, std::string_view name) {
    if (lock.held()) ::unlinkat(fd_, name_file(name).c_str(), 0);
}

void NameDirectory::sweep(const Lock& lock) {
    if (!lock.held()) return;
    const int dup = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup < 0) return;
    DIR* d = ::fdopendir(dup);
    if (!d) {
        ::close(dup);
        return;
    }
    std::vector<std::string> doomed;
    while (const dirent* de = ::readdir(d)) {
        const std::string_view file = de->d_name;
        if (file == "." || file == ".." || file == ".lock") continue;
        if (file.starts_with(temp_prefix)) {
            const std::string owner = temp_owner(file);
            if (!owner.empty() && !mark_alive(owner)) doomed.emplace_back(file);
            continue;
        }
        // Decode the hex back to the name, then read it as any reader would.
        if (file.size() % 2 != 0 || file.size() > 2 * 255) continue;
        std::string name;
        bool hex = true;
        for (std::size_t i = 0; i < file.size() && hex; i += 2) {
            unsigned byte = 0;
            const auto [end, ec] = std::from_chars(file.data() + i, file.data() + i + 2, byte, 16);
            hex = ec == std::errc() && end == file.data() + i + 2;
            name += static_cast<char>(byte);
        }
        NameEntry e;
        if (hex && name_file(name) == file && read(name, e) != Found::live)
            doomed.emplace_back(file);
    }
    ::closedir(d);
    for (const std::string& f : doomed) ::unlinkat(fd_, f.c_str(), 0);
}

}  // namespace transit::rt
