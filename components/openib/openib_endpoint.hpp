// The per-peer connection state machine of the openib btl.
//
// Why a handshake at all: RC queue pairs are created lazily, at the first
// operation towards a peer, so their numbers cannot be in the modex, which is
// exchanged once at init.  What the modex does carry is each module's UD queue
// pair; connection messages (wire::CmMessage) go over it:
//
//   A: idle --start--> create QP, REQ(qpA, credits) ----------> B: idle
//                                                               create QP, connect to qpA,
//   A: requesting <------------- REP(qpB, echo qpA, credits) -- B: accepting
//   connect to qpB, READY(echo qpB) ----------------------------> B: connected
//   A: connected
//
// UD is unreliable, so REQ and REP are resent on a timer until answered, every
// message is idempotent, and answers carry the QP number they answer so a stale
// one is recognised and dropped.  The replier only sends on its QP once it
// knows the requester's QP is ready (READY, or the first fragment arriving on
// the QP), because a packet to a QP that is not yet ready to receive is lost.
//
// Both sides starting at once: each endpoint has one QP, so one request must
// win.  The lower rank's does: the higher rank, while requesting, answers the
// lower rank's REQ with a REP for its own (already created) QP and stops
// resending its request; the lower rank ignores the higher rank's REQ.
//
// This file is only the logic: the verbs work is done through Actions, so the
// machine is tested with two instances wired back to back over a lossy queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "openib_wire.hpp"

namespace transit::openib {

// The clock the handshake's times are read on (milliseconds, monotonic).
inline std::uint64_t now_ms() noexcept {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(
        duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}

enum class ConnState : std::uint8_t { idle, requesting, accepting, connected, failed };

std::string_view to_string(ConnState s) noexcept;

// What the state machine asks of the endpoint.
class ConnectionActions {
  public:
    virtual ~ConnectionActions() = default;
    // Creates the RC QP (state INIT) and describes it; false on failure.
    virtual bool create_qp(wire::QpAddress& local) = 0;
    // Moves the QP to ready-to-receive then ready-to-send towards `remote`.
    virtual bool connect_qp(const wire::QpAddress& remote) = 0;
    // Reserves receive buffers for the peer: the data credits to grant, 0 when
    // none are left.
    virtual std::uint16_t reserve_credits() = 0;
    virtual void release_credits(std::uint16_t granted) = 0;
    // Sends a connection message on the UD QP.  Loss is fine, failure too: the
    // timer resends.
    virtual void send_cm(const wire::CmMessage& m) = 0;
    // The connection is usable: start flow control and drain the pending queue.
    virtual void connected(std::uint16_t granted_to_us, std::uint16_t granted_to_peer) = 0;
    // The connection is dead: fail queued work and report to the error callback.
    virtual void failed(const char* reason) = 0;
};

class Connection {
  public:
    struct Config {
        std::uint32_t local_rank = 0;
        std::uint32_t peer_rank = 0;
        std::uint64_t job_key = 0;
        std::uint64_t retry_interval_ms = 100;
        std::uint32_t max_retries = 50;
    };

    Connection(ConnectionActions& actions, Config config) : act_(actions), cfg_(config) {}

    ConnState state() const noexcept { return state_; }
    const wire::QpAddress& local() const noexcept { return local_; }
    const wire::QpAddress& remote() const noexcept { return remote_; }
    const char* failure() const noexcept { return failure_; }
    std::uint32_t retries() const noexcept { return attempts_; }
    // Nonzero while the machine waits for an answer: the progress loop must
    // call tick() until then.
    bool waiting() const noexcept {
        return state_ == ConnState::requesting || state_ == ConnState::accepting;
    }

    // Local side needs the connection (first send/put/get/atomic).
    void start(std::uint64_t now_ms);
    // A connection message for this peer (rank and job already checked).
    void receive(const wire::CmMessage& m, std::uint64_t now_ms);
    // A fragment arrived on our QP: the requester is certainly ready.
    void fragment_arrived();
    // Resends when the current attempt timed out; fails after max_retries.
    void tick(std::uint64_t now_ms);
    // A QP error or port failure: give up for good.
    void fail(const char* reason);

  private:
    void on_request(const wire::CmMessage& m, std::uint64_t now_ms);
    void on_reply(const wire::CmMessage& m);
    void on_ready(const wire::CmMessage& m);
    void on_reject(const wire::CmMessage& m);
    void accept(const wire::CmMessage& m, std::uint64_t now_ms);
    void become_connected();
    void send(wire::CmType type, std::uint32_t dst_qpn);
    void arm(std::uint64_t now_ms) noexcept {
        deadline_ = now_ms + cfg_.retry_interval_ms;
        attempts_ = 0;
    }
    bool matches_remote(const wire::CmMessage& m) const noexcept {
        return m.src.qpn == remote_.qpn && m.dst_qpn == local_.qpn;
    }

    ConnectionActions& act_;
    Config cfg_;
    ConnState state_ = ConnState::idle;
    wire::QpAddress local_{};
    wire::QpAddress remote_{};
    bool have_qp_ = false;
    std::uint16_t granted_to_peer_ = 0;
    std::uint16_t granted_to_us_ = 0;
    std::uint64_t deadline_ = 0;
    std::uint32_t attempts_ = 0;
    const char* failure_ = "";
};

}  // namespace transit::openib
