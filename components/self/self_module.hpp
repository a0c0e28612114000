// The self module: every operation completes inline, by memcpy or a direct call
// of the receive callback, because sender and receiver are the same process.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "self_frag.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/region_table.hpp"

namespace transit::self {

// Registrations live in a table (transit/btl/region_table.hpp): a handle, even
// one that went through a copy, grants access only while its registration lives.
inline constexpr std::uint32_t registration_slots = 1024;

struct SelfConfig : btl::BaseConfig {
    bool multi_threaded = false;  // lock the pools and the registration list
};

class SelfModule final : public btl::Module,
                         public btl::Rdma,
                         public btl::Atomics,
                         public btl::WaitObject {
  public:
    SelfModule(btl::Component& component, const SelfConfig& config, Rank own_rank,
               btl::AmTable& am_table);

    std::string name() const override { return "self"; }

    btl::Rdma* rdma() noexcept override { return this; }
    btl::Atomics* atomics() noexcept override { return this; }
    void* extension(std::uint32_t id) noexcept override {
        return id == btl::WaitObject::id ? static_cast<btl::WaitObject*>(this) : nullptr;
    }
    // Everything completes inline: nothing ever arrives while the process sleeps.
    int wait_fd() const noexcept override { return -1; }
    Armed arm() noexcept override { return Armed::armed; }
    void disarm() noexcept override {}

    Status add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                     btl::Reachability& reachable) override;
    Status del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) override;

    btl::Descriptor* alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                           std::uint32_t flags) noexcept override;
    Status free(btl::Descriptor* descriptor) noexcept override;
    btl::Descriptor* prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                 std::uint8_t order, std::size_t reserve, std::size_t& size,
                                 std::uint32_t flags) noexcept override;
    Status send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                btl::Tag tag) noexcept override;
    Status sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                 std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                 std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept override;

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;

    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;
    void dump(btl::Endpoint* endpoint, int verbosity) override;
    Status finalize() override;

  private:
    SelfFrag* take(std::size_t bytes) noexcept;
    btl::Descriptor* prepare_inplace(btl::Convertor& convertor, std::uint8_t order,
                                     std::size_t reserve, std::size_t size,
                                     std::uint32_t flags) noexcept;
    Status deliver(btl::Endpoint* endpoint, const btl::Segment* segments, std::size_t count,
                   btl::Tag tag) noexcept;
    std::span<const btl::RegionSlot> table() const noexcept {
        return {slots_.get(), registration_slots};
    }
    bool valid_endpoint(const btl::Endpoint* endpoint) const noexcept {
        return endpoint == &endpoint_;
    }

    btl::Endpoint endpoint_;
    btl::AmTable& am_table_;
    FragPool eager_;                  // fragments of eager_limit bytes
    FragPool large_;                  // fragments of max_send_size bytes
    std::mutex registrations_mutex_;  // registration is not on the hot path: always locked
    std::unique_ptr<btl::RegionSlot[]> slots_;
    btl::RegionTable registrations_;
    std::uint32_t registered_ = 0;
};

}  // namespace transit::self
