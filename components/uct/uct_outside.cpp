// Peers outside the job of a uct module (see uct_outside.hpp): a client
// connects to a server's interface from the server's address, sends a join
// with the access token and two channels, and may send right behind it; the
// server checks the token, connects back to the client's interface and
// answers with a welcome.  See the README's "Peers outside the job".
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <random>

#include "transit/btl/join_timeout.hpp"
#include "uct_outside.hpp"

#include "uct_module.hpp"

namespace transit::uct {

namespace {

// How long a refusal may wait for room in UCT's queues: bounded work for the
// server.  (A join waits up to btl_uct_join_timeout: a tcp endpoint connects
// first, and a server slow to progress is no reason to give it up sooner.)
constexpr auto refusal_wait = std::chrono::milliseconds(100);
// Clients joined that have not spoken yet: more are refused.
constexpr std::size_t max_joining = 64;

}  // namespace

Status UctOutside::listen() {
    listening_ = true;
    module_.update_progress();  // joins arrive while nobody else keeps the module polled
    return Status::success;
}

bool UctOutside::is_dynamic(Rank peer) const noexcept {
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    return d != nullptr && d->is_dynamic(peer);
}

UctEndpoint* UctOutside::endpoint(Rank peer) const noexcept {
    const auto it = dynamic_ids_.find(peer);
    return it == dynamic_ids_.end() ? nullptr : it->second;
}

bool UctOutside::valid(const btl::Endpoint* e) const noexcept {
    return e != nullptr && endpoint(e->peer()) == e;
}

// A channel not in use here: random, so that another client cannot name a
// peer it did not join as.
std::uint32_t UctOutside::new_channel() const {
    std::random_device random;
    for (;;) {
        const std::uint32_t c = static_cast<std::uint32_t>(random()) | channel_bit;
        if (is_channel(c) && !channels_.contains(c)) return c;
    }
}

UctEndpoint* UctOutside::add(Rank id, uct_ep_h ep, std::uint32_t channel, std::uint32_t wire_source,
                             std::uint32_t pid) noexcept {
    std::unique_ptr<UctEndpoint> owned;
    try {
        owned = std::make_unique<UctEndpoint>(id, ep);
    } catch (...) {
        uct_ep_destroy(ep);
        return nullptr;
    }
    try {
        dynamic_.reserve(dynamic_.size() + 1);
        dynamic_ids_.reserve(dynamic_ids_.size() + 1);
        channels_.reserve(channels_.size() + 1);
        dynamic_ids_.emplace(id, owned.get());
        channels_.emplace(channel, owned.get());
    } catch (...) {
        dynamic_ids_.erase(id);
        return nullptr;
    }
    UctEndpoint* e = owned.get();
    e->dynamic = true;
    e->channel = channel;
    e->wire_source = wire_source;
    // Active messages carry its one-sided operations: native RDMA would need
    // the cma interface's rights over a stranger's process.
    e->rdma_broken = true;
    e->amo_broken = true;
    if (pid != 0) e->process = btl::util::ProcessWatch(static_cast<pid_t>(pid));
    dynamic_.push_back(std::move(owned));  // reserved
    return e;
}

// --- the client's side -----------------------------------------------------------

UctEndpoint* UctOutside::connect_server(Rank peer, std::string* why) {
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    const rt::Secret* token = d ? d->token_for(peer) : nullptr;
    // A client that joined through another module has no address here.
    if (token == nullptr) {
        if (why) *why = "a client outside the job that did not join through this module";
        return nullptr;
    }
    UctEndpoint* e = module_.connect(peer, why);
    if (e == nullptr) return nullptr;
    // Joining before the join leaves: its answer may come while it is pushed.
    // Messages may follow the join at once; a server that never welcomes it
    // (stopped, not progressing) is given up from attend().
    links_.join_sent(e->outside, config_.join_timeout);
    if (!send_join(*e, *token)) {
        if (why) *why = "the server did not take our join (gone, or not answering)";
        remove(*e);
        return nullptr;
    }
    module_.attend_soon();
    out_.verbose(10, "{}: joined the server at peer {}", module_.name(), peer);
    return e;
}

// The join: our token, both channels and our interface's addresses, for the
// server to connect back.  Sent before anything else on the endpoint; UCT
// keeps an endpoint's active messages in order, so data may follow at once.
bool UctOutside::send_join(UctEndpoint& e, const rt::Secret& token) noexcept {
    JoinRequest j{};
    j.token = token;
    j.server_channel = e.wire_source;
    j.client_channel = e.channel;
    j.pid = static_cast<std::uint32_t>(::getpid());
    j.rank = runtime_.rank();
    // Our interface's lengths and message sizes, as our address says them.
    const AddressHeader a = module_.uct().address_header();
    j.device_len = a.device_len;
    j.iface_len = a.iface_len;
    j.largest_accepted = a.largest_accepted;
    j.largest_sent = a.largest_sent;
    Gather g{WireHeader{static_cast<std::uint8_t>(Kind::join), 0, wire_version, 0, join_source}, &j,
             sizeof j, module_.address().data() + sizeof(AddressHeader),
             std::size_t{j.device_len} + j.iface_len};
    if (g.total() > j.largest_sent) return false;
    const auto deadline = btl::join_deadline(config_.join_timeout);
    for (;;) {
        const ssize_t n = uct_ep_am_bcopy(e.ep, am_id, &UctSender::pack_cb, &g, 0);
        if (n >= 0) return true;
        if (n != UCS_ERR_NO_RESOURCE || e.failed || receiver_.in_callback() ||
            std::chrono::steady_clock::now() >= deadline)
            return false;
        module_.uct().progress();
    }
}

void UctOutside::handle_welcome(const WireHeader& h, std::span<const std::byte> body) noexcept {
    UctEndpoint* e = endpoint(h.source);
    Welcome w{};
    if (e == nullptr || e->failed || body.size() < sizeof w) return;
    std::memcpy(&w, body.data(), sizeof w);
    if (w.status == 0) {
        out_.verbose(10, "{}: the server at peer {} admitted us", module_.name(), e->peer());
        links_.welcome(e->outside);
        return;
    }
    if (!links_.refuse(e->outside)) return;  // a server refuses only a join it has not admitted
    const Status why = status_from_wire(w.status);
    // The pml says it once, as access_denied, for a wrong token.
    e->refused_token = why == Status::access_denied;
    if (!e->refused_token)
        log::warn("uct: the server at peer {} refused us: {}", e->peer(), to_string(why));
    e->failed = true;
    peer_watch_.note_failure();
}

// From attend(), every 16 polls while a join is unanswered: a server whose
// welcome is late is lost (handle_failures ends its operations with
// peer_failed and reports it).
void UctOutside::check_welcomes() noexcept {
    UctEndpoint* late[16];
    const std::size_t n = links_.expire_joins(
        dynamic_, [](const auto& e) { return e->failed || e->deleted ? nullptr : e.get(); },
        std::chrono::steady_clock::now(), late);
    for (std::size_t i = 0; i < n; ++i) {
        out_.verbose(1, "{}: peer {} outside the job: no answer to the join in {} s",
                     module_.name(), late[i]->peer(), config_.join_timeout);
        late[i]->failed = true;
        peer_watch_.note_failure();
    }
}

// --- the server's side -------------------------------------------------------------

void UctOutside::handle_join(std::span<const std::byte> body) noexcept {
    JoinRequest j{};
    std::span<const std::byte> addresses;
    if (const char* bad = read_join(body, j, addresses))
        return refused("a client", std::string("its join ") + bad);
    const std::string who = fmt::format("a client (pid {}, rank {} of its job)", j.pid, j.rank);
    if (!listening_) {
        answer_join(j, addresses, Status::not_available);
        return refused(who, "this process does not listen");
    }
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    if (d == nullptr || !d->token_matches(j.token)) {
        answer_join(j, addresses, Status::access_denied);
        return refused(who, "without this context's access token");
    }
    if (channels_.contains(j.server_channel) || joining_.contains(j.server_channel)) {
        answer_join(j, addresses, Status::bad_param);
        return refused(who, "its channel is in use");
    }
    if (std::string refusal = module_.uct().mismatched_messages(j.largest_accepted, j.largest_sent);
        !refusal.empty()) {
        answer_join(j, addresses, Status::bad_param);
        return refused(who, refusal);
    }
    if (joining_.size() >= max_joining) {
        answer_join(j, addresses, Status::out_of_resource);
        return refused(who, "too many clients joining at once");
    }
    std::string why;
    uct_ep_h ep = nullptr;
    try {
        if (!fits(j)) return refused(who, "its addresses do not fit this transport");
        ep = module_.uct().create_ep(addresses.first(j.device_len), addresses.subspan(j.device_len),
                                     &why);
    } catch (const std::exception& x) {
        why = x.what();
    }
    if (ep == nullptr) return refused(who, "cannot connect to it: " + why);
    Joining joining;
    joining.ep = ep;
    joining.client_channel = j.client_channel;
    joining.pid = j.pid;
    joining.rank = j.rank;
    if (resource_.dev_type != UCT_DEVICE_TYPE_NET)
        joining.process = btl::util::ProcessWatch(static_cast<pid_t>(j.pid));
    try {
        joining_.emplace(j.server_channel, std::move(joining));
    } catch (...) {
        uct_ep_destroy(ep);
        return refused(who, "out of memory");
    }
    const auto deadline = std::chrono::steady_clock::now() + refusal_wait;
    if (const ssize_t n = send_welcome(ep, j.client_channel, Status::success, deadline); n < 0)
        out_.verbose(1, "{}: {} joined, but the welcome was not sent: {}", module_.name(), who,
                     ucs_status_string(static_cast<ucs_status_t>(n)));
    out_.verbose(10, "{}: {} joined (channel {:#x})", module_.name(), who, j.server_channel);
}

// A joined client's first message other than the join: it becomes a peer,
// with an id from the runtime.  nullptr when it cannot (no id, no memory):
// it is forgotten, and its messages are dropped.
UctEndpoint* UctOutside::admit(std::uint32_t channel) noexcept {
    const auto it = joining_.find(channel);
    if (it == joining_.end()) return nullptr;
    Joining j = std::move(it->second);
    joining_.erase(it);
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    const Rank id = d != nullptr ? d->admit() : any_rank;
    if (id == any_rank) {
        uct_ep_destroy(j.ep);
        refused(fmt::format("a client (pid {})", j.pid), "no peer id left");
        return nullptr;
    }
    UctEndpoint* e = add(id, j.ep, channel, j.client_channel, j.process.pid());
    if (e == nullptr) {
        refused(fmt::format("a client (pid {})", j.pid), "out of memory");
        return nullptr;
    }
    links_.admitted(e->outside);
    out_.verbose(10, "{}: a client (pid {}, rank {} of its job) admitted as peer {}",
                 module_.name(), j.pid, j.rank, id);
    return e;
}

// A joined client that left (goodbye) before it spoke: it was never a peer,
// so nobody is told.  Its endpoint goes in check_joining, outside UCT's
// progress.
void UctOutside::forget_joining(std::uint32_t channel, const char* why) noexcept {
    const auto it = joining_.find(channel);
    if (it == joining_.end()) return;
    out_.verbose(10, "{}: a joined client (pid {}) {} before it spoke", module_.name(),
                 it->second.pid, why);
    it->second.failed = true;
    module_.attend_soon();
}

// From attend(): joined clients that left, whose endpoint UCT reported
// lost, or that exited (check_local_peers).
void UctOutside::check_joining() noexcept {
    if (receiver_.in_callback()) return;
    for (auto it = joining_.begin(); it != joining_.end();) {
        if (it->second.failed) {
            uct_ep_destroy(it->second.ep);
            it = joining_.erase(it);
        } else {
            ++it;
        }
    }
}

// The answer to a join (status 0: admitted) on `ep`, to the client's
// `channel`, retried while UCT has no room until `deadline`: what
// uct_ep_am_bcopy returned last.
ssize_t UctOutside::send_welcome(uct_ep_h ep, std::uint32_t channel, Status status,
                                 std::chrono::steady_clock::time_point deadline) noexcept {
    Welcome w{};
    w.status = static_cast<std::int32_t>(status);
    Gather g{WireHeader{static_cast<std::uint8_t>(Kind::welcome), 0, wire_version, 0, channel}, &w,
             sizeof w};
    ssize_t n;
    while ((n = uct_ep_am_bcopy(ep, am_id, &UctSender::pack_cb, &g, 0)) == UCS_ERR_NO_RESOURCE &&
           !receiver_.in_callback() && std::chrono::steady_clock::now() < deadline)
        module_.uct().progress();
    return n;
}

// A refusal the client can hear: through an endpoint made for it alone,
// pushed out with a short bounded wait, then closed.
void UctOutside::answer_join(const JoinRequest& j, std::span<const std::byte> addresses,
                             Status status) noexcept {
    if (!fits(j)) return;
    uct_ep_h ep = nullptr;
    try {
        ep = module_.uct().create_ep(addresses.first(j.device_len), addresses.subspan(j.device_len),
                                     nullptr);
    } catch (...) {
        return;
    }
    if (ep == nullptr) return;
    const auto deadline = std::chrono::steady_clock::now() + refusal_wait;
    const ssize_t n = send_welcome(ep, j.client_channel, status, deadline);
    ucs_status_t s = UCS_INPROGRESS;
    while (n >= 0 && !receiver_.in_callback() &&
           ((s = uct_ep_flush(ep, UCT_FLUSH_FLAG_LOCAL, nullptr)) == UCS_INPROGRESS ||
            s == UCS_ERR_NO_RESOURCE) &&
           std::chrono::steady_clock::now() < deadline)
        module_.uct().progress();
    uct_ep_destroy(ep);
}

// A stranger may try thousands of times: the first few refusals of each
// window are logged with the reason, the rest are counted.
void UctOutside::refused(const std::string& who, const std::string& why) noexcept {
    refusals_.refused(out_, module_.name(), why, "{}", who);
}

// --- both sides --------------------------------------------------------------------

// A source at or above the job's size names a peer outside the job by its
// channel; one that names an id (no peer sends that) or an unknown channel
// is dropped.  What this checks: a client can name only channels it knows,
// its own, each a 31-bit random number; see the README for what it cannot.
bool UctOutside::rename_source(WireHeader& h) noexcept {
    const auto it = is_channel(h.source) ? channels_.find(h.source) : channels_.end();
    if (it != channels_.end()) {
        h.source = it->second->peer();
        return true;
    }
    // A joined client's first word makes it a peer; a goodbye instead ends it.
    const auto j = is_channel(h.source) ? joining_.find(h.source) : joining_.end();
    if (j != joining_.end() && !j->second.failed) {
        if (static_cast<Kind>(h.kind) == Kind::goodbye) {
            forget_joining(h.source, "said goodbye");
            return false;
        }
        UctEndpoint* e = admit(h.source);
        if (e == nullptr) return false;
        h.source = e->peer();
        return true;
    }
    // A goodbye from a peer we deleted first crosses ours: nothing to say.
    if (static_cast<Kind>(h.kind) == Kind::goodbye && is_channel(h.source))
        out_.verbose(10, "{}: a goodbye on channel {:#x}, which is gone", module_.name(), h.source);
    else if (j == joining_.end())
        refused("a message",
                fmt::format("it names an unknown sender ({:#x}, kind {})", h.source, h.kind));
    return false;
}

// The peer disconnected: what it sent before is delivered already (the ring
// is in order); it is reported as departed, not failed.  UCT may have called
// the connection lost first (over tcp our endpoint to the client is another
// socket, whose end can be read before the goodbye): until the loss is
// reported, the goodbye still makes it a departure.
void UctOutside::goodbye(Rank peer) noexcept {
    UctEndpoint* e = endpoint(peer);
    if (e == nullptr || e->reported) return;
    if (!links_.goodbye_received(e->outside)) return;
    out_.verbose(10, "{}: peer {} outside the job disconnected", module_.name(), peer);
    e->goodbye = true;
    e->failed = true;
    peer_watch_.note_failure();
}

// Unnamed at once (records, channel); freed at the next safe point, as a
// caller up the stack (a report from handle_failures) may still hold it.
void UctOutside::remove(UctEndpoint& e) noexcept {
    links_.release(e.outside);
    e.deleted = true;
    e.failed = true;
    // Off the send queue's waiting list before reap() frees it; its replies
    // would name a channel no longer known: what is in flight ends now (a job
    // peer's operations complete on replies that still come).
    module_.cancel_pending(e);
    if (const auto c = channels_.find(e.channel); c != channels_.end() && c->second == &e)
        channels_.erase(c);
    if (const auto d = dynamic_ids_.find(e.peer()); d != dynamic_ids_.end() && d->second == &e)
        dynamic_ids_.erase(d);
    module_.attend_soon();
    module_.update_progress();
}

void UctOutside::reap() noexcept {
    std::erase_if(dynamic_, [](const std::unique_ptr<UctEndpoint>& e) { return e->deleted; });
}

bool UctOutside::fits(const JoinRequest& j) const noexcept {
    const AddressHeader a = module_.uct().address_header();
    return j.iface_len == a.iface_len &&
           (resource_.dev_type == UCT_DEVICE_TYPE_NET || j.device_len == a.device_len);
}

void UctOutside::lost_joining(uct_ep_h ep) noexcept {
    for (auto& [channel, j] : joining_)
        if (j.ep == ep) {
            j.failed = true;
            module_.attend_soon();
        }
}

void UctOutside::check_joining_exits() noexcept {
    for (auto& [channel, j] : joining_)
        if (!j.failed && j.process.exited()) {
            j.failed = true;
            module_.attend_soon();
        }
}

void UctOutside::close() noexcept {
    for (auto& [channel, j] : joining_) uct_ep_destroy(j.ep);
    joining_.clear();
    channels_.clear();
    dynamic_ids_.clear();
    dynamic_.clear();
    listening_ = false;
}

}  // namespace transit::uct
