// A tcp module: one network interface, its listening sockets, its endpoints,
// the send path and failure handling.  It owns the rest as members: its
// capabilities, one-sided operations (TcpRdma), atomics (TcpAtomics) and the
// wait object (TcpWait), each the object the upper layer calls, so that an
// operation still costs one virtual call; the receive parser (TcpReceiver);
// and the connection state machine (TcpConnector).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "tcp_atomics.hpp"
#include "tcp_component.hpp"
#include "tcp_connector.hpp"
#include "tcp_endpoint.hpp"
#include "tcp_frag.hpp"
#include "tcp_interfaces.hpp"
#include "tcp_rdma.hpp"
#include "tcp_receiver.hpp"
#include "tcp_splice.hpp"
#include "tcp_wait.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/unreached_reasons.hpp"

namespace transit::tcp {

class TcpComponent;

class TcpModule final : public btl::Module, public btl::DynamicPeerRecords {
  public:
    TcpModule(TcpComponent& component, Interface iface);
    ~TcpModule() override;

    // Binds the listening sockets (one per address); throws std::runtime_error.
    void listen();
    // Addresses this module publishes through the modex.
    const std::vector<PeerAddress>& published() const noexcept { return published_; }
    const Interface& interface() const noexcept { return iface_; }

    std::string name() const override { return "tcp:" + iface_.name; }

    btl::Rdma* rdma() noexcept override { return &rdma_; }
    btl::Atomics* atomics() noexcept override { return &atomics_; }
    void* extension(std::uint32_t id) noexcept override {
        if (id == btl::DynamicPeerRecords::id) return static_cast<btl::DynamicPeerRecords*>(this);
        if (id == btl::WaitObject::id) return static_cast<btl::WaitObject*>(&wait_);
        if (id == btl::UnreachedReason::id) return static_cast<btl::UnreachedReason*>(&unreached_);
        return nullptr;
    }
    std::size_t dynamic_endpoints() const noexcept override { return dynamic_.size(); }

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

    void dump(btl::Endpoint* endpoint, int verbosity) override;
    Status finalize() override;

    // --- called by the component's progress --------------------------------
    void on_event(Link& link, std::uint32_t events) noexcept;
    // Writes what the link has queued (a coalesced burst at the next poll).
    void flush(Link& link) noexcept;
    // Connections: accepted sockets, timeouts, hand-over between modules.
    TcpConnector& connector() noexcept { return connector_; }

    // Small messages that went out inside a burst rather than alone.
    std::uint64_t coalesced_frames() const noexcept { return coalesced_frames_; }

    // --- for the objects it owns (TcpRdma, TcpAtomics, TcpReceiver, TcpConnector) --
    // Sends f on l: completed (written inline), success (queued, connecting
    // if needed) or an error (nothing queued).
    Status enqueue(Link& l, Frag* f) noexcept;
    // Sends a control fragment; it goes back to its pool once written.
    void send_control(Link& l, Frag* f) noexcept;
    // Failure: closes the link; unless the peer said goodbye and nothing is
    // pending, the whole endpoint fails and the upper layer is told.
    void fail_link(Link& l, const std::string& reason) noexcept;

    // --- for the connector ----------------------------------------------------
    // flags: added to nonfatal in the error report (btl::error_flags::departed).
    void fail_endpoint(TcpEndpoint& ep, const std::string& reason,
                       std::uint32_t flags = 0) noexcept;
    // The endpoint of a peer, made when it has none; throws std::bad_alloc.
    TcpEndpoint* endpoint_for(Rank rank);
    template <typename F>
    void for_each_endpoint(F f) {
        for (auto& ep : endpoints_)
            if (ep) f(*ep);
        for (auto& [rank, ep] : dynamic_) f(*ep);
    }

  private:
    TcpEndpoint* existing_endpoint(Rank rank) const noexcept;
    void revive(TcpEndpoint& ep) noexcept;

    // Sending.
    enum class WriteResult { done, partial, error };
    WriteResult write_frag(Link& l, Frag* f) noexcept;
    // A frame whose payload goes by reference (Frag::by_reference).
    WriteResult write_spliced(Link& l, Frag* f) noexcept;
    static constexpr std::size_t max_burst_frame = 32768;  // larger ones are written alone
    bool joins_burst(const Link& l, std::size_t total) const noexcept;
    bool append_to_burst(Link& l, btl::Tag tag, const void* header, std::size_t header_size,
                         const void* payload, std::size_t payload_size) noexcept;
    void complete_frag(Frag* f, Status status) noexcept;

    // Tells a connected peer that this side closes on purpose.
    void say_goodbye(TcpEndpoint& ep) noexcept;

  private:
    TcpComponent& tcp_;
    Interface iface_;
    std::vector<Fd> listeners_;
    std::vector<PeerAddress> published_;
    std::vector<std::unique_ptr<TcpEndpoint>> endpoints_;  // by rank, the job's
    // Peers outside the job, while they are not deleted (ids are not reused:
    // a server up for days keeps nothing of its clients gone).
    std::unordered_map<Rank, std::unique_ptr<TcpEndpoint>> dynamic_;
    btl::util::UnreachedReasons unreached_;  // servers add_procs could not reach
    wire::Limits limits_;
    std::unique_ptr<FragPool> eager_;
    std::unique_ptr<FragPool> max_;
    std::unique_ptr<FragPool> control_;  // requests, replies, goodbyes
    SplicePipe pipe_;
    // The capabilities, after what they refer to (control_, limits_).
    TcpRdma rdma_;
    TcpAtomics atomics_;
    TcpWait wait_;
    TcpReceiver receiver_;
    TcpConnector connector_;
    bool finalized_ = false;
    std::uint64_t coalesced_frames_ = 0;
};

}  // namespace transit::tcp
