#include "components/vader/vader_segment.hpp"

#include <dirent.h>

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <utility>

#include "components/vader/vader_layout.hpp"
#include "transit/btl/util/process_watch.hpp"

namespace transit::vader {
namespace {

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

[[noreturn]] void fail(std::string_view what, const std::string& path) {
    throw std::system_error(errno, std::generic_category(),
                            fmt::format("vader: {} {}", what, path));
}

// A preference, not a binding: if the node is full the kernel places the pages
// elsewhere instead of failing the job.
void prefer_numa_node(void* base, std::size_t size, int node) noexcept {
    if (node < 0 || node >= 64) return;
    unsigned long mask = 1ul << node;
    (void)::syscall(SYS_mbind, base, size, MPOL_PREFERRED, &mask, 64ul, 0u);
}

void* map(int fd, std::size_t size, const std::string& path) {
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) fail("cannot map", path);
    return base;
}

}  // namespace

std::uint64_t random64() {
    std::uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))
        throw std::system_error(errno, std::generic_category(), "vader: getrandom");
    return r;
}

std::string segment_file_name(std::string_view job_id, Rank rank, std::uint64_t random) {
    std::string job(job_id);
    for (char& c : job) {
        const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!keep) c = '_';
    }
    return fmt::format("transit-{}-vader-{}-{:016x}", job, rank, random);
}

void unlink_path(const std::string& path) noexcept {
    (void)::unlink(path.c_str());
}

std::vector<std::string> remove_dead_segments(const std::string& dir) noexcept {
    std::vector<std::string> removed;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return removed;
    const int dfd = ::dirfd(d);
    const uid_t uid = ::geteuid();
    const std::uint64_t own_ns = btl::util::pid_namespace();
    try {
        while (const dirent* e = ::readdir(d)) {
            const std::string_view name(e->d_name);
            if (!name.starts_with("transit-") || name.find("-vader-") == std::string_view::npos)
                continue;
            // Not blocking, not following a link: the directory is shared
            // and the name may be anything.
            Fd fd(::openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
            if (fd.get() < 0) continue;
            struct stat st {};
            if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) continue;
            std::byte raw[sizeof(SegmentHeader)];
            if (::pread(fd.get(), raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) continue;
            const auto field = [&raw]<typename T>(std::size_t offset, T& out) {
                std::memcpy(&out, raw + offset, sizeof out);
            };
            std::uint64_t magic = 0, pid_ns = 0, start_time = 0;
            std::uint32_t pid = 0;
            field(offsetof(SegmentHeader, magic), magic);
            field(offsetof(SegmentHeader, pid), pid);
            field(offsetof(SegmentHeader, pid_ns), pid_ns);
            field(offsetof(SegmentHeader, start_time), start_time);
            if (magic != segment_magic || pid == 0 || pid > INT32_MAX || own_ns == 0 ||
                pid_ns != own_ns)
                continue;
            if (!btl::util::process_gone(static_cast<pid_t>(pid), start_time)) continue;
            if (::unlinkat(dfd, e->d_name, 0) == 0) removed.emplace_back(name);
        }
    } catch (...) {
        // Out of memory for a name: what was removed stays removed.
    }
    ::closedir(d);
    return removed;
}

SharedFile SharedFile::create(std::string_view dir, std::string_view job_id, Rank rank,
                              std::size_t size, std::size_t reserve, int numa_node,
                              std::span<const Extent> supply_now) {
    SharedFile f;
    f.path_ = fmt::format("{}/{}", dir, segment_file_name(job_id, rank, random64()));
    f.fd_ = ::open(f.path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f.fd_ < 0) fail("cannot create", f.path_);
    f.owner_ = true;
    f.linked_ = true;
    const std::size_t total = size + reserve;
    if (::ftruncate(f.fd_, static_cast<off_t>(total)) != 0) fail("cannot size", f.path_);
    f.base_ = map(f.fd_, total, f.path_);
    f.size_ = total;
    prefer_numa_node(f.base_, total, numa_node);
    const Extent whole{0, size};
    if (supply_now.empty()) supply_now = std::span(&whole, 1);
    for (const Extent& e : supply_now) {
        if (e.offset > size || e.len > size - e.offset) {
            errno = EINVAL;
            fail("a part outside", f.path_);
        }
        // Touched now: tmpfs pages are placed where first faulted, and a full
        // /dev/shm should fail here (SIGBUS-free) rather than mid-transfer.
        if (!f.provide(e.offset, e.len)) {
            errno = ENOSPC;
            fail("no space for", f.path_);
        }
        std::memset(f.data() + e.offset, 0, e.len);
    }
    return f;
}

bool SharedFile::provide(std::size_t offset, std::size_t len) noexcept {
    if (fd_ < 0 || offset > size_ || len > size_ - offset) return false;
    return ::posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(len)) == 0;
}

void SharedFile::reclaim(std::size_t offset, std::size_t len) noexcept {
    if (fd_ < 0 || offset > size_ || len > size_ - offset) return;
    (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                      static_cast<off_t>(len));
}

SharedFile SharedFile::attach(const std::string& path) {
    return map_peer(path, O_NOFOLLOW);
}

// /proc/<pid>/fd/<fd> is a link the kernel resolves to the open file itself.
SharedFile SharedFile::attach_process(std::uint32_t pid, int fd) {
    return map_peer(fmt::format("/proc/{}/fd/{}", pid, fd), 0);
}

SharedFile SharedFile::map_peer(const std::string& path, int open_flags) {
    SharedFile f;
    f.path_ = path;
    Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | open_flags));
    if (fd.get() < 0) fail("cannot open", path);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail("cannot stat", path);
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        fail("not a shared-memory file:", path);
    }
    if (st.st_uid != ::geteuid()) {
        errno = EPERM;
        fail("not owned by this user:", path);
    }
    if ((st.st_mode & 077) != 0) {
        errno = EPERM;
        fail("open to other users (not mode 0600):", path);
    }
    f.size_ = static_cast<std::size_t>(st.st_size);
    f.base_ = map(fd.get(), f.size_, path);
    return f;
}

void SharedFile::unlink() noexcept {
    if (owner_ && linked_) unlink_path(path_);
    linked_ = false;
}

void SharedFile::release() noexcept {
    unlink();
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
    base_ = nullptr;
    size_ = 0;
    fd_ = -1;
}

SharedFile::~SharedFile() {
    release();
}

SharedFile::SharedFile(SharedFile&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      owner_(std::exchange(other.owner_, false)),
      linked_(std::exchange(other.linked_, false)) {}

SharedFile& SharedFile::operator=(SharedFile&& other) noexcept {
    if (this != &other) {
        release();
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::exchange(other.fd_, -1);
        path_ = std::move(other.path_);
        owner_ = std::exchange(other.owner_, false);
        linked_ = std::exchange(other.linked_, false);
    }
    return *this;
}

}  // namespace transit::vader
