// btl/unix: the module (one per process) and its endpoints (one per peer).
//
// Each process binds one datagram socket and publishes its name in the modex
// (unix_component.cpp).  send and sendi write one datagram, Header + payload,
// to the peer's socket with one sendmsg(); the peer's progress reads it and
// calls the tag's callback.  Nothing is queued: when the peer's socket is full,
// send answers out_of_resource and the caller retries later, as the contract
// allows.  The module offers no one-sided capability (rdma() stays nullptr),
// so the upper layer carries put, get and atomics in its messages.
#pragma once

#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <transit/btl/base_params.hpp>
#include <transit/btl/component.hpp>
#include <transit/btl/module.hpp>
#include <transit/log.hpp>

#include "unix_wire.hpp"

namespace unix_btl {

namespace btl = transit::btl;
using transit::Rank;
using transit::Status;

// An owned file descriptor.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        std::swap(fd_, o.fd_);
        return *this;
    }
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }

  private:
    int fd_ = -1;
};

// The component's parameters, read once at init (see unix_component.cpp).
// The base parameters (eager_limit, max_send_size, ...) and our own.
struct Config : btl::BaseConfig {
    int verbose = 0;
    std::size_t send_buffer = 0;  // the socket's send buffer; 0: the system's default
};

// A send descriptor: one segment over its own buffer.  All are made at init.
struct Frag : btl::Descriptor {
    btl::Segment segment{};
    std::vector<std::byte> buffer;  // max_send_size bytes
    bool in_pool = true;
};

// A peer: where its socket is.
struct UnixEndpoint final : btl::Endpoint {
    UnixEndpoint(Rank peer, const sockaddr_un& address, socklen_t length)
        : btl::Endpoint(peer), address(address), length(length) {}
    sockaddr_un address;
    socklen_t length;
    bool gone = false;  // its socket was closed: the peer left the job
};

class UnixModule final : public btl::Module {
  public:
    UnixModule(btl::Component& component, const Config& config, btl::InitContext& ctx, Fd socket,
               std::vector<std::byte> address);
    ~UnixModule() override;

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

  private:
    static int progress_callback(void* self) noexcept;
    int progress() noexcept;
    void deliver(std::size_t size) noexcept;
    // Writes pieces (pieces[0] is the Header) as one datagram to the peer.
    Status write(UnixEndpoint& ep, std::span<iovec> pieces, btl::Tag tag) noexcept;
    Frag* take_frag(btl::Endpoint* endpoint, std::uint8_t order, std::uint32_t flags) noexcept;
    // The endpoint, or nullptr when it is null or its peer has left.
    static UnixEndpoint* usable(btl::Endpoint* endpoint) noexcept {
        auto* ep = static_cast<UnixEndpoint*>(endpoint);
        return ep != nullptr && !ep->gone ? ep : nullptr;
    }

    Config config_;
    transit::rt::Runtime& runtime_;
    btl::AmTable& am_table_;
    transit::ProgressEngine& engine_;
    transit::ProgressEngine::Handle progress_handle_{};
    transit::log::Stream out_;

    Fd socket_;
    std::vector<std::byte> address_;                        // the socket's name, as published
    std::vector<std::unique_ptr<UnixEndpoint>> endpoints_;  // by rank
    std::vector<std::byte> receive_buffer_;                 // one message at a time
    bool in_progress_ = false;

    std::vector<Frag> frags_;
    std::vector<Frag*> free_frags_;
};

}  // namespace unix_btl
