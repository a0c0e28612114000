// The tcp wire format: round trips, and every kind of malformed input refused.
#include <gtest/gtest.h>

#include <vector>

#include "components/tcp/tcp_wire.hpp"

namespace wire = transit::tcp::wire;
using wire::FrameHeader;
using wire::FrameType;
using wire::ScanResult;

namespace {

std::vector<std::byte> header_bytes(const FrameHeader& h) {
    std::vector<std::byte> b(wire::header_size);
    wire::encode(h, b.data());
    return b;
}

ScanResult scan(const std::vector<std::byte>& b, FrameHeader& out,
                wire::Limits limits = wire::Limits{}) {
    return wire::scan_header(b, limits, out);
}

wire::Handshake our_hello() {
    wire::Handshake h;
    h.kind = wire::HandshakeKind::hello;
    h.rank = 3;
    h.job_id = "job-42";
    for (std::size_t i = 0; i < h.secret.size(); ++i) h.secret[i] = std::byte(i * 7 + 1);
    return h;
}

}  // namespace

TEST(TcpWire, HeaderRoundTrip) {
    FrameHeader h{wire::frame_magic, FrameType::am, 0x41, 0, 1234};
    FrameHeader out;
    ASSERT_EQ(scan(header_bytes(h), out), ScanResult::ok);
    EXPECT_EQ(out.type, FrameType::am);
    EXPECT_EQ(out.tag, 0x41);
    EXPECT_EQ(out.length, 1234u);
}

TEST(TcpWire, ShortHeaderNeedsMore) {
    auto b = header_bytes({wire::frame_magic, FrameType::am, 1, 0, 0});
    b.resize(wire::header_size - 1);
    FrameHeader out;
    EXPECT_EQ(scan(b, out), ScanResult::need_more);
}

TEST(TcpWire, BadMagicRefused) {
    auto b = header_bytes({wire::frame_magic, FrameType::am, 1, 0, 4});
    b[0] = std::byte{0x00};
    FrameHeader out;
    EXPECT_EQ(scan(b, out), ScanResult::bad_magic);
}

TEST(TcpWire, UnknownTypeRefused) {
    auto b = header_bytes({wire::frame_magic, FrameType::am, 1, 0, 4});
    for (int t : {0, 7, 200}) {
        b[1] = std::byte(t);
        FrameHeader out;
        EXPECT_EQ(scan(b, out), ScanResult::bad_type) << t;
    }
}

TEST(TcpWire, ReservedFlagsRefused) {
    auto b = header_bytes({wire::frame_magic, FrameType::am, 1, 0, 4});
    b[3] = std::byte{1};
    FrameHeader out;
    EXPECT_EQ(scan(b, out), ScanResult::bad_flags);
}

TEST(TcpWire, ImpossibleLengthsRefused) {
    wire::Limits limits{.max_am = 1000, .max_rdma = 4096};
    struct Case {
        FrameType type;
        std::uint32_t length;
        bool ok;
    } cases[] = {
        {FrameType::am, 1000, true},
        {FrameType::am, 1001, false},
        {FrameType::am, 0xffffffffu, false},
        {FrameType::put, wire::rdma_request_size - 1, false},
        {FrameType::put, wire::rdma_request_size, true},
        {FrameType::put, wire::rdma_request_size + 4096, true},
        {FrameType::put, wire::rdma_request_size + 4097, false},
        {FrameType::get, wire::rdma_request_size, true},
        {FrameType::get, wire::rdma_request_size + 1, false},
        {FrameType::atomic, wire::atomic_request_size, true},
        {FrameType::atomic, 8, false},
        {FrameType::reply, wire::reply_size - 1, false},
        {FrameType::reply, wire::reply_size + 4096, true},
        {FrameType::reply, 0xfffffff0u, false},
        {FrameType::goodbye, 0, true},
        {FrameType::goodbye, 1, false},
    };
    for (const Case& c : cases) {
        FrameHeader out;
        auto r = scan(header_bytes({wire::frame_magic, c.type, 0, 0, c.length}), out, limits);
        EXPECT_EQ(r, c.ok ? ScanResult::ok : ScanResult::bad_length)
            << "type " << int(c.type) << " length " << c.length;
    }
}

TEST(TcpWire, BodiesRoundTrip) {
    wire::RdmaRequest r{
        0x1122334455667788ull, 0x99aabbccddeeff00ull, 0xdeadbeef000ull, 4096, 77, 0};
    std::byte buf[64];
    wire::encode(r, buf);
    auto r2 = wire::decode_rdma_request(buf);
    EXPECT_EQ(r2.key, r.key);
    EXPECT_EQ(r2.secret, r.secret);
    EXPECT_EQ(r2.address, r.address);
    EXPECT_EQ(r2.size, r.size);
    EXPECT_EQ(r2.op_id, r.op_id);

    wire::AtomicRequest a{1, 9, 2, 3, 4, 5, 0x1a, wire::RdmaKind::atomic_cswap, 1};
    wire::encode(a, buf);
    auto a2 = wire::decode_atomic_request(buf);
    EXPECT_EQ(a2.compare, 4u);
    EXPECT_EQ(a2.op, 0x1a);
    EXPECT_EQ(a2.kind, wire::RdmaKind::atomic_cswap);
    EXPECT_EQ(a2.atomic_flags, 1);

    wire::Reply p{9, -13, 0xabcdef};
    wire::encode(p, buf);
    auto p2 = wire::decode_reply(buf);
    EXPECT_EQ(p2.op_id, 9u);
    EXPECT_EQ(p2.status, -13);
    EXPECT_EQ(p2.value, 0xabcdefu);
}

TEST(TcpWire, BodySizes) {
    EXPECT_EQ(wire::body_size(FrameType::am), 0u);
    EXPECT_EQ(wire::body_size(FrameType::put), wire::rdma_request_size);
    EXPECT_EQ(wire::body_size(FrameType::atomic), wire::atomic_request_size);
    EXPECT_EQ(wire::body_size(FrameType::reply), wire::reply_size);
}

TEST(TcpWire, HandshakeRoundTripAndVerify) {
    const auto h = our_hello();
    const auto bytes = wire::encode(h);
    wire::Handshake out;
    ASSERT_EQ(wire::decode(bytes, out), "");
    EXPECT_EQ(out.kind, wire::HandshakeKind::hello);
    EXPECT_EQ(out.rank, 3u);
    EXPECT_EQ(out.job_id, "job-42");
    EXPECT_EQ(wire::verify(out, "job-42", h.secret), "");
}

// The target names the acceptor's address the connection was meant for
// (0: the listener's own); it travels in what were reserved bytes.
TEST(TcpWire, HandshakeTargetRoundTrip) {
    for (std::uint32_t target : {0u, 1u, 7u, 256u}) {
        auto h = our_hello();
        h.target = target;
        wire::Handshake out;
        ASSERT_EQ(wire::decode(wire::encode(h), out), "");
        EXPECT_EQ(out.target, target);
    }
}

TEST(TcpWire, JoinAndWelcomeRoundTrip) {
    for (auto kind : {wire::HandshakeKind::join, wire::HandshakeKind::welcome}) {
        auto h = our_hello();
        h.kind = kind;
        h.secret[0] = std::byte{0x5a};  // a listening context's token, not the job secret
        wire::Handshake out;
        ASSERT_EQ(wire::decode(wire::encode(h), out), "");
        EXPECT_EQ(out.kind, kind);
        EXPECT_EQ(out.secret, h.secret);
    }
}

TEST(TcpWire, HandshakeWrongSecretOrJobRefused) {
    const auto h = our_hello();
    wire::Handshake out;
    ASSERT_EQ(wire::decode(wire::encode(h), out), "");
    auto other = h.secret;
    other[15] ^= std::byte{1};
    EXPECT_EQ(wire::verify(out, "job-42", other), "wrong job secret");
    EXPECT_NE(wire::verify(out, "job-43", h.secret), "");
}

TEST(TcpWire, MalformedHandshakesRefused) {
    const auto good = wire::encode(our_hello());
    wire::Handshake out;

    EXPECT_NE(wire::decode(std::span(good).first(wire::handshake_size - 1), out), "");

    auto bad_magic = good;
    bad_magic[0] ^= std::byte{0xff};
    EXPECT_EQ(wire::decode(bad_magic, out), "bad handshake magic");

    auto bad_version = good;
    bad_version[8] = std::byte{99};
    EXPECT_NE(wire::decode(bad_version, out).find("version"), std::string::npos);

    auto bad_kind = good;
    bad_kind[10] = std::byte{9};
    EXPECT_NE(wire::decode(bad_kind, out).find("kind"), std::string::npos);

    auto long_job = good;
    long_job[11] = std::byte{200};
    EXPECT_NE(wire::decode(long_job, out).find("too long"), std::string::npos);
}

TEST(TcpWire, LongJobIdTruncatedConsistently) {
    auto h = our_hello();
    h.job_id.assign(100, 'x');
    wire::Handshake out;
    ASSERT_EQ(wire::decode(wire::encode(h), out), "");
    EXPECT_EQ(out.job_id.size(), wire::max_job_id);
    EXPECT_EQ(wire::verify(out, h.job_id, h.secret), "");
}
