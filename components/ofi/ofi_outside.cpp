// ofi between a server and its clients outside the job (rt::DynamicPeers).
//
// The listening address holds each module's fi_getname blob (its modex key)
// and the process id.  A client inserts the server's blob and sends a join
// first: the token, its own blob, and two random channels, one for each
// side's messages to the other.  A message from a peer outside the job names
// the channel its receiver knows it by (WireHeader::from_dynamic), never a
// job rank: the server admits the client (rt::DynamicPeers::admit), inserts
// its blob and answers with a welcome.  Messages follow the join in order
// (FI_ORDER_SAS), so the client does not wait for the welcome; a server that
// sends none within btl_ofi_join_timeout is given up.  See the README's
// "Peers outside the job".
#include <fmt/format.h>
#include <rdma/fi_errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ofi_fabric.hpp"
#include "ofi_module.hpp"
#include "ofi_outside.hpp"
#include "ofi_peer_watch.hpp"
#include "transit/name_hash.hpp"

namespace transit::ofi {

namespace {

// At most this many peers outside the job are looked at per pass.
constexpr std::size_t check_batch = 16;
// How long a deleted peer's address stays for its goodbye to leave.
constexpr auto retire_after = std::chrono::milliseconds(500);

}  // namespace

void* OfiOutside::extension(std::uint32_t id) noexcept {
    if (id == btl::DynamicPeerRecords::id) return static_cast<btl::DynamicPeerRecords*>(this);
    if (id == btl::Listener::id) return static_cast<btl::Listener*>(this);
    if (id == btl::UnreachedReason::id) return static_cast<btl::UnreachedReason*>(&unreached_);
    return nullptr;
}

// The address blob went to the modex at init; listening only starts the
// progress that reads joins (a singleton may have no other peer).
Status OfiOutside::listen() {
    listening_ = true;
    m_.update_progress();
    return Status::success;
}

bool OfiOutside::is_dynamic(Rank peer) const noexcept {
    if (peer < runtime_.size()) return false;
    const rt::DynamicPeers* d = runtime_.dynamic_peers();
    return d != nullptr && d->is_dynamic(peer);
}

OfiEndpoint* OfiOutside::dynamic_endpoint(Rank peer) const noexcept {
    const auto it = dynamic_.find(peer);
    return it == dynamic_.end() ? nullptr : it->second.get();
}

// A random channel no live peer outside the job uses (0 is none).
std::uint32_t OfiOutside::new_channel() noexcept {
    for (;;) {
        const std::uint32_t c = channel_rng_();
        if (c != 0 && !channels_.contains(c)) return c;
    }
}

// Whether a job rank's or another live peer outside the job's address is
// `address` (a client naming one of them would get their messages).  One that
// departed or failed is on its way out: the same client may join again.
bool OfiOutside::address_taken(fi_addr_t address) const noexcept {
    if (m_.job_address(address)) return true;
    return std::any_of(dynamic_.begin(), dynamic_.end(), [address](const auto& kv) {
        return kv.second->address == address && !kv.second->failed;
    });
}

// --- the client's side -----------------------------------------------------------

void OfiOutside::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                           btl::Reachability& reachable) {
    for (std::size_t i = 0; i < peers.size(); ++i) {
        if (!is_dynamic(peers[i])) continue;
        OfiEndpoint* ep = dynamic_endpoint(peers[i]);
        try {
            if (ep == nullptr) ep = join_server(peers[i]);
        } catch (const std::exception& e) {
            log::error("{}: joining peer {} failed: {}", m_.name(), peers[i], e.what());
        }
        if (ep == nullptr || ep->failed) continue;
        unreached_.clear(peers[i]);
        endpoints[i] = ep;
        reachable.set(i);
    }
}

void OfiOutside::unreached(Rank peer, std::string why) {
    out_.verbose(1, "{}: peer {} not reached: {}", m_.name(), peer, why);
    unreached_.set(peer, std::move(why));
}

// A server reached by its address: its blob goes into the address vector and
// the join is posted now; our messages to it follow the join.
OfiEndpoint* OfiOutside::join_server(Rank peer) {
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    const rt::Secret* token = d ? d->token_for(peer) : nullptr;
    if (token == nullptr) return nullptr;  // a client that joined through another transport
    if (f_.node_local && !runtime_.on_this_node(peer)) return nullptr;
    std::vector<std::byte> blob;
    if (!ok(runtime_.modex_recv(peer, m_.modex_key(), blob))) {
        out_.verbose(10, "{}: the address of peer {} has no {} part", m_.name(), peer,
                     m_.provider());
        return nullptr;
    }
    std::vector<std::byte> padded;
    if (!av_address(blob, f_.address.size(), f_.address_form, padded)) {
        // Another module may reach it: the bml says so if none does.
        unreached(peer, fmt::format("the {} part of its address ({} bytes) cannot be one of {}'s",
                                    m_.provider(), blob.size(), m_.provider()));
        return nullptr;
    }
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    if (fi_av_insert(f_.av.get(), padded.data(), 1, &a, 0, nullptr) != 1) {
        out_.verbose(1, "{}: the address of peer {} was refused", m_.name(), peer);
        return nullptr;
    }
    keep_address(a);
    auto owned = std::make_unique<OfiEndpoint>(peer, a);
    OfiEndpoint& ep = *owned;
    ep.dynamic = true;
    ep.channel_in = new_channel();
    ep.channel_out = new_channel();
    JoinPayload p{};
    std::memcpy(p.token.data(), token->data(), p.token.size());
    p.to_server = ep.channel_out;
    p.to_client = ep.channel_in;
    p.pid = static_cast<std::uint32_t>(::getpid());
    p.rank = runtime_.rank();
    p.node = name_hash(runtime_.node_id());
    p.pid_ns = btl::util::pid_namespace();
    p.address_size = static_cast<std::uint32_t>(f_.address.size());
    std::vector<std::byte> payload(sizeof p + f_.address.size());
    std::memcpy(payload.data(), &p, sizeof p);
    std::copy(f_.address.begin(), f_.address.end(), payload.begin() + sizeof p);
    channels_.reserve(channels_.size() + 1);
    dynamic_.reserve(dynamic_.size() + 1);
    channels_[ep.channel_in] = &ep;
    dynamic_[peer] = std::move(owned);
    watch_.watch(ep);  // a server on this node: its pid is in its address
    if (ep.process.watching() && ep.process.exited()) {
        unreached(peer, fmt::format("the server (pid {}) is not there: its process has exited",
                                    ep.process.pid()));
        ep.failed = true;
        delete_dynamic(ep);
        return nullptr;
    }
    links_.join_sent(ep.outside, join_timeout_);
    if (const Status s = m_.post_control(ep, WireKind::join, false, payload); !ok(s)) {
        unreached(peer, fmt::format("cannot send the join: {}", to_string(s)));
        ep.failed = true;
        delete_dynamic(ep);
        return nullptr;
    }
    m_.update_progress();
    out_.verbose(10, "{}: joining peer {} outside the job (channels {:#x}/{:#x})", m_.name(), peer,
                 p.to_server, p.to_client);
    return &ep;
}

// --- the server's side ---------------------------------------------------------------

// A client's join: admitted with the listening context's token, it gets a
// peer id, its address goes into the address vector and a welcome goes back.
// Refused, nothing of it is kept; while the refusal log admits refusals (so a
// flood of strangers cannot fill the address vector) it hears a `refuse`.
void OfiOutside::on_join(const WireHeader& h, std::span<const std::byte> body) noexcept {
    JoinPayload p{};
    std::span<const std::byte> address;
    if (!read_join(body, p, address)) return (void)refused("a client", "its join is malformed");
    std::string who;
    try {
        who = fmt::format("a client (pid {}, rank {} of its job)", p.pid, p.rank);
    } catch (...) {
        return;
    }
    const bool same_node = p.node == name_hash(runtime_.node_id());
    if (f_.node_local && !same_node) return (void)refused(who, "on another node");
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    try {
        std::vector<std::byte> padded;
        if (!av_address(address, f_.address.size(), f_.address_form, padded))
            return (void)refused(who, "its address cannot be one of this provider's");
        if (fi_av_insert(f_.av.get(), padded.data(), 1, &a, 0, nullptr) != 1)
            return (void)refused(who, "libfabric refused its address");
    } catch (...) {
        return (void)refused(who, "out of memory");
    }
    keep_address(a);
    // A job rank's address, or another client's: that peer would get its
    // messages, and our answer.  (libfabric gave the known entry back.)
    if (address_taken(a)) return (void)refused(who, "its address is another peer's");
    auto refuse = [&](const char* why, bool token = false) {
        if (refused(who, why)) answer_refusal(a, p.to_client, token);
        drop_address(a);
    };
    if (!listening_) return refuse("this process does not listen");
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    rt::Secret token{};
    std::memcpy(token.data(), p.token.data(), token.size());
    if (d == nullptr || !d->token_matches(token))
        return refuse("without this context's access token", true);
    if (p.to_server == 0 || p.to_server != h.source || channels_.contains(p.to_server))
        return refuse("its channel is none or in use");
    try {
        // So that nothing below fails once the peer id is given.
        channels_.reserve(channels_.size() + 1);
        dynamic_.reserve(dynamic_.size() + 1);
    } catch (...) {
        return refuse("out of memory");
    }
    const Rank id = d->admit();
    if (id == any_rank) return refuse("no peer id left");
    std::unique_ptr<OfiEndpoint> owned;
    try {
        owned = std::make_unique<OfiEndpoint>(id, a);
    } catch (...) {
        return refuse("out of memory");  // the id is never used
    }
    OfiEndpoint& ep = *owned;
    ep.dynamic = true;
    links_.admitted(ep.outside);
    ep.channel_in = p.to_server;
    ep.channel_out = p.to_client;
    // libfabric says nothing of a client that dies with nothing in flight: one
    // on this node (and in our pid namespace) is watched.
    if (same_node && p.pid_ns != 0 && p.pid_ns == btl::util::pid_namespace() && p.pid != 0 &&
        p.pid <= 0x7fffffffu)
        ep.process = btl::util::ProcessWatch(static_cast<pid_t>(p.pid));
    channels_[ep.channel_in] = &ep;
    dynamic_[id] = std::move(owned);
    if (!ok(m_.post_control(ep, WireKind::welcome, false)))
        out_.verbose(1, "{}: could not welcome peer {} (its join will time out)", m_.name(), id);
    m_.update_progress();
    out_.verbose(10, "{}: {} joined as peer {}{}", m_.name(), who, id,
                 ep.process.watching() ? " (its process is watched)" : "");
}

// Tells a refused client so, on the channel it asked our messages to carry.
void OfiOutside::answer_refusal(fi_addr_t address, std::uint32_t channel, bool token) noexcept {
    OfiEndpoint stranger(any_rank, address);
    stranger.dynamic = true;
    stranger.channel_out = channel;
    // post_control forgets the endpoint once the frame is posted.
    if (!ok(m_.post_control(stranger, WireKind::refuse, false, {}, token ? refused_token : 0)))
        out_.verbose(1, "{}: could not tell a refused client (its join will time out)", m_.name());
}

// The address of a peer deleted or refused: it goes unless another peer has
// it (a server that is a job rank of ours, a context connected to its own
// address; a departed client that joined again before we deleted it).
void OfiOutside::drop_address(fi_addr_t address) noexcept {
    const bool shared = std::any_of(dynamic_.begin(), dynamic_.end(), [address](const auto& kv) {
        return kv.second->address == address;
    });
    if (!shared && !m_.job_address(address)) retire(address);
}

// A stranger may try thousands of times: the first few refusals of each
// window are logged with the reason (true), the rest are counted.
bool OfiOutside::refused(const std::string& who, const char* why) noexcept {
    return refusals_.refused(out_, m_.name(), why, "{}", who);
}

// --- both sides --------------------------------------------------------------------

// A control message from a peer outside the job, named by its channel.
void OfiOutside::on_dynamic_control(Received what, const WireHeader& h) noexcept {
    const auto it = channels_.find(h.source);
    if (it == channels_.end() || it->second->failed) {
        out_.verbose(10, "{}: a control message on an unknown channel dropped", m_.name());
        return;
    }
    OfiEndpoint& ep = *it->second;
    switch (what) {
        case Received::welcome:
            links_.welcome(ep.outside);
            return;
        case Received::refuse:
            // A server refuses only a join it has not admitted.
            if (!links_.refuse(ep.outside)) return;
            ep.failed = true;
            out_.verbose(1, "{}: peer {} outside the job refused our join", m_.name(), ep.peer());
            if (h.tag == refused_token)
                m_.report(btl::error_flags::nonfatal | btl::error_flags::refused, ep.peer(),
                          "ofi: the server refused the token");
            else
                m_.report(btl::error_flags::nonfatal, ep.peer(),
                          "ofi: the server refused the connection");
            watch_.abandon_operations(ep, Status::peer_failed);
            return;
        case Received::goodbye:
            // Its messages before the goodbye came first (FI_ORDER_SAS).
            if (!links_.goodbye_received(ep.outside)) return;
            out_.verbose(10, "{}: peer {} outside the job disconnected", m_.name(), ep.peer());
            ep.goodbye = true;
            ep.failed = true;
            m_.report(btl::error_flags::departed, ep.peer(),
                      "ofi: the peer outside the job disconnected");
            watch_.abandon_operations(ep, Status::peer_departed);
            return;
        default:
            out_.verbose(1, "{}: a control message of peer {} outside the job dropped", m_.name(),
                         ep.peer());
            return;
    }
}

// A deleted peer's address-vector entry.  shm wrote the header-only goodbye
// into the peer's queue when it was posted, and its address vector holds 256
// peers: the entry goes now.  Elsewhere the goodbye may still wait for a
// connection: the entry goes after retire_after.
void OfiOutside::retire(fi_addr_t address) noexcept {
    if (!f_.node_local) {
        try {
            retiring_.push_back({address, std::chrono::steady_clock::now() + retire_after});
            return;
        } catch (...) {
            // No memory to wait: removed now.
        }
    }
    if (const int rc = fi_av_remove(f_.av.get(), &address, 1, 0); rc != 0)
        out_.verbose(1, "{}: removing a departed peer's address failed: {}", m_.name(),
                     libfabric().strerror(-rc));
}

// An address inserted again (the same peer back) may be the entry of a
// deleted peer still waiting to go: it stays.
void OfiOutside::keep_address(fi_addr_t address) noexcept {
    std::erase_if(retiring_, [address](const Retiring& r) { return r.address == address; });
}

// Address-vector entries of deleted peers whose time has come (all, with
// `all`).
void OfiOutside::retire_addresses(bool all) noexcept {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(retiring_, [&](const Retiring& r) {
        if (!all && now < r.after) return false;
        fi_addr_t a = r.address;
        fi_av_remove(f_.av.get(), &a, 1, 0);
        return true;
    });
}

// From the low-priority check: clients and servers on this node that exited,
// servers that never answered our join.
void OfiOutside::check_dynamic() noexcept {
    if ((dynamic_.empty() && retiring_.empty()) || !dynamic_pace_.due()) return;
    const auto now = std::chrono::steady_clock::now();
    if (!retiring_.empty()) {
        retire_addresses(false);
        // The module leaves the low-priority pass once nothing else needs it.
        if (retiring_.empty()) m_.update_progress();
    }
    OfiEndpoint* exited[check_batch];
    std::size_t n_exited = 0;
    for (auto& [peer, ep] : dynamic_)
        if (!ep->failed && ep->process.watching() && ep->process.exited() && n_exited < check_batch)
            exited[n_exited++] = ep.get();
    // Each is reported once; the pml deletes it later, not from inside this.
    for (std::size_t i = 0; i < n_exited; ++i) watch_.lose_peer(*exited[i]);
    OfiEndpoint* late[check_batch];
    const std::size_t n_late = links_.expire_joins(
        dynamic_, [](const auto& kv) { return kv.second->failed ? nullptr : kv.second.get(); }, now,
        late);
    for (std::size_t i = 0; i < n_late; ++i) {
        OfiEndpoint& ep = *late[i];
        ep.failed = true;
        out_.verbose(1, "{}: peer {} outside the job: no answer to the join in {} s", m_.name(),
                     ep.peer(), join_timeout_);
        m_.report(btl::error_flags::nonfatal, ep.peer(),
                  "ofi: the server did not answer the join within btl_ofi_join_timeout "
                  "(refused, stopped, or not progressing)");
        watch_.abandon_operations(ep, Status::peer_failed);
    }
}

// A peer outside the job deleted (disconnected, or released after it
// departed or failed): a goodbye if it still listens; its operations end and
// its endpoint goes.  The goodbye is not waited for (the pml calls this from
// its own loops, which our progress must not re-enter), so the peer's
// address-vector entry goes a little later, once the goodbye has left.
void OfiOutside::delete_dynamic(OfiEndpoint& ep) noexcept {
    const Rank peer = ep.peer();
    if (!ep.failed && f_.ep) (void)m_.post_control(ep, WireKind::goodbye, false);
    links_.release(ep.outside);
    ep.failed = true;
    watch_.abandon_operations(ep, Status::cancelled);
    if (const auto c = channels_.find(ep.channel_in); c != channels_.end() && c->second == &ep)
        channels_.erase(c);
    const fi_addr_t address = ep.address;
    dynamic_.erase(peer);
    drop_address(address);
    m_.update_progress();
    out_.verbose(10, "{}: peer {} outside the job deleted", m_.name(), peer);
}

// Every peer outside the job hears that we left (a departure, not a
// failure); no client joins from now on.
void OfiOutside::leave() noexcept {
    while (!dynamic_.empty()) delete_dynamic(*dynamic_.begin()->second);
    listening_ = false;
}

}  // namespace transit::ofi
