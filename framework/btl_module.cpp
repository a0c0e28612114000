// The module's default name and dump, and the CPU
// atomics that components use to perform atomics on a target's behalf.
#include <atomic>
#include <type_traits>

#include "transit/btl/component.hpp"
#include "transit/btl/module.hpp"
#include "transit/log.hpp"

namespace transit::btl {

std::string Module::name() const {
    return component().name();
}

void Module::dump(Endpoint* endpoint, int verbosity) {
    const log::Stream out(name(), verbosity);
    const Attributes& a = attr_;
    out.verbose(1, "exclusivity {} latency {} bandwidth {} MB/s flags 0x{:x} atomics 0x{:x}",
                a.exclusivity, a.latency, a.bandwidth, a.flags, a.atomic_flags);
    out.verbose(1, "eager limit {} rndv eager limit {} max send size {}", a.eager_limit,
                a.rndv_eager_limit, a.max_send_size);
    out.verbose(5, "rdma pipeline: send length {} frag size {} min size {}",
                a.rdma_pipeline_send_length, a.rdma_pipeline_frag_size, a.min_rdma_pipeline_size);
    out.verbose(5, "put limit {} alignment {}, get limit {} alignment {}", a.put_limit,
                a.put_alignment, a.get_limit, a.get_alignment);
    out.verbose(5, "registration handle {} bytes, local registration above put {} get {}",
                a.registration_handle_size, a.put_local_registration_threshold,
                a.get_local_registration_threshold);
    if (endpoint != nullptr) out.verbose(1, "endpoint of peer {}", endpoint->peer());
}

namespace {

// Read-modify-write with an arbitrary function, for the ops the hardware has
// no fetch_* for (logical ops, signed min/max).
template <typename T, typename F>
T update(std::atomic_ref<T> ref, F f) noexcept {
    T old = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(old, f(old), std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
    }
    return old;
}

template <typename T>
T apply(T* target, AtomicOp op, T operand) noexcept {
    using S = std::make_signed_t<T>;
    std::atomic_ref<T> ref(*target);
    constexpr auto order = std::memory_order_acq_rel;
    switch (op) {
        case AtomicOp::add:
            return ref.fetch_add(operand, order);
        case AtomicOp::and_:
            return ref.fetch_and(operand, order);
        case AtomicOp::or_:
            return ref.fetch_or(operand, order);
        case AtomicOp::xor_:
            return ref.fetch_xor(operand, order);
        case AtomicOp::swap:
            return ref.exchange(operand, order);
        case AtomicOp::land:
            return update(ref, [=](T v) { return T((v != 0) && (operand != 0)); });
        case AtomicOp::lor:
            return update(ref, [=](T v) { return T((v != 0) || (operand != 0)); });
        case AtomicOp::lxor:
            return update(ref, [=](T v) { return T((v != 0) != (operand != 0)); });
        case AtomicOp::min:
            return update(ref, [=](T v) { return S(operand) < S(v) ? operand : v; });
        case AtomicOp::max:
            return update(ref, [=](T v) { return S(operand) > S(v) ? operand : v; });
    }
    return ref.load(std::memory_order_acquire);  // unknown op: leave the target untouched
}

}  // namespace

std::uint64_t apply_atomic(void* target, AtomicOp op, std::uint64_t operand,
                           int atomic_flags) noexcept {
    if (atomic_flags & atomic_flags::bits32)
        return apply(static_cast<std::uint32_t*>(target), op, static_cast<std::uint32_t>(operand));
    return apply(static_cast<std::uint64_t*>(target), op, operand);
}

std::uint64_t apply_cswap(void* target, std::uint64_t compare, std::uint64_t value,
                          int atomic_flags) noexcept {
    auto cswap = [](auto* t, auto expected, auto desired) {
        std::atomic_ref ref(*t);
        ref.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
        return expected;  // the old value, whether or not the swap happened
    };
    if (atomic_flags & atomic_flags::bits32)
        return cswap(static_cast<std::uint32_t*>(target), static_cast<std::uint32_t>(compare),
                     static_cast<std::uint32_t>(value));
    return cswap(static_cast<std::uint64_t*>(target), compare, value);
}

}  // namespace transit::btl
