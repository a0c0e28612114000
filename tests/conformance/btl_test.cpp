#include "tests/conformance/btl_test.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "tests/conformance/suite_env.hpp"
#include "transit/params.hpp"

namespace transit::conformance {
namespace {}  // namespace

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
    // Fatal, so the case's body never runs on a half-built fixture (no module).
    if (HasFailure()) GTEST_FAIL() << "the case could not start on " << component_;
    if (!skip.empty()) GTEST_SKIP() << skip;
    if (!driver_) {
        // Rank 1 runs no case of its own: it answers rank 0 until rank 0 says bye.
        wait_for([this] { return bye_; }, "rank 0 to finish the case", suite_env().timeout * 10);
        GTEST_SKIP() << "rank 1 serviced rank 0's requests; the case's result is on rank 0";
    }
    if (module_ == nullptr) GTEST_FAIL() << component_ << ": no module and no reason given";
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
        // A case uses its module directly, also where the bml would never ask it.
        params::registry().set("btl_base_lazy", "false",
                               params::Source{params::Origin::api, "conformance suite", 0});
        apply_overrides();
        fw_->multi_threaded(multi_threaded());
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
    if (Status s = am_.register_callback(tag_threads, &ThreadsEcho::on_message, &threads_echo_);
        s != Status::success)
        ADD_FAILURE() << "registering tag " << int(tag_threads) << ": " << to_string(s);
    if (loopback_)
        peers_ = {rt.rank()};
    else
        peers_ = {0, 1};
    const std::size_t index = loopback_ ? 0 : 1 - rt.rank();
    // A component may open several modules (tcp: one per interface, ofi: one
    // per provider); the first that reaches the other rank is tested (on
    // another node: not loopback's, not shm's).
    for (btl::Module* m : fw_->modules()) {
        if (m->component().name() != component_) continue;
        module_ = m;
        endpoints_.assign(peers_.size(), nullptr);
        btl::Reachability reachable(peers_.size());
        if (Status s = module_->add_procs(peers_, endpoints_, reachable); !ok(s)) {
            ADD_FAILURE() << "add_procs: " << to_string(s);
            return "";
        }
        if (reachable.test(index) && endpoints_[index] != nullptr) break;
        module_->del_procs(peers_, endpoints_);
        endpoints_.assign(peers_.size(), nullptr);
    }
    connected_ = true;
    if (endpoints_[index] == nullptr) {
        return loopback_ ? fmt::format(
                               "{} does not reach its own process (loopback mode); run "
                               "it with two processes: transit_run -n 2",
                               component_)
                         : fmt::format("{} does not reach rank {}", component_, peers_[index]);
    }
    target_ = endpoints_[index];
    threads_echo_.attach(module_, target_);
    // Asked of the module chosen above, as the bml asks each module it uses.
    rdma_ = module_->rdma();
    atomics_ = module_->atomics();
    check_capabilities();
    if (service_) setup_service();
    if (driver_ && !HasFailure()) wait_for([this] { return hello_; }, "the service's hello");
    return "";
}

// The flags announce what the interfaces do: a flag without its interface is
// an operation nobody can call.  (An interface whose operations the flags do
// not announce, e.g. turned off by a parameter, is never called.)
// Registration handles and flush come from rdma().
void BtlTest::check_capabilities() {
    const std::uint32_t f = attr().flags;
    if ((f & (btl::flags::put | btl::flags::get)) != 0 && rdma_ == nullptr)
        ADD_FAILURE() << component_ << ": flags announce put or get, rdma() returns nullptr";
    if ((f & (btl::flags::atomic_ops | btl::flags::atomic_fops)) != 0 && atomics_ == nullptr)
        ADD_FAILURE() << component_ << ": flags announce atomics, atomics() returns nullptr";
    if (atomics_ != nullptr && rdma_ == nullptr)
        ADD_FAILURE() << component_ << ": atomics() without rdma() (no registration, no flush)";
    if (attr().registration_handle_size > 0 && rdma_ == nullptr)
        ADD_FAILURE() << component_ << ": registration_handle_size "
                      << attr().registration_handle_size << " without rdma() to register";
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
    region_memory_.assign((guard_bytes + region_bytes_ + guard_bytes) / sizeof(std::uint64_t), 0);
    region_handle_ = rdma_ ? rdma_->register_mem(nullptr, region_start(), region_bytes_,
                                                 btl::reg_flags::access_any)
                           : nullptr;
    send_hello();
}

void BtlTest::send_hello() {
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
    const RegionInfo info{reinterpret_cast<std::uintptr_t>(region_start()), region_bytes_, hs};
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
        wait_for([this] { return outbox_.empty() && sends_pending_ == 0 && threads_echo_.idle(); },
                 "every send to complete");
        if (Status s = rdma_ ? rdma_->flush(nullptr) : Status::success; !ok(s))
            ADD_FAILURE() << "flush at teardown: " << to_string(s);
        for (btl::RegistrationHandle* h : local_handles_) rdma_->deregister_mem(h);
        local_handles_.clear();
        if (region_handle_ != nullptr) {
            EXPECT_EQ(rdma_->deregister_mem(region_handle_), Status::success);
            region_handle_ = nullptr;
        }
        EXPECT_TRUE(ok(module_->del_procs(peers_, endpoints_)));
        threads_echo_.detach();
        connected_ = false;
    }
    // The memory around the region must be intact.
    const std::size_t first = guard_bytes / 8, end = (guard_bytes + region_bytes_) / 8;
    for (std::size_t i = 0; i < region_memory_.size(); ++i) {
        if ((i < first || i >= end) && region_memory_[i] != 0) {
            ADD_FAILURE() << "memory " << (i < first ? "before" : "after")
                          << " the registered region was written (word " << i << ")";
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
    // A target logs every one-sided request it refuses (rate-limited); the
    // origin's status is what each case asserts, so those lines are expected
    // in any case.
    expected_logs_.push_back(": refused a");
    expected_logs_.push_back("one-sided requests refused");
    for (const std::string& line : log_watch_.stop()) {
        const bool expected = std::any_of(
            expected_logs_.begin(), expected_logs_.end(),
            [&](const std::string& text) { return line.find(text) != std::string::npos; });
        if (!expected) ADD_FAILURE() << "the case logged an unexpected warning or error: " << line;
    }
}

// --- progress ----------------------------------------------------------------

void BtlTest::progress() {
    progress_.progress();
    pump();
    threads_echo_.pump();
}

void BtlTest::progress_concurrent() {
    progress_.progress();
    threads_echo_.pump();
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

bool BtlTest::remote_reregister() {
    hello_ = false;
    post(tag_request, WireHeader{Kind::reregister, 0, new_msg(), 0, 0, 0}, {});
    return wait_for([this] { return hello_; }, "the service's hello after reregistering");
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
    if (attr().registration_handle_size == 0 || rdma_ == nullptr) return nullptr;
    btl::RegistrationHandle* h =
        rdma_->register_mem(target_, base, size, btl::reg_flags::access_any);
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

namespace {

// A request of a case, sent to the target and completing to run_issue.
template <typename Request>
void bind(Request& request, btl::Endpoint* target, btl::RdmaCompletionFn cb, void* context,
          void* cbdata) {
    request.endpoint = target;
    request.cb = cb;
    request.cbcontext = context;
    request.cbdata = cbdata;
}

}  // namespace

Status BtlTest::run_rdma(bool is_put, btl::RdmaRequest request, const std::string& what) {
    return run_issue(
        [&](btl::RdmaCompletionFn cb, void* context, void* cbdata) {
            bind(request, target_, cb, context, cbdata);
            return is_put ? rdma_->put(request) : rdma_->get(request);
        },
        what);
}

Status BtlTest::run_atomic(AtomicKind kind, btl::AtomicRequest request, const std::string& what) {
    return run_issue(
        [&](btl::RdmaCompletionFn cb, void* context, void* cbdata) {
            bind(request, target_, cb, context, cbdata);
            switch (kind) {
                case AtomicKind::op:
                    return atomics_->atomic_op(request);
                case AtomicKind::fop:
                    return atomics_->atomic_fop(request);
                case AtomicKind::cswap:
                    break;
            }
            return atomics_->atomic_cswap(request);
        },
        what);
}

Status BtlTest::run_issue(const RdmaIssue& issue, const std::string& what) {
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
