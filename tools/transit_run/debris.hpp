// What a launcher killed outright (kill -9) leaves behind: its job directory
// (PMIx's files, a few MB), the job's /dev/shm/transit-<job id>-* files and
// libfabric's shm regions of its ranks (/dev/shm/<pid>:<uid>:<n>, 16 MiB each).
// Each launcher records in its job directory who it is and which ranks it
// started; the next launcher of the same user removes what launchers that are
// gone left, and nothing of a launcher that still runs.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runtime/name_directory.hpp"

namespace transit::run {

// A process's pid and start time (the name directory's owner marks).
using rt::process_mark;

// Records this launcher in its job directory `dir` (file "launcher").
void mark_job_dir(const std::string& dir);

// Adds a rank's pid to `dir`'s list (file "ranks").
void record_rank(const std::string& dir, pid_t pid);

// Removes, under `base` (the launchers' $TMPDIR), every job directory
// transit-trun-<pid>-<hex> owned by this user whose launcher is gone, with the
// job's /dev/shm files and the shm regions of its ranks that are gone too.
// Returns the job ids removed.
std::vector<std::string> remove_dead_jobs(const std::string& base);

}  // namespace transit::run
