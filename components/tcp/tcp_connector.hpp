// The connection state machine of a tcp module (the link states are described
// in tcp_endpoint.hpp): paths tried best first as probes, the handshake in
// both directions, clients outside the job joining, connection timeouts, and
// closing a link's socket.  The module owns it; it owns the accepted
// connections awaiting a hello and the probes, and acts on the module's
// endpoints through TcpModule's calls for it (endpoint_for, fail_link, ...).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tcp_endpoint.hpp"
#include "tcp_interfaces.hpp"
#include "tcp_wire.hpp"
#include "transit/runtime.hpp"

namespace transit::tcp {

class SplicePipe;
class TcpComponent;
class TcpModule;
class TcpReceiver;

class TcpConnector {
  public:
    // receiver: reads what a peer still sent on a link it replaces; pipe: the
    // module's, released by a link whose socket closes.
    TcpConnector(TcpModule& module, TcpComponent& tcp, TcpReceiver& receiver, SplicePipe& pipe);

    void set_state(Link& l, LinkState s) noexcept;
    // Starts connecting link `l`; returns "" or why it cannot.
    std::string start_connect(Link& l) noexcept;
    // Connects to a server outside the job now, waiting at most
    // btl_tcp_server_connect_timeout; returns "" or why it cannot.
    std::string connect_server(TcpEndpoint& ep) noexcept;
    // A probe's socket is writable: its TCP connection is done or failed.
    void on_probe(Link& probe) noexcept;
    // Handshake bytes arrived on a link that is not connected yet.
    void on_handshake_input(Link& l) noexcept;
    void on_accepted(int fd, std::string peer) noexcept;
    // An accepted connection whose hello targets this module's address came
    // through another module's listener: it continues here.
    void take_incoming(std::unique_ptr<Link> link, const wire::Handshake& h) noexcept;
    void check_timeouts(std::uint64_t now) noexcept;
    // Closes the link's socket and the paths it was still trying.
    void close_socket(Link& l) noexcept;
    // The module is finalized: accepted connections and probes go, and no
    // connection is accepted any more.
    void close_all() noexcept;
    // An incoming connection is refused (logged by the component's refusal log).
    void drop_incoming(Link& l, const std::string& reason) noexcept;

  private:
    // Starts the next path of the link's that can be started; false when none is left.
    bool launch_next_path(Link& l) noexcept;
    std::string open_probe(Link& l, const AddressPair& path) noexcept;
    // A path of `l` failed: the next is tried; the link fails when none is left.
    void path_failed(Link& l, const std::string& why) noexcept;
    bool has_probes(const Link& l) const noexcept;
    void retire_probe(Link& probe) noexcept;
    void cancel_probes(Link& l) noexcept;
    std::string check_server_answer(Link& l, std::chrono::steady_clock::time_point until) noexcept;
    void on_connected(Link& l) noexcept;
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
    void retire_incoming(Link& l) noexcept;

    TcpModule& module_;
    TcpComponent& tcp_;
    TcpReceiver& receiver_;
    SplicePipe& pipe_;
    std::size_t rbuf_size_;                        // a connected link's receive buffer
    std::vector<std::unique_ptr<Link>> incoming_;  // accepted, awaiting a hello
    std::vector<std::unique_ptr<Link>> probes_;    // paths being tried (Link::probe_for)
    bool closed_ = false;                          // close_all was called
};

}  // namespace transit::tcp
