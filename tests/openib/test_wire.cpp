#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "components/openib/openib_wire.hpp"

namespace w = transit::openib::wire;

namespace {

w::CmMessage sample_cm() {
    w::CmMessage m;
    m.type = w::CmType::reply;
    m.src_rank = 3;
    m.dst_rank = 7;
    m.job_key = 0x0123456789abcdefULL;
    m.src.qpn = 0x123456;
    m.src.psn = 0xabcdef;
    m.src.lid = 0x1234;
    m.src.mtu = 5;
    m.src.rd_atomic = 16;
    for (int i = 0; i < 16; ++i) m.src.gid[i] = static_cast<std::uint8_t>(0xf0 + i);
    m.dst_qpn = 0x000042;
    m.credits = 64;
    return m;
}

}  // namespace

TEST(OpenibWire, FragHeaderRoundTrip) {
    w::FragHeader h{w::FragType::data, 0x41, w::frag_flags::returns_control, 513};
    std::byte buf[w::FragHeader::size + 4]{};
    w::encode(h, buf);
    auto d = w::decode_frag(buf);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->type, w::FragType::data);
    EXPECT_EQ(d->tag, 0x41);
    EXPECT_EQ(d->flags, w::frag_flags::returns_control);
    EXPECT_EQ(d->credits, 513);
}

TEST(OpenibWire, FragHeaderIsLittleEndian) {
    w::FragHeader h{w::FragType::credit, 0, 0, 0x0102};
    std::byte buf[w::FragHeader::size];
    w::encode(h, buf);
    EXPECT_EQ(buf[0], std::byte{2});
    EXPECT_EQ(buf[4], std::byte{0x02});
    EXPECT_EQ(buf[5], std::byte{0x01});
}

TEST(OpenibWire, FragHeaderRejectsMalformed) {
    std::byte buf[w::FragHeader::size + 8]{};
    w::encode(w::FragHeader{w::FragType::data, 1, 0, 0}, buf);
    EXPECT_FALSE(w::decode_frag(std::span(buf, 7))) << "short";
    auto corrupt = [&](std::size_t at, std::byte v) {
        std::byte copy[sizeof buf];
        std::memcpy(copy, buf, sizeof buf);
        copy[at] = v;
        return w::decode_frag(copy);
    };
    EXPECT_FALSE(corrupt(0, std::byte{0})) << "type 0";
    EXPECT_FALSE(corrupt(0, std::byte{5})) << "unknown type";
    EXPECT_FALSE(corrupt(2, std::byte{0x80})) << "unknown flag";
    EXPECT_FALSE(corrupt(3, std::byte{1})) << "reserved byte";
    EXPECT_FALSE(corrupt(7, std::byte{1})) << "reserved word";
    // A credit-only fragment has no tag and no payload.
    w::encode(w::FragHeader{w::FragType::credit, 0, 0, 4}, buf);
    EXPECT_TRUE(w::decode_frag(std::span(buf, w::FragHeader::size)));
    EXPECT_FALSE(w::decode_frag(std::span(buf, w::FragHeader::size + 1)));
    w::encode(w::FragHeader{w::FragType::credit, 9, 0, 4}, buf);
    EXPECT_FALSE(w::decode_frag(std::span(buf, w::FragHeader::size)));
}

TEST(OpenibWire, AtomicRequestAndReplyRoundTrip) {
    w::AtomicRequest r{77, 0x7fff12345678, 5, 6, 0xdeadbeef, 0x14, w::AtomicKind::cswap, 1};
    std::byte buf[w::AtomicRequest::size];
    w::encode(r, buf);
    auto d = w::decode_atomic_request(buf);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->request_id, 77u);
    EXPECT_EQ(d->remote_address, 0x7fff12345678u);
    EXPECT_EQ(d->operand, 5u);
    EXPECT_EQ(d->compare, 6u);
    EXPECT_EQ(d->rkey, 0xdeadbeefu);
    EXPECT_EQ(d->op, 0x14);
    EXPECT_EQ(d->kind, w::AtomicKind::cswap);
    EXPECT_EQ(d->bits32, 1);
    buf[38] = std::byte{9};
    EXPECT_FALSE(w::decode_atomic_request(buf)) << "bad kind";
    EXPECT_FALSE(w::decode_atomic_request(std::span(buf, 39))) << "wrong size";

    w::AtomicReply rep{77, 0xffffffffffffffffULL, -11};
    std::byte rb[w::AtomicReply::size];
    w::encode(rep, rb);
    auto dr = w::decode_atomic_reply(rb);
    ASSERT_TRUE(dr);
    EXPECT_EQ(dr->request_id, 77u);
    EXPECT_EQ(dr->old_value, 0xffffffffffffffffULL);
    EXPECT_EQ(dr->status, -11);
    rb[20] = std::byte{1};
    EXPECT_FALSE(w::decode_atomic_reply(rb));
}

TEST(OpenibWire, CmRoundTrip) {
    w::CmMessage m = sample_cm();
    std::byte buf[w::CmMessage::size];
    w::encode(m, buf);
    auto d = w::decode_cm(buf);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->type, m.type);
    EXPECT_EQ(d->src_rank, 3u);
    EXPECT_EQ(d->dst_rank, 7u);
    EXPECT_EQ(d->job_key, m.job_key);
    EXPECT_EQ(d->src.qpn, m.src.qpn);
    EXPECT_EQ(d->src.psn, m.src.psn);
    EXPECT_EQ(d->src.lid, m.src.lid);
    EXPECT_EQ(d->src.mtu, 5);
    EXPECT_EQ(d->src.rd_atomic, 16);
    EXPECT_EQ(d->src.gid, m.src.gid);
    EXPECT_EQ(d->dst_qpn, m.dst_qpn);
    EXPECT_EQ(d->credits, 64);
}

TEST(OpenibWire, CmRejectsMalformed) {
    auto encoded = [](const w::CmMessage& m) {
        std::vector<std::byte> b(w::CmMessage::size);
        w::encode(m, b.data());
        return b;
    };
    w::CmMessage m = sample_cm();
    auto b = encoded(m);
    EXPECT_FALSE(w::decode_cm(std::span(b).first(w::CmMessage::size - 1)));
    b[0] = std::byte{0};
    EXPECT_FALSE(w::decode_cm(b)) << "magic";
    b = encoded(m);
    b[4] = std::byte{2};
    EXPECT_FALSE(w::decode_cm(b)) << "version";

    auto bad = [&](auto mutate) {
        w::CmMessage x = sample_cm();
        mutate(x);
        return !w::decode_cm(encoded(x));
    };
    EXPECT_TRUE(bad([](auto& x) { x.src.qpn = 0; }));
    EXPECT_TRUE(bad([](auto& x) { x.src.qpn = 0x1000000; })) << "QPNs are 24 bits";
    EXPECT_TRUE(bad([](auto& x) { x.src.psn = 0x1000000; }));
    EXPECT_TRUE(bad([](auto& x) { x.src.mtu = 0; }));
    EXPECT_TRUE(bad([](auto& x) { x.src.mtu = 6; }));
    EXPECT_TRUE(bad([](auto& x) { x.credits = 0; })) << "a reply must grant credits";
    EXPECT_TRUE(bad([](auto& x) {
        x.type = w::CmType::ready;  // ready grants nothing
    }));
    EXPECT_TRUE(bad([](auto& x) {
        x.type = w::CmType::reject;
        x.credits = 0;
        x.dst_qpn = 0;  // a reject must say which request it answers
    }));
    EXPECT_FALSE(bad([](auto& x) {
        x.type = w::CmType::request;
        x.dst_qpn = 0;
    }));
}

TEST(OpenibWire, CmSurvivesRandomBytes) {
    std::mt19937 rng(42);
    std::vector<std::byte> buf(w::CmMessage::size);
    int accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        w::encode(sample_cm(), buf.data());
        buf[rng() % buf.size()] = static_cast<std::byte>(rng());
        if (auto d = w::decode_cm(buf)) {
            ++accepted;
            EXPECT_GE(d->src.mtu, 1);
            EXPECT_LE(d->src.mtu, 5);
            EXPECT_LE(d->src.qpn, 0xffffffu);
        }
    }
    EXPECT_GT(accepted, 0);  // changes in free fields (ranks, gid) still decode
}

TEST(OpenibWire, ModexRoundTripAndValidation) {
    std::vector<w::PortAddress> ports(2);
    ports[0].link = w::LinkLayer::infiniband;
    ports[0].port = 1;
    ports[0].mtu = 5;
    ports[0].lid = 17;
    ports[0].subnet_prefix = 0xfe80000000000000ULL;
    ports[0].ud_qpn = 0x99;
    ports[0].qkey = 0x11111111;
    ports[0].recv_size = 16392;
    ports[1] = ports[0];
    ports[1].link = w::LinkLayer::ethernet;
    ports[1].port = 2;
    ports[1].gid[15] = 9;

    std::vector<std::byte> blob;
    w::encode_modex(std::span<const w::PortAddress>(ports), blob);
    ASSERT_EQ(blob.size(), w::modex_header + 2 * w::PortAddress::size);
    std::vector<w::PortAddress> back;
    ASSERT_TRUE(w::decode_modex(blob, back));
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].lid, 17);
    EXPECT_EQ(back[0].subnet_prefix, ports[0].subnet_prefix);
    EXPECT_EQ(back[1].link, w::LinkLayer::ethernet);
    EXPECT_EQ(back[1].gid[15], 9);
    EXPECT_EQ(back[1].qkey, 0x11111111u);
    EXPECT_EQ(back[1].recv_size, 16392u);

    EXPECT_FALSE(w::decode_modex(std::span(blob).first(blob.size() - 1), back));
    EXPECT_TRUE(back.empty());
    auto b2 = blob;
    b2[4] = std::byte{3};  // count says 3, two present
    EXPECT_FALSE(w::decode_modex(b2, back));
    b2 = blob;
    b2[w::modex_header + 1] = std::byte{0};  // port 0 does not exist
    EXPECT_FALSE(w::decode_modex(b2, back));
    b2 = blob;
    b2[0] = std::byte{0};
    EXPECT_FALSE(w::decode_modex(b2, back));
    ports[1].recv_size = 4;  // smaller than a header: nobody could send to it
    w::encode_modex(std::span<const w::PortAddress>(ports), b2);
    EXPECT_FALSE(w::decode_modex(b2, back));
}

TEST(OpenibWire, RemoteKeyRoundTripAndChecks) {
    w::RemoteKey k{0x7f0000001000, 4096, 0xabcd, w::access::remote_read | w::access::remote_write};
    std::byte buf[w::RemoteKey::size];
    w::encode(k, buf);
    auto d = w::decode_remote_key(buf);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->address, k.address);
    EXPECT_EQ(d->length, 4096u);
    EXPECT_EQ(d->rkey, 0xabcdu);
    EXPECT_TRUE(d->allows(k.address, 4096, w::access::remote_write));
    EXPECT_TRUE(d->allows(k.address + 4000, 96, w::access::remote_read));
    EXPECT_FALSE(d->allows(k.address + 4000, 97, w::access::remote_read)) << "past the end";
    EXPECT_FALSE(d->allows(k.address - 1, 8, w::access::remote_read)) << "before the start";
    EXPECT_FALSE(d->allows(k.address, 8, w::access::remote_atomic)) << "not allowed by the owner";
    EXPECT_FALSE(d->allows(~std::uint64_t{0} - 2, 8, w::access::remote_read)) << "wraps";

    EXPECT_FALSE(w::decode_remote_key(nullptr));
    w::encode(w::RemoteKey{1, 0, 1, 0}, buf);
    EXPECT_FALSE(w::decode_remote_key(buf)) << "empty";
    w::encode(w::RemoteKey{~std::uint64_t{0} - 10, 100, 1, 0}, buf);
    EXPECT_FALSE(w::decode_remote_key(buf)) << "wraps";
    w::encode(w::RemoteKey{4096, 100, 1, 0x10}, buf);
    EXPECT_FALSE(w::decode_remote_key(buf)) << "unknown access bit";
}
