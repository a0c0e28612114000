// The names of one user on one node, one file per name in a directory of that
// user's alone.  Two keepers share it, so each finds the other's names:
// DirectoryNames (a process without a launcher, or whose launcher keeps no
// names) and transit_run's PMIx server (tools/transit_run/name_table.hpp).
//
//   <dir>/<hex of the name>   one entry (at most 240 characters: any name of
//                             max_name_length bytes is a safe file name)
//   <dir>/.lock               flock()ed while an entry is checked and changed
//   <dir>/.tmp-<pid>-<n>      an entry being written, linked into place whole
//
// An entry is the owner's process mark (pid and start time), the publisher's
// job id and rank, its scope and persistence, and the value.  A name lasts as
// long as its owner process: an entry whose owner is gone (killed outright)
// names nothing, and whoever finds it removes it.  The marks are only
// meaningful within one pid namespace: processes that share a directory must
// share it too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace transit::rt {

// A process's pid and start time ("<pid> <ticks since boot>"): unlike the pid
// alone, never the same for two processes.  Empty when no such process runs
// (a zombie has ended: it counts as gone).
std::string process_mark(pid_t pid);

struct NameEntry {
    std::string owner;  // process_mark() of the process the name dies with
    std::string job_id;
    std::uint32_t rank = 0;
    bool job_scope = false;   // seen by the publisher's job only (else by every process)
    bool per_process = true;  // else it lasts as long as its job (transit_run's owner is the
                              // launcher either way)
    std::string value;
};

class NameDirectory {
  public:
    // Largest entry read back (the value is a listen address, a few hundred
    // bytes to a few KiB): a bigger file is not an entry.
    static constexpr std::size_t max_entry = 256 * 1024;
    static constexpr std::size_t max_job_id = 255;

    // $TMPDIR (else /tmp) + "/transit-names-<uid>": where transit_run keeps
    // its names, hence the default of every keeper.
    static std::string default_path();

    explicit NameDirectory(std::string path) : path_(std::move(path)) {}
    ~NameDirectory();
    NameDirectory(const NameDirectory&) = delete;
    NameDirectory& operator=(const NameDirectory&) = delete;

    const std::string& path() const noexcept { return path_; }

    // Creates the directory (mode 0700) when it is missing, then holds it
    // open.  Refused (false, `why` says what to do) when it is a symbolic
    // link, not a directory, not this user's, or open to others: names lead
    // clients to servers, so another user must not be able to plant one.
    // Every later call works from the descriptor, never the path again.
    bool open(std::string& why);
    bool is_open() const noexcept { return fd_ >= 0; }

    // Exclusive over the directory's entries while it lives (flock on
    // ".lock").  Waits at most `limit` for a holder.
    class Lock {
      public:
        Lock(const NameDirectory& dir, std::string& why);
        ~Lock();
        Lock(const Lock&) = delete;
        Lock& operator=(const Lock&) = delete;
        bool held() const noexcept { return fd_ >= 0; }

      private:
        int fd_ = -1;
    };

    enum class Found {
        absent,
        live,     // `entry` holds it
        gone,     // its owner no longer runs
        invalid,  // not an entry (wrong type, owner, size or form): never trusted
    };
    // Reads the entry under `name` (no lock needed: entries appear and go whole).
    Found read(std::string_view name, NameEntry& entry) const;

    // With the lock held and the name found absent: places `entry` under
    // `name` (written to a temporary file, then linked: the name is never
    // seen half-written, and an entry already there is never replaced).
    // False (and `why`) when it cannot be written or is there already.
    bool place(const Lock& lock, std::string_view name, const NameEntry& entry, std::string& why);
    // With the lock held: removes the entry under `name`.
    void remove(const Lock& lock, std::string_view name);
    // With the lock held: removes the entries whose owner is gone, the
    // invalid ones and the temporary files of processes that are gone.
    void sweep(const Lock& lock);

  private:
    std::string path_;
    int fd_ = -1;
    unsigned temp_serial_ = 0;
};

// The file name of `name` (its bytes in hex): any bytes, no '/', no leading '.'.
std::string name_file(std::string_view name);

}  // namespace transit::rt
