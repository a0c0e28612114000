// One-sided operations: over the btl's put/get/atomics where the peer's module
// can do them with the region's key, emulated with active messages otherwise
// (the target applies the operation and answers).  flush waits for both kinds.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "pml/one_sided.hpp"
#include "transit/btl/util/random_bits.hpp"

namespace transit::pml {

namespace {

btl::AtomicOp to_btl(std::uint8_t op) noexcept {
    switch (static_cast<AtomicOp>(op)) {
        case AtomicOp::add:
            return btl::AtomicOp::add;
        case AtomicOp::and_:
            return btl::AtomicOp::and_;
        case AtomicOp::or_:
            return btl::AtomicOp::or_;
        case AtomicOp::xor_:
            return btl::AtomicOp::xor_;
        case AtomicOp::swap:
            return btl::AtomicOp::swap;
        case AtomicOp::min:
            return btl::AtomicOp::min;
        case AtomicOp::max:
            return btl::AtomicOp::max;
    }
    return btl::AtomicOp::add;
}

std::uint32_t support_bit(std::uint8_t op) noexcept {
    namespace as = btl::atomic_support;
    if (op == wire::cswap_op) return as::cswap;
    switch (static_cast<AtomicOp>(op)) {
        case AtomicOp::add:
            return as::add;
        case AtomicOp::and_:
            return as::and_;
        case AtomicOp::or_:
            return as::or_;
        case AtomicOp::xor_:
            return as::xor_;
        case AtomicOp::swap:
            return as::swap;
        case AtomicOp::min:
            return as::min;
        case AtomicOp::max:
            return as::max;
    }
    return 0;
}

template <typename T>
void put_bytes(std::vector<std::byte>& out, const T& v) {
    // resize + memcpy rather than insert: g++ 12 at -O3 misreads insert's
    // bounds here (-Wstringop-overflow).
    const std::size_t at = out.size();
    out.resize(at + sizeof v);
    std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

bool RegionImpl::allows(Rank peer, std::uint32_t job_size) const noexcept {
    switch (scope) {
        case RegionScope::Kind::everyone:
            return true;
        case RegionScope::Kind::job:
            return peer < job_size;
        case RegionScope::Kind::peers:
            return std::binary_search(peers.begin(), peers.end(), peer);
    }
    return false;
}

Status OneSided::register_memory(void* base, std::size_t size, const RegionScope& scope,
                                 RegionImpl*& out) {
    out = nullptr;
    if (!base && size) return Status::bad_param;
    if (scope.kind != RegionScope::Kind::everyone && scope.kind != RegionScope::Kind::job &&
        scope.kind != RegionScope::Kind::peers)
        return Status::bad_param;
    auto region = std::make_unique<RegionImpl>();
    region->base = base;
    region->size = size;
    region->secret = btl::util::random_u64();
    region->scope = scope.kind;
    if (scope.kind == RegionScope::Kind::peers) {
        region->peers.assign(scope.peers.begin(), scope.peers.end());
        std::sort(region->peers.begin(), region->peers.end());
    }
    // Slot first (the one step that may throw), so nothing needs undoing.
    if (free_slots_.empty()) {
        if (regions_.size() >= std::numeric_limits<std::uint32_t>::max())
            return Status::out_of_resource;
        regions_.push_back(nullptr);
        free_slots_.push_back(static_cast<std::uint32_t>(regions_.size() - 1));
    }
    region->entries.reserve(modules_.size());
    auto mods = modules_;
    for (std::size_t i = 0; i < mods.size(); ++i) {
        btl::Module* m = mods[i];
        const auto& a = m->attributes();
        constexpr std::uint32_t wanted =
            btl::flags::rdma | btl::flags::atomic_ops | btl::flags::atomic_fops;
        btl::Rdma* rdma = m->rdma();
        if (!(a.flags & wanted) || a.registration_handle_size == 0 || !rdma) continue;
        // A transport checks a key, not our scope: a scoped region goes only
        // to those that cannot reach the peers it excludes (a job's region
        // to those that carry no peer outside the job); the rest of its
        // operations are emulated, and screened here (screen).
        if (scope.kind == RegionScope::Kind::peers ||
            (scope.kind == RegionScope::Kind::job && (a.flags & btl::flags::dynamic_peers)))
            continue;
        btl::RegistrationHandle* h =
            rdma->register_mem(nullptr, base, size, btl::reg_flags::access_any);
        if (!h) {
            c_.out.verbose(10, "{} cannot register {} bytes; that peer path is emulated", m->name(),
                           size);
            continue;
        }
        region->entries.push_back({m, c_.component_hash[i], h, a.registration_handle_size});
    }
    region->slot = free_slots_.back();
    free_slots_.pop_back();
    regions_[region->slot] = region.get();
    out = region.release();  // owned by regions_ until deregister_memory
    return Status::success;
}

Status OneSided::deregister_memory(RegionImpl* region) {
    if (!region) return Status::bad_param;
    // Compared as a pointer before it is read: a region not ours is not found.
    const auto it = std::find(regions_.begin(), regions_.end(), region);
    if (it == regions_.end()) return Status::not_found;
    const auto slot = static_cast<std::uint32_t>(it - regions_.begin());
    free_slots_.reserve(regions_.size());  // may throw: before anything changes
    *it = nullptr;
    free_slots_.push_back(slot);
    std::unique_ptr<RegionImpl> owned(region);
    for (auto& e : owned->entries)
        if (e.handle) e.module->rdma()->deregister_mem(e.handle);
    return Status::success;
}

std::vector<std::byte> OneSided::pack_key(const RegionImpl* region) const {
    std::vector<std::byte> out;
    if (!region) return out;
    put_bytes(out, key_magic);
    put_bytes(out, region->slot);
    put_bytes(out, region->secret);
    put_bytes(out, reinterpret_cast<std::uint64_t>(region->base));
    put_bytes(out, static_cast<std::uint64_t>(region->size));
    put_bytes(out, static_cast<std::uint32_t>(region->entries.size()));
    for (const auto& e : region->entries) {
        put_bytes(out, e.component);
        put_bytes(out, static_cast<std::uint32_t>(e.handle_len));
        const std::size_t at = out.size();
        out.resize(at + e.handle_len);
        if (e.handle_len) std::memcpy(out.data() + at, e.handle, e.handle_len);
    }
    return out;
}

Status OneSided::unpack_key(std::span<const std::byte> in, RemoteKeyImpl*& out) {
    out = nullptr;
    auto key = std::make_unique<RemoteKeyImpl>();
    if (Status s = decode_key(in, *key); !ok(s)) return s;
    for (const RemoteKeyImpl::Entry& e : key->entries)
        if (!handle_size_fits(e.component, e.handle.size())) return Status::bad_param;
    out = key.release();  // the caller's, until release_key
    return Status::success;
}

// A handle for a transport loaded here must have the size one of its modules
// reads (a shorter one would be read past its end and the bytes behind it
// sent to the peer); one for a transport not loaded here, or whose modules
// read no handle now, is never used.  vader reads handles only once it has a
// segment: a client on another node, whose vader never made one, still takes
// the key of a server whose vader did (tcp carries its operations).
bool OneSided::handle_size_fits(std::uint32_t component, std::size_t len) const noexcept {
    auto mods = modules_;
    bool loaded = false;
    for (std::size_t i = 0; i < mods.size(); ++i) {
        if (c_.component_hash[i] != component ||
            mods[i]->attributes().registration_handle_size == 0)
            continue;
        if (mods[i]->attributes().registration_handle_size == len) return true;
        loaded = true;
    }
    return !loaded;
}

const RegionImpl* OneSided::region_named(std::uint32_t slot, std::uint64_t secret) const noexcept {
    if (slot >= regions_.size()) return nullptr;
    const RegionImpl* r = regions_[slot];
    return r && r->secret == secret ? r : nullptr;
}

const char* OneSided::screen(wire::Kind k, const wire::OscHdr& h, Rank from,
                             const RegionImpl*& region, Status& refusal) const noexcept {
    refusal = Status::access_denied;
    region = region_named(h.region, h.secret);
    if (!region) return "it names no live region of ours (wrong or stale key)";
    if (!region->allows(from, c_.size)) return "the region is not registered for that peer";
    refusal = Status::bad_param;
    const auto base = reinterpret_cast<std::uint64_t>(region->base);
    // No sum is formed: bounds near 2^64 cannot wrap into a pass.
    if (h.addr < base || h.len > region->size || h.addr - base > region->size - h.len)
        return "it reaches outside the region its key names";
    if (k == wire::osc_atomic) {
        if ((h.width != 4 && h.width != 8) || h.len != h.width || h.addr % h.width != 0 ||
            (h.op != wire::cswap_op && h.op > static_cast<std::uint8_t>(AtomicOp::max)))
            return "its atomic is malformed (width, alignment or operation)";
    }
    return nullptr;
}

namespace {

// A refusal (outside the target's live registrations, or a key it does not
// know) is the caller's error, kept for its next flush; any other failure
// means the operation was lost.
bool is_refusal(Status s) noexcept {
    return s == Status::access_denied || s == Status::bad_param || s == Status::not_found;
}

}  // namespace

void OneSided::note_refused(Peer* p, Status s) noexcept {
    c_.out.verbose(5, "pml: rank {} refused a one-sided operation: {}", p->rank, to_string(s));
    if (ok(p->osc_refused)) p->osc_refused = s;
    any_refused_ = true;
}

Status OneSided::take_refused(Peer* p) noexcept {
    const Status s = p->osc_refused;
    p->osc_refused = Status::success;
    return s;
}

void OneSided::osc_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                        void* context, void* cbdata, Status s) noexcept {
    auto* e = static_cast<OneSided*>(context);
    auto* op = static_cast<OscOp*>(cbdata);
    if (is_refusal(s)) {
        e->note_refused(op->peer, s);
    } else if (!ok(s)) {
        log::error("pml: one-sided operation to rank {} failed: {}", op->peer->rank, to_string(s));
        op->peer->osc_lost = true;
    } else if (op->fetched) {
        *op->fetched = op->bits32 ? static_cast<std::uint32_t>(op->result) : op->result;
    }
    if (op->local_handle) op->module->rdma()->deregister_mem(op->local_handle);
    --op->peer->osc_outstanding;
    --e->outstanding_total_;
    e->osc_ops_.put(op);
}

template <typename Issue>
Status OneSided::over_each_handle(const bml::BtlRef& b, const RemoteKeyImpl* key,
                                  Issue issue) noexcept {
    const std::size_t size = b.module->attributes().registration_handle_size;
    if (size == 0) return issue(nullptr);
    Status s = Status::not_available;
    std::size_t next = 0;
    while (const btl::RegistrationHandle* rh =
               key->handle_for(c_.component_hash[b.index], size, next)) {
        s = issue(rh);
        if (s != Status::not_available) break;  // not_available: another module's handle
    }
    return s;
}

// A pooled record for one operation to `p` (over `module`, or emulated when
// null), every field reset but the pool's; nullptr when the pool is empty.
OscOp* OneSided::new_osc_op(Peer* p, btl::Module* module) noexcept {
    OscOp* op = osc_ops_.get();
    if (!op) return nullptr;
    const std::uint32_t slot = op->slot;
    const std::uint32_t generation = op->generation;
    *op = OscOp{.next_free = nullptr,
                .in_use = true,
                .slot = slot,
                .generation = generation,
                .peer = p,
                .module = module};
    return op;
}

OscOp* OneSided::new_emulated_op(Peer* p, wire::Kind reply, std::byte* dest,
                                 std::size_t len) noexcept {
    OscOp* op = new_osc_op(p, nullptr);
    if (!op) return nullptr;
    op->reply = reply;
    op->dest = dest;
    op->len = len;
    return op;
}

namespace {

// What an emulated operation counts in its peer's outstanding operations
// until answered: a get its bytes, the others one.
std::uint64_t units_of(const OscOp& op) noexcept {
    return op.reply == wire::osc_get_reply ? op.len : 1;
}

}  // namespace

void OneSided::count_emulated(Peer* p, std::uint64_t units, bool add) noexcept {
    if (add) {
        p->osc_outstanding += units;
        p->osc_emulated += units;
        outstanding_total_ += units;
    } else {
        p->osc_outstanding -= units;
        p->osc_emulated -= units;
        outstanding_total_ -= units;
    }
}

// Sends the request of emulated op (h names it by handle).  A loopback may
// answer inside the send: op is not touched once it went.
Status OneSided::emulate(OscOp* op, wire::Kind k, wire::OscHdr& h, const void* data,
                         std::size_t len) noexcept {
    Peer* p = op->peer;
    const std::uint64_t units = units_of(*op);
    h.token = osc_ops_.handle(*op);
    count_emulated(p, units, true);
    const Status s = outbox_.send_ctrl(p, k, &h, sizeof h, data, len);
    if (!ok(s)) {
        count_emulated(p, units, false);
        osc_ops_.put(op);
    }
    return s;
}

Status OneSided::rma_over(const bml::BtlRef& b, Peer* p, bool is_put, void* local, std::size_t len,
                          std::uint64_t raddr, const btl::RegistrationHandle* rh) noexcept {
    const auto& a = b.module->attributes();
    OscOp* op = new_osc_op(p, b.module);
    if (!op) return Status::out_of_resource;
    // Below its threshold a module moves the data without a local registration.
    const std::size_t local_threshold =
        is_put ? a.put_local_registration_threshold : a.get_local_registration_threshold;
    if (a.registration_handle_size > 0 && len >= local_threshold) {
        op->local_handle = b.rdma->register_mem(
            b.endpoint, local, len,
            is_put ? btl::reg_flags::remote_read : btl::reg_flags::local_write);
        if (!op->local_handle) {
            osc_ops_.put(op);
            return Status::out_of_resource;
        }
    }
    ++p->osc_outstanding;
    ++outstanding_total_;
    const btl::RdmaRequest req{.endpoint = b.endpoint,
                               .local = local,
                               .remote = raddr,
                               .local_handle = op->local_handle,
                               .remote_handle = rh,
                               .size = len,
                               .cb = &OneSided::osc_done,
                               .cbcontext = this,
                               .cbdata = op};
    Status s = is_put ? b.rdma->put(req) : b.rdma->get(req);
    if (s == Status::success) return Status::success;
    if (s == Status::completed) {
        osc_done(b.module, b.endpoint, local, op->local_handle, this, op, Status::success);
        return Status::success;
    }
    --p->osc_outstanding;
    --outstanding_total_;
    if (op->local_handle) b.rdma->deregister_mem(op->local_handle);
    osc_ops_.put(op);
    return s;
}

Status OneSided::rma(bool is_put, Rank dst, void* local, std::size_t len, const RemoteKeyImpl* key,
                     std::uint64_t offset) noexcept {
    if (!key || offset > key->size || len > key->size - offset) return Status::bad_param;
    if (len == 0) return Status::success;
    Peer* p = c_.peers.send_peer(dst);
    if (!p) return c_.peers.why_unsendable(dst);
    if (p->failed) [[unlikely]]
        return p->gone_status();
    const std::uint64_t raddr = key->base + offset;
    for (const bml::BtlRef& b : p->ep->rdma) {
        const auto& a = b.module->attributes();
        if (!(a.flags & (is_put ? btl::flags::put : btl::flags::get))) continue;
        if (len > (is_put ? a.put_limit : a.get_limit)) continue;
        const Status s = over_each_handle(b, key, [&](const btl::RegistrationHandle* rh) {
            return rma_over(b, p, is_put, local, len, raddr, rh);
        });
        if (s == Status::success) return s;
        // Outside the target's registrations: no other path may do it either.
        if (is_refusal(s)) return s;
        // out_of_resource or not possible here: the emulation below never drops it.
    }
    // Emulation: the target copies; chunks fit one eager fragment each.
    const std::size_t chunk = outbox_.ctrl_payload_limit(p);
    auto* bytes = static_cast<std::byte*>(local);
    for (std::size_t at = 0; at < len; at += chunk) {
        std::size_t n = len - at < chunk ? len - at : chunk;
        OscOp* op = new_emulated_op(p, is_put ? wire::osc_ack : wire::osc_get_reply, bytes + at, n);
        if (!op) return Status::out_of_resource;
        wire::OscHdr h{c_.rank, 0, 0, 0, key->region, 0, key->secret, raddr + at, n, 0, 0, 0};
        const Status s = is_put ? emulate(op, wire::osc_put, h, bytes + at, n)
                                : emulate(op, wire::osc_get, h, nullptr, 0);
        if (!ok(s)) return s;
    }
    return Status::success;
}

Status OneSided::atomic_over(const bml::BtlRef& b, Peer* p, std::uint8_t op, bool bits32,
                             std::uint64_t raddr, const btl::RegistrationHandle* rh,
                             std::uint64_t operand, std::uint64_t compare,
                             std::uint64_t* fetched) noexcept {
    const int aflags = bits32 ? btl::atomic_flags::bits32 : 0;
    OscOp* o = new_osc_op(p, b.module);
    if (!o) return Status::out_of_resource;
    o->fetched = fetched;
    o->bits32 = bits32;
    ++p->osc_outstanding;
    ++outstanding_total_;
    const bool cswap = op == wire::cswap_op;
    const btl::AtomicRequest req{.endpoint = b.endpoint,
                                 .local = &o->result,
                                 .remote = raddr,
                                 .remote_handle = rh,
                                 .op = cswap ? btl::AtomicOp::swap : to_btl(op),
                                 .operand = operand,
                                 .compare = compare,
                                 .flags = aflags,
                                 .cb = &OneSided::osc_done,
                                 .cbcontext = this,
                                 .cbdata = o};
    const Status s = cswap     ? b.atomics->atomic_cswap(req)
                     : fetched ? b.atomics->atomic_fop(req)
                               : b.atomics->atomic_op(req);
    if (s == Status::success) return Status::success;
    if (s == Status::completed) {
        osc_done(b.module, b.endpoint, &o->result, nullptr, this, o, Status::success);
        return Status::success;
    }
    --p->osc_outstanding;
    --outstanding_total_;
    osc_ops_.put(o);
    return s;
}

Status OneSided::atomic(Rank dst, std::uint8_t op, AtomicWidth width, const RemoteKeyImpl* key,
                        std::uint64_t offset, std::uint64_t operand, std::uint64_t compare,
                        std::uint64_t* fetched) noexcept {
    const std::size_t w = width == AtomicWidth::bits32 ? 4 : 8;
    if (!key || offset > key->size || w > key->size - offset || offset % w != 0)
        return Status::bad_param;
    if (op != wire::cswap_op && op > static_cast<std::uint8_t>(AtomicOp::max))
        return Status::bad_param;
    Peer* p = c_.peers.send_peer(dst);
    if (!p) return c_.peers.why_unsendable(dst);
    if (p->failed) [[unlikely]]
        return p->gone_status();
    const std::uint64_t raddr = key->base + offset;
    const bool fetch = fetched != nullptr || op == wire::cswap_op;
    bool native_full = false;
    for (const bml::BtlRef& b : p->ep->rdma) {
        const auto& a = b.module->attributes();
        if (!b.atomics) continue;
        if (!(a.flags & (fetch ? btl::flags::atomic_fops : btl::flags::atomic_ops))) continue;
        if (!(a.atomic_flags & support_bit(op))) continue;
        if (w == 4 && !(a.atomic_flags & btl::atomic_support::bits32)) continue;
        // Emulated operations still in flight could be overtaken by this one.
        if (p->osc_emulated > 0) return Status::out_of_resource;
        const Status s = over_each_handle(b, key, [&](const btl::RegistrationHandle* rh) {
            return atomic_over(b, p, op, w == 4, raddr, rh, operand, compare, fetched);
        });
        if (s == Status::success) return s;
        if (is_refusal(s)) return s;
        if (s == Status::out_of_resource) {
            native_full = true;
            break;
        }
    }
    // A full transport with atomics of ours in flight: through another module,
    // or emulated, this one could be applied before them (and, done by a NIC,
    // they are not atomic with the target's CPU).  The engine waits for one of
    // them and asks again.
    if (native_full && p->osc_outstanding > p->osc_emulated) return Status::out_of_resource;
    OscOp* o = new_emulated_op(p, wire::osc_atomic_reply, nullptr, w);
    if (!o) return Status::out_of_resource;
    o->fetched = fetched;
    o->bits32 = w == 4;
    wire::OscHdr h{c_.rank,     op,          static_cast<std::uint8_t>(w),
                   0,           key->region, 0,
                   key->secret, raddr,       w,
                   operand,     compare,     0};
    const Status s = emulate(o, wire::osc_atomic, h, nullptr, 0);
    return ok(s) ? Status::success : s;
}

void OneSided::on_request(wire::Kind k, const std::byte* b, std::size_t n) noexcept {
    wire::OscHdr h;
    std::memcpy(&h, b, sizeof h);
    Peer* p = c_.peers.send_peer(h.src);
    if (!p) [[unlikely]] {
        if (h.src >= c_.size) return c_.drops.malformed(k, n, h.src);  // a sender outside the job
        log::error(
            "pml: a one-sided request from rank {} cannot be answered: no transport "
            "reaches it",
            h.src);
        return;
    }
    const RegionImpl* region = nullptr;
    Status refused = Status::success;
    const char* why = screen(k, h, h.src, region, refused);
    if (why) [[unlikely]]
        c_.drops.refused(k, h.src, why);
    const bool valid = why == nullptr;
    std::byte* target = valid ? static_cast<std::byte*>(region->base) +
                                    (h.addr - reinterpret_cast<std::uint64_t>(region->base))
                              : nullptr;
    wire::OscReplyHdr r{c_.rank, static_cast<std::int32_t>(valid ? Status::success : refused),
                        h.token, 1, 0};
    if (k == wire::osc_put) {
        std::size_t len = n - sizeof h < h.len ? n - sizeof h : h.len;
        if (valid) std::memcpy(target, b + sizeof h, len);
        outbox_.send_ctrl(p, wire::osc_ack, &r, sizeof r);
    } else if (k == wire::osc_get) {
        // A refused request is still answered for its full length, so the
        // origin's flush returns.
        r.len = h.len;
        outbox_.send_ctrl(p, wire::osc_get_reply, &r, sizeof r, valid ? target : nullptr,
                          valid ? h.len : 0);
    } else {
        const int aflags = h.width == 4 ? btl::atomic_flags::bits32 : 0;
        if (valid)
            r.value = h.op == wire::cswap_op
                          ? btl::apply_cswap(target, h.compare, h.operand, aflags)
                          : btl::apply_atomic(target, to_btl(h.op), h.operand, aflags);
        outbox_.send_ctrl(p, wire::osc_atomic_reply, &r, sizeof r);
    }
}

// The reply names its operation by handle: one of ours, to the peer it came
// from, waiting for this kind of reply, and (a get's) with the bytes asked
// for.  Anything else is dropped: a target cannot make us write elsewhere.
void OneSided::on_reply(wire::Kind k, const std::byte* b, std::size_t n, Rank from) noexcept {
    wire::OscReplyHdr h;
    std::memcpy(&h, b, sizeof h);
    Peer* p = c_.peers.peer(from);
    if (p && p->failed) return;  // its operations were (or will be) written off
    OscOp* op = osc_ops_.find(h.token);
    const auto status = static_cast<Status>(h.status);
    const char* why = nullptr;
    if (!op || op->reply != k) [[unlikely]]
        why = "it names no one-sided operation of ours waiting for it";
    else if (op->peer != p) [[unlikely]]
        why = "it names a one-sided operation with another peer";
    else if (k == wire::osc_get_reply && ok(status) && n - sizeof h != op->len) [[unlikely]]
        why = "its data is not the length asked for";
    if (why) [[unlikely]]
        return c_.drops.named(k, from, why);
    if (!ok(status)) {
        note_refused(p, is_refusal(status) ? status : Status::access_denied);
    } else if (k == wire::osc_get_reply) {
        if (op->len) std::memcpy(op->dest, b + sizeof h, op->len);
    } else if (k == wire::osc_atomic_reply && op->fetched) {
        *op->fetched = op->bits32 ? static_cast<std::uint32_t>(h.value) : h.value;
    }
    count_emulated(p, units_of(*op), false);
    osc_ops_.put(op);
}

void OneSided::release_regions() noexcept {
    for (RegionImpl* r : regions_) {
        if (!r) continue;
        std::unique_ptr<RegionImpl> owned(r);  // made by register_memory
        for (auto& e : owned->entries)
            if (e.handle) e.module->rdma()->deregister_mem(e.handle);
    }
    regions_.clear();
    free_slots_.clear();
}

Status OneSided::flush_result(Peer* p) noexcept {
    if (p->failed) return p->gone_status();
    return take_refused(p);
}

Status OneSided::flush_all_result() noexcept {
    Status s = Status::success;
    if (any_refused_) {
        any_refused_ = false;
        c_.peers.for_each([&](Peer& p) {
            const Status refused = take_refused(&p);
            if (ok(s)) s = refused;
        });
    }
    bool lost = false;
    if (c_.any_failed)
        c_.peers.for_each([&](const Peer& p) { lost = lost || (p.failed && p.osc_lost); });
    return lost ? Status::peer_failed : s;
}

// Replies the target would have sent: written off so flush returns.
void OneSided::write_off(Peer* p) noexcept {
    for (OscOp& op : osc_ops_.items())
        if (op.in_use && op.reply != wire::kind_count && op.peer == p) osc_ops_.put(&op);
    if (p->osc_emulated) p->osc_lost = true;
    p->osc_outstanding -= p->osc_emulated;
    outstanding_total_ -= p->osc_emulated;
    p->osc_emulated = 0;
}

}  // namespace transit::pml
