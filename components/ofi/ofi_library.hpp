// libfabric, loaded when the component is started rather than linked: a job
// whose peers all go by vader or tcp never maps it (loading it runs every
// provider's constructor).  The few functions libfabric exports are called
// through this table; everything else in its API is inline, through the
// objects' operation tables.
#pragma once

#include <rdma/fabric.h>

#include <string>

namespace transit::ofi {

struct Libfabric {
    decltype(&::fi_getinfo) getinfo = nullptr;
    decltype(&::fi_freeinfo) freeinfo = nullptr;
    decltype(&::fi_dupinfo) dupinfo = nullptr;
    decltype(&::fi_fabric) fabric = nullptr;
    decltype(&::fi_strerror) strerror = nullptr;

    // fi_allocinfo is an inline wrapper of fi_dupinfo, which it would name.
    fi_info* allocinfo() const noexcept { return dupinfo(nullptr); }
};

// Loads libfabric on the first call (thread-safe); nullptr, with `why`, when it
// cannot be loaded or lacks a function.
const Libfabric* load_libfabric(std::string& why);

// The table, once load_libfabric succeeded (every module exists after that).
const Libfabric& libfabric() noexcept;

}  // namespace transit::ofi
