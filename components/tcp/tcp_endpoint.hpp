// Per-peer connection state.  An endpoint holds btl_tcp_links links; each link
// is one socket with its own handshake, receive buffer and send queue.
//
// Link states:
//   idle -> connecting -> hello_sent -> connected        (we connect)
// While a link is connecting it has no socket of its own: each path being
// tried is a probe (a Link in state probing, its own socket); the first
// probe whose TCP connection completes gives the link its socket.
//   accepting -> (adopted by an endpoint link) connected (the peer connects)
//   hello_sent --reject--> await_incoming -> connected   (the peer's connect won)
//   any --error--> closed
// Simultaneous connects: when both sides connect the same link at once, the
// connection opened by the lower rank is kept and the other is refused.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tcp_fd.hpp"
#include "tcp_frag.hpp"
#include "tcp_interfaces.hpp"
#include "tcp_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::tcp {

class TcpModule;

enum class LinkState : std::uint8_t {
    idle,
    connecting,
    hello_sent,
    await_incoming,
    accepting,
    connected,
    closed,
    probing,  // a connection attempt over one path, for the link probe_for
};
const char* to_string(LinkState s) noexcept;

// What to do once a payload that bypasses the receive buffer has arrived.
enum class DirectAfter : std::uint8_t { none, put_done, get_done };

// Short reads after each payload read straight into its destination (set by
// the one-sided target and origin, counted down by the receive parser); a
// stream of small frames is back to full reads after these.
inline constexpr std::uint8_t short_reads_after_direct = 4;

struct Link {
    TcpModule* module = nullptr;
    class TcpEndpoint* endpoint = nullptr;  // null while an incoming link awaits its hello
    std::uint32_t index = 0;
    LinkState state = LinkState::idle;
    Fd fd;
    bool want_write = false;  // EPOLLOUT armed
    bool listed = false;      // in the component's list of connected links (saves a
                              // search there; false too if the list could not grow)
    bool burst_due = false;   // a coalesced burst waits for the next poll
    std::uint64_t deadline_ns = 0;
    std::string peer_text;     // address of the other side, for messages
    std::uint32_t target = 0;  // wire::Handshake::target of the path connected

    // Paths (TcpEndpoint::paths) while connecting: the next one to try, when
    // to start it alongside those still pending, and why those tried failed.
    Link* probe_for = nullptr;  // a probe's link
    std::size_t next_path = 0;
    std::uint64_t stagger_ns = 0;
    std::string path_errors;
    bool waited = false;  // connect_server waits for it: failing it fails no peer

    // Handshake in progress.
    std::array<std::byte, wire::handshake_size> hs_in{};
    std::size_t hs_got = 0;

    // Receive buffer: frames are parsed in place.
    std::unique_ptr<std::byte[]> rbuf;
    std::size_t rcap = 0;
    std::size_t rhead = 0;
    std::size_t rtail = 0;

    // A payload read straight into its destination (put data into the target's
    // memory, get data into the origin's); dst null = discard.
    std::byte* direct_dst = nullptr;
    std::size_t direct_left = 0;
    DirectAfter direct_after = DirectAfter::none;
    std::uint32_t direct_op = 0;
    std::int32_t direct_status = 0;
    // Reads left that take only a little into the receive buffer: after a
    // payload read straight into its destination, the next frame is likely
    // another, whose payload must not be copied twice (socket, buffer, user).
    std::uint8_t short_reads = 0;

    FragQueue queue;
    // The progress pass of the last small message written straight to the
    // socket: a second one in the same pass starts a coalesced burst.
    std::uint64_t last_direct_poll = ~std::uint64_t{0};

    bool has_socket() const noexcept { return static_cast<bool>(fd); }

    std::unique_ptr<Link> next_dead;  // in the component's graveyard (defer_free)
};

class TcpEndpoint : public btl::Endpoint {
  public:
    TcpEndpoint(TcpModule& module, Rank peer, std::size_t links);

    TcpModule& module() const noexcept { return *module_; }
    Link& link(std::size_t i) noexcept { return *links_[i]; }
    std::size_t link_count() const noexcept { return links_.size(); }
    // Active messages use link 0 so that they stay in order; one-sided requests
    // are spread over every link.
    Link& am_link() noexcept { return *links_[0]; }
    Link& next_rdma_link() noexcept {
        Link& l = *links_[rr_];
        if (++rr_ == links_.size()) rr_ = 0;
        return l;
    }

    // Where to connect (from the modex), best first: this module's own pairs,
    // then those over the other interfaces, which take over when this
    // interface's do not answer.  Empty for a peer that only connected to us.
    std::vector<AddressPair> paths;
    bool failed = false;
    bool deleted = false;  // by del_procs (failed quietly): add_procs revives it
    // The peer announced an orderly close; a link connected since takes it
    // back (the peer only connects or accepts while it holds us again).
    bool goodbye = false;
    std::size_t outstanding = 0;             // put/get/atomics waiting for their reply
    std::unique_ptr<TcpEndpoint> next_dead;  // in the component's graveyard (defer_free)

  private:
    TcpModule* module_;
    std::vector<std::unique_ptr<Link>> links_;
    std::size_t rr_ = 0;
};

}  // namespace transit::tcp
