// Binds the calling process to one CPU, for the two sides of a ping-pong
// (a failure is printed and the run goes on unbound).
#pragma once

#include <sched.h>

#include <cstdio>

inline void bind_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
}
