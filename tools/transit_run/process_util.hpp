// Process and file chores of the launcher.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace transit::run {

// The program's path as execve() needs it: as given when it contains a '/',
// else the first executable match in $PATH.  Empty when there is none.
std::string find_program(const std::string& name);

// CPU sets, one per rank, when ranks are to be bound (one core each, wrapping
// around when there are more ranks than cores); empty when not binding.
std::vector<cpu_set_t> core_bindings(unsigned np, bool force_core, bool force_none);

// Kills and reaps every process whose parent is this one (orphans adopted as
// child subreaper); returns how many it found.
int kill_adopted_children();

// Removes a directory tree; errors are ignored (best effort at exit).
void remove_tree(const std::string& path);

// Removes /dev/shm/transit-<job_id>-* (what the job's ranks left); returns
// the names removed.
std::vector<std::string> remove_job_shm(const std::string& job_id);

}  // namespace transit::run
