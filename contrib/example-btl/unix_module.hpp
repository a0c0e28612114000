// btl/unix: the module (one per process), its endpoints (one connection per
// peer) and the objects that wait in a connection's send queue.
//
// Data paths:
//   send, sendi    origin writes Header{am} + payload; the target's progress
//                  reads it and calls the tag's callback.
//   put            origin writes Header{put} + data; the target copies it into
//                  its registered memory and answers put_ack.
//   get            origin writes Header{get}; the target answers get_reply with
//                  the bytes, which the origin copies into its buffer.
// Each process connects once to every peer it sends to (the peer's listening
// socket name comes from the modex); the peer answers on that same connection.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

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
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = o.release();
        }
        return *this;
    }
    ~Fd() { reset(); }
    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

  private:
    int fd_ = -1;
};

// The component's parameters, read once at init (see unix_component.cpp).
struct Config {
    std::size_t eager_limit = 0;
    std::size_t max_send_size = 0;
    std::size_t free_list_max = 0;
    std::uint32_t exclusivity = 0;
    int verbose = 0;
};

struct Frag;

// One message waiting for room in a socket.  Frags, put/get requests and the
// target's replies each embed one, so queueing never allocates.
struct Outgoing {
    enum class Owner : std::uint8_t { frag, rdma, reply };
    Outgoing* next = nullptr;
    Owner owner = Owner::frag;
    Frag* frag = nullptr;  // Owner::frag
    Header header{};
    const void* payload = nullptr;
    std::size_t payload_size = 0;
};

// A send descriptor.  All come from the module's pool, created at init.
struct Frag : btl::Descriptor {
    Outgoing out;
    btl::Segment segment{};
    std::vector<std::byte> buffer;  // max_send_size bytes
    bool in_pool = true;
};

class UnixEndpoint;

// A socket and what waits to be written to it, in order.
struct Connection {
    Fd fd;
    Rank peer = transit::any_rank;     // known after the peer's hello
    UnixEndpoint* endpoint = nullptr;  // the endpoint for `peer`, once known
    bool broken = false;
    Outgoing* head = nullptr;
    Outgoing* tail = nullptr;
    // Replies this side owes the peer.  The peer has at most max_rdma_in_flight
    // requests outstanding, so these never run out (see unix_wire.hpp).
    std::array<Outgoing, max_rdma_in_flight> replies{};
    std::vector<Outgoing*> free_replies;

    Connection();
    Connection(const Connection&) = delete;  // the free list points into it
    Connection& operator=(const Connection&) = delete;
    void push(Outgoing* o) noexcept;
    Outgoing* pop() noexcept;
};

class UnixEndpoint final : public btl::Endpoint {
  public:
    using btl::Endpoint::Endpoint;
    Connection conn;  // the connection this process opened to the peer
};

// A put or get in flight: what the completion callback needs.
struct RdmaOp {
    Outgoing out;
    UnixEndpoint* endpoint = nullptr;
    void* local = nullptr;
    std::size_t size = 0;
    btl::RegistrationHandle* local_handle = nullptr;
    btl::RdmaCompletionFn cbfunc = nullptr;
    void* context = nullptr;
    void* cbdata = nullptr;
    bool busy = false;
};

// Memory the peers may put to and get from.
struct Registration {
    PackedRegistration packed;  // first: a handle's address is its packed form
    std::uint32_t access = 0;
};

class UnixModule final : public btl::Module {
  public:
    UnixModule(btl::Component& component, const Config& config, btl::InitContext& ctx, Fd listener,
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

    Status put(btl::Endpoint* endpoint, void* local_address, std::uint64_t remote_address,
               btl::RegistrationHandle* local_handle, const btl::RegistrationHandle* remote_handle,
               std::size_t size, int flags, int order, btl::RdmaCompletionFn cbfunc,
               void* cbcontext, void* cbdata) noexcept override;
    Status get(btl::Endpoint* endpoint, void* local_address, std::uint64_t remote_address,
               btl::RegistrationHandle* local_handle, const btl::RegistrationHandle* remote_handle,
               std::size_t size, int flags, int order, btl::RdmaCompletionFn cbfunc,
               void* cbcontext, void* cbdata) noexcept override;

    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;

  private:
    static int progress_callback(void* self) noexcept;
    int progress() noexcept;

    // Connections.
    std::unique_ptr<UnixEndpoint> connect_to(Rank peer, std::span<const std::byte> address);
    void accept_new() noexcept;
    bool watch(Connection& c) noexcept;
    void lost(Connection& c) noexcept;

    // Sending: write now when nothing waits, else queue behind the rest.
    Status start(Connection& c, Outgoing& o) noexcept;
    Status write(Connection& c, const Outgoing& o) noexcept;
    void drain(Connection& c) noexcept;
    void written(Connection& c, Outgoing& o, Status status) noexcept;
    void frag_done(Frag& f, UnixEndpoint* endpoint, Status status) noexcept;

    // Receiving.
    int read_from(Connection& c) noexcept;
    void handle(Connection& c, const Header& h, std::span<std::byte> payload) noexcept;
    void reply(Connection& c, Kind kind, std::uint32_t op, Status status, const void* data,
               std::size_t size) noexcept;
    Status check_access(std::uint64_t key, std::uint64_t address, std::size_t size,
                        std::uint32_t access) const noexcept;

    // Put/get bookkeeping.
    RdmaOp* take_op(UnixEndpoint* ep) noexcept;
    void complete(RdmaOp& op, Status status) noexcept;
    Status start_rdma(btl::Endpoint* endpoint, Kind kind, void* local, std::uint64_t remote_address,
                      btl::RegistrationHandle* local_handle,
                      const btl::RegistrationHandle* remote_handle, std::size_t size,
                      btl::RdmaCompletionFn cbfunc, void* cbcontext, void* cbdata) noexcept;

    Frag* take_frag(UnixEndpoint* ep, std::uint8_t order, std::uint32_t flags) noexcept;
    UnixEndpoint* usable(btl::Endpoint* endpoint) const noexcept;
    UnixEndpoint* find_endpoint(Rank peer) const noexcept;

    Config config_;
    transit::rt::Runtime& runtime_;
    btl::AmTable& am_table_;
    transit::ProgressEngine& engine_;
    transit::ProgressEngine::Handle progress_handle_{};
    transit::log::Stream out_;

    Fd listener_;
    std::vector<std::byte> address_;  // the listener's name, as published
    Fd epoll_;
    std::map<Rank, std::unique_ptr<UnixEndpoint>> endpoints_;
    std::vector<std::unique_ptr<Connection>> accepted_;  // peers' connections to us
    std::vector<std::byte> receive_buffer_;              // one message at a time
    bool in_progress_ = false;

    std::vector<Frag> frags_;
    std::vector<Frag*> free_frags_;
    std::array<RdmaOp, max_rdma_in_flight> ops_{};
    std::vector<RdmaOp*> free_ops_;
    std::unordered_map<std::uint64_t, Registration> registrations_;
    std::uint64_t next_key_ = 1;
};

}  // namespace unix_btl
