// A shared-memory file: created by its owner (mode 0600, unpredictable name
// carrying the job id), mapped by the local peers, and unlinked as early as
// possible so that a crash leaves nothing behind.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transit/runtime.hpp"

namespace transit::vader {

class SharedFile {
  public:
    SharedFile() = default;
    ~SharedFile();
    SharedFile(SharedFile&& other) noexcept;
    SharedFile& operator=(SharedFile&& other) noexcept;
    SharedFile(const SharedFile&) = delete;
    SharedFile& operator=(const SharedFile&) = delete;

    // A byte range of the file.
    struct Extent {
        std::size_t offset = 0;
        std::size_t len = 0;
    };

    // Creates <dir>/transit-<job>-vader-<rank>-<random>, sized and mapped, after
    // asking for `numa_node` (-1: no preference).  The `supply_now` parts of the
    // first `size` bytes (all of them when empty) get their pages at once,
    // allocated and touched by this process (first touch); the rest of `size`
    // and the `reserve` bytes after it stay without pages until provide() asks
    // for them.  Throws std::system_error naming the path.
    static SharedFile create(std::string_view dir, std::string_view job_id, Rank rank,
                             std::size_t size, std::size_t reserve, int numa_node,
                             std::span<const Extent> supply_now = {});
    // Maps a peer's file: one of this user's, readable by nobody else (mode
    // 0600).  Throws std::system_error naming the path.
    static SharedFile attach(const std::string& path);
    // Maps the file process `pid` holds open as descriptor `fd` (through
    // /proc/<pid>/fd, which the kernel opens for the same user only), with
    // attach()'s checks: a named file need not exist.
    static SharedFile attach_process(std::uint32_t pid, int fd);

    char* data() const noexcept { return static_cast<char*>(base_); }
    std::size_t size() const noexcept { return size_; }
    const std::string& path() const noexcept { return path_; }
    int fd() const noexcept { return fd_; }  // the owner's, else -1
    bool owner() const noexcept { return owner_; }
    bool linked() const noexcept { return linked_; }

    // Removes the name (the mapping stays valid).  Idempotent, never throws.
    void unlink() noexcept;

    // The owner's page supply for what create() left without pages: provide() allocates
    // [offset, offset + len) (false when the file system is full: touching
    // pages it could not supply would be a SIGBUS), reclaim() gives them back.
    bool provide(std::size_t offset, std::size_t len) noexcept;
    void reclaim(std::size_t offset, std::size_t len) noexcept;

  private:
    static SharedFile map_peer(const std::string& path, int open_flags);
    void release() noexcept;

    void* base_ = nullptr;
    std::size_t size_ = 0;
    int fd_ = -1;  // the owner keeps it, to supply the reserved pages
    std::string path_;
    bool owner_ = false;
    bool linked_ = false;
};

// The file name for a job id: characters outside [A-Za-z0-9._-] become '_'.
std::string segment_file_name(std::string_view job_id, Rank rank, std::uint64_t random);

// 64 random bits.  Throws std::system_error.
std::uint64_t random64();

// Removes a file by name when a peer knows it is the last to map it.
void unlink_path(const std::string& path) noexcept;

// Removes from `dir` the segment files (transit-*-vader-*) of this user whose
// owner is gone: the header names the owner (pid, pid namespace, start time)
// and btl::util::process_gone says it no longer runs.  A file of another
// user, one not yet formatted, one made in another pid namespace (or by a
// build that did not record it) is left alone.  Returns the names removed.
// What a killed process leaves: its name goes only once every local peer
// mapped it, or at finalize.
std::vector<std::string> remove_dead_segments(const std::string& dir) noexcept;

}  // namespace transit::vader
