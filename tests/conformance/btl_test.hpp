// The fixture every conformance case derives from.  Per case it opens a fresh
// btl framework (its own progress engine and tag table, so cases cannot leak
// into each other), finds the module of the component under test, connects it
// to the target (its own rank in loopback, rank 1 with two processes), and sets
// up the service that answers the driver's requests.  Cases use only the
// helpers below and the module itself, so they run unchanged in both modes.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "framework/btl_framework.hpp"
#include "tests/conformance/log_watch.hpp"
#include "tests/conformance/threads_echo.hpp"
#include "tests/conformance/wire.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/progress.hpp"

namespace transit::conformance {

enum class SendMethod {
    alloc_send,          // alloc, copy, send
    prepare_contiguous,  // prepare_src over one buffer (in place where offered)
    prepare_iovec,       // prepare_src over a three-piece iovec list
    sendi,               // sendi, falling back to the returned descriptor
    sendi_iovec,         // sendi over a three-piece iovec list
};

const char* to_string(SendMethod m);

class BtlTest : public ::testing::TestWithParam<std::string> {
  protected:
    using Overrides = std::vector<std::pair<std::string, std::string>>;

    void SetUp() override;
    void TearDown() override;

    // Parameters the case needs before the module exists, by short name:
    // {"free_list_max", "4"} sets btl_<component>_free_list_max when the
    // component offers it.  Restored after the case.
    virtual Overrides overrides() const { return {}; }
    // Whether the framework tells the modules they will be called by several
    // threads at once (btl::Framework::multi_threaded), on both ranks.
    virtual bool multi_threaded() const { return false; }

    // --- the module under test ---
    btl::Module& module() { return *module_; }
    // Its capabilities; a case calls them only where the flags announce them
    // (the fixture fails a module whose flags announce what it does not offer).
    btl::Rdma& rdma() { return *rdma_; }
    btl::Atomics& atomics() { return *atomics_; }
    const btl::Attributes& attr() const { return module_->attributes(); }
    bool has_flags(std::uint32_t f) const { return (attr().flags & f) == f; }
    bool has_atomics(std::uint32_t f) const { return (attr().atomic_flags & f) == f; }
    btl::Endpoint* target() const { return target_; }
    bool loopback() const { return loopback_; }
    // Names the parameter btl_<component>_<name> if the component offers it.
    std::string param_name(const std::string& name) const;
    bool override_applied(const std::string& name) const;

    // --- progress and waiting ---
    void progress();
    // The module's progress and the concurrent messages' queue, without the
    // fixture's frame queue (one thread's): what the concurrent case's
    // threads call, several at once.
    void progress_concurrent();
    ThreadsEcho& threads_echo() { return threads_echo_; }
    // Progresses until pred() holds; on timeout adds a failure naming `what`.
    bool wait_for(const std::function<bool()>& pred, const std::string& what,
                  std::chrono::seconds limit = {});

    // --- messages to the service ---
    std::uint64_t new_msg() { return next_msg_++; }
    // Sends `payload` as an echo request with `method`, cut into fragments the
    // module accepts.  seq is carried for the ordering cases.
    void send_echo(SendMethod method, std::uint64_t msg, std::span<const std::byte> payload,
                   std::uint32_t seq = 0);
    // Waits for the whole reply to message msg; nullptr (and a failure) on timeout.
    const std::vector<std::byte>* wait_reply(std::uint64_t msg);
    void forget_reply(std::uint64_t msg) { replies_.erase(msg); }
    // Sequence numbers of echo replies, in arrival order (first fragments only).
    const std::vector<std::uint32_t>& echo_order() const { return echo_seqs_; }
    bool wait_ack(std::uint64_t msg);
    // Region access through the service (never through the module under
    // test), so put/get/atomics are checked by an independent path.
    bool remote_fill(std::uint64_t base, std::uint64_t length, std::uint32_t seed);
    bool remote_write(std::uint64_t base, std::span<const std::byte> bytes);
    std::vector<std::byte> remote_read(std::uint64_t base, std::uint64_t length);
    // Has the service deregister its region and register it again: the handle
    // held before names a dead registration, remote_handle() the new one.
    bool remote_reregister();
    // Sends a chain message that bounces hops times between the two sides.
    void start_chain(std::uint64_t hops);
    int chains_done() const { return chains_done_; }

    // --- one-sided ---
    std::uint64_t remote_address(std::uint64_t offset) const { return region_.address + offset; }
    std::uint64_t remote_size() const { return region_.size; }
    const btl::RegistrationHandle* remote_handle() const;
    // Registers local memory when the module uses handles (else nullptr);
    // deregistered at the end of the case.
    btl::RegistrationHandle* register_local(void* base, std::size_t size);
    // Issues a put (is_put) or get to the target, or an atomic, retrying while
    // it reports out_of_resource, and waits for its completion; returns the
    // final status.  The request's endpoint and completion are filled in here.
    // Checks that an operation that completed inline does not call back as well.
    enum class AtomicKind { op, fop, cswap };
    Status run_rdma(bool is_put, btl::RdmaRequest request, const std::string& what);
    Status run_atomic(AtomicKind kind, btl::AtomicRequest request, const std::string& what);

    // When set, every reply callback calls progress() again before returning,
    // as an upper layer waiting inside a handler does.
    void progress_inside_replies(bool on) { progress_in_reply_ = on; }

    // Failures seen inside callbacks (checked in TearDown too).
    int callback_errors() const { return callback_errors_; }
    int sends_pending() const { return sends_pending_; }

    // A warning or error containing `text` does not fail the case (a target
    // logs the requests it refuses).  Call before SetUp.
    void expect_logged(std::string text) { expected_logs_.push_back(std::move(text)); }

    std::string component_;

  private:
    struct Frame {
        btl::Tag tag;
        std::vector<std::byte> bytes;  // header + payload
    };
    struct Reply {
        std::vector<std::byte> data;
        std::uint64_t received = 0;
        bool any = false;
    };
    struct RdmaCompletion {
        bool called = false;
        Status status = Status::success;
    };

    std::string start();  // "" or the reason to skip
    using RdmaIssue = std::function<Status(btl::RdmaCompletionFn, void*, void*)>;
    Status run_issue(const RdmaIssue& issue, const std::string& what);
    std::string find_module();
    void check_capabilities();
    void apply_overrides();
    void restore_overrides();
    void setup_service();
    void send_hello();
    std::byte* region_start() {
        return reinterpret_cast<std::byte*>(region_memory_.data()) + guard_bytes;
    }
    void finish();

    // Sending: the driver's methods, and the frame queue used by replies and
    // as the fallback when the module is out of resources.
    bool send_fragment(SendMethod method, btl::Tag tag, WireHeader h,
                       std::span<const std::byte> payload, std::size_t& taken);
    void post(btl::Tag tag, WireHeader h, std::span<const std::byte> payload);
    void queue_frame(btl::Tag tag, const WireHeader& h, std::span<const std::byte> payload);
    void pump();
    Status send_descriptor(btl::Descriptor* d, btl::Tag tag);
    std::size_t fragment_payload(SendMethod method) const;

    // Receiving.
    static void on_request(btl::Module*, const btl::ReceiveDescriptor& d, void* self);
    static void on_reply(btl::Module*, const btl::ReceiveDescriptor& d, void* self);
    static void on_chain(btl::Module*, const btl::ReceiveDescriptor& d, void* self);
    static void on_sent(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s);
    static void on_rdma(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                        void* context, void* cbdata, Status s);
    void handle_request(const WireHeader& h, const btl::ReceiveDescriptor& d);
    void handle_reply(const WireHeader& h, const btl::ReceiveDescriptor& d);

    LogWatch log_watch_;
    std::vector<std::string> expected_logs_;  // substrings of lines the case may log
    ProgressEngine progress_;
    btl::AmTable am_;
    std::unique_ptr<btl::Framework> fw_;
    btl::Module* module_ = nullptr;
    btl::Rdma* rdma_ = nullptr;
    btl::Atomics* atomics_ = nullptr;
    std::vector<Rank> peers_;
    std::vector<btl::Endpoint*> endpoints_;
    btl::Endpoint* target_ = nullptr;
    bool loopback_ = true;
    bool driver_ = true;
    bool service_ = true;
    bool connected_ = false;
    struct Saved {
        std::string name;
        std::string text;
    };
    std::vector<Saved> saved_params_;
    std::set<std::string> applied_;

    std::deque<Frame> outbox_;
    ThreadsEcho threads_echo_;
    int sends_pending_ = 0;
    int callback_errors_ = 0;

    // Service side: the region, between two guard areas that must stay zero.
    static constexpr std::size_t guard_bytes = 4096;
    std::vector<std::uint64_t> region_memory_;
    std::size_t region_bytes_ = 0;
    btl::RegistrationHandle* region_handle_ = nullptr;
    std::map<std::uint64_t, std::uint64_t> written_;
    bool bye_ = false;

    // Driver side.
    RegionInfo region_{};
    bool hello_ = false;
    alignas(16) std::array<std::byte, btl::max_registration_handle_size> remote_handle_{};
    std::map<std::uint64_t, Reply> replies_;
    std::set<std::uint64_t> acks_;
    std::vector<std::uint32_t> echo_seqs_;
    int chains_done_ = 0;
    bool progress_in_reply_ = false;
    std::uint64_t next_msg_ = 1;
    std::deque<RdmaCompletion> completions_;
    std::vector<btl::RegistrationHandle*> local_handles_;
};

// The name gtest shows for a component parameter (non-alphanumerics become _).
std::string component_param_name(const ::testing::TestParamInfo<std::string>& info);

}  // namespace transit::conformance
