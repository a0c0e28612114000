// RAII owners for verbs objects, so every error path of setup releases what it
// made, in the right order (members are destroyed in reverse declaration order).
#pragma once

#include <infiniband/verbs.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace transit::openib::verbs {

template <auto Destroy>
struct Deleter {
    template <typename T>
    void operator()(T* p) const noexcept {
        if (p) (void)Destroy(p);
    }
};

using DeviceList = std::unique_ptr<ibv_device*, Deleter<&ibv_free_device_list>>;
using Context = std::unique_ptr<ibv_context, Deleter<&ibv_close_device>>;
using ProtectionDomain = std::unique_ptr<ibv_pd, Deleter<&ibv_dealloc_pd>>;
using CompletionQueue = std::unique_ptr<ibv_cq, Deleter<&ibv_destroy_cq>>;
using SharedReceiveQueue = std::unique_ptr<ibv_srq, Deleter<&ibv_destroy_srq>>;
using QueuePair = std::unique_ptr<ibv_qp, Deleter<&ibv_destroy_qp>>;
using AddressHandle = std::unique_ptr<ibv_ah, Deleter<&ibv_destroy_ah>>;
using MemoryRegion = std::unique_ptr<ibv_mr, Deleter<&ibv_dereg_mr>>;

// Translates btl::reg_flags to verbs access flags.  Remote write and atomics
// require local write too; plain local (read-only) registration must not ask
// for it, or registering read-only memory fails.
int access_flags(std::uint32_t reg_flags) noexcept;

// Throws the reason a setup step failed: "what: strerror(err)".
[[noreturn]] inline void fail(const std::string& what, int err) {
    throw std::runtime_error(what + ": " + std::strerror(err));
}

// The MTU as bytes, for verbose output.
int mtu_bytes(ibv_mtu mtu) noexcept;

}  // namespace transit::openib::verbs
