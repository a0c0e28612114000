// Process and file chores of the launcher.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace transit::run {

// The program's path as execve() needs it: as given when it contains a '/',
// else the first executable match in $PATH.  Empty when there is none.
std::string find_program(const std::string& name);

// Where each rank runs.  `cores` is what this process may use (cores, or
// hardware threads where hwloc finds no cores); 0 when unknown.
struct CoreBindings {
    unsigned cores = 0;
    std::vector<cpu_set_t> sets;    // one per rank; empty when not binding
    std::vector<unsigned> core_of;  // rank -> core index, when binding
};

// One core per rank (wrapping around when there are more ranks than cores)
// when forced, or by default when every rank gets a core of its own.
CoreBindings core_bindings(unsigned np, bool force_core, bool force_none);

// "0-3,8" for a CPU set.
std::string cpu_list(const cpu_set_t& set);

// Kills and reaps every process whose parent is this one (orphans adopted as
// child subreaper); returns how many it found.
int kill_adopted_children();

// Removes a directory tree; errors are ignored (best effort at exit).
void remove_tree(const std::string& path);

// Removes /dev/shm/transit-<job_id>-* (what the job's ranks left); returns
// the names removed.
std::vector<std::string> remove_job_shm(const std::string& job_id);

// libfabric's shm provider names a region /dev/shm/<pid>:<uid>:<n> and removes
// it when its endpoint closes: a rank killed with one open leaves it behind
// (and a later process given the same pid finds it in the way).  Removes
// those of `pid` changed no later than `ended` (the rank's end, CLOCK_REALTIME_COARSE,
// the clock file times come from): a newer one belongs to another process that
// got the pid since.  Returns the names removed.
std::vector<std::string> remove_dead_rank_regions(pid_t pid, const timespec& ended);

}  // namespace transit::run
