#include "runtime/topology.hpp"

#include <dirent.h>
#include <hwloc.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

namespace transit::rt::topo {
namespace {

struct BitmapDeleter {
    void operator()(hwloc_bitmap_s* b) const noexcept { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

Bitmap make_bitmap() {
    return Bitmap(hwloc_bitmap_alloc());
}

// The topology with PCI devices, loaded once: hwloc's discovery reads a lot of
// /sys, so every query shares this one copy.
class Topology {
  public:
    Topology() {
        if (hwloc_topology_init(&topo_) != 0) return;
        hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        // On Linux hwloc reads PCI devices from sysfs itself; its libpciaccess
        // plugin would only add memory that stays allocated after unloading
        // (LeakSanitizer cannot name it), and GPU plugins tell a transport
        // nothing it needs.
        for (const char* c : {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
            hwloc_topology_set_components(topo_, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, c);
        if (hwloc_topology_load(topo_) != 0) {
            hwloc_topology_destroy(topo_);
            topo_ = nullptr;
        }
    }
    ~Topology() {
        if (topo_) hwloc_topology_destroy(topo_);
    }
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    hwloc_topology_t get() const noexcept { return topo_; }

  private:
    hwloc_topology_t topo_ = nullptr;
};

hwloc_topology_t topology() noexcept {
    static const Topology instance;
    return instance.get();
}

Bitmap current_binding(hwloc_topology_t topo) {
    Bitmap set = make_bitmap();
    if (!set) return nullptr;
    if (hwloc_get_cpubind(topo, set.get(), HWLOC_CPUBIND_PROCESS) != 0 &&
        hwloc_get_cpubind(topo, set.get(), HWLOC_CPUBIND_THREAD) != 0)
        return nullptr;
    return set;
}

// NUMA nodes whose CPUs intersect `cpus`.
Bitmap nodes_of(hwloc_topology_t topo, hwloc_const_cpuset_t cpus) {
    Bitmap nodes = make_bitmap();
    hwloc_obj_t node = nullptr;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
        if (node->cpuset && hwloc_bitmap_intersects(node->cpuset, cpus))
            hwloc_bitmap_set(nodes.get(), node->os_index);
    }
    return nodes;
}

hwloc_obj_t numa_by_os_index(hwloc_topology_t topo, unsigned os_index) {
    hwloc_obj_t node = nullptr;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) != nullptr)
        if (node->os_index == os_index) return node;
    return nullptr;
}

// The firmware's NUMA latency matrix, relative: 0 for a node to itself.
// -1 when no matrix is known for the pair.
int relative_distance(hwloc_topology_t topo, unsigned from, unsigned to) {
    hwloc_obj_t a = numa_by_os_index(topo, from);
    hwloc_obj_t b = numa_by_os_index(topo, to);
    if (!a || !b) return -1;
    unsigned nr = 1;
    hwloc_distances_s* dist = nullptr;
    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
        nr == 0)
        return -1;
    int result = -1;
    hwloc_uint64_t ab = 0, ba = 0, aa = 0, ignored = 0;
    if (hwloc_distances_obj_pair_values(dist, a, b, &ab, &ba) == 0 &&
        hwloc_distances_obj_pair_values(dist, a, a, &aa, &ignored) == 0 && ab >= aa)
        result = static_cast<int>(ab - aa);
    hwloc_distances_release(topo, dist);
    return result;
}

// Whether the kernel's CPU list `list` ("0-3,8,10-11") names a CPU of `cpus`.
bool list_intersects(const char* list, const cpu_set_t& cpus) noexcept {
    while (*list != '\0' && *list != '\n') {
        char* end = nullptr;
        const unsigned long first = std::strtoul(list, &end, 10);
        if (end == list) return false;
        unsigned long last = first;
        if (*end == '-') {
            list = end + 1;
            last = std::strtoul(list, &end, 10);
            if (end == list) return false;
        }
        for (unsigned long c = first; c <= last && c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &cpus)) return true;
        list = *end == ',' ? end + 1 : end;
    }
    return false;
}

// numa_node from the kernel's node list in sysfs: a few small reads, where
// loading hwloc's topology takes milliseconds (a process alone on its node
// asks at its first peer outside the job, on the way to that peer's first
// answer).  nullopt when sysfs cannot say.
std::optional<int> numa_node_from_sysfs() noexcept {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (::sched_getaffinity(0, sizeof cpus, &cpus) != 0) return std::nullopt;
    DIR* dir = ::opendir("/sys/devices/system/node");
    if (dir == nullptr) return std::nullopt;
    int found = -1, count = 0;
    bool readable = true;
    while (const dirent* e = ::readdir(dir)) {
        int node = -1;
        char tail = 0;
        if (std::sscanf(e->d_name, "node%d%c", &node, &tail) != 1 || node < 0) continue;
        char path[96], list[4096];
        std::snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
        FILE* f = std::fopen(path, "r");
        if (f == nullptr || std::fgets(list, sizeof list, f) == nullptr) readable = false;
        if (f != nullptr) std::fclose(f);
        if (!readable) break;
        if (list_intersects(list, cpus)) {
            found = node;
            ++count;
        }
    }
    ::closedir(dir);
    if (!readable || count == 0) return std::nullopt;
    return count == 1 ? found : -1;
}

}  // namespace

int numa_node() noexcept {
    if (const std::optional<int> node = numa_node_from_sysfs()) return *node;
    hwloc_topology_t topo = topology();
    if (!topo) return -1;
    Bitmap cpus = current_binding(topo);
    if (!cpus) return -1;
    Bitmap nodes = nodes_of(topo, cpus.get());
    if (!nodes || hwloc_bitmap_weight(nodes.get()) != 1) return -1;
    return hwloc_bitmap_first(nodes.get());
}

std::string binding() {
    hwloc_topology_t topo = topology();
    if (!topo) return {};
    Bitmap cpus = current_binding(topo);
    if (!cpus) return {};
    char* text = nullptr;
    if (hwloc_bitmap_list_asprintf(&text, cpus.get()) < 0 || !text) return {};
    std::string out(text);
    std::free(text);
    return out;
}

int distance_to_device(std::string_view pci_bus_id) {
    hwloc_topology_t topo = topology();
    if (!topo || pci_bus_id.empty() || pci_bus_id.size() > 64) return -1;
    const std::string id(pci_bus_id);
    hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo, id.c_str());
    if (!dev) return -1;
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, dev);
    Bitmap cpus = current_binding(topo);
    if (!anchor || !anchor->cpuset || !cpus) return -1;
    Bitmap mine = nodes_of(topo, cpus.get());
    Bitmap theirs = nodes_of(topo, anchor->cpuset);
    if (!mine || !theirs || hwloc_bitmap_iszero(mine.get()) || hwloc_bitmap_iszero(theirs.get()))
        return -1;
    if (hwloc_bitmap_isincluded(mine.get(), theirs.get())) return 0;
    // Worst case over the nodes the process may run on, best over the device's.
    int worst = 0;
    int m = -1;
    while ((m = hwloc_bitmap_next(mine.get(), m)) != -1) {
        int best = -1;
        int t = -1;
        while ((t = hwloc_bitmap_next(theirs.get(), t)) != -1) {
            int d = m == t ? 0
                           : relative_distance(topo, static_cast<unsigned>(m),
                                               static_cast<unsigned>(t));
            if (d < 0) d = 1;  // different nodes, no matrix: just "further"
            if (best < 0 || d < best) best = d;
        }
        if (best > worst) worst = best;
    }
    return worst == 0 ? 1 : worst;
}

}  // namespace transit::rt::topo
