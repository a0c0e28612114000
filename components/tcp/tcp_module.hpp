// A tcp module: one network interface, its listening sockets, its endpoints,
// the connection state machine, the send path and the receive parser.  Its
// capabilities are members it owns: one-sided operations (TcpRdma), atomics
// (TcpAtomics) and the wait object (TcpWait); each is the object the upper
// layer calls, so an operation still costs one virtual call.
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
#include "tcp_endpoint.hpp"
#include "tcp_frag.hpp"
#include "tcp_interfaces.hpp"
#include "tcp_rdma.hpp"
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
    void flush(Link& link) noexcept { flush_queue(link); }
    void on_accepted(int fd, std::string peer) noexcept;
    void check_timeouts(std::uint64_t now) noexcept;

    // Small messages that went out inside a burst rather than alone.
    std::uint64_t coalesced_frames() const noexcept { return coalesced_frames_; }

    // --- for the capability objects (TcpRdma, TcpAtomics) ------------------------
    // Sends f on l: completed (written inline), success (queued, connecting
    // if needed) or an error (nothing queued).
    Status enqueue(Link& l, Frag* f) noexcept;
    // Sends a control fragment; it goes back to its pool once written.
    void send_control(Link& l, Frag* f) noexcept;
    // Failure: closes the link; unless the peer said goodbye and nothing is
    // pending, the whole endpoint fails and the upper layer is told.
    void fail_link(Link& l, const std::string& reason) noexcept;

  private:
    TcpEndpoint* endpoint_for(Rank rank);
    TcpEndpoint* existing_endpoint(Rank rank) const noexcept;
    template <typename F>
    void for_each_endpoint(F f) {
        for (auto& ep : endpoints_)
            if (ep) f(*ep);
        for (auto& [rank, ep] : dynamic_) f(*ep);
    }
    // A peer outside the job (rt::DynamicPeers) that is not released.
    bool is_dynamic(Rank rank) const noexcept;
    void revive(TcpEndpoint& ep) noexcept;
    void add_other_paths(std::vector<AddressPair>& paths, std::span<const PeerAddress> remote,
                         const PairContext& ctx);
    // Starts connecting link `l`; returns "" or why it cannot.
    std::string start_connect(Link& l) noexcept;
    // Starts the next path of the link's that can be started; false when none is left.
    bool launch_next_path(Link& l) noexcept;
    std::string open_probe(Link& l, const AddressPair& path) noexcept;
    void on_probe(Link& probe) noexcept;
    // A path of `l` failed: the next is tried; the link fails when none is left.
    void path_failed(Link& l, const std::string& why) noexcept;
    bool has_probes(const Link& l) const noexcept;
    void retire_probe(Link& probe) noexcept;
    void cancel_probes(Link& l) noexcept;
    // Connects to a server outside the job now, waiting at most
    // btl_tcp_server_connect_timeout; returns "" or why it cannot.
    std::string connect_server(TcpEndpoint& ep) noexcept;
    std::string check_server_answer(Link& l, std::chrono::steady_clock::time_point until) noexcept;
    void set_state(Link& l, LinkState s) noexcept;
    void on_connected(Link& l) noexcept;
    void on_handshake_input(Link& l) noexcept;
    void handle_hello(Link& incoming, const wire::Handshake& h) noexcept;
    void handle_answer(Link& l, const wire::Handshake& h) noexcept;
    void handle_join(Link& incoming, const wire::Handshake& h) noexcept;
    // token: the secret to present (the job's when null); as: the rank to
    // name (ours when any_rank).
    bool send_handshake(Link& l, wire::HandshakeKind kind, const rt::Secret* token = nullptr,
                        Rank as = any_rank) noexcept;
    // The token of a server outside the job we connect to, else nullptr.
    const rt::Secret* server_token(const TcpEndpoint& ep) const noexcept;
    void become_connected(Link& l) noexcept;

    // Sending.
    enum class WriteResult { done, partial, error };
    WriteResult write_frag(Link& l, Frag* f) noexcept;
    // A frame whose payload goes by reference (Frag::by_reference).
    WriteResult write_spliced(Link& l, Frag* f) noexcept;
    static constexpr std::size_t max_burst_frame = 32768;  // larger ones are written alone
    bool joins_burst(const Link& l, std::size_t total) const noexcept;
    bool append_to_burst(Link& l, btl::Tag tag, const void* header, std::size_t header_size,
                         const void* payload, std::size_t payload_size) noexcept;
    void flush_queue(Link& l) noexcept;
    void complete_frag(Frag* f, Status status) noexcept;
    void close_socket(Link& l) noexcept;

    // Receiving.
    void on_readable(Link& l) noexcept;
    void read_direct(Link& l) noexcept;
    void parse(Link& l) noexcept;
    // Handles the frame at rbuf[rhead]; returns false to stop parsing.
    bool handle_frame(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept;
    // flags: added to nonfatal in the error report (btl::error_flags::departed).
    void fail_endpoint(TcpEndpoint& ep, const std::string& reason,
                       std::uint32_t flags = 0) noexcept;
    void drop_incoming(Link& l, const std::string& reason) noexcept;
    void retire_incoming(Link& l) noexcept;
    void say_goodbye(TcpEndpoint& ep) noexcept;

  public:
    // An accepted connection whose hello targets this module's address came
    // through another module's listener: it continues here.
    void take_incoming(std::unique_ptr<Link> link, const wire::Handshake& h) noexcept;

  private:
    TcpComponent& tcp_;
    Interface iface_;
    std::vector<Fd> listeners_;
    std::vector<PeerAddress> published_;
    std::vector<std::unique_ptr<TcpEndpoint>> endpoints_;  // by rank, the job's
    // Peers outside the job, while they are not deleted (ids are not reused:
    // a server up for days keeps nothing of its clients gone).
    std::unordered_map<Rank, std::unique_ptr<TcpEndpoint>> dynamic_;
    btl::util::UnreachedReasons unreached_;        // servers add_procs could not reach
    std::vector<std::unique_ptr<Link>> incoming_;  // accepted, awaiting a hello
    std::vector<std::unique_ptr<Link>> probes_;    // paths being tried (Link::probe_for)
    wire::Limits limits_;
    std::size_t rbuf_size_ = 0;
    std::unique_ptr<FragPool> eager_;
    std::unique_ptr<FragPool> max_;
    std::unique_ptr<FragPool> control_;  // requests, replies, goodbyes
    SplicePipe pipe_;
    // The capabilities, after what they refer to (control_, limits_).
    TcpRdma rdma_;
    TcpAtomics atomics_;
    TcpWait wait_;
    bool finalized_ = false;
    std::uint64_t coalesced_frames_ = 0;
};

}  // namespace transit::tcp
