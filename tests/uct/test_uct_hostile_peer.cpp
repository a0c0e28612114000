// A uct module (posix) against a peer that speaks its wire protocol but is
// written with UCT alone (raw_uct_peer.hpp), so it can send what no Transit
// module sends.  As a target, the module answers every one-sided request that
// names its operation, refused ones with an error, so an initiator's flush,
// get or atomic ends instead of waiting for good; it never changes memory for
// a refused one.  As an initiator, it takes a target's status for what it is:
// one that names no status fails the operation and leaves its buffer alone.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "tests/fixtures/rdma_outcome.hpp"
#include "tests/fixtures/two_rank_runtime.hpp"
#include "tests/uct/raw_uct_peer.hpp"

namespace {

using namespace transit;
using transit::test::note_outcome;
using transit::test::Opened;
using transit::test::RawUctPeer;
using transit::test::RdmaOutcome;
using transit::test::TwoRankRuntime;
using uct::Kind;

// The selection must be in the environment before the registry first reads it.
[[maybe_unused]] const bool posix_selected = [] {
    ::setenv("TRANSIT_MCA_btl", "self,uct", 1);
    ::setenv("TRANSIT_MCA_btl_uct_transports", "posix", 1);
    return true;
}();

constexpr std::chrono::milliseconds wait_limit{5000};
constexpr std::uint64_t fill = 0x5151515151515151ull;

class UctHostilePeer : public ::testing::Test {
  protected:
    void SetUp() override {
        try {
            peer_ = std::make_unique<RawUctPeer>("posix", "posix", 1);
        } catch (const std::exception& e) {
            GTEST_SKIP() << "UCT's posix transport is not available here: " << e.what();
        }
        runtime_.modex_[{1, "btl.uct.posix"}] = peer_->address();
        opened_ = std::make_unique<Opened>(runtime_, "uct:posix/memory");
        ASSERT_NE(opened_->module, nullptr) << "no uct:posix/memory module";
        btl::Reachability reachable(peers_.size());
        ASSERT_EQ(opened_->module->add_procs(peers_, endpoints_, reachable), Status::success);
        ASSERT_TRUE(reachable.test(1)) << "the module did not take the raw peer's address";
        peer_->connect(runtime_.modex_.at({0, "btl.uct.posix"}));
        memory_.fill(fill);
        handle_ = rdma().register_mem(nullptr, region(), region_size, btl::reg_flags::access_any);
        ASSERT_NE(handle_, nullptr);
        std::memcpy(&packed_, handle_, sizeof packed_);
    }

    void TearDown() override {
        if (opened_ && opened_->module) {
            if (handle_) {
                EXPECT_EQ(rdma().deregister_mem(handle_), Status::success);
            }
            EXPECT_TRUE(ok(opened_->module->del_procs(peers_, endpoints_)));
        }
    }

    btl::Rdma& rdma() { return *opened_->module->rdma(); }
    btl::Endpoint* rank1() { return endpoints_[1]; }

    // The registered region: the middle of memory_, with a 64-byte guard on
    // each side.
    static constexpr std::size_t region_size = 256;
    std::uint64_t* region() { return memory_.data() + 8; }
    std::uint64_t region_address() { return reinterpret_cast<std::uintptr_t>(region()); }
    bool memory_untouched() const {
        for (std::uint64_t w : memory_)
            if (w != fill) return false;
        return true;
    }

    // Runs the module's and the raw peer's progress until `done` holds or the
    // wait limit passes.
    template <typename Done>
    bool until(Done done, std::chrono::milliseconds limit = wait_limit) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (!done()) {
            if (std::chrono::steady_clock::now() > end) return false;
            opened_->progress.progress();
            peer_->progress();
        }
        return true;
    }

    // Sends the module a request of `kind` and waits for its one answer.
    std::optional<std::vector<std::byte>> ask(Kind kind, std::span<const std::byte> body) {
        peer_->received.clear();
        if (!until([&] { return peer_->send(kind, body); })) return std::nullopt;
        if (!until([&] { return !peer_->received.empty(); })) return std::nullopt;
        return peer_->received.front();
    }
    template <typename T>
    requires std::is_trivially_copyable_v<T> std::optional<std::vector<std::byte>> ask(
        Kind kind, const T& request) {
        return ask(kind, std::as_bytes(std::span(&request, 1)));
    }

    // The reply in `message`, checked to be of `kind` and to answer (op, generation).
    template <typename Reply>
    Reply reply_of(const std::vector<std::byte>& message, Kind kind, std::uint32_t op,
                   std::uint32_t generation) {
        uct::WireHeader h{};
        std::span<const std::byte> body;
        Reply r{};
        EXPECT_TRUE(uct::read_message(message, h, body));
        EXPECT_EQ(h.kind, static_cast<std::uint8_t>(kind));
        EXPECT_GE(body.size(), sizeof r);
        std::memcpy(&r, body.data(), std::min(sizeof r, body.size()));
        EXPECT_EQ(r.op, op);
        EXPECT_EQ(r.generation, generation);
        return r;
    }

    // Refused: answered with an error, and no byte of memory_ changed.
    template <typename Reply, typename Request>
    void expect_refused(const char* what, Kind kind, Kind answer, const Request& req,
                        std::size_t length = sizeof(Request)) {
        SCOPED_TRACE(what);
        const auto message = ask(kind, std::as_bytes(std::span(&req, 1)).first(length));
        ASSERT_TRUE(message.has_value()) << what << ": no answer within 5 s";
        const Reply r = reply_of<Reply>(*message, answer, req.op, req.generation);
        EXPECT_FALSE(ok(status_from_wire(r.status))) << what << " was served";
        EXPECT_TRUE(memory_untouched()) << what << " changed the target's memory";
        if constexpr (std::is_same_v<Reply, uct::AtomicReply>) {
            EXPECT_EQ(r.value, 0u);
        } else {
            EXPECT_EQ(r.length, 0u);
        }
    }

    // The module still serves a valid put from the peer.
    void expect_put_served() {
        struct {
            uct::RdmaRequest req;
            std::uint64_t data;
        } put{{90, 1, packed_.key, packed_.secret, region_address(), sizeof(std::uint64_t), 0}, 42};
        const auto message = ask(Kind::put, put);
        ASSERT_TRUE(message.has_value()) << "a valid put was not answered";
        const auto r = reply_of<uct::RdmaReply>(*message, Kind::put_ack, 90, 1);
        EXPECT_EQ(status_from_wire(r.status), Status::success);
        EXPECT_EQ(region()[0], 42u);
    }

    uct::RdmaRequest put_request(std::uint32_t op, std::uint64_t length) {
        return {op, 7, packed_.key, packed_.secret, region_address(), length, 0};
    }
    uct::AtomicRequest atomic_request(std::uint32_t op, std::uint16_t amo, std::uint8_t mode) {
        return {op, 7, packed_.key, packed_.secret, region_address(), 1, 0, amo, mode, 0, 0};
    }

    TwoRankRuntime runtime_;
    std::unique_ptr<RawUctPeer> peer_;
    std::unique_ptr<Opened> opened_;
    const std::vector<Rank> peers_{0, 1};
    std::vector<btl::Endpoint*> endpoints_ = std::vector<btl::Endpoint*>(2, nullptr);
    std::array<std::uint64_t, 16 + region_size / 8> memory_{};
    btl::RegistrationHandle* handle_ = nullptr;
    uct::PackedHandle packed_{};
};

// --- the module as the target ---------------------------------------------------------

TEST_F(UctHostilePeer, APutWhoseDataIsNotItsLengthIsAnsweredWithAnError) {
    struct {
        uct::RdmaRequest req;
        std::array<std::uint64_t, 2> data{1, 2};
    } put{put_request(1, 64)};  // 64 bytes said, 16 sent
    expect_refused<uct::RdmaReply>("a put of 16 bytes saying 64", Kind::put, Kind::put_ack, put.req,
                                   sizeof put);
    expect_put_served();
}

TEST_F(UctHostilePeer, ACutRequestIsAnsweredWithAnError) {
    expect_refused<uct::RdmaReply>("a put cut after 12 bytes", Kind::put, Kind::put_ack,
                                   put_request(2, 0), 12);
    expect_refused<uct::RdmaReply>("a get cut after 20 bytes", Kind::get_req, Kind::get_rep,
                                   put_request(3, 8), 20);
    expect_refused<uct::AtomicReply>("an atomic cut after 40 bytes", Kind::amo_req, Kind::amo_rep,
                                     atomic_request(4, 0, 1), 40);
    expect_put_served();
}

TEST_F(UctHostilePeer, AnAtomicNamingNoOperationOrModeIsAnsweredWithAnError) {
    for (const std::uint16_t amo : {std::uint16_t{0x13}, std::uint16_t{0xffff}})
        expect_refused<uct::AtomicReply>("a fetching atomic naming no operation", Kind::amo_req,
                                         Kind::amo_rep, atomic_request(5, amo, 1));
    expect_refused<uct::AtomicReply>("an atomic of mode 9", Kind::amo_req, Kind::amo_rep,
                                     atomic_request(6, 0, 9));
    expect_put_served();
}

TEST_F(UctHostilePeer, ARequestOutsideTheRegistrationsIsAnsweredWithAnError) {
    uct::RdmaRequest forged = put_request(10, 0);
    forged.key += 1000;
    expect_refused<uct::RdmaReply>(
        "a get through a key never registered", Kind::get_req, Kind::get_rep,
        uct::RdmaRequest{forged.op, 7, forged.key, forged.secret, region_address(), 8, 0});
    expect_refused<uct::RdmaReply>(
        "a get through the right id with a guessed secret", Kind::get_req, Kind::get_rep,
        uct::RdmaRequest{15, 7, packed_.key, packed_.secret ^ 1, region_address(), 8, 0});
    expect_refused<uct::RdmaReply>(
        "a get 64 bytes below the region", Kind::get_req, Kind::get_rep,
        uct::RdmaRequest{11, 7, packed_.key, packed_.secret, region_address() - 64, 8, 0});
    expect_refused<uct::RdmaReply>("a get larger than one reply", Kind::get_req, Kind::get_rep,
                                   uct::RdmaRequest{12, 7, packed_.key, packed_.secret,
                                                    region_address(), std::uint64_t{1} << 40, 0});
    struct {
        uct::RdmaRequest req;
        std::uint64_t data = 1;
    } above{{13, 7, packed_.key, packed_.secret, region_address() + region_size, 8, 0}};
    expect_refused<uct::RdmaReply>("a put just above the region", Kind::put, Kind::put_ack,
                                   above.req, sizeof above);
    uct::AtomicRequest misaligned =
        atomic_request(14, static_cast<std::uint16_t>(btl::AtomicOp::add), 1);
    misaligned.address += 4;
    expect_refused<uct::AtomicReply>("a misaligned 64-bit fetch-add", Kind::amo_req, Kind::amo_rep,
                                     misaligned);
    expect_put_served();
}

// Registration records are reused: the key of a deregistered region must not
// reach whatever is registered in its record next.
TEST_F(UctHostilePeer, TheKeyOfADeregisteredRegionIsRefusedOnceItsRecordIsReused) {
    const std::uint64_t old_key = packed_.key;
    ASSERT_EQ(rdma().deregister_mem(handle_), Status::success);
    handle_ = rdma().register_mem(nullptr, region(), region_size, btl::reg_flags::access_any);
    ASSERT_NE(handle_, nullptr);
    std::memcpy(&packed_, handle_, sizeof packed_);
    ASSERT_NE(packed_.key, old_key) << "a new registration got the old key";
    struct {
        uct::RdmaRequest req;
        std::uint64_t data = 1;
    } stale{{20, 7, old_key, packed_.secret, region_address(), 8, 0}};
    expect_refused<uct::RdmaReply>("a put through the deregistered key", Kind::put, Kind::put_ack,
                                   stale.req, sizeof stale);
    expect_put_served();
}

// The upper layer's mistakes end in an error, not in a freed record taken twice.
TEST_F(UctHostilePeer, DeregisteringAnUnknownOrFreedHandleIsNotFound) {
    btl::RegistrationHandle* second =
        rdma().register_mem(nullptr, region(), region_size, btl::reg_flags::remote_read);
    ASSERT_NE(second, nullptr);
    ASSERT_EQ(rdma().deregister_mem(second), Status::success);
    EXPECT_EQ(rdma().deregister_mem(second), Status::not_found) << "a handle deregistered twice";
    std::array<std::byte, btl::max_registration_handle_size> foreign{};
    std::memcpy(foreign.data(), handle_, foreign.size());
    EXPECT_EQ(rdma().deregister_mem(reinterpret_cast<btl::RegistrationHandle*>(foreign.data())),
              Status::not_found)
        << "a copy of a live handle";
    EXPECT_EQ(rdma().deregister_mem(reinterpret_cast<btl::RegistrationHandle*>(
                  reinterpret_cast<std::byte*>(handle_) + 8)),
              Status::not_found)
        << "an address inside a live handle";
    // The refused calls freed nothing: records still come out one at a time.
    btl::RegistrationHandle* a =
        rdma().register_mem(nullptr, region(), 8, btl::reg_flags::access_any);
    btl::RegistrationHandle* b =
        rdma().register_mem(nullptr, region(), 8, btl::reg_flags::access_any);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a, b);
    EXPECT_NE(a, handle_);
    EXPECT_NE(b, handle_);
    EXPECT_EQ(rdma().deregister_mem(a), Status::success);
    EXPECT_EQ(rdma().deregister_mem(b), Status::success);
    expect_put_served();
}

TEST_F(UctHostilePeer, ARequestTooShortToNameItsOperationLeavesTheModuleWorking) {
    const std::array<std::byte, 4> stub{};
    peer_->received.clear();
    ASSERT_TRUE(until([&] { return peer_->send(Kind::put, stub); }));
    // Nothing names the operation to answer: the module drops it.
    EXPECT_FALSE(until([&] { return !peer_->received.empty(); }, std::chrono::milliseconds(200)))
        << "a 4-byte request was answered";
    EXPECT_TRUE(memory_untouched());
    expect_put_served();
}

// Requests made from valid ones by a seeded generator: any key, address,
// length, operation, mode and width, cut anywhere past the operation's name,
// with data of any length.  Each is answered once, served exactly when a
// model of the rules says so; a refused one changes no byte, a served one
// none outside the region, and a served get returns the region's bytes.
TEST_F(UctHostilePeer, RandomRequestsAreEachAnsweredAsTheRulesSay) {
    constexpr std::uint64_t seed = 0x75637472;  // fixed: a failure reproduces
    std::mt19937_64 random(seed);
    auto pick = [&](std::uint64_t n) { return n == 0 ? 0 : random() % n; };
    const std::uint64_t base = region_address();
    constexpr std::size_t rounds = 3000;
    std::size_t served = 0;
    for (std::uint32_t i = 0; i < rounds; ++i) {
        SCOPED_TRACE(::testing::Message() << "request " << i << " (seed " << seed << ")");
        const Kind kind = std::array{Kind::put, Kind::get_req, Kind::amo_req}[pick(3)];
        const std::uint64_t key = pick(8) == 0 ? packed_.key + 1 + pick(3) : packed_.key;
        // A right id with a wrong secret is refused too.
        const std::uint64_t secret = pick(8) == 0 ? random() : packed_.secret;
        const std::uint64_t address = base - 72 + pick(region_size + 144);
        std::uint64_t length = pick(4) == 0 ? pick(1000) : pick(64);
        if (pick(50) == 0) length = std::uint64_t{1} << (40 + pick(20));
        std::vector<std::byte> body;
        bool valid = key == packed_.key && secret == packed_.secret;
        if (kind == Kind::amo_req) {
            const uct::AtomicRequest req{
                i,
                ~i,
                key,
                secret,
                address,
                random(),
                random(),
                static_cast<std::uint16_t>(pick(4) == 0 ? random() : pick(12)),
                static_cast<std::uint8_t>(pick(5) == 0 ? pick(256) : pick(3)),
                static_cast<std::uint8_t>(pick(2)),
                0};
            const std::size_t width = req.bits32 != 0 ? 4 : 8;
            valid = valid && req.mode <= 2 && (req.mode == 2 || btl::is_atomic_op(req.amo)) &&
                    address % width == 0 && address >= base &&
                    address + width <= base + region_size;
            body.resize(sizeof req);
            std::memcpy(body.data(), &req, sizeof req);
        } else {
            const uct::RdmaRequest req{i, ~i, key, secret, address, length, pick(1000)};
            body.resize(sizeof req);
            std::memcpy(body.data(), &req, sizeof req);
            std::uint64_t data = 0;
            if (kind == Kind::put) {
                data = pick(8) == 0 ? pick(300) : std::min<std::uint64_t>(length, 1000);
                for (std::uint64_t b = 0; b < data; ++b)
                    body.push_back(static_cast<std::byte>(random()));
            }
            valid = valid && (kind == Kind::get_req || data == length) && address >= base &&
                    length <= region_size && address + length <= base + region_size;
        }
        if (pick(6) == 0) {  // cut anywhere past the operation's name
            body.resize(uct::request_id_size + pick(body.size() - uct::request_id_size));
            const std::size_t whole =
                kind == Kind::amo_req ? sizeof(uct::AtomicRequest) : sizeof(uct::RdmaRequest);
            valid = valid && body.size() >= whole &&
                    (kind != Kind::put || body.size() - whole == length);
        }
        const auto before = memory_;
        const auto message = ask(kind, std::span<const std::byte>(body));
        ASSERT_TRUE(message.has_value()) << "no answer within 5 s";
        const Kind answer = kind == Kind::put       ? Kind::put_ack
                            : kind == Kind::get_req ? Kind::get_rep
                                                    : Kind::amo_rep;
        uct::WireHeader h{};
        std::span<const std::byte> reply_body;
        ASSERT_TRUE(uct::read_message(*message, h, reply_body));
        ASSERT_EQ(h.kind, static_cast<std::uint8_t>(answer));
        std::int32_t status = 0;
        std::uint32_t ids[2];
        ASSERT_GE(reply_body.size(), 12u);
        std::memcpy(ids, reply_body.data(), sizeof ids);
        std::memcpy(&status, reply_body.data() + 8, sizeof status);
        EXPECT_EQ(ids[0], i);
        EXPECT_EQ(ids[1], ~i);
        ASSERT_EQ(ok(status_from_wire(status)), valid) << "status " << status;
        for (std::size_t w = 0; w < 8; ++w) {
            ASSERT_EQ(memory_[w], fill) << "the guard below the region changed";
            ASSERT_EQ(memory_[memory_.size() - 1 - w], fill) << "the guard above it changed";
        }
        if (!valid) {
            ASSERT_EQ(memory_, before) << "a refused request changed the target's memory";
            continue;
        }
        ++served;
        if (kind == Kind::get_req) {
            const auto* at =
                reinterpret_cast<const std::byte*>(before.data()) + (address - base) + 64;
            ASSERT_EQ(reply_body.size(), sizeof(uct::RdmaReply) + length);
            EXPECT_EQ(std::memcmp(reply_body.data() + sizeof(uct::RdmaReply), at, length), 0);
        }
    }
    EXPECT_TRUE(peer_->received.size() <= 1);
    // Both kinds happen, so the model is exercised both ways.
    EXPECT_GT(served, rounds / 20);
    EXPECT_LT(served, rounds - rounds / 20);
}

// --- the module as the initiator -------------------------------------------------------

// The peer's "registration": what it hands out as its handle.
constexpr std::uint64_t peer_base = 0x10000;
const uct::PackedHandle peer_handle{
    5, 6, peer_base, 4096, btl::reg_flags::access_any, uct::handle_magic};
const auto* peer_remote = reinterpret_cast<const btl::RegistrationHandle*>(&peer_handle);

class UctHostileTarget : public UctHostilePeer {
  protected:
    // The one request the module sent the peer, of `kind`.
    template <typename Request>
    std::optional<Request> request_sent(Kind kind) {
        if (!until([&] { return !peer_->received.empty(); })) return std::nullopt;
        const auto message = peer_->received.front();
        peer_->received.clear();
        uct::WireHeader h{};
        std::span<const std::byte> body;
        Request req{};
        if (!uct::read_message(message, h, body) || h.kind != static_cast<std::uint8_t>(kind) ||
            body.size() < sizeof req)
            return std::nullopt;
        std::memcpy(&req, body.data(), sizeof req);
        return req;
    }

    template <typename Reply>
    void answer(Kind kind, const Reply& r) {
        ASSERT_TRUE(until([&] { return peer_->send(kind, r); }));
    }
};

TEST_F(UctHostileTarget, AGetAnsweredWithAStatusThatNamesNoneFailsAndLeavesItsBuffer) {
    for (const std::int32_t status : {5, 0x7fffffff, -99}) {
        SCOPED_TRACE(status);
        std::array<std::uint64_t, 4> local;
        local.fill(fill);
        RdmaOutcome outcome;
        const Status s = rdma().get({.endpoint = rank1(),
                                     .local = local.data(),
                                     .remote = peer_base,
                                     .remote_handle = peer_remote,
                                     .size = sizeof local,
                                     .cb = &note_outcome,
                                     .cbdata = &outcome});
        ASSERT_EQ(s, Status::success);
        const auto req = request_sent<uct::RdmaRequest>(Kind::get_req);
        ASSERT_TRUE(req.has_value()) << "the module sent no get request";
        answer(Kind::get_rep, uct::RdmaReply{req->op, req->generation, status, 0, 0, 0});
        ASSERT_TRUE(until([&] { return outcome.calls > 0; })) << "the get never completed";
        EXPECT_FALSE(ok(outcome.status)) << "a get answered with status " << status << " succeeded";
        for (std::uint64_t w : local) EXPECT_EQ(w, fill) << "the refused get wrote its buffer";
    }
}

TEST_F(UctHostileTarget, AFetchingAtomicTheTargetRefusedLeavesItsResult) {
    for (const std::int32_t status : {static_cast<std::int32_t>(Status::access_denied), 5}) {
        SCOPED_TRACE(status);
        std::uint64_t result = fill;
        RdmaOutcome outcome;
        const Status s = opened_->module->atomics()->atomic_fop({.endpoint = rank1(),
                                                                 .local = &result,
                                                                 .remote = peer_base,
                                                                 .remote_handle = peer_remote,
                                                                 .op = btl::AtomicOp::add,
                                                                 .operand = 1,
                                                                 .cb = &note_outcome,
                                                                 .cbdata = &outcome});
        ASSERT_EQ(s, Status::success);
        const auto req = request_sent<uct::AtomicRequest>(Kind::amo_req);
        ASSERT_TRUE(req.has_value()) << "the module sent no atomic request";
        answer(Kind::amo_rep, uct::AtomicReply{req->op, req->generation, status, 0, 0x1234});
        ASSERT_TRUE(until([&] { return outcome.calls > 0; })) << "the atomic never completed";
        EXPECT_FALSE(ok(outcome.status))
            << "an atomic answered with status " << status << " succeeded";
        EXPECT_EQ(result, fill) << "the refused atomic wrote its result";
    }
}

}  // namespace
