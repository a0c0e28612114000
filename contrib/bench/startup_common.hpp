// Shared by startup_transit.cpp and startup_mpi.cpp: the clock and this
// process's proportional set size, so both programs measure the same way.
#pragma once

#include <chrono>
#include <fstream>
#include <string>

namespace startup_bench {

inline double now_s() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Pss of the whole process in kB, from /proc/self/smaps_rollup; -1 when absent.
inline long pss_kb() {
    std::ifstream in("/proc/self/smaps_rollup");
    std::string key;
    long value = 0;
    std::string unit;
    while (in >> key) {
        if (key == "Pss:") {
            in >> value;
            return value;
        }
        std::getline(in, unit);
    }
    return -1;
}

}  // namespace startup_bench
