#include "process_util.hpp"

#include <dirent.h>
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace transit::run {

std::string find_program(const std::string& name) {
    if (name.empty()) return {};
    if (name.find('/') != std::string::npos)
        return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    return {};
}

CoreBindings core_bindings(unsigned np, bool force_core, bool force_none) {
    CoreBindings b;
    hwloc_topology_t topo = nullptr;
    if (hwloc_topology_init(&topo) != 0) return b;
    // Cores only: no I/O discovery (its GPU loaders are slow and leak).
    for (const char* io : {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
        hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, io);
    if (hwloc_topology_load(topo) == 0) {
        hwloc_obj_type_t type = HWLOC_OBJ_CORE;
        int n = hwloc_get_nbobjs_by_type(topo, type);
        if (n <= 0) {
            type = HWLOC_OBJ_PU;
            n = hwloc_get_nbobjs_by_type(topo, type);
        }
        b.cores = n > 0 ? static_cast<unsigned>(n) : 0;
        if (b.cores > 0 && !force_none && (force_core || np <= b.cores)) {
            for (unsigned r = 0; r < np; ++r) {
                hwloc_obj_t core = hwloc_get_obj_by_type(topo, type, r % b.cores);
                cpu_set_t set;
                CPU_ZERO(&set);
                hwloc_cpuset_to_glibc_sched_affinity(topo, core->cpuset, &set, sizeof set);
                b.sets.push_back(set);
                b.core_of.push_back(r % b.cores);
            }
        }
    }
    hwloc_topology_destroy(topo);
    return b;
}

std::string cpu_list(const cpu_set_t& set) {
    std::string out;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
        if (!out.empty()) out += ',';
        out += last == c ? std::to_string(c) : std::to_string(c) + "-" + std::to_string(last);
        c = last;
    }
    return out;
}

namespace {

// The parent pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may
// hold spaces and parentheses, so parse from the last ')').
pid_t parent_of(const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/stat");
    std::string stat;
    std::getline(in, stat);
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    pid_t ppid = -1;
    rest >> state >> ppid;
    return ppid;
}

std::vector<pid_t> my_children() {
    std::vector<pid_t> kids;
    const pid_t self = ::getpid();
    DIR* proc = ::opendir("/proc");
    if (!proc) return kids;
    while (dirent* e = ::readdir(proc)) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        if (parent_of(e->d_name) == self) kids.push_back(std::atoi(e->d_name));
    }
    ::closedir(proc);
    return kids;
}

}  // namespace

int kill_adopted_children() {
    int found = 0;
    // Killing one may hand its own children to us: repeat until none is left.
    for (int round = 0; round < 20; ++round) {
        const std::vector<pid_t> kids = my_children();
        if (kids.empty()) break;
        for (pid_t pid : kids) ::kill(pid, SIGKILL);
        for (pid_t pid : kids) ::waitpid(pid, nullptr, 0);
        found += static_cast<int>(kids.size());
    }
    return found;
}

void remove_tree(const std::string& path) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

std::vector<std::string> remove_job_shm(const std::string& job_id) {
    std::vector<std::string> removed;
    const std::string prefix = "transit-" + job_id + "-";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with(prefix)) continue;
        std::error_code rm;
        if (std::filesystem::remove_all(entry.path(), rm) > 0) removed.push_back(name);
    }
    return removed;
}

std::vector<std::string> remove_dead_rank_regions(pid_t pid, const timespec& ended) {
    std::vector<std::string> removed;
    const uid_t uid = ::getuid();
    const std::string prefix = std::to_string(pid) + ":" + std::to_string(uid) + ":";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with(prefix) || name.size() == prefix.size()) continue;
        if (name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
        struct stat st {};
        if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid)
            continue;
        // Not after: a rank killed right after making its region shares the
        // clock tick with its end; a new process would need that pid to come
        // round and libfabric to start within the same few milliseconds.
        const bool not_after =
            st.st_ctim.tv_sec < ended.tv_sec ||
            (st.st_ctim.tv_sec == ended.tv_sec && st.st_ctim.tv_nsec <= ended.tv_nsec);
        if (not_after && ::unlink(entry.path().c_str()) == 0) removed.push_back(name);
    }
    return removed;
}

}  // namespace transit::run
