// The UCT objects one uct module opens for its transport: the async context,
// the worker, the memory domain and the interface, with the interface's
// attributes, the longest active message it accepts and the address the
// module publishes.  The module and the
// objects it owns reach UCT through these handles.
//
// Owns: the four objects, closed by close() (or the destructor) in the order
// UCT needs: the interface, the worker, the async context, the memory domain;
// the module closes its endpoints, registrations and RDMA interface first.
// Borrows: the module's resource, configuration and log stream.
#pragma once

#include <uct/api/uct.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transit/log.hpp"
#include "uct_config.hpp"
#include "uct_deleters.hpp"
#include "uct_resource.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

// UCT tcp's send and receive segments (UCX_TCP_TX_SEG_SIZE, RX_SEG_SIZE):
// room for 64 KiB of payload, the pml's header and ours in one message.
inline constexpr std::size_t tcp_segment = 66 << 10;
// The longest active message UCT's shared-memory transports deliver intact
// (their FIFO element holds the length in 16 bits).
inline constexpr std::size_t shm_message_limit = 0xffff;

class UctInterface {
  public:
    // `name`: the module's, for the log.
    UctInterface(const Resource& resource, const UctConfig& config, const log::Stream& out,
                 std::string name)
        : resource_(resource), config_(config), out_(out), name_(std::move(name)) {}

    // Opens them, the interface calling on_error with `error_arg` (also the
    // user data of every endpoint) and on_message with `message_arg`; throws
    // std::runtime_error with the reason when the transport cannot be used.
    void open(uct_error_handler_t on_error, void* error_arg, uct_am_callback_t on_message,
              void* message_arg);
    // An endpoint to the interface at (device, iface), as a peer sent them;
    // nullptr, with the reason, when UCT cannot reach it or make one.
    uct_ep_h create_ep(std::span<const std::byte> device, std::span<const std::byte> iface,
                       std::string* why);
    void close() noexcept;
    // The address the module publishes: header, device and interface address,
    // then those of the RDMA interface when it is a second one (cma).
    void build_address(uct_iface_h second, const uct_iface_attr_t& second_attr,
                       const std::string& second_name);
    const std::vector<std::byte>& address() const noexcept { return address_; }
    // Its header (interface lengths, message sizes).
    AddressHeader address_header() const noexcept;
    // Why a peer whose interface takes active messages of at most `accepted`
    // bytes and sends at most `sent` cannot be connected to, or "".
    std::string mismatched_messages(std::uint32_t accepted, std::uint32_t sent) const;

    bool is_open() const noexcept { return worker_ != nullptr; }
    uct_worker_h worker() const noexcept { return worker_.get(); }
    uct_md_h md() const noexcept { return md_.get(); }
    uct_iface_h iface() const noexcept { return iface_.get(); }
    const uct_iface_attr_t& attr() const noexcept { return iface_attr_; }
    // The longest active message received (our AddressHeader says it).
    std::size_t largest_accepted() const noexcept { return largest_accepted_; }
    unsigned progress() noexcept { return uct_worker_progress(worker_.get()); }

  private:
    void widen_tcp_segments(uct_iface_config_t* config);
    static std::uint32_t on_wire(std::size_t size) noexcept {
        return static_cast<std::uint32_t>(
            std::min<std::size_t>(size, std::numeric_limits<std::uint32_t>::max()));
    }
    static std::size_t accepted_size(std::size_t max_bcopy, std::size_t tx_segment,
                                     std::size_t rx_segment) noexcept;

    const Resource& resource_;
    const UctConfig& config_;
    const log::Stream& out_;
    std::string name_;
    void* user_data_ = nullptr;
    std::unique_ptr<ucs_async_context_t, AsyncDeleter> async_;
    std::unique_ptr<uct_worker, WorkerDeleter> worker_;
    std::unique_ptr<uct_md, MdDeleter> md_;
    std::unique_ptr<uct_iface, IfaceDeleter> iface_;
    uct_iface_attr_t iface_attr_{};
    std::size_t largest_accepted_ = 0;
    std::vector<std::byte> address_;  // AddressHeader + device + interface address
};

}  // namespace transit::uct
