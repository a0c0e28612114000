// The connection manager's wire: one unreliable-datagram queue pair per module
// over which endpoints exchange the addresses of their RC queue pairs
// (wire::CmMessage; the handshake itself is Connection, openib_endpoint.hpp).
// UD may lose a message: the connection's timer sends it again.
//
// Owns the UD queue pair, its completion queue and its send and receive
// slots (in memory the module registered).  Borrows from the module the
// endpoint a message is for (Module::cm_endpoint) and its progress
// bookkeeping (Module::update_progress) when a connection changed state.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "openib_frag.hpp"
#include "openib_verbs.hpp"
#include "openib_wire.hpp"
#include "transit/runtime.hpp"

namespace transit::openib {

class EndpointTable;
class Module;
struct Port;

class ConnectionManager {
  public:
    static constexpr std::uint32_t depth = 64;   // receive slots, and send slots
    static constexpr std::size_t grh_size = 40;  // a UD receive starts with the GRH
    static constexpr std::size_t recv_size = grh_size + wire::CmMessage::size;
    // The registered memory open() takes: every receive and send slot.
    static constexpr std::size_t memory_size = depth * (recv_size + wire::CmMessage::size);

    explicit ConnectionManager(Module& module) noexcept : module_(module) {}
    ConnectionManager(const ConnectionManager&) = delete;
    ConnectionManager& operator=(const ConnectionManager&) = delete;

    // Creates the UD queue pair on `port` (queue key from the job's key) and
    // posts its receives into `memory` (memory_size bytes registered under
    // `lkey`); throws std::runtime_error with the reason.
    void open(Port& port, std::uint64_t job_key, std::byte* memory, std::uint32_t lkey);
    std::uint32_t qpn() const noexcept { return qp_ ? qp_->qp_num : 0; }
    std::uint32_t qkey() const noexcept { return qkey_; }  // peers' messages carry it
    bool owns(const ibv_cq* cq) const noexcept { return cq == cq_.get(); }

    // Sends m to ep's port through the address handle `ah`; dropped (the
    // timer resends) when every send slot is busy or the post fails.
    void send(const Endpoint& ep, ibv_ah* ah, const wire::CmMessage& m) noexcept;
    // Handles what arrived for rank `me` of the job with `job_key` (anything
    // else is dropped) and reposts the slots; returns how many completions.
    int poll(std::uint64_t job_key, Rank me) noexcept;

    // Runs the handshake timers (resend, give up) of every endpoint waiting
    // on one: true when one of them stopped waiting.
    bool tick(const EndpointTable& endpoints) noexcept;

  private:
    static constexpr int batch = 16;  // completions read per poll
    // Posts receive slot `slot`; the verbs error, or 0.
    int post_receive(std::uint32_t slot) noexcept;

    Module& module_;
    verbs::CompletionQueue cq_;
    verbs::QueuePair qp_;
    std::byte* recv_ = nullptr;
    std::byte* send_ = nullptr;
    std::uint32_t lkey_ = 0;
    std::uint32_t qkey_ = 0;
    std::uint32_t send_next_ = 0;
    std::uint32_t send_free_ = 0;
    // The work requests' ids: [0, depth) receive slots, then the send slots.
    std::vector<Frag> slots_;
};

}  // namespace transit::openib
