#include "tests/conformance/btl_test.hpp"

#include <fmt/format.h>
#include <sys/uio.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "tests/conformance/suite_env.hpp"
#include "transit/params.hpp"

namespace transit::conformance {
namespace {

constexpr std::size_t header_size = sizeof(WireHeader);
constexpr std::size_t guard_bytes = 4096;  // after the region: catches writes past its end

std::size_t total_length(const btl::ReceiveDescriptor& d) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < d.segment_count; ++i) n += d.segments[i].len;
    return n;
}

// Copies len bytes, starting at byte `from` of the segments laid end to end: a
// transport may cut the header and the payload anywhere.
void gather(const btl::ReceiveDescriptor& d, std::size_t from, void* dst, std::size_t len) {
    auto* out = static_cast<std::byte*>(dst);
    for (std::size_t i = 0; i < d.segment_count && len > 0; ++i) {
        const std::size_t seg = d.segments[i].len;
        if (from >= seg) {
            from -= seg;
            continue;
        }
        const std::size_t n = std::min(seg - from, len);
        std::memcpy(out, static_cast<const std::byte*>(d.segments[i].addr) + from, n);
        out += n;
        len -= n;
        from = 0;
    }
}

std::array<iovec, 3> three_pieces(std::span<const std::byte> data) {
    // Uneven pieces, so fragment borders fall inside pieces and between them.
    const std::size_t a = data.size() / 7;
    const std::size_t b = data.size() * 3 / 7;
    auto* p = const_cast<std::byte*>(data.data());
    return {iovec{p, a}, iovec{p + a, b - a}, iovec{p + b, data.size() - b}};
}

}  // namespace

const char* to_string(SendMethod m) {
    switch (m) {
        case SendMethod::alloc_send:
            return "alloc+send";
        case SendMethod::prepare_contiguous:
            return "prepare_src(contiguous)+send";
        case SendMethod::prepare_iovec:
            return "prepare_src(iovec)+send";
        case SendMethod::sendi:
            return "sendi";
        case SendMethod::sendi_iovec:
            return "sendi(iovec)";
    }
    return "?";
}

std::string component_param_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string s = info.param;
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

// --- setup and teardown ------------------------------------------------------

void BtlTest::SetUp() {
    component_ = GetParam();
    log_watch_.start();
    const std::string skip = start();
    if (HasFailure()) return;
    if (!skip.empty()) GTEST_SKIP() << skip;
    if (!driver_) {
        // Rank 1 runs no case of its own: it answers rank 0 until rank 0 says bye.
        wait_for([this] { return bye_; }, "rank 0 to finish the case", suite_env().timeout * 10);
        GTEST_SKIP() << "rank 1 serviced rank 0's requests; the case's result is on rank 0";
    }
}

void BtlTest::TearDown() {
    finish();
}

std::string BtlTest::start() {
    SuiteEnv& env = suite_env();
    rt::Runtime& rt = *env.runtime;
    loopback_ = !env.two_process;
    driver_ = loopback_ || rt.rank() == 0;
    service_ = loopback_ || rt.rank() == 1;
    try {
        fw_ = std::make_unique<btl::Framework>(rt, progress_, am_);
        fw_->open();
        apply_overrides();
        fw_->init();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "opening the btl framework failed: " << e.what();
    }
    // Both ranks reach this fence whatever happened above, so they stay in step.
    if (env.two_process) {
        if (Status s = rt.fence(); !ok(s)) ADD_FAILURE() << "fence: " << to_string(s);
    }
    if (HasFailure()) return "";
    if (std::string why = find_module(); !why.empty() || module_ == nullptr) return why;

    for (auto [tag, fn] :
         {std::pair{tag_request, &BtlTest::on_request}, std::pair{tag_reply, &BtlTest::on_reply},
          std::pair{tag_chain, &BtlTest::on_chain}}) {
        if (Status s = am_.register_callback(tag, fn, this); s != Status::success)
            ADD_FAILURE() << "registering tag " << int(tag) << ": " << to_string(s);
    }
    if (loopback_)
        peers_ = {rt.rank()};
    else
        peers_ = {0, 1};
    endpoints_.assign(peers_.size(), nullptr);
    btl::Reachability reachable(peers_.size());
    if (Status s = module_->add_procs(peers_, endpoints_, reachable); !ok(s)) {
        ADD_FAILURE() << "add_procs: " << to_string(s);
        return "";
    }
    connected_ = true;
    const std::size_t index = loopback_ ? 0 : 1 - rt.rank();
    if (!reachable.test(index) || endpoints_[index] == nullptr) {
        return loopback_ ? fmt::format(
                               "{} does not reach its own process (loopback mode); run "
                               "it with two processes: transit_run -n 2",
                               component_)
                         : fmt::format("{} does not reach rank {}", component_, peers_[index]);
    }
    target_ = endpoints_[index];
    if (service_) setup_service();
    if (driver_ && !HasFailure()) wait_for([this] { return hello_; }, "the service's hello");
    return "";
}

std::string BtlTest::find_module() {
    for (btl::Module* m : fw_->modules()) {
        if (m->component().name() == component_) {
            module_ = m;
            return "";
        }
    }
    std::vector<std::string> known;
    for (const mca::ComponentRecord& r : fw_->records()) {
        known.push_back(r.name);
        if (r.name != component_) continue;
        switch (r.state) {
            case mca::ComponentState::declined:
                return fmt::format("{} declined on this machine: {}", r.name, r.reason);
            case mca::ComponentState::failed:
                ADD_FAILURE() << r.name << " (" << r.path << ") was refused: " << r.reason;
                return "";
            case mca::ComponentState::excluded:
                ADD_FAILURE() << r.name << " is not selected: " << r.reason
                              << " (include it in TRANSIT_MCA_btl)";
                return "";
            default:
                return fmt::format("{} created no module ({})", r.name, mca::to_string(r.state));
        }
    }
    ADD_FAILURE() << "no btl component named \"" << component_
                  << "\"; known: " << fmt::format("{}", fmt::join(known, ", "))
                  << " (plugins are searched in mca_base_component_path)";
    return "";
}

std::string BtlTest::param_name(const std::string& name) const {
    return "btl_" + component_ + "_" + name;
}

bool BtlTest::override_applied(const std::string& name) const {
    return applied_.count(name) > 0;
}

void BtlTest::apply_overrides() {
    params::Registry& reg = params::registry();
    for (const auto& [name, value] : overrides()) {
        const std::string full = param_name(name);
        params::Variable* v = reg.find(full);
        if (v == nullptr) continue;  // the component does not offer it: the case adapts
        saved_params_.push_back({full, v->text()});
        reg.set(full, value, params::Source{params::Origin::api, "conformance case", 0});
        applied_.insert(name);
    }
}

void BtlTest::restore_overrides() {
    // The registry keeps API settings; setting the old text back restores the value.
    for (const Saved& s : saved_params_)
        params::registry().set(s.name, s.text,
                               params::Source{params::Origin::api, "conformance restore", 0});
    saved_params_.clear();
}

void BtlTest::setup_service() {
    region_bytes_ = suite_env().max_size + (64 << 10);
    region_memory_.assign((region_bytes_ + guard_bytes) / sizeof(std::uint64_t), 0);
    void* base = region_memory_.data();
    region_handle_ =
        module_->register_mem(nullptr, base, region_bytes_, btl::reg_flags::access_any);
    const std::size_t hs = attr().registration_handle_size;
    if (hs > btl::max_registration_handle_size) {
        ADD_FAILURE() << "registration_handle_size " << hs << " exceeds the SDK maximum";
        return;
    }
    if (hs > 0 && region_handle_ == nullptr) {
        ADD_FAILURE() << "register_mem of " << region_bytes_ << " bytes failed";
        return;
    }
    std::vector<std::byte> hello(sizeof(RegionInfo) + hs);
    const RegionInfo info{reinterpret_cast<std::uintptr_t>(base), region_bytes_, hs};
    std::memcpy(hello.data(), &info, sizeof info);
    if (hs > 0) std::memcpy(hello.data() + sizeof info, region_handle_, hs);
    post(tag_reply, WireHeader{Kind::hello, 0, 0, 0, hello.size(), 0}, hello);
}

void BtlTest::finish() {
    SuiteEnv& env = suite_env();
    if (connected_) {
        if (driver_ && !loopback_ && target_ != nullptr) {
            const std::uint64_t msg = new_msg();
            post(tag_request, WireHeader{Kind::bye, 0, msg, 0, 0, 0}, {});
            wait_ack(msg);
        }
        wait_for([this] { return outbox_.empty() && sends_pending_ == 0; },
                 "every send to complete");
        if (Status s = module_->flush(nullptr); !ok(s))
            ADD_FAILURE() << "flush at teardown: " << to_string(s);
        for (btl::RegistrationHandle* h : local_handles_) module_->deregister_mem(h);
        local_handles_.clear();
        if (region_handle_ != nullptr) {
            EXPECT_EQ(module_->deregister_mem(region_handle_), Status::success);
            region_handle_ = nullptr;
        }
        EXPECT_TRUE(ok(module_->del_procs(peers_, endpoints_)));
        connected_ = false;
    }
    // The region must be intact past its registered end.
    for (std::size_t i = region_bytes_ / 8; i < region_memory_.size(); ++i) {
        if (region_memory_[i] != 0) {
            ADD_FAILURE() << "memory after the registered region was written (offset " << i * 8
                          << ")";
            break;
        }
    }
    module_ = nullptr;
    fw_.reset();
    restore_overrides();
    if (env.two_process) {
        if (Status s = env.runtime->fence(); !ok(s))
            ADD_FAILURE() << "fence at teardown: " << to_string(s);
    }
    EXPECT_EQ(callback_errors_, 0) << "errors were reported from callbacks";
    for (const std::string& line : log_watch_.stop())
        ADD_FAILURE() << "the case logged an unexpected warning or error: " << line;
}

// --- progress ----------------------------------------------------------------

void BtlTest::progress() {
    progress_.progress();
    pump();
}

bool BtlTest::wait_for(const std::function<bool()>& pred, const std::string& what,
                       std::chrono::seconds limit) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + (limit.count() > 0 ? limit : suite_env().timeout);
    while (!pred()) {
        progress();
        if (clock::now() > deadline) {
            ADD_FAILURE() << "timed out waiting for " << what;
            return false;
        }
    }
    return true;
}

// --- sending -----------------------------------------------------------------

std::size_t BtlTest::fragment_payload(SendMethod method) const {
    std::size_t limit = attr().max_send_size;
    if (method == SendMethod::sendi || method == SendMethod::sendi_iovec)
        limit = std::min(limit, attr().eager_limit);
    return limit > header_size ? limit - header_size : 0;
}

Status BtlTest::send_descriptor(btl::Descriptor* d, btl::Tag tag) {
    d->flags |= btl::des_flags::btl_ownership;
    d->cbfunc = &BtlTest::on_sent;
    d->cbdata = this;
    const Status s = module_->send(target_, d, tag);
    switch (s) {
        case Status::completed:
            break;
        case Status::success:
            ++sends_pending_;
            break;
        case Status::out_of_resource:
            module_->free(d);
            break;  // still ours: nothing happened
        default:
            ADD_FAILURE() << "send: " << to_string(s);
            module_->free(d);
    }
    return s;
}

bool BtlTest::send_fragment(SendMethod method, btl::Tag tag, WireHeader h,
                            std::span<const std::byte> rest, std::size_t& taken) {
    const std::size_t chunk = std::min(rest.size(), fragment_payload(method));
    taken = rest.size();  // on a hard error the rest of the message is dropped
    auto fill_descriptor = [&](btl::Descriptor* d, std::size_t n) {
        btl::Segment& s = d->segments[0];
        std::memcpy(s.addr, &h, header_size);
        if (n > 0) std::memcpy(static_cast<std::byte*>(s.addr) + header_size, rest.data(), n);
        s.len = header_size + n;
    };
    switch (method) {
        case SendMethod::alloc_send: {
            btl::Descriptor* d = module_->alloc(target_, btl::no_order, header_size + chunk,
                                                btl::des_flags::btl_ownership);
            if (d == nullptr) return false;
            const std::size_t got = d->segments[0].len;
            EXPECT_LE(got, attr().max_send_size) << "alloc returned more than max_send_size";
            if (got < header_size || (chunk > 0 && got == header_size)) {
                ADD_FAILURE() << "alloc(" << header_size + chunk << ") returned " << got
                              << " bytes";
                module_->free(d);
                return true;
            }
            const std::size_t n = std::min(chunk, got - header_size);
            fill_descriptor(d, n);
            if (send_descriptor(d, tag) == Status::out_of_resource) return false;
            taken = n;
            return true;
        }
        case SendMethod::prepare_contiguous:
        case SendMethod::prepare_iovec: {
            std::array<iovec, 3> pieces = three_pieces(rest);
            btl::Convertor contiguous(rest.data(), rest.size());
            btl::Convertor scattered{std::span<const iovec>(pieces)};
            btl::Convertor& conv =
                method == SendMethod::prepare_contiguous ? contiguous : scattered;
            std::size_t size = chunk;
            btl::Descriptor* d = module_->prepare_src(target_, conv, btl::no_order, header_size,
                                                      size, btl::des_flags::btl_ownership);
            if (d == nullptr) return false;
            if (size > chunk || conv.position() != size || (chunk > 0 && size == 0) ||
                d->segment_count < 1 || d->segments[0].len < header_size) {
                ADD_FAILURE() << to_string(method) << ": asked " << chunk << " bytes, took " << size
                              << ", convertor at " << conv.position() << ", " << d->segment_count
                              << " segment(s)";
                module_->free(d);
                return true;
            }
            std::memcpy(d->segments[0].addr, &h, header_size);
            if (send_descriptor(d, tag) == Status::out_of_resource) return false;
            taken = size;
            return true;
        }
        case SendMethod::sendi:
        case SendMethod::sendi_iovec: {
            std::array<iovec, 3> pieces = three_pieces(rest.first(chunk));
            btl::Convertor contiguous(rest.data(), chunk);
            btl::Convertor scattered{std::span<const iovec>(pieces)};
            btl::Convertor& conv = method == SendMethod::sendi ? contiguous : scattered;
            btl::Descriptor* d = nullptr;
            const Status s = module_->sendi(target_, &conv, &h, header_size, chunk, btl::no_order,
                                            btl::des_flags::btl_ownership, tag, &d);
            if (s == Status::completed) {
                EXPECT_EQ(d, nullptr) << "sendi completed and also returned a descriptor";
                taken = chunk;
                return true;
            }
            if (s != Status::out_of_resource) {
                ADD_FAILURE() << "sendi returned " << to_string(s)
                              << " (expected completed or out of resource)";
                return true;
            }
            if (d == nullptr) return false;
            if (d->segments[0].len < header_size + chunk) {
                ADD_FAILURE() << "sendi's fallback descriptor has " << d->segments[0].len
                              << " bytes, needs " << header_size + chunk;
                module_->free(d);
                return true;
            }
            fill_descriptor(d, chunk);
            if (send_descriptor(d, tag) == Status::out_of_resource) return false;
            taken = chunk;
            return true;
        }
    }
    return true;
}

void BtlTest::send_echo(SendMethod method, std::uint64_t msg, std::span<const std::byte> payload,
                        std::uint32_t seq) {
    if (fragment_payload(method) == 0) {
        ADD_FAILURE() << "the module's limits leave no room for the suite's " << header_size
                      << "-byte header";
        return;
    }
    WireHeader h{Kind::echo, seq, msg, 0, payload.size(), 0};
    std::size_t pos = 0;
    do {
        h.offset = pos;
        const std::span<const std::byte> rest = payload.subspan(pos);
        std::size_t taken = 0;
        // Behind queued frames a direct send would overtake them: queue as well.
        if (!outbox_.empty() || !send_fragment(method, tag_request, h, rest, taken)) {
            taken = std::min(rest.size(), fragment_payload(SendMethod::alloc_send));
            queue_frame(tag_request, h, rest.first(taken));
            pump();
        }
        pos += taken;
    } while (pos < payload.size());
}

void BtlTest::queue_frame(btl::Tag tag, const WireHeader& h, std::span<const std::byte> payload) {
    Frame f{tag, std::vector<std::byte>(header_size + payload.size())};
    std::memcpy(f.bytes.data(), &h, header_size);
    if (!payload.empty()) std::memcpy(f.bytes.data() + header_size, payload.data(), payload.size());
    outbox_.push_back(std::move(f));
}

void BtlTest::post(btl::Tag tag, WireHeader h, std::span<const std::byte> payload) {
    const std::size_t room = fragment_payload(SendMethod::alloc_send);
    std::size_t pos = 0;
    do {
        const std::size_t n = std::min(room, payload.size() - pos);
        h.offset = pos;
        queue_frame(tag, h, payload.subspan(pos, n));
        pos += n;
    } while (pos < payload.size() && room > 0);
    pump();
}

// Sends queued frames in order.  Re-entrant: a frame delivered synchronously
// (self) runs a callback that may post and pump again, which is why a frame
// leaves the queue before it is sent.
void BtlTest::pump() {
    while (!outbox_.empty() && module_ != nullptr && target_ != nullptr) {
        Frame f = std::move(outbox_.front());
        outbox_.pop_front();
        btl::Descriptor* d =
            module_->alloc(target_, btl::no_order, f.bytes.size(), btl::des_flags::btl_ownership);
        if (d == nullptr) {
            outbox_.push_front(std::move(f));
            return;
        }
        if (d->segments[0].len < f.bytes.size()) {
            ADD_FAILURE() << "alloc(" << f.bytes.size() << ") returned " << d->segments[0].len
                          << " bytes (max_send_size " << attr().max_send_size << ")";
            module_->free(d);
            continue;
        }
        std::memcpy(d->segments[0].addr, f.bytes.data(), f.bytes.size());
        d->segments[0].len = f.bytes.size();
        if (send_descriptor(d, f.tag) == Status::out_of_resource) {
            outbox_.push_front(std::move(f));
            return;
        }
    }
}

void BtlTest::on_sent(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) {
    auto* t = static_cast<BtlTest*>(d->cbdata);
    if (--t->sends_pending_ < 0) {
        ++t->callback_errors_;
        ADD_FAILURE() << "completion callback for a send that completed inline";
    }
    if (!ok(s)) {
        ++t->callback_errors_;
        ADD_FAILURE() << "send completed with " << to_string(s);
    }
}

// --- receiving ---------------------------------------------------------------

void BtlTest::on_request(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* t = static_cast<BtlTest*>(self);
    WireHeader h;
    if (total_length(d) < header_size) {
        ++t->callback_errors_;
        ADD_FAILURE() << "request of " << total_length(d) << " bytes: shorter than its header";
        return;
    }
    gather(d, 0, &h, header_size);
    t->handle_request(h, d);
}

void BtlTest::on_reply(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* t = static_cast<BtlTest*>(self);
    WireHeader h;
    if (total_length(d) < header_size) {
        ++t->callback_errors_;
        ADD_FAILURE() << "reply of " << total_length(d) << " bytes: shorter than its header";
        return;
    }
    gather(d, 0, &h, header_size);
    t->handle_reply(h, d);
}

void BtlTest::on_chain(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* t = static_cast<BtlTest*>(self);
    WireHeader h;
    gather(d, 0, &h, header_size);
    if (h.length == 0) {
        ++t->chains_done_;
        return;
    }
    // Sending from inside the receive callback: in loopback this recurses.
    --h.length;
    t->post(tag_chain, h, {});
}

void BtlTest::handle_request(const WireHeader& h, const btl::ReceiveDescriptor& d) {
    const std::size_t n = total_length(d) - header_size;
    auto* region = reinterpret_cast<std::byte*>(region_memory_.data());
    auto inside = [&](std::uint64_t base, std::uint64_t len) {
        if (base <= region_bytes_ && len <= region_bytes_ - base) return true;
        ++callback_errors_;
        ADD_FAILURE() << "request outside the region: [" << base << ", +" << len << ")";
        return false;
    };
    const WireHeader ack{Kind::ack, 0, h.msg, 0, 0, 0};
    switch (h.kind) {
        case Kind::echo: {
            Frame f{tag_reply, std::vector<std::byte>(header_size + n)};
            gather(d, 0, f.bytes.data(), f.bytes.size());
            outbox_.push_back(std::move(f));
            pump();
            return;
        }
        case Kind::read:
            if (!inside(h.base, h.length)) return;
            post(tag_reply, WireHeader{Kind::read_data, 0, h.msg, 0, h.length, h.base},
                 std::span<const std::byte>(region + h.base, h.length));
            return;
        case Kind::fill:
            if (!inside(h.base, h.length)) return;
            for (std::uint64_t i = 0; i < h.length; ++i) region[h.base + i] = pattern(h.seq, i);
            post(tag_reply, ack, {});
            return;
        case Kind::write: {
            if (!inside(h.base + h.offset, n)) return;
            gather(d, header_size, region + h.base + h.offset, n);
            std::uint64_t& got = written_[h.msg];
            got += n;
            if (got == h.length) {
                written_.erase(h.msg);
                post(tag_reply, ack, {});
            }
            return;
        }
        case Kind::bye:
            bye_ = true;
            post(tag_reply, ack, {});
            return;
        default:
            ++callback_errors_;
            ADD_FAILURE() << "unexpected request kind " << static_cast<int>(h.kind);
    }
}

void BtlTest::handle_reply(const WireHeader& h, const btl::ReceiveDescriptor& d) {
    const std::size_t n = total_length(d) - header_size;
    switch (h.kind) {
        case Kind::echo:
        case Kind::read_data: {
            Reply& r = replies_[h.msg];
            if (!r.any) {
                r.data.resize(h.length);
                r.any = true;
            }
            if (h.kind == Kind::echo && h.offset == 0) echo_seqs_.push_back(h.seq);
            if (h.offset > r.data.size() || n > r.data.size() - h.offset) {
                ++callback_errors_;
                ADD_FAILURE() << "reply fragment [" << h.offset << ", +" << n
                              << ") outside its message of " << r.data.size() << " bytes";
                return;
            }
            gather(d, header_size, r.data.data() + h.offset, n);
            r.received += n;
            return;
        }
        case Kind::ack:
            acks_.insert(h.msg);
            return;
        case Kind::hello: {
            RegionInfo info{};
            if (n < sizeof info) break;
            gather(d, header_size, &info, sizeof info);
            if (info.handle_size > remote_handle_.size() || n < sizeof info + info.handle_size)
                break;
            gather(d, header_size + sizeof info, remote_handle_.data(), info.handle_size);
            region_ = info;
            hello_ = true;
            return;
        }
        default:
            break;
    }
    ++callback_errors_;
    ADD_FAILURE() << "unexpected or malformed reply kind " << static_cast<int>(h.kind);
}

// --- requests ----------------------------------------------------------------

const std::vector<std::byte>* BtlTest::wait_reply(std::uint64_t msg) {
    auto complete = [&] {
        auto it = replies_.find(msg);
        return it != replies_.end() && it->second.any &&
               it->second.received >= it->second.data.size();
    };
    if (!wait_for(complete, fmt::format("the reply to message {}", msg))) return nullptr;
    const Reply& r = replies_.at(msg);
    EXPECT_EQ(r.received, r.data.size()) << "duplicate reply fragments";
    return &r.data;
}

bool BtlTest::wait_ack(std::uint64_t msg) {
    return wait_for([&] { return acks_.count(msg) > 0; },
                    fmt::format("the acknowledgement of message {}", msg));
}

bool BtlTest::remote_fill(std::uint64_t base, std::uint64_t length, std::uint32_t seed) {
    const std::uint64_t msg = new_msg();
    post(tag_request, WireHeader{Kind::fill, seed, msg, 0, length, base}, {});
    return wait_ack(msg);
}

bool BtlTest::remote_write(std::uint64_t base, std::span<const std::byte> bytes) {
    const std::uint64_t msg = new_msg();
    post(tag_request, WireHeader{Kind::write, 0, msg, 0, bytes.size(), base}, bytes);
    return wait_ack(msg);
}

std::vector<std::byte> BtlTest::remote_read(std::uint64_t base, std::uint64_t length) {
    const std::uint64_t msg = new_msg();
    post(tag_request, WireHeader{Kind::read, 0, msg, 0, length, base}, {});
    std::vector<std::byte> out;
    if (const auto* data = wait_reply(msg)) out = *data;
    replies_.erase(msg);
    return out;
}

void BtlTest::start_chain(std::uint64_t hops) {
    // An odd hop count ends on the driver, in both modes.
    if (hops % 2 == 0) ++hops;
    post(tag_chain, WireHeader{Kind::chain, 0, new_msg(), 0, hops, 0}, {});
}

// --- one-sided -----------------------------------------------------------------

const btl::RegistrationHandle* BtlTest::remote_handle() const {
    if (region_.handle_size == 0) return nullptr;
    return reinterpret_cast<const btl::RegistrationHandle*>(remote_handle_.data());
}

btl::RegistrationHandle* BtlTest::register_local(void* base, std::size_t size) {
    if (attr().registration_handle_size == 0) return nullptr;
    btl::RegistrationHandle* h =
        module_->register_mem(target_, base, size, btl::reg_flags::access_any);
    EXPECT_NE(h, nullptr) << "register_mem of " << size << " local bytes failed";
    if (h != nullptr) local_handles_.push_back(h);
    return h;
}

void BtlTest::on_rdma(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void* context,
                      void* cbdata, Status s) {
    auto* c = static_cast<RdmaCompletion*>(cbdata);
    if (c->called) {
        auto* t = static_cast<BtlTest*>(context);
        ++t->callback_errors_;
        ADD_FAILURE() << "an rdma completion callback came twice";
    }
    c->called = true;
    c->status = s;
}

Status BtlTest::run_rdma(const RdmaIssue& issue, const std::string& what) {
    using clock = std::chrono::steady_clock;
    RdmaCompletion& c = completions_.emplace_back();
    const auto deadline = clock::now() + suite_env().timeout;
    Status s;
    while ((s = issue(&BtlTest::on_rdma, this, &c)) == Status::out_of_resource) {
        progress();
        if (clock::now() > deadline) {
            ADD_FAILURE() << what << ": out of resource until the timeout";
            return s;
        }
    }
    if (s == Status::completed) {
        progress();
        EXPECT_FALSE(c.called) << what << " completed inline and called back as well";
        return s;
    }
    if (s != Status::success) return s;
    if (!wait_for([&] { return c.called; }, what)) return Status::timeout;
    return c.status;
}

}  // namespace transit::conformance
