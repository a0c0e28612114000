// A listening uct module (posix) against clients outside the job written with
// UCT alone (raw_uct_peer.hpp), which send what no module sends: a join
// without the token is answered with a refusal and leaves nothing behind; a
// joined client is admitted (given an id) by its first message, which
// arrives under that id; a message naming a channel the module never took,
// or an id, is dropped; a goodbye is a departure, or, from a client that
// never spoke, nothing at all.  Over tcp, a goodbye read after UCT called the
// connection to the client lost is still a departure.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "tests/fixtures/two_rank_runtime.hpp"
#include "tests/uct/raw_uct_peer.hpp"

namespace {

using namespace transit;
using transit::test::Opened;
using transit::test::RawUctPeer;
using transit::test::TwoRankRuntime;
using uct::Kind;

[[maybe_unused]] const bool transports_selected = [] {
    ::setenv("TRANSIT_MCA_btl", "self,uct", 1);
    ::setenv("TRANSIT_MCA_btl_uct_transports", "posix,tcp/lo", 1);
    ::setenv("TRANSIT_MCA_btl_base_lazy", "0", 1);
    return true;
}();

constexpr btl::Tag tag = 77;
constexpr std::chrono::milliseconds wait_limit{5000};

// Rank 0 of two, listening with a known token; ids from 2 up.
class ListeningRuntime final : public TwoRankRuntime, public rt::DynamicPeers {
  public:
    rt::Secret token{std::byte{7}, std::byte{1}, std::byte{2}};
    std::vector<Rank> admitted;

    rt::DynamicPeers* dynamic_peers() noexcept override { return this; }
    bool is_dynamic(Rank peer) const noexcept override {
        return std::find(admitted.begin(), admitted.end(), peer) != admitted.end();
    }
    bool token_matches(const rt::Secret& t) const noexcept override { return t == token; }
    const rt::Secret* token_for(Rank) const noexcept override { return nullptr; }
    Rank admit() noexcept override {
        admitted.push_back(static_cast<Rank>(2 + admitted.size()));
        return admitted.back();
    }
};

struct Delivery {
    Rank from;
    std::vector<std::byte> data;
};

// Where the module and the raw clients meet: UCT's memory domain, transport
// and device, and the module's name and modex key there.
struct Transport {
    const char* md;
    const char* tl;
    const char* device;
    const char* module;
    const char* modex_key;
};
constexpr Transport posix{"posix", "posix", "memory", "uct:posix/memory", "btl.uct.posix"};
constexpr Transport tcp{"tcp", "tcp", "lo", "uct:tcp/lo", "btl.uct.tcp"};

class UctDynamicJoin : public ::testing::Test {
  protected:
    explicit UctDynamicJoin(const Transport& t = posix) : transport_(t) {}

    void SetUp() override {
        try {
            client_ = raw_peer();
        } catch (const std::exception& e) {
            GTEST_SKIP() << "UCT's " << transport_.tl
                         << " transport is not available here: " << e.what();
        }
        opened_ = std::make_unique<Opened>(runtime_, transport_.module);
        ASSERT_NE(opened_->module, nullptr) << "no " << transport_.module << " module";
        ASSERT_TRUE(opened_->module->attributes().flags & btl::flags::dynamic_peers);
        listener_ = btl::capability<btl::Listener>(*opened_->module);
        records_ = btl::capability<btl::DynamicPeerRecords>(*opened_->module);
        ASSERT_NE(listener_, nullptr);
        ASSERT_NE(records_, nullptr);
        ASSERT_EQ(listener_->listen(), Status::success);
        ASSERT_EQ(opened_->am.register_callback(tag, &UctDynamicJoin::on_message, this),
                  Status::success);
        opened_->module->register_error(&UctDynamicJoin::on_error, this);
        client_->connect(runtime_.modex_.at({0, transport_.modex_key}));
    }

    std::unique_ptr<RawUctPeer> raw_peer() const {
        return std::make_unique<RawUctPeer>(transport_.md, transport_.tl, uct::join_source,
                                            transport_.device);
    }

    static void on_message(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
        const auto* p = static_cast<const std::byte*>(d.segments[0].addr);
        static_cast<UctDynamicJoin*>(self)->delivered.push_back(
            {d.endpoint ? d.endpoint->peer() : any_rank, {p, p + d.segments[0].len}});
    }
    static void on_error(btl::Module*, std::uint32_t flags, Rank peer, const char*, void* self) {
        static_cast<UctDynamicJoin*>(self)->errors.emplace_back(flags, peer);
    }

    template <typename Done>
    bool until(Done done, std::chrono::milliseconds limit = wait_limit) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (!done()) {
            if (std::chrono::steady_clock::now() > end) return false;
            opened_->progress.progress();
            client_->progress();
        }
        return true;
    }

    // A join from the raw client (the device and interface addresses of
    // answered_, or else its own, behind the request) and the welcome the
    // module sends there.
    // `accepted` and `sent`: the message sizes the join says (0: not said).
    std::optional<uct::Welcome> join(const rt::Secret& token, std::uint32_t server_channel,
                                     std::uint32_t client_channel, std::uint32_t accepted = 0,
                                     std::uint32_t sent = 0) {
        RawUctPeer& answered = answered_ ? *answered_ : *client_;
        const std::vector<std::byte> a = answered.address();
        uct::AddressHeader h{};
        std::memcpy(&h, a.data(), sizeof h);
        uct::JoinRequest j{};
        j.token = token;
        j.server_channel = server_channel;
        j.client_channel = client_channel;
        j.pid = static_cast<std::uint32_t>(::getpid());
        j.device_len = h.device_len;
        j.iface_len = h.iface_len;
        j.largest_accepted = accepted;
        j.largest_sent = sent;
        std::vector<std::byte> body(sizeof j);
        std::memcpy(body.data(), &j, sizeof j);
        body.insert(body.end(), a.begin() + sizeof h, a.end());
        answered.received.clear();
        // answered_ is progressed by a thread of its own until the welcome
        // arrives: over tcp the module's connection to it completes only
        // while both progress, and the module waits for that in its join.
        std::atomic<bool> arrived{false};
        std::jthread progressing;
        if (answered_)
            progressing = std::jthread([&](std::stop_token stop) {
                while (!stop.stop_requested() && answered.received.empty()) answered.progress();
                arrived = !answered.received.empty();
            });
        const auto welcomed = [&] {
            return answered_ ? arrived.load() : !client_->received.empty();
        };
        client_->set_source(uct::join_source);
        const bool answered_in_time =
            until([&] { return client_->send(Kind::join, body); }) && until(welcomed);
        if (progressing.joinable()) {
            progressing.request_stop();
            progressing.join();
        }
        if (!answered_in_time) return std::nullopt;
        uct::WireHeader wh{};
        std::span<const std::byte> rest;
        EXPECT_TRUE(uct::read_message(answered.received.front(), wh, rest));
        EXPECT_EQ(wh.kind, static_cast<std::uint8_t>(Kind::welcome));
        EXPECT_EQ(wh.source, client_channel) << "the welcome names the client's channel";
        uct::Welcome w{};
        EXPECT_GE(rest.size(), sizeof w);
        std::memcpy(&w, rest.data(), std::min(sizeof w, rest.size()));
        return w;
    }

    // Sends a message for `tag` carrying `source`; true once sent.
    bool send_as(Rank source, std::uint64_t value) {
        client_->set_source(source);
        return until(
            [&] { return client_->send(Kind::message, std::as_bytes(std::span(&value, 1)), tag); });
    }

    void TearDown() override {
        if (opened_) opened_->am.unregister_callback(tag);
    }

    const Transport& transport_;
    ListeningRuntime runtime_;
    std::unique_ptr<RawUctPeer> client_;    // sends to the module
    std::unique_ptr<RawUctPeer> answered_;  // when set: the module's endpoint for the client
    std::unique_ptr<Opened> opened_;
    btl::Listener* listener_ = nullptr;
    btl::DynamicPeerRecords* records_ = nullptr;
    std::vector<Delivery> delivered;
    std::vector<std::pair<std::uint32_t, Rank>> errors;
};

constexpr std::uint32_t server_channel = 0x80001234u;
constexpr std::uint32_t client_channel = 0x80005678u;

TEST_F(UctDynamicJoin, WrongTokenRefusedAndNothingKept) {
    rt::Secret wrong = runtime_.token;
    wrong[15] ^= std::byte{1};
    const auto w = join(wrong, server_channel, client_channel);
    ASSERT_TRUE(w.has_value()) << "no answer to a join without the token";
    EXPECT_EQ(status_from_wire(w->status), Status::access_denied);
    EXPECT_TRUE(runtime_.admitted.empty());
    EXPECT_EQ(records_->dynamic_endpoints(), 0u);
    // Its messages name a channel the module never took: dropped.
    ASSERT_TRUE(send_as(server_channel, 1));
    until([] { return false; }, std::chrono::milliseconds(200));
    EXPECT_TRUE(delivered.empty()) << "a refused client's message was delivered";
}

// A client whose messages do not fit the server's interface, or the server's
// messages its own, is refused (UCT stops a process that receives a message
// longer than its segment); one whose sizes fit is admitted.
TEST_F(UctDynamicJoin, ClientWhoseMessageSizesDoNotFitIsRefused) {
    const auto small = join(runtime_.token, server_channel, client_channel, 64, 64);
    ASSERT_TRUE(small.has_value()) << "no answer to a client taking 64-byte messages";
    EXPECT_EQ(status_from_wire(small->status), Status::bad_param);
    const auto large = join(runtime_.token, server_channel, client_channel, 1u << 30, 1u << 30);
    ASSERT_TRUE(large.has_value()) << "no answer to a client sending 1 GiB messages";
    EXPECT_EQ(status_from_wire(large->status), Status::bad_param);
    EXPECT_EQ(records_->dynamic_endpoints(), 0u) << "a refused client kept an endpoint";
    const auto fits = join(runtime_.token, server_channel, client_channel, 1u << 30, 64);
    ASSERT_TRUE(fits.has_value()) << "no welcome";
    EXPECT_EQ(fits->status, 0);
}

TEST_F(UctDynamicJoin, AdmittedClientNamedByItsIdForgeriesDropped) {
    const auto w = join(runtime_.token, server_channel, client_channel);
    ASSERT_TRUE(w.has_value()) << "no welcome";
    EXPECT_EQ(w->status, 0);
    EXPECT_TRUE(runtime_.admitted.empty()) << "admitted before its first message";
    EXPECT_EQ(records_->dynamic_endpoints(), 1u);

    // Its first message admits it and arrives under its id.
    ASSERT_TRUE(send_as(server_channel, 14));
    ASSERT_TRUE(until([&] { return !delivered.empty(); })) << "the client's message is lost";
    ASSERT_EQ(runtime_.admitted.size(), 1u);
    const Rank id = runtime_.admitted[0];
    EXPECT_EQ(records_->dynamic_endpoints(), 1u);
    EXPECT_EQ(delivered[0].from, id);
    // Forgeries: a channel never taken, the id itself, the join marker; then
    // its own channel again (one endpoint keeps its messages in order).
    ASSERT_TRUE(send_as(0x80000001u, 11));
    ASSERT_TRUE(send_as(id, 12));
    ASSERT_TRUE(send_as(uct::join_source, 13));
    ASSERT_TRUE(send_as(server_channel, 15));
    ASSERT_TRUE(until([&] { return delivered.size() >= 2; })) << "the client's message is lost";
    until([] { return false; }, std::chrono::milliseconds(100));
    ASSERT_EQ(delivered.size(), 2u) << "a forged message was delivered";
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(delivered[i].from, id);
        std::uint64_t v = 0;
        ASSERT_EQ(delivered[i].data.size(), sizeof v);
        std::memcpy(&v, delivered[i].data.data(), sizeof v);
        EXPECT_EQ(v, i == 0 ? 14u : 15u);
    }

    // A second join naming the same channel is refused.
    const auto again = join(runtime_.token, server_channel, client_channel + 1);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(status_from_wire(again->status), Status::bad_param);
    EXPECT_EQ(runtime_.admitted.size(), 1u);

    // A goodbye on its channel is a departure; deleting the peer leaves nothing.
    client_->set_source(server_channel);
    ASSERT_TRUE(until([&] { return client_->send(Kind::goodbye, std::span<const std::byte>{}); }));
    ASSERT_TRUE(until([&] { return !errors.empty(); })) << "the departure was not reported";
    EXPECT_EQ(errors[0].second, id);
    EXPECT_TRUE(errors[0].first & btl::error_flags::departed);
    btl::Endpoint* ep = nullptr;
    btl::Reachability reach(1);
    const Rank peers[] = {id};
    ASSERT_EQ(opened_->module->add_procs(peers, {&ep, 1}, reach), Status::success);
    ASSERT_TRUE(reach.test(0));
    ASSERT_EQ(opened_->module->del_procs(peers, {&ep, 1}), Status::success);
    EXPECT_EQ(records_->dynamic_endpoints(), 0u);
}

// A client that joins and leaves without a word (its bml chose another
// module for the server) was never a peer: no id, no event, nothing kept.
TEST_F(UctDynamicJoin, SilentClientLeavesNothing) {
    const auto w = join(runtime_.token, server_channel, client_channel);
    ASSERT_TRUE(w.has_value()) << "no welcome";
    EXPECT_EQ(records_->dynamic_endpoints(), 1u);
    client_->set_source(server_channel);
    ASSERT_TRUE(until([&] { return client_->send(Kind::goodbye, std::span<const std::byte>{}); }));
    EXPECT_TRUE(until([&] { return records_->dynamic_endpoints() == 0; }))
        << "a silent client's record stayed";
    EXPECT_TRUE(runtime_.admitted.empty());
    EXPECT_TRUE(errors.empty()) << "a client that never spoke was reported";
    ASSERT_TRUE(send_as(server_channel, 16));
    until([] { return false; }, std::chrono::milliseconds(100));
    EXPECT_TRUE(delivered.empty()) << "a message after its goodbye was delivered";
}

// Over tcp the module's endpoint for a client is a connection of its own,
// apart from the one the client sends on; here it ends (the client's
// interface it leads to is closed) before the client's goodbye is read.
// Over two connections that order is a race a client exiting after its
// goodbye loses now and then: the goodbye still makes it a departure.
class UctDynamicJoinTcp : public UctDynamicJoin {
  protected:
    UctDynamicJoinTcp() : UctDynamicJoin(tcp) {}
};

TEST_F(UctDynamicJoinTcp, GoodbyeReadAfterTheConnectionEndedIsADeparture) {
    answered_ = raw_peer();
    const auto w = join(runtime_.token, server_channel, client_channel);
    ASSERT_TRUE(w.has_value()) << "no welcome";
    ASSERT_EQ(w->status, 0);
    ASSERT_TRUE(send_as(server_channel, 14));
    ASSERT_TRUE(until([&] { return !delivered.empty(); })) << "the client's message is lost";
    ASSERT_EQ(runtime_.admitted.size(), 1u);
    answered_.reset();
    client_->set_source(server_channel);
    while (!client_->send(Kind::goodbye, std::span<const std::byte>{})) client_->progress();
    ASSERT_TRUE(until([&] { return !errors.empty(); })) << "the client's leaving was not reported";
    EXPECT_EQ(errors[0].second, runtime_.admitted[0]);
    EXPECT_TRUE(errors[0].first & btl::error_flags::departed)
        << "a client that said goodbye was reported failed";
}

}  // namespace
