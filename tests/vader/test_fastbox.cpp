#include "components/vader/vader_fastbox.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/vader/fork_util.hpp"

namespace transit::vader {
namespace {

constexpr std::uint32_t box_size = 4096;

// Payload bytes that look like valid headers: a reader that trusted stale
// payload as a header would deliver garbage.
void fill(char* p, std::uint32_t len, std::uint32_t n) {
    const std::uint32_t fake = Fastbox::encode(Fastbox::type_message, 7, 8);
    for (std::uint32_t i = 0; i < len; ++i)
        p[i] = (i / 4) % 2 ? static_cast<char>(fake >> (8 * (i % 4))) : static_cast<char>(n + i);
}

bool check(const char* p, std::uint32_t len, std::uint32_t n) {
    std::vector<char> want(len);
    fill(want.data(), len, n);
    return len == 0 || std::memcmp(want.data(), p, len) == 0;  // memcmp wants non-null pointers
}

std::uint32_t size_of(std::uint32_t n) {
    return (n * 37) % (Fastbox::max_payload(box_size) + 1);
}

TEST(VaderFastbox, FillsThenRefusesThenDrainsAcrossTheWrap) {
    test::SharedArea area(Fastbox::bytes(box_size));
    FastboxReader reader(area.get(), box_size);
    FastboxWriter writer(area.get(), box_size);
    std::vector<char> buf(Fastbox::max_payload(box_size));
    std::uint32_t sent = 0;
    std::uint32_t got = 0;
    for (int round = 0; round < 50; ++round) {
        while (true) {
            const std::uint32_t len = size_of(sent);
            fill(buf.data(), len, sent);
            if (!writer.write(static_cast<std::uint8_t>(sent), buf.data(), len)) break;
            ++sent;
        }
        ASSERT_GT(sent, got) << "an empty box refused a message";
        const int n = reader.poll(
            [&](const char* p, std::uint32_t len, std::uint8_t tag) {
                EXPECT_EQ(tag, static_cast<std::uint8_t>(got));
                EXPECT_EQ(len, size_of(got));
                EXPECT_TRUE(check(p, len, got)) << "message " << got;
                ++got;
            },
            1 << 20);
        EXPECT_GT(n, 0);
        EXPECT_EQ(got, sent);
        EXPECT_FALSE(reader.ready());
    }
}

TEST(VaderFastbox, EmptyPayloadIsDelivered) {
    test::SharedArea area(Fastbox::bytes(box_size));
    FastboxReader reader(area.get(), box_size);
    FastboxWriter writer(area.get(), box_size);
    ASSERT_TRUE(writer.write(0, nullptr, 0));
    int seen = 0;
    EXPECT_EQ(
        reader.poll([&](const char*, std::uint32_t len, std::uint8_t) { seen += len == 0; }, 8), 1);
    EXPECT_EQ(seen, 1);
}

TEST(VaderFastbox, WriterProcessToReaderProcess) {
    constexpr std::uint32_t total = 50000;  // hundreds of times round the box
    test::SharedArea area(Fastbox::bytes(box_size));
    FastboxReader reader(area.get(), box_size);
    const pid_t child = test::spawn([&] {
        FastboxWriter writer(area.get(), box_size);
        for (std::uint32_t n = 0; n < total; ++n) {
            const std::uint32_t len = size_of(n);
            // Filled in place, as sendi packs a convertor straight into the box.
            while (!writer.write_parts(static_cast<std::uint8_t>(n), nullptr, 0, len,
                                       [&](char* p) { fill(p, len, n); }))
                sched_yield();
        }
        return true;
    });
    std::uint32_t got = 0;
    std::uint32_t bad = 0;
    while (got < total && bad == 0) {
        const int n = reader.poll(
            [&](const char* p, std::uint32_t len, std::uint8_t tag) {
                if (tag != static_cast<std::uint8_t>(got) || len != size_of(got) ||
                    !check(p, len, got))
                    ++bad;
                ++got;
            },
            64);
        if (n == 0) sched_yield();
    }
    EXPECT_EQ(bad, 0u) << "first bad message near " << got;
    if (bad != 0) ::kill(child, SIGKILL);  // it would wait for room forever
    EXPECT_EQ(test::join(child), bad != 0 ? 128 + SIGKILL : 0);
}

// A record no writer makes (from a broken or hostile peer) must not make the
// reader deliver bytes outside the box: the box stops, what came before stays
// delivered.
void expect_stops_at_bad_record(std::uint32_t bad_header) {
    test::SharedArea area(Fastbox::bytes(box_size));
    FastboxReader reader(area.get(), box_size);
    FastboxWriter writer(area.get(), box_size);
    const char good[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_TRUE(writer.write(3, good, sizeof good));
    // The next record's header, where the writer zeroed it.
    auto* data = static_cast<char*>(area.get()) + Fastbox::bytes(box_size) - box_size;
    std::memcpy(data + Fastbox::record(sizeof good), &bad_header, sizeof bad_header);
    int delivered = 0;
    EXPECT_EQ(reader.poll(
                  [&](const char*, std::uint32_t len, std::uint8_t tag) {
                      EXPECT_EQ(len, sizeof good);
                      EXPECT_EQ(tag, 3);
                      ++delivered;
                  },
                  8),
              1);
    EXPECT_EQ(delivered, 1);
    EXPECT_TRUE(reader.broken());
    EXPECT_FALSE(reader.ready());
    EXPECT_EQ(reader.poll([&](const char*, std::uint32_t, std::uint8_t) { ++delivered; }, 8), 0);
    EXPECT_EQ(delivered, 1);
}

TEST(VaderFastbox, LengthPastTheLimitStopsTheBox) {
    expect_stops_at_bad_record(Fastbox::encode(Fastbox::type_message, 1, box_size));
}

TEST(VaderFastbox, LengthPastTheEndStopsTheBox) {
    // Within the limit, but running past the end of the box from where it sits.
    const std::uint32_t len = Fastbox::max_payload(box_size);
    test::SharedArea area(Fastbox::bytes(box_size));
    FastboxReader reader(area.get(), box_size);
    auto* data = static_cast<char*>(area.get()) + Fastbox::bytes(box_size) - box_size;
    const std::uint32_t at = box_size - 64;  // a record of len bytes cannot fit here
    // Walk the reader to `at` with records of zero length (8 bytes each).
    const std::uint32_t empty = Fastbox::encode(Fastbox::type_message, 0, 0);
    for (std::uint32_t o = 0; o < at; o += 8) std::memcpy(data + o, &empty, sizeof empty);
    const std::uint32_t bad = Fastbox::encode(Fastbox::type_message, 0, len);
    std::memcpy(data + at, &bad, sizeof bad);
    int delivered = 0;
    reader.poll([&](const char*, std::uint32_t, std::uint8_t) { ++delivered; }, 1 << 20);
    EXPECT_EQ(delivered, static_cast<int>(at / 8));
    EXPECT_TRUE(reader.broken());
}

TEST(VaderFastbox, UnknownTypeStopsTheBox) {
    expect_stops_at_bad_record(Fastbox::encode(3, 0, 8));
}

}  // namespace
}  // namespace transit::vader
