#include "runtime/topology.hpp"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <sched.h>

#include <string>

namespace {

namespace topo = transit::rt::topo;

// Restores the test process's CPU mask on scope exit.
class AffinityGuard {
  public:
    AffinityGuard() { ::sched_getaffinity(0, sizeof saved_, &saved_); }
    ~AffinityGuard() { ::sched_setaffinity(0, sizeof saved_, &saved_); }

  private:
    cpu_set_t saved_{};
};

int first_allowed_cpu() {
    cpu_set_t set;
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) return c;
    return -1;
}

TEST(Topology, BindingListsTheAllowedCpus) {
    const std::string b = topo::binding();
    ASSERT_FALSE(b.empty());
    EXPECT_EQ(b.find_first_not_of("0123456789,-"), std::string::npos) << b;
}

TEST(Topology, BindingToOneCpuIsReported) {
    const int cpu = first_allowed_cpu();
    ASSERT_GE(cpu, 0);
    AffinityGuard guard;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
    EXPECT_EQ(topo::binding(), std::to_string(cpu));
    // One CPU always lies in exactly one NUMA node.
    EXPECT_GE(topo::numa_node(), 0);
}

// hwloc's answer to numa_node: the one NUMA node whose CPUs meet the
// calling thread's binding, -1 for none or several.
int hwloc_numa_node() {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_load(t) != 0) return -2;
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    int node = -1, count = 0;
    if (hwloc_get_cpubind(t, cpus, HWLOC_CPUBIND_THREAD) == 0)
        for (hwloc_obj_t n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); n;
             n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n))
            if (n->cpuset && hwloc_bitmap_intersects(n->cpuset, cpus)) {
                node = static_cast<int>(n->os_index);
                ++count;
            }
    hwloc_bitmap_free(cpus);
    hwloc_topology_destroy(t);
    return count == 1 ? node : -1;
}

// numa_node reads the kernel's node list instead of loading the topology:
// the same answer, unbound and bound to each CPU.
TEST(Topology, NumaNodeAgreesWithHwloc) {
    EXPECT_EQ(topo::numa_node(), hwloc_numa_node());
    AffinityGuard guard;
    cpu_set_t allowed;
    ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
    for (int c = 0, tried = 0; c < CPU_SETSIZE && tried < 16; ++c) {
        if (!CPU_ISSET(c, &allowed)) continue;
        ++tried;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);
        EXPECT_EQ(topo::numa_node(), hwloc_numa_node()) << "bound to CPU " << c;
    }
}

TEST(Topology, UnknownDevicesHaveNoDistance) {
    EXPECT_EQ(topo::distance_to_device(""), -1);
    EXPECT_EQ(topo::distance_to_device("not a bus id"), -1);
    EXPECT_EQ(topo::distance_to_device("ffff:ff:1f.7"), -1);
    EXPECT_EQ(topo::distance_to_device(std::string(200, '0')), -1);
}

// Every PCI device hwloc finds has a distance (0 when the process may run on
// the device's own NUMA node, which is always the case when there is one).
TEST(Topology, PciDevicesHaveADistance) {
    hwloc_topology_t t = nullptr;
    ASSERT_EQ(hwloc_topology_init(&t), 0);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // The same discovery as the runtime's (sysfs, not libpciaccess).
    hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    ASSERT_EQ(hwloc_topology_load(t), 0);
    int checked = 0;
    const int numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (hwloc_obj_t dev = hwloc_get_next_pcidev(t, nullptr); dev && checked < 8;
         dev = hwloc_get_next_pcidev(t, dev), ++checked) {
        char id[32];
        std::snprintf(id, sizeof id, "%04x:%02x:%02x.%01x", dev->attr->pcidev.domain,
                      dev->attr->pcidev.bus, dev->attr->pcidev.dev, dev->attr->pcidev.func);
        const int d = topo::distance_to_device(id);
        EXPECT_GE(d, 0) << id;
        if (numa_nodes == 1) {
            EXPECT_EQ(d, 0) << id;
        }
    }
    hwloc_topology_destroy(t);
    if (checked == 0) GTEST_SKIP() << "hwloc sees no PCI device on this machine";
}

}  // namespace
