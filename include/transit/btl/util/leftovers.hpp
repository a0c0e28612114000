// What a process leaves on the node when it is killed: the named kernel objects
// it made (a POSIX message queue, a POSIX shared-memory object, a file) outlive
// it, and nothing else knows their names.  A transport lists each such object
// here before it makes it; a later process of the same user on the node (every
// process opening the btl framework, and transit_run after one of its ranks
// ended) removes what processes that are gone listed.  A process is named by
// its pid and its start time, so a pid that came round to a new process is not
// mistaken for the old one; a process that still runs loses nothing.
//
// The lists live in /dev/shm/transit-leftovers-<uid>-<pid namespace id>/ (0700,
// this user's only; tmpfs, so they go with the objects at reboot), one file per
// process and owner, "<pid>-<start time>-<owner>", one "<kind> <name>" line per
// object.  Processes of another pid namespace keep separate lists: their pids
// mean nothing here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace transit::btl::util {

enum class LeftoverKind : std::uint8_t {
    file,       // a file by absolute path (a FIFO, a socket file, a lock file ...)
    posix_mq,   // mq_unlink(name): "/name"
    posix_shm,  // shm_unlink(name): "/name"
};

// This process's list of the objects it made for `owner` (a component's name).
// Not thread-safe: one owner, one thread at a time.
class Leftovers {
  public:
    // Throws std::system_error when the list cannot be made (another user owns
    // the directory, /dev/shm is absent or full).
    explicit Leftovers(std::string_view owner);
    // Removes the list when nothing is left on it; what is still listed is
    // removed by a later process once this one is gone.
    ~Leftovers();
    Leftovers(Leftovers&& other) noexcept;
    Leftovers& operator=(Leftovers&& other) noexcept;
    Leftovers(const Leftovers&) = delete;
    Leftovers& operator=(const Leftovers&) = delete;

    // Lists `name` before the object is made (killed in between, the name of
    // an object that was never made is listed: harmless).  Throws
    // std::invalid_argument for a name the kind cannot have (a file's path
    // not absolute, a queue's name not "/x", a newline), std::system_error
    // when the list cannot be written.
    void add(LeftoverKind kind, std::string_view name);
    // The object was removed by its owner.  No-op for a name not listed.
    void forget(LeftoverKind kind, std::string_view name) noexcept;

    // The file holding the list (for tests and logs).
    const std::string& path() const noexcept { return path_; }

  private:
    void rewrite() noexcept;

    std::string path_;
    std::vector<std::string> lines_;
};

// The directory of this user's lists in this pid namespace.
std::string leftovers_directory();

// Removes the objects listed by this user's processes that are gone, then
// their lists; returns what it removed ("<owner>: <kind> <name>").  A listed
// object already gone is skipped.  Never throws.
std::vector<std::string> remove_leftovers_of_gone_processes() noexcept;

}  // namespace transit::btl::util
