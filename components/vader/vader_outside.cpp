#include "components/vader/vader_outside.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "components/vader/vader_dynamic.hpp"
#include "components/vader/vader_module.hpp"

namespace transit::vader {

namespace {

constexpr std::size_t max_joining = 64;  // clients mapped whose token has not come yet

const SegmentHeader& header_of(const SharedFile& seg) noexcept {
    return *reinterpret_cast<const SegmentHeader*>(seg.data());
}

// A segment some other process made, checked against what its header says.
bool usable_from_outside(const SharedFile& seg) noexcept {
    if (seg.size() < sizeof(SegmentHeader)) return false;
    const SegmentHeader& h = header_of(seg);
    return segment_usable({reinterpret_cast<const std::byte*>(seg.data()), seg.size()},
                          h.local_index, h.local_size);
}

}  // namespace

bool VaderOutside::is_dynamic(Rank peer) noexcept {
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    return d != nullptr && d->is_dynamic(peer);
}

Status VaderOutside::listen() {
    if (!ensure_segment()) return Status::not_available;
    ListenBlob b;
    b.pid = header_->pid;
    b.fd = segment_.fd();
    b.uid = static_cast<std::uint32_t>(::geteuid());
    b.nonce = header_->nonce;
    b.pid_ns = btl::util::pid_namespace();
    if (const Status s = runtime_.modex_send(listen_key, encode(b)); !ok(s)) return s;
    listening_ = true;
    progress_hook_.start();  // joins arrive in the FIFO
    return Status::success;
}

void VaderOutside::finalize() noexcept {
    // Peers outside the job hear a goodbye: a departure, not a failure.
    for (auto& [peer, ep] : dynamic_)
        if (!ep->dead && ep->joined)
            if (ep->fifo.push(with_kind(ep->ref_base, DynamicKind::goodbye)))
                module_.ring(ep.get());
    dynamic_.clear();
    channels_.clear();
    joining_.clear();
}

void VaderOutside::add_watched(std::vector<VaderEndpoint*>& polled) const {
    for (const auto& [peer, ep] : dynamic_)
        if (!ep->dead) polled.push_back(ep.get());
}

// The segment of a process alone on its node, made when it first meets a
// peer outside the job.  Nobody opens it by name (clients go through
// /proc/<pid>/fd), so the name goes at once: a crash leaves nothing.
bool VaderOutside::ensure_segment() noexcept {
    if (header_ != nullptr) return true;
    try {
        const SharedFile::Extent now[] = {
            {0, layout_.spare_offset},
            {layout_.region_offset, layout_.total - layout_.region_offset}};
        segment_ = SharedFile::create(config_.backing_directory, runtime_.job_id(), runtime_.rank(),
                                      layout_.total, layout_.heap_size, runtime_.numa_node(), now);
        segment_.unlink();
        module_.format_segment();
    } catch (const std::exception& e) {
        if (!warned_dynamic_)
            log::warn("{}; shared memory is not used for peers outside the job", e.what());
        warned_dynamic_ = true;
        segment_ = SharedFile();
        return false;
    }
    out_.verbose(10,
                 "segment for peers outside the job ({} bytes, {} fragments, FIFO {}), single "
                 "copy {}",
                 layout_.total, layout_.frag_count, layout_.fifo_capacity,
                 config_.single_copy == SingleCopy::cma ? "cma" : "none");
    return true;
}

// --- the client's side -----------------------------------------------------------

VaderEndpoint* VaderOutside::connect_server(Rank peer) {
    if (auto it = dynamic_.find(peer); it != dynamic_.end())
        return it->second->dead ? nullptr : it->second.get();
    // A client that joined through another transport has no address: not found.
    if (!runtime_.on_this_node(peer)) return nullptr;
    std::vector<std::byte> blob;
    if (!ok(runtime_.modex_recv(peer, listen_key, blob))) {
        out_.verbose(10, "peer {}: its address has no vader part", peer);
        return nullptr;
    }
    const std::optional<ListenBlob> b = decode_listen_blob(blob);
    if (!b) {
        out_.verbose(1, "peer {}: the vader part of its address is malformed", peer);
        return nullptr;
    }
    if (b->pid_ns != btl::util::pid_namespace()) {
        out_.verbose(10, "peer {}: in another pid namespace", peer);
        return nullptr;
    }
    if (b->uid != ::geteuid()) {
        log::warn(
            "vader: the server (peer {}, pid {}) runs as user {}, this process as {}: vader "
            "serves clients of the same user only; another transport must carry it",
            peer, b->pid, b->uid, ::geteuid());
        return nullptr;
    }
    for (const auto& [r, ep] : dynamic_)
        if (!ep->dead && ep->pid == static_cast<pid_t>(b->pid)) {
            out_.verbose(10, "peer {}: one vader connection per server, peer {} has it", peer, r);
            return nullptr;
        }
    if (!ensure_segment()) return nullptr;
    SharedFile seg;
    try {
        seg = SharedFile::attach_process(b->pid, b->fd);
    } catch (const std::system_error& e) {
        log::warn("vader: cannot open the shared memory of the server (peer {}): {}", peer,
                  e.what());
        return nullptr;
    }
    if (!usable_from_outside(seg) || header_of(seg).pid != b->pid ||
        header_of(seg).nonce != b->nonce) {
        log::warn("vader: {} is not the segment the address of peer {} names", seg.path(), peer);
        return nullptr;
    }
    auto ep = std::make_unique<VaderEndpoint>(peer, no_local_index, std::move(seg));
    peers_.attach_peer(*ep);
    ep->dynamic = true;
    ep->fbox_after = ~0u;
    ep->channel = next_channel_;
    next_channel_ = (next_channel_ + 1) & 0x0fffffffu;
    if (next_channel_ == 0) next_channel_ = 1;
    // The server knows us by our pid: one connection per client process.
    ep->ref_base = make_dynamic_ref(DynamicKind::data, header_->pid, 0);
    ep->joined = false;
    module_.probe_single_copy(*ep);
    give_spare(*ep);
    VaderEndpoint* raw = ep.get();
    channels_[raw->channel] = raw;
    dynamic_[peer] = std::move(ep);
    peer_watch_.rebuild();
    progress_hook_.start();
    out_.verbose(10, "peer {} outside the job (pid {}): mapped {}", peer, raw->pid,
                 raw->segment.path());
    return raw;
}

// Before the first fragment to a server: a join reference (how to open our
// segment), then a join fragment (the token, and the channel the server's
// references are to carry).  False when its FIFO or our fragments are full:
// the caller retries, and the reference is not sent twice.
bool VaderOutside::send_join(VaderEndpoint* ep) noexcept {
    if (!ep->join_ref_sent) {
        const auto fd = static_cast<std::uint32_t>(segment_.fd());
        if (!ep->fifo.push(make_dynamic_ref(DynamicKind::join, header_->pid, fd))) return false;
        module_.ring(ep);
        ep->join_ref_sent = true;
    }
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    const rt::Secret* token = d ? d->token_for(ep->peer()) : nullptr;
    if (token == nullptr) return false;
    Frag* j = module_.take_frag(ep);
    if (j == nullptr) return false;
    JoinPayload p;
    p.token = *token;
    p.channel = ep->channel;
    p.rank = runtime_.rank();
    p.fast_box = ep->spare == SpareBoxes::none ? no_fast_box : layout_.local_size + ep->spare;
    std::memcpy(j->payload, &p, sizeof p);
    j->header->kind = FragKind::join;
    j->header->size = sizeof p;
    j->header->atomic_status = 0;
    j->internal = true;
    if (!ep->fifo.push(ep->ref_base | j->index)) {
        frags_.put(j);
        return false;
    }
    module_.ring(ep);
    j->in_flight = true;
    ++ep->outstanding;
    ep->joined = true;
    links_.join_sent(ep->outside, config_.join_timeout);
    return true;
}

// The server gave the join fragment back: a status in it is a refusal, else
// it names the fast box of the server's segment we write into from now on.
void VaderOutside::join_answered(Frag* f) noexcept {
    VaderEndpoint* ep = f->endpoint;
    const std::int16_t refusal = f->header->atomic_status;
    const std::uint64_t box = f->header->operand;
    frags_.put(f);
    if (refusal == 0) {
        links_.welcome(ep->outside);
        if (box <= UINT32_MAX && !ep->dead) write_into(*ep, static_cast<std::uint32_t>(box));
        return;
    }
    links_.refuse(ep->outside);
    // Refused before it was admitted: the server never wrote into our box.
    if (ep->spare != SpareBoxes::none) {
        module_.unpoll(ep);
        spares_.free(ep->spare);
        ep->spare = SpareBoxes::none;
        ep->reader = nullptr;
    }
    if (ep->dead) return;
    if (refusal == static_cast<std::int16_t>(Status::access_denied))
        module_.peer_lost(ep, "vader: the server refused the token", btl::error_flags::refused);
    else
        module_.peer_lost(ep, "vader: the server refused the connection");
}

// A spare box of our segment for the peer to write into, formatted afresh
// (its last writer let go of it); none left: the peer uses the FIFO.
void VaderOutside::give_spare(VaderEndpoint& ep) noexcept {
    const std::uint32_t spare = spares_.take();
    if (spare == SpareBoxes::none) {
        out_.verbose(10, "peer {}: no spare fast box left, its messages use the FIFO", ep.peer());
        return;
    }
    const std::uint32_t index = layout_.local_size + spare;
    const std::size_t offset = layout_.fbox_offset + std::size_t{index} * layout_.fbox_stride;
    if (!segment_.provide(offset, layout_.fbox_stride)) {
        spares_.free(spare);
        out_.verbose(5, "peer {}: {} has no room for a fast box, its messages use the FIFO",
                     ep.peer(), config_.backing_directory);
        return;
    }
    ep.spare = spare;
    if (!module_.read_box(ep, index)) {
        spares_.free(spare);
        ep.spare = SpareBoxes::none;
    }
}

// The peer gave us box `box` of its segment: our small messages go there
// (after the threshold, as to a local peer).  One the segment does not
// hold as a spare is ignored.
void VaderOutside::write_into(VaderEndpoint& ep, std::uint32_t box) noexcept {
    const SegmentHeader& ph = ep.header();
    if (box == no_fast_box) return;
    if (box < ph.local_size || box >= ph.fbox_count) {
        out_.verbose(1, "peer {}: a fast box it does not have ({}) ignored", ep.peer(), box);
        return;
    }
    ep.fastbox = FastboxWriter(
        ep.segment.data() + ph.fbox_offset + std::size_t{box} * ph.fbox_stride, ph.fbox_size);
    ep.spare_at_peer = box;
    ep.fbox_after = config_.fbox_threshold;
}

// --- both sides --------------------------------------------------------------------

void VaderOutside::dynamic_ref(std::uint64_t ref) noexcept {
    const std::uint32_t channel = dynamic_channel(ref);
    switch (dynamic_kind(ref)) {
        case DynamicKind::join:
            return handle_join(channel, ref_index(ref));
        case DynamicKind::goodbye: {
            const auto it = channels_.find(channel);
            if (it == channels_.end() || it->second->dead ||
                !links_.goodbye_received(it->second->outside))
                return;
            out_.verbose(10, "peer {} outside the job disconnected", it->second->peer());
            // What it wrote into its box before the goodbye comes first.
            if (VaderEndpoint* ep = it->second; ep->reader != nullptr)
                module_.poll_box(*ep->reader, ep, INT_MAX);
            // Reported at the next pass: the messages it sent before are
            // delivered in this one, and the pml takes them in between.
            try {
                departing_.push_back(it->second);
                pass_.chores = true;
            } catch (...) {
                module_.peer_lost(it->second, "vader: the peer outside the job disconnected",
                                  btl::error_flags::departed);
            }
            return;
        }
        case DynamicKind::release:
            if (const std::uint32_t box = ref_index(ref); box >= layout_.local_size)
                spares_.released(box - layout_.local_size, channel);
            progress_hook_.stop_if_idle();
            return;
        case DynamicKind::data: {
            if (const auto it = channels_.find(channel); it != channels_.end()) {
                VaderEndpoint* ep = it->second;
                if (!ep->dead && ref_index(ref) < ep->frag_count) module_.receive(ep, ref);
                return;
            }
            if (const auto it = joining_.find(channel); it != joining_.end())
                return admit(channel, it->second, ref);
            out_.verbose(10, "a fragment of an unknown peer outside the job (channel {}) dropped",
                         channel);
            return;
        }
    }
    out_.verbose(1, "a FIFO entry of an unknown kind dropped");
}

// A peer outside the job deleted (disconnected or released after a failure):
// a goodbye if it still listens, and its endpoint goes once no caller up the
// stack can name it (the next progress pass).
void VaderOutside::delete_dynamic(VaderEndpoint* ep) noexcept {
    const Rank peer = ep->peer();
    const auto it = dynamic_.find(peer);
    if (it == dynamic_.end() || it->second.get() != ep) return;
    if (!ep->dead && ep->joined) {
        // Its FIFO full means it is not reading; it will see our exit instead.
        const std::uint64_t bye = with_kind(ep->ref_base, DynamicKind::goodbye);
        for (int tries = 0; tries < 1000 && !ep->fifo.push(bye); ++tries) ::sched_yield();
        module_.ring(ep);
    }
    const bool alive = !ep->dead;
    ep->dead = true;
    release_boxes(ep);
    links_.release(ep->outside);
    for (Frag& f : frags_.items())
        if (f.in_flight && f.endpoint == ep) {
            if (alive)
                orphan(&f, ep, Status::cancelled);
            else
                module_.complete(&f, Status::cancelled);
        }
    module_.forget(ep);
    std::erase(departing_, ep);
    if (const auto c = channels_.find(ep->channel); c != channels_.end() && c->second == ep)
        channels_.erase(c);
    // From inside our own progress or peer check a caller may still hold it.
    if (pass_.in_pass()) {
        try {
            graveyard_.push_back(std::move(it->second));
            pass_.chores = true;
        } catch (...) {
            // Freed now: nothing up the stack holds it when memory is this short.
        }
    }
    dynamic_.erase(it);
    out_.verbose(10, "peer {} outside the job deleted", peer);
}

// The fast boxes between us and a peer outside the job that is deleted.  Ours
// is free again once the peer cannot write into it any more; if the peer
// dropped us first (its goodbye) and still runs, it parked the one we wrote
// into, and hears that we let go of it.
void VaderOutside::release_boxes(VaderEndpoint* ep) noexcept {
    const bool exited = ep->process.exited();
    if (ep->spare != SpareBoxes::none) {
        module_.unpoll(ep);
        if (ep->outside.departed() || exited) {
            spares_.free(ep->spare);
        } else {
            spares_.park(ep->spare, ep->channel, ep->pid);
            out_.verbose(10, "peer {}: fast box {} parked until it lets go of it", ep->peer(),
                         ep->spare);
        }
        ep->spare = SpareBoxes::none;
        ep->reader = nullptr;
    }
    if (ep->outside.departed() && !exited && ep->spare_at_peer != SpareBoxes::none) {
        const std::uint64_t release =
            with_kind(ep->ref_base, DynamicKind::release) | std::uint64_t{ep->spare_at_peer};
        // Its FIFO full means it is not reading: the box stays parked until it exits.
        for (int tries = 0; tries < 1000 && !ep->fifo.push(release); ++tries) ::sched_yield();
        module_.ring(ep);
        out_.verbose(10, "peer {}: let go of its fast box {}", ep->peer(), ep->spare_at_peer);
    }
}

// From VaderPeerWatch::check, when due: parked boxes whose writer exited, joins no
// server answered in time.
void VaderOutside::watch_dynamic() noexcept {
    spares_.reap_exited();
    if (links_.joining() != 0) expire_joins();
    if (!orphan_owners_.empty()) reap_orphans();
    progress_hook_.stop_if_idle();
}

// A server that maps in but never answers our join (stopped, or not
// progressing) would hold our operations forever: after btl_vader_join_timeout
// it is given up.  Its fragments stay off the free list (it may still read
// them) and our operations with it end with peer_failed.
void VaderOutside::expire_joins() noexcept {
    VaderEndpoint* late[16];
    const std::size_t n = links_.expire_joins(
        dynamic_, [](const auto& kv) { return kv.second->dead ? nullptr : kv.second.get(); },
        std::chrono::steady_clock::now(), late);
    for (std::size_t i = 0; i < n; ++i) {
        VaderEndpoint* ep = late[i];
        ep->dead = true;
        for (Frag& f : frags_.items())
            if (f.in_flight && f.endpoint == ep) orphan(&f, ep, Status::peer_failed);
        out_.verbose(1, "peer {} outside the job (pid {}): no answer to the join in {} s",
                     ep->peer(), ep->pid, config_.join_timeout);
        module_.report_peer_error(
            ep,
            "vader: the server did not answer the join within btl_vader_join_timeout "
            "(stopped, or not progressing)");
    }
}

// A fragment in flight to a peer that still reads: cancelled for its user,
// kept from the free list until the peer hands it back.
void VaderOutside::orphan(Frag* f, VaderEndpoint* ep, Status status) noexcept {
    --ep->outstanding;
    f->orphan = true;
    f->orphan_of = ep->pid;
    f->endpoint = nullptr;
    const auto watched = [pid = ep->pid](const btl::util::ProcessWatch& w) {
        return w.pid() == pid;
    };
    if (std::none_of(orphan_owners_.begin(), orphan_owners_.end(), watched)) {
        try {
            orphan_owners_.emplace_back(ep->pid);
        } catch (...) {
            // Unwatched: the fragment comes back only if the peer returns it.
        }
    }
    if (f->header->kind == FragKind::atomic) {
        if (f->rdma_cb)
            f->rdma_cb(&module_, ep, f->local_address, f->local_handle, f->rdma_context,
                       f->rdma_cbdata, status);
    } else if (!f->internal && f->cbfunc) {
        f->cbfunc(&module_, ep, f, status);
    }
    f->internal = true;
}

// Orphaned fragments of a peer that exited without handing them back are
// ours again (the returns it pushed before it died are taken first); a peer
// that handed back all of its own is no longer watched.
void VaderOutside::reap_orphans() noexcept {
    module_.progress();
    std::erase_if(orphan_owners_, [this](const btl::util::ProcessWatch& w) {
        const bool gone = w.exited();
        bool held = false;
        for (Frag& f : frags_.items()) {
            if (!f.orphan || f.orphan_of != w.pid()) continue;
            if (gone)
                module_.complete(&f, Status::cancelled);
            else
                held = true;
        }
        return gone || !held;
    });
}

void VaderOutside::pass_chores() noexcept {
    if (!graveyard_.empty()) graveyard_.clear();
    if (!departing_.empty()) report_departures();
}

// The peers whose goodbye came in an earlier pass.
void VaderOutside::report_departures() noexcept {
    std::vector<VaderEndpoint*> now;
    now.swap(departing_);
    for (VaderEndpoint* ep : now)
        if (!ep->dead)
            module_.peer_lost(ep, "vader: the peer outside the job disconnected",
                              btl::error_flags::departed);
}

// --- the server's side ---------------------------------------------------------------

// A client's join reference: its segment is mapped now (the kernel opens
// /proc/<pid>/fd/<fd> for the same user only), the token comes next.
void VaderOutside::handle_join(std::uint32_t pid, std::uint32_t fd) noexcept {
    if (!listening_) return refused(pid, "this process does not listen");
    if (const auto it = channels_.find(pid); it != channels_.end()) {
        // The same client again after its goodbye, or the same pid after a
        // death not yet noticed (a new process): the old endpoint is done.
        if (!it->second->dead && !it->second->outside.departed())
            return refused(pid, "it is connected already");
        channels_.erase(it);
    }
    if (joining_.contains(pid)) return refused(pid, "it is joining already");
    if (joining_.size() >= max_joining) return refused(pid, "too many clients joining at once");
    try {
        SharedFile seg = SharedFile::attach_process(pid, static_cast<int>(fd));
        if (!usable_from_outside(seg) || header_of(seg).pid != pid)
            return refused(pid, seg.path() + " is not a vader segment of that process");
        Fifo fifo = Fifo::attach(seg.data() + header_of(seg).fifo_offset);
        joining_.emplace(
            pid, Joining{std::move(seg), fifo, btl::util::ProcessWatch(static_cast<pid_t>(pid))});
    } catch (const std::exception& e) {
        refused(pid, e.what());
    }
}

// The client's join fragment: admitted with the listening context's token,
// it gets a peer id; refused, its fragment goes back with the reason.
void VaderOutside::admit(std::uint32_t pid, Joining& j, std::uint64_t ref) noexcept {
    const std::uint32_t index = ref_index(ref);
    const std::uint64_t back = ref | return_bit;
    auto drop = [&](const char* why) {
        refused(pid, why);
        joining_.erase(pid);
    };
    const JoinFragment join =
        read_join({reinterpret_cast<std::byte*>(j.segment.data()), j.segment.size()}, index);
    if (join.header == nullptr) return drop("a join fragment outside its segment");
    auto& h = *join.header;
    auto refuse = [&](const char* why, Status s) {
        h.atomic_status = static_cast<std::int16_t>(s);
        if (j.fifo.push(back)) module_.ring(*reinterpret_cast<SegmentHeader*>(j.segment.data()));
        drop(why);
    };
    if (!join.payload) return refuse("its first fragment is no join", Status::protocol_error);
    const JoinPayload& p = *join.payload;
    rt::DynamicPeers* d = runtime_.dynamic_peers();
    if (d == nullptr || !d->token_matches(p.token))
        return refuse("without this context's access token", Status::access_denied);
    try {
        // So that nothing below fails once the peer id is given.
        dynamic_.reserve(dynamic_.size() + 1);
        channels_.reserve(channels_.size() + 1);
        peer_watch_.reserve();
    } catch (...) {
        return refuse("out of memory", Status::out_of_resource);
    }
    const Rank id = d->admit();
    if (id == any_rank) return refuse("no peer id left", Status::out_of_resource);
    std::unique_ptr<VaderEndpoint> ep;
    try {
        ep = std::make_unique<VaderEndpoint>(id, no_local_index, std::move(j.segment));
    } catch (...) {
        return refuse("out of memory", Status::out_of_resource);
    }
    peers_.attach_peer(*ep);
    ep->dynamic = true;
    ep->fbox_after = ~0u;
    ep->channel = pid;
    ep->ref_base = make_dynamic_ref(DynamicKind::data, p.channel, 0);
    links_.admitted(ep->outside);
    joining_.erase(pid);
    module_.probe_single_copy(*ep);
    write_into(*ep, p.fast_box);
    give_spare(*ep);
    h.atomic_status = 0;
    h.operand = ep->spare == SpareBoxes::none ? no_fast_box : layout_.local_size + ep->spare;
    VaderEndpoint* raw = ep.get();
    channels_[pid] = raw;
    dynamic_[id] = std::move(ep);
    module_.return_frag(raw, back);
    peer_watch_.rebuild();
    out_.verbose(10, "a client (pid {}, rank {} of its job) joined as peer {}", pid, p.rank, id);
}

// Clients that mapped in and died before sending their token.
void VaderOutside::forget_joining_exited() noexcept {
    if (!joining_pace_.due()) return;
    std::erase_if(joining_, [this](const auto& kv) {
        if (!kv.second.process.exited()) return false;
        out_.verbose(1, "a joining client (pid {}) exited before its token came", kv.first);
        return true;
    });
}

// A stranger may try thousands of times: the first few refusals of each
// window are logged with the reason, the rest are counted.
void VaderOutside::refused(std::uint32_t pid, const std::string& reason) noexcept {
    refusals_.refused(out_, "vader", reason, "a client (pid {})", pid);
}

}  // namespace transit::vader
