#include "components/vader/vader_module.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "components/vader/vader_cma.hpp"
#include "components/vader/vader_dynamic.hpp"

namespace transit::vader {

namespace {

VaderEndpoint* as_vader(btl::Endpoint* ep) noexcept {
    return static_cast<VaderEndpoint*>(ep);
}

}  // namespace

VaderModule::VaderModule(btl::Component& component, btl::InitContext& ctx, const Config& config,
                         const Layout& layout, SharedFile segment, log::Stream out)
    : btl::Module(component),
      runtime_(ctx.runtime),
      progress_engine_(ctx.progress),
      am_table_(ctx.am_table),
      config_(config),
      layout_(layout),
      segment_(std::move(segment)),
      header_(nullptr),
      out_(std::move(out)),
      single_copy_(config.single_copy),
      my_index_(0),
      fbox_max_(0) {
    const auto peers = runtime_.local_peers();
    my_index_ = static_cast<std::uint32_t>(std::find(peers.begin(), peers.end(), runtime_.rank()) -
                                           peers.begin());
    const std::size_t payload = layout_.frag_stride - frag_header_size;
    fbox_max_ = std::min<std::uint32_t>(Fastbox::max_payload(layout_.fbox_size),
                                        static_cast<std::uint32_t>(config_.eager_limit));
    attr_.eager_limit = std::min(config_.eager_limit, payload);
    attr_.rndv_eager_limit = attr_.eager_limit;
    attr_.max_send_size = std::min(config_.max_send_size, payload);
    attr_.exclusivity = config_.exclusivity;  // default: just below self, above every network
    attr_.latency = 1;
    // Not flags::thread_safe: a fast box and a FIFO each have one writer per
    // process, and the fragment free lists and pending queues are unlocked.
    // One-sided flags come with the segment (format_segment).
    // Every peer is on this node: its process is watched (VaderPeerWatch::check).
    attr_.flags = btl::flags::send | btl::flags::dynamic_peers | btl::flags::reports_peer_loss;
    attr_.reach = btl::reach::node;
    sender_fences_ = Doorbell::sender_fences();
    sleep_.open();
    if (segment_.data() != nullptr) format_segment();
}

// Lays out the own segment and announces what it allows.  Single copy is
// decided here, before anything is published: at init, or when a process
// alone on its node makes its segment for a peer outside the job.
void VaderModule::format_segment() {
    decide_single_copy(config_);
    single_copy_ = config_.single_copy;
    SegmentHeader& h = *new (segment_.data()) SegmentHeader{};
    h.version = segment_version;
    h.pid = static_cast<std::uint32_t>(::getpid());
    h.pid_ns = btl::util::pid_namespace();
    h.start_time = btl::util::process_start_time(::getpid());
    h.rank = runtime_.rank();
    h.local_index = my_index_;
    h.local_size = layout_.local_size;
    h.fifo_capacity = layout_.fifo_capacity;
    h.size = segment_.size();
    h.owner_base = reinterpret_cast<std::uint64_t>(segment_.data());
    h.fifo_offset = layout_.fifo_offset;
    h.fbox_offset = layout_.fbox_offset;
    h.fbox_stride = layout_.fbox_stride;
    h.fbox_size = layout_.fbox_size;
    h.fbox_count = layout_.fbox_count;
    h.frag_count = layout_.frag_count;
    h.frag_offset = layout_.frag_offset;
    h.frag_stride = layout_.frag_stride;
    std::uint64_t cookie = reinterpret_cast<std::uint64_t>(this) ^ 0x5a5aa5a5c3c33c3cull;
    h.probe_cookie = cookie;
    h.heap_offset = layout_.heap_offset;
    h.heap_size = layout_.heap_size;
    h.region_offset = layout_.region_offset;
    h.region_count = region_slot_count;
    h.nonce = random64();
    h.sleeping.store(awake, std::memory_order_relaxed);
    std::memcpy(h.bell, sleep_.bell_name(), bell_name_size);
    one_sided_.format(layout_);

    fifo_ = Fifo::create(segment_.data() + layout_.fifo_offset, layout_.fifo_capacity);
    // Never resized from here on: endpoints point at their reader.  The
    // spares are formatted when handed out (their pages come then).
    readers_.reserve(layout_.fbox_count);
    for (std::uint32_t i = 0; i < layout_.local_size; ++i)
        readers_.emplace_back(segment_.data() + layout_.fbox_offset + i * layout_.fbox_stride,
                              layout_.fbox_size);
    readers_.resize(layout_.fbox_count);
    endpoints_.resize(layout_.local_size);
    peers_.format();
    active_.reserve(layout_.local_size);
    outside_.format();
    // Room for every box twice: entries of peers deleted during a pass stay
    // (null) until its end, beside those of peers given the boxes again.
    boxes_.reserve(2 * std::size_t{layout_.fbox_count});

    frags_.setup({.initial = layout_.frag_count, .max = layout_.frag_count});
    std::uint32_t i = 0;
    for (Frag& f : frags_.items()) {
        f.index = i;
        f.header = reinterpret_cast<FragHeader*>(segment_.data() + layout_.frag_offset +
                                                 i * layout_.frag_stride);
        f.payload = reinterpret_cast<char*>(f.header) + frag_header_size;
        f.segments = &f.segment;
        f.segment_count = 1;
        ++i;
    }
    pending_returns_.reserve(std::size_t{layout_.local_size} * layout_.frag_count);
    // Last: a peer that sees the magic may use everything above.
    std::atomic_thread_fence(std::memory_order_release);
    h.magic = segment_magic;
    header_ = &h;

    attr_.bandwidth = single_copy_ == SingleCopy::cma ? 10000 : 5000;
    attr_.flags |= btl::flags::atomic_ops | btl::flags::atomic_fops | btl::flags::rdma_flush;
    // CMA reads and writes the target's memory from here: the target need not run.
    if (single_copy_ == SingleCopy::cma)
        attr_.flags |= btl::flags::put | btl::flags::get | btl::flags::rdma_without_target;
    namespace as = btl::atomic_support;
    // Not announced global, although every vader atomic is a CPU atomic (through
    // the mapping or by the target): Open MPI's osc/rdma, seeing a global btl
    // behind the adapter, issues atomics to its own rank with no endpoint.
    attr_.atomic_flags = as::add | as::and_ | as::or_ | as::xor_ | as::land | as::lor | as::lxor |
                         as::swap | as::min | as::max | as::cswap | as::bits32;
    attr_.registration_handle_size = sizeof(btl::RegionKey);
    // The origin moves the data itself: its own memory needs no registration.
    attr_.put_local_registration_threshold = std::numeric_limits<std::size_t>::max();
    attr_.get_local_registration_threshold = std::numeric_limits<std::size_t>::max();
}

VaderModule::~VaderModule() {
    (void)finalize();
}

Status VaderModule::finalize() {
    if (header_ == nullptr) return Status::success;
    header_->departed.store(1, std::memory_order_release);
    outside_.finalize();
    boxes_.clear();
    progress_hook_.stop();
    for (auto& ep : endpoints_) ep.reset();
    peers_.finalize();
    active_.clear();
    segment_.unlink();
    return Status::success;
}

// --- peers --------------------------------------------------------------------

// The second CMA probe: a read of the peer's segment through the kernel.
void VaderModule::probe_single_copy(const VaderEndpoint& ep) {
    if (single_copy_ != SingleCopy::cma) return;
    SegmentHeader& ph = ep.header();
    std::string why =
        config_.cma_probe_fail
            ? std::string("forced to fail by btl_vader_cma_probe_fail")
            : cma_peer_probe(ep.pid, ph.owner_base + offsetof(SegmentHeader, probe_cookie),
                             ph.probe_cookie);
    if (why.empty()) return;
    single_copy_ = SingleCopy::none;
    attr_.flags &= ~(btl::flags::put | btl::flags::get);
    attr_.bandwidth = 5000;
    if (!warned_cma_)
        log::warn(
            "vader: single copy (CMA) disabled: {}; large messages go through "
            "shared-memory fragments instead",
            why);
    warned_cma_ = true;
}

Status VaderModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                              btl::Reachability& reachable) {
    if (peers.size() != endpoints.size() || reachable.size() < peers.size())
        return Status::bad_param;
    const auto local = runtime_.local_peers();
    bool any = false;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const Rank r = peers[i];
        if (r >= runtime_.size()) {
            VaderEndpoint* ep = outside_.is_dynamic(r) ? outside_.connect_server(r) : nullptr;
            if (ep == nullptr) continue;
            endpoints[i] = ep;
            reachable.set(i);
            any = true;
            continue;
        }
        if (header_ == nullptr) continue;  // alone on the node: no job peer here
        if (r == runtime_.rank() || !runtime_.on_this_node(r)) continue;
        const auto it = std::find(local.begin(), local.end(), r);
        if (it == local.end()) continue;
        const auto index = static_cast<std::uint32_t>(it - local.begin());
        if (index >= layout_.local_size) continue;
        VaderEndpoint* ep = endpoints_[index] ? endpoints_[index].get() : peers_.connect(r, index);
        if (ep == nullptr) continue;
        endpoints[i] = ep;
        reachable.set(i);
        any = true;
    }
    if (any) progress_hook_.start();
    return Status::success;
}

Status VaderModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    (void)peers;
    for (btl::Endpoint* e : endpoints) {
        auto* ep = as_vader(e);
        if (ep != nullptr && ep->dynamic) {
            outside_.delete_dynamic(ep);
            continue;
        }
        if (ep == nullptr || ep->local_index >= endpoints_.size() ||
            endpoints_[ep->local_index].get() != ep)
            continue;
        // Fragments still in flight to it must not point at a dead endpoint.
        for (Frag& f : frags_.items())
            if (f.in_flight && f.endpoint == ep) complete(&f, Status::cancelled);
        std::erase(active_, ep->local_index);
        unpoll(ep);
        peers_.retire(ep->local_index);
    }
    peer_watch_.rebuild();
    progress_hook_.stop_if_idle();
    return Status::success;
}

VaderEndpoint* VaderModule::endpoint_for(std::uint32_t local_index) noexcept {
    if (local_index >= endpoints_.size()) [[unlikely]]
        return nullptr;
    if (VaderEndpoint* ep = endpoints_[local_index].get(); ep != nullptr) [[likely]]
        return ep;
    // A peer that added us before we added it: map it now (rare, setup cost).
    try {
        return peers_.connect(runtime_.local_peers()[local_index], local_index);
    } catch (...) {
        return nullptr;
    }
}

// The progress pass reads the spare box `index` of our segment from now on,
// written by ep.
bool VaderModule::read_box(VaderEndpoint& ep, std::uint32_t index) noexcept {
    const std::size_t offset = layout_.fbox_offset + std::size_t{index} * layout_.fbox_stride;
    readers_[index] = FastboxReader(segment_.data() + offset, layout_.fbox_size);
    ep.reader = &readers_[index];
    try {
        poll_from(ep);  // reserved at format_segment: does not allocate
    } catch (...) {
        ep.reader = nullptr;
        return false;
    }
    return true;
}

void VaderModule::return_frag(VaderEndpoint* ep, std::uint64_t back) noexcept {
    if (ep->fifo.push(back))
        ring(ep);
    else
        pending_returns_.emplace_back(ep, back);
}

void VaderModule::forget(VaderEndpoint* ep) noexcept {
    std::erase_if(pending_returns_, [ep](const auto& p) { return p.first == ep; });
    peer_watch_.forget(ep);
}

// --- sends --------------------------------------------------------------------

Frag* VaderModule::take_frag(VaderEndpoint* ep) noexcept {
    Frag* f = frags_.get();
    if (f == nullptr) [[unlikely]]
        return nullptr;
    if (f->index >= supplied_frags_ && !supply_frags(f->index)) [[unlikely]] {
        frags_.put(f);
        return nullptr;
    }
    f->endpoint = ep;
    f->flags = 0;
    f->cbfunc = nullptr;
    f->cbdata = nullptr;
    f->context = nullptr;
    f->internal = false;
    f->header->kind = FragKind::data;
    return f;
}

// Pages for the fragments up to `index`, a few at a time.  A file system too
// full to give them leaves the module with the fragments it has.
bool VaderModule::supply_frags(std::uint32_t index) noexcept {
    constexpr std::uint32_t step = 16;
    const std::uint32_t upto = std::min(layout_.frag_count, (index / step + 1) * step);
    const std::size_t offset =
        layout_.frag_offset + std::size_t{supplied_frags_} * layout_.frag_stride;
    const std::size_t len = std::size_t{upto - supplied_frags_} * layout_.frag_stride;
    if (!segment_.provide(offset, len)) {
        if (!warned_supply_)
            log::warn("vader: {} has no room for more fragments; sends wait for the {} it has",
                      segment_.path(), supplied_frags_);
        warned_supply_ = true;
        return false;
    }
    supplied_frags_ = upto;
    return true;
}

bool VaderModule::push(VaderEndpoint* ep, Frag* f) noexcept {
    f->endpoint = ep;
    // A server outside the job hears who we are before our first fragment.
    if (!ep->joined && !outside_.send_join(ep)) [[unlikely]]
        return false;
    if (!ep->fifo.push(ep->ref_base | f->index)) [[unlikely]]
        return false;
    ring(ep);
    f->in_flight = true;
    ++ep->outstanding;
    return true;
}

btl::Descriptor* VaderModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                    std::uint32_t flags) noexcept {
    Frag* f = take_frag(as_vader(endpoint));
    if (f == nullptr) return nullptr;
    f->order = order;
    f->flags = flags;
    f->segment = {f->payload, std::min<std::size_t>(size, attr_.max_send_size)};
    return f;
}

Status VaderModule::free(btl::Descriptor* descriptor) noexcept {
    auto* f = static_cast<Frag*>(descriptor);
    if (f != nullptr && f->orphan) return Status::success;  // freed when the peer returns it
    if (f == nullptr || f->in_flight || !frags_.put_checked(f)) return Status::bad_param;
    return Status::success;
}

btl::Descriptor* VaderModule::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                          std::uint8_t order, std::size_t reserve,
                                          std::size_t& size, std::uint32_t flags) noexcept {
    if (reserve > attr_.max_send_size) return nullptr;
    Frag* f = take_frag(as_vader(endpoint));
    if (f == nullptr) return nullptr;
    const std::size_t room = attr_.max_send_size - reserve;
    size = convertor.pack(f->payload + reserve, std::min(size, room));
    f->order = order;
    f->flags = flags;
    f->segment = {f->payload, reserve + size};
    return f;
}

Status VaderModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                         btl::Tag tag) noexcept {
    VaderEndpoint* ep = as_vader(endpoint);
    auto* f = static_cast<Frag*>(descriptor);
    if (ep->dead) [[unlikely]]
        return Status::peer_failed;
    const auto len = static_cast<std::uint32_t>(f->segment.len);
    // A fast box keeps order only while nothing of ours waits in the FIFO.
    if (len <= fbox_max_ && ep->outstanding == 0 && ep->sends >= ep->fbox_after &&
        ep->fastbox.write(tag, f->payload, len)) {
        ring(ep);
        if ((f->flags & btl::des_flags::send_always_callback) && f->cbfunc)
            f->cbfunc(this, ep, f, Status::success);
        if (f->flags & btl::des_flags::btl_ownership) frags_.put(f);
        return Status::completed;
    }
    if (ep->sends < config_.fbox_threshold) ++ep->sends;
    f->header->size = len;
    f->header->tag = tag;
    f->header->kind = FragKind::data;
    f->internal = false;
    return push(ep, f) ? Status::success : Status::out_of_resource;
}

Status VaderModule::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                          std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                          std::uint32_t flags, btl::Tag tag,
                          btl::Descriptor** descriptor) noexcept {
    VaderEndpoint* ep = as_vader(endpoint);
    const std::size_t total = header_size + payload_size;
    if (total <= fbox_max_ && ep->outstanding == 0 && ep->sends >= ep->fbox_after && !ep->dead)
        [[likely]] {
        if (ep->fastbox.write_parts(tag, header, static_cast<std::uint32_t>(header_size),
                                    static_cast<std::uint32_t>(payload_size),
                                    [&](char* dst) { convertor->pack(dst, payload_size); })) {
            ring(ep);
            if (descriptor != nullptr) *descriptor = nullptr;
            return Status::completed;
        }
    }
    return sendi_fragment(ep, convertor, header, header_size, payload_size, order, flags, tag,
                          descriptor);
}

// sendi's second choice, out of line so the fast-box path above stays small:
// one fragment through the FIFO.
Status VaderModule::sendi_fragment(VaderEndpoint* ep, btl::Convertor* convertor, const void* header,
                                   std::size_t header_size, std::size_t payload_size,
                                   std::uint8_t order, std::uint32_t flags, btl::Tag tag,
                                   btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    if (ep->dead) return Status::peer_failed;
    const std::size_t total = header_size + payload_size;
    if (total > attr_.max_send_size) return Status::bad_param;
    Frag* f = take_frag(ep);
    if (f == nullptr) return Status::out_of_resource;
    if (ep->sends < config_.fbox_threshold) ++ep->sends;
    const std::size_t start = convertor != nullptr ? convertor->position() : 0;
    if (header_size) std::memcpy(f->payload, header, header_size);  // header may be null when empty
    if (payload_size != 0) convertor->pack(f->payload + header_size, payload_size);
    f->header->size = static_cast<std::uint32_t>(total);
    f->header->tag = tag;
    f->internal = true;
    if (push(ep, f)) [[likely]]
        return Status::completed;
    // FIFO full: hand the fragment over for the caller to fill and send later.
    if (convertor != nullptr) convertor->seek(start);
    f->internal = false;
    f->order = order;
    f->flags = flags;
    f->segment = {f->payload, total};
    if (descriptor != nullptr)
        *descriptor = f;
    else
        frags_.put(f);
    return Status::out_of_resource;
}

void VaderModule::dump(btl::Endpoint* endpoint, int verbosity) {
    (void)verbosity;
    for (std::uint32_t i : active_) {
        VaderEndpoint* ep = endpoints_[i].get();
        if (endpoint != nullptr && endpoint != ep) continue;
        log::write("vader",
                   fmt::format("peer {} local {} pid {} outstanding {} sends {} dead {}",
                               ep->peer(), i, ep->pid, ep->outstanding, ep->sends, ep->dead));
    }
    log::write("vader", fmt::format("free fragments {}/{}, FIFO capacity {}, single copy {}",
                                    frags_.available(), frags_.size(), layout_.fifo_capacity,
                                    single_copy_ == SingleCopy::cma ? "cma" : "none"));
}

// --- sleeping -------------------------------------------------------------------

bool VaderModule::has_work() const noexcept {
    if (pass_.chores || !pending_returns_.empty() || !fifo_.empty_at(fifo_head_)) return true;
    for (const PolledBox& b : boxes_)
        if (b.ep != nullptr && b.reader->ready()) return true;
    return false;
}

// --- receive path -------------------------------------------------------------

int VaderModule::progress() noexcept {
    // A receive callback that calls progress must not re-enter the boxes.
    if (pass_.in_progress) [[unlikely]]
        return 0;
    // A peer's exit ended the sleep: look now, not at the paced look.  The
    // look takes what the peer sent before it died first (peer_died).
    if (pass_.exit_seen) [[unlikely]]
        return peer_watch_.check();
    pass_.in_progress = true;
    int events = 0;
    if (pass_.chores) [[unlikely]]
        do_pass_chores();
    // Indexed, up to the entries there are now: a callback may delete a peer
    // (its entry turns null) or add one (read from the next pass on).
    const std::size_t n = boxes_.size();
    for (std::size_t k = 0; k < n; ++k) {
        const PolledBox b = boxes_[k];
        if (b.ep != nullptr) [[likely]]
            events += poll_box(*b.reader, b.ep, 32);
    }
    events += poll_fifo(64);
    if (!pending_returns_.empty()) [[unlikely]] {
        std::erase_if(pending_returns_, [this](const auto& p) {
            if (!p.first->fifo.push(p.second)) return false;
            ring(p.first);
            return true;
        });
    }
    pass_.in_progress = false;
    return events;
}

void VaderModule::deliver(VaderEndpoint* ep, const char* data, std::size_t size,
                          btl::Tag tag) noexcept {
    const btl::Segment seg{const_cast<char*>(data), size};
    const btl::ReceiveDescriptor rd{ep, &seg, 1, tag};
    if (!am_table_.dispatch(this, rd)) [[unlikely]]
        report_error(btl::error_flags::nonfatal, ep->peer(),
                     "vader: message for a tag with no registered callback");
}

int VaderModule::poll_box(FastboxReader& box, VaderEndpoint* ep, int max) noexcept {
    const int n = box.poll(
        [&](const char* data, std::uint32_t len, std::uint8_t tag) { deliver(ep, data, len, tag); },
        max);
    if (box.broken() && ep != nullptr && !ep->dead) [[unlikely]]
        peer_lost(ep,
                  "vader: a malformed fast-box record from a local peer; nothing more is read "
                  "from it");
    return n;
}

// What the last pass left for the start of this one: endpoints of peers
// outside the job deleted then (no caller up the stack names them any more),
// their departures to report, the entries of deleted peers' boxes to erase.
void VaderModule::do_pass_chores() noexcept {
    pass_.chores = false;
    outside_.pass_chores();
    std::erase_if(boxes_, [](const PolledBox& b) { return b.ep == nullptr; });
}

// The progress pass reads the peer's box from now on (reserved: no allocation
// unless a peer was added and deleted more often than boxes_ holds).
void VaderModule::poll_from(VaderEndpoint& ep) {
    boxes_.push_back({ep.reader, &ep});
}

// The progress pass stops reading the peer's box: its entry turns null, erased
// at the start of the next pass (now when no pass runs).
void VaderModule::unpoll(VaderEndpoint* ep) noexcept {
    for (PolledBox& b : boxes_)
        if (b.ep == ep) b = {nullptr, nullptr};
    if (pass_.in_progress)
        pass_.chores = true;
    else
        std::erase_if(boxes_, [](const PolledBox& b) { return b.ep == nullptr; });
}

int VaderModule::poll_fifo(int max) noexcept {
    int events = 0;
    std::uint64_t ref = 0;
    while (events < max && fifo_.pop(fifo_head_, ref)) {
        ++events;
        if (ref & return_bit) {
            const std::uint32_t index = ref_index(ref);
            if (index < frags_.size() && frags_.at(index).in_flight) [[likely]]
                complete(&frags_.at(index), Status::success);
            continue;
        }
        if (ref & dynamic_bit) [[unlikely]] {
            outside_.dynamic_ref(ref);
            continue;
        }
        VaderEndpoint* ep = endpoint_for(ref_owner(ref));
        if (ep == nullptr || ref_index(ref) >= ep->frag_count) [[unlikely]]
            continue;  // nobody to return it to
        receive(ep, ref);
    }
    return events;
}

void VaderModule::receive(VaderEndpoint* ep, std::uint64_t ref) noexcept {
    // Whatever the sender put in its fast box before this fragment comes first.
    if (ep->reader != nullptr) [[likely]]
        poll_box(*ep->reader, ep, INT_MAX);
    FragHeader& h = *ep->frag(ref_index(ref));
    if (h.kind == FragKind::data) [[likely]] {
        const char* payload = reinterpret_cast<const char*>(&h) + frag_header_size;
        deliver(ep, payload, frag_data_length(h, ep->frag_payload), h.tag);
    } else if (h.kind == FragKind::atomic) {
        atomics_.perform(ep, h);
    }
    if (ep->fifo.push(ref | return_bit)) [[likely]]
        ring(ep);
    else
        pending_returns_.emplace_back(ep, ref | return_bit);
}

void VaderModule::complete(Frag* f, Status status) noexcept {
    if (f->orphan) [[unlikely]] {
        f->orphan = false;
        f->in_flight = false;
        frags_.put(f);
        return;
    }
    f->in_flight = false;
    VaderEndpoint* ep = f->endpoint;
    --ep->outstanding;
    if (f->header->kind == FragKind::join) [[unlikely]]
        return outside_.join_answered(f);
    if (f->header->kind == FragKind::atomic) return atomics_.complete(f, status);
    if (f->internal) {
        frags_.put(f);
        return;
    }
    const bool owned = f->flags & btl::des_flags::btl_ownership;
    if (f->cbfunc) f->cbfunc(this, ep, f, status);
    if (owned) frags_.put(f);
}

// --- peer failure -------------------------------------------------------------

// The peer is given up: its pending operations end with an error and the
// upper layer hears of it once.
void VaderModule::peer_lost(VaderEndpoint* ep, const char* why, std::uint32_t flags) noexcept {
    ep->dead = true;
    outside_.lost(*ep);
    for (Frag& f : frags_.items())
        if (f.in_flight && f.endpoint == ep) complete(&f, Status::peer_failed);
    report_error(btl::error_flags::nonfatal | flags, ep->peer(), why);
}

}  // namespace transit::vader
