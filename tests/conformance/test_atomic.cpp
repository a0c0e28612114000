// Atomics: every operation the module announces, non-fetching and fetching, at
// 64 and 32 bits, and compare-and-swap.  Expected values come from a reference
// written here (not from btl::apply_atomic, which self itself uses), and the
// target is read through the service, with its neighbouring bytes checked.
#include <fmt/format.h>

#include <cstring>

#include "tests/conformance/btl_test.hpp"
#include "tests/conformance/suite_env.hpp"

namespace transit::conformance {
namespace {

using btl::AtomicOp;

struct OpInfo {
    AtomicOp op;
    std::uint32_t support;
    const char* name;
};

constexpr OpInfo all_ops[] = {
    {AtomicOp::add, btl::atomic_support::add, "add"},
    {AtomicOp::and_, btl::atomic_support::and_, "and"},
    {AtomicOp::or_, btl::atomic_support::or_, "or"},
    {AtomicOp::xor_, btl::atomic_support::xor_, "xor"},
    {AtomicOp::land, btl::atomic_support::land, "land"},
    {AtomicOp::lor, btl::atomic_support::lor, "lor"},
    {AtomicOp::lxor, btl::atomic_support::lxor, "lxor"},
    {AtomicOp::swap, btl::atomic_support::swap, "swap"},
    {AtomicOp::min, btl::atomic_support::min, "min"},
    {AtomicOp::max, btl::atomic_support::max, "max"},
};

// (initial target value, operand): zero and non-zero for the logical ops,
// negative values for the signed min and max, carries for add.
constexpr std::pair<std::uint64_t, std::uint64_t> cases[] = {
    {5, 3},
    {0, 0x55},
    {0x55, 0},
    {0xfffffffffffffff0ull, 7},
    {0x8000000000000001ull, 0x7fffffffffffffffull},
    {0x00000000ffffffffull, 1},
    {0x0f0f0f0f0f0f0f0full, 0xff00ff00ff00ff00ull},
};

template <typename T>
T reference(AtomicOp op, T old, T operand) {
    using S = std::make_signed_t<T>;
    switch (op) {
        case AtomicOp::add:
            return static_cast<T>(old + operand);
        case AtomicOp::and_:
            return old & operand;
        case AtomicOp::or_:
            return old | operand;
        case AtomicOp::xor_:
            return old ^ operand;
        case AtomicOp::land:
            return (old != 0 && operand != 0) ? 1 : 0;
        case AtomicOp::lor:
            return (old != 0 || operand != 0) ? 1 : 0;
        case AtomicOp::lxor:
            return ((old != 0) != (operand != 0)) ? 1 : 0;
        case AtomicOp::swap:
            return operand;
        case AtomicOp::min:
            return static_cast<S>(operand) < static_cast<S>(old) ? operand : old;
        case AtomicOp::max:
            return static_cast<S>(operand) > static_cast<S>(old) ? operand : old;
    }
    return old;
}

std::uint64_t expected(AtomicOp op, std::uint64_t old, std::uint64_t operand, bool bits32) {
    if (bits32)
        return reference<std::uint32_t>(op, static_cast<std::uint32_t>(old),
                                        static_cast<std::uint32_t>(operand));
    return reference<std::uint64_t>(op, old, operand);
}

constexpr std::uint64_t target_offset = 4096;  // 8-aligned: the region is
constexpr std::byte sentinel{0xa5};

class Atomic : public BtlTest {
  protected:
    std::string missing(bool fetching, bool bits32, std::uint32_t extra = 0) const {
        const std::uint32_t need = fetching ? btl::flags::atomic_fops : btl::flags::atomic_ops;
        if (!has_flags(need))
            return component_ + (fetching ? " offers no fetching atomics (flags::atomic_fops)"
                                          : " offers no atomics (flags::atomic_ops)");
        if (bits32 && !has_atomics(btl::atomic_support::bits32))
            return component_ + " offers no 32-bit atomics (atomic_support::bits32)";
        if (extra && !has_atomics(extra))
            return component_ + " does not announce this operation in atomic_flags";
        return "";
    }

    std::size_t width(bool bits32) const { return bits32 ? 4 : 8; }

    // Writes `value` at the target with sentinels on both sides.
    bool set_target(std::uint64_t value, bool bits32) {
        std::byte bytes[24];
        std::fill(std::begin(bytes), std::end(bytes), sentinel);
        put_value(bytes + 8, value, bits32);
        return remote_write(target_offset - 8, bytes);
    }

    // The target's value; fails the case if the sentinels around it moved.
    std::uint64_t read_target(bool bits32, const std::string& what) {
        const std::vector<std::byte> bytes = remote_read(target_offset - 8, 24);
        if (bytes.size() != 24) {
            ADD_FAILURE() << what << ": reading the target failed";
            return 0;
        }
        for (std::size_t i = 0; i < 24; ++i)
            if ((i < 8 || i >= 8 + width(bits32)) && bytes[i] != sentinel)
                ADD_FAILURE() << what << ": byte " << int(i) - 8
                              << " next to the target was modified";
        return get_value(bytes.data() + 8, bits32);
    }

    static void put_value(std::byte* p, std::uint64_t v, bool bits32) {
        if (bits32) {
            const auto v32 = static_cast<std::uint32_t>(v);
            std::memcpy(p, &v32, 4);
        } else {
            std::memcpy(p, &v, 8);
        }
    }
    static std::uint64_t get_value(const std::byte* p, bool bits32) {
        if (bits32) {
            std::uint32_t v32;
            std::memcpy(&v32, p, 4);
            return v32;
        }
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
    }
    static std::uint64_t truncate(std::uint64_t v, bool bits32) {
        return bits32 ? static_cast<std::uint32_t>(v) : v;
    }

    // Every announced op over every case; returns how many ops were tried.
    int run_ops(bool fetching, bool bits32) {
        alignas(8) std::uint64_t result[2] = {0, 0};
        btl::RegistrationHandle* lh = register_local(result, sizeof result);
        const int flags = bits32 ? btl::atomic_flags::bits32 : 0;
        int tried = 0;
        for (const OpInfo& op : all_ops) {
            if (!has_atomics(op.support)) continue;
            ++tried;
            for (auto [initial, operand] : cases) {
                const std::string what = fmt::format(
                    "{}{} {}-bit: target {:#x}, operand {:#x}", fetching ? "fetch-" : "", op.name,
                    bits32 ? 32 : 64, truncate(initial, bits32), truncate(operand, bits32));
                if (!set_target(initial, bits32)) return tried;
                result[0] = 0xdeadbeefdeadbeefull;
                const std::uint64_t addr = remote_address(target_offset);
                const Status s = run_atomic(fetching ? AtomicKind::fop : AtomicKind::op,
                                            {.local = fetching ? result : nullptr,
                                             .remote = addr,
                                             .local_handle = fetching ? lh : nullptr,
                                             .remote_handle = remote_handle(),
                                             .op = op.op,
                                             .operand = operand,
                                             .flags = flags},
                                            what);
                EXPECT_TRUE(ok(s)) << what << ": " << to_string(s);
                if (!ok(s)) continue;
                if (fetching) {
                    EXPECT_EQ(get_value(reinterpret_cast<std::byte*>(result), bits32),
                              truncate(initial, bits32))
                        << what << ": fetched value";
                }
                EXPECT_EQ(read_target(bits32, what), expected(op.op, initial, operand, bits32))
                    << what << ": target afterwards";
            }
        }
        return tried;
    }

    void run_cswap(bool bits32) {
        alignas(8) std::uint64_t result[2] = {0, 0};
        btl::RegistrationHandle* lh = register_local(result, sizeof result);
        const int flags = bits32 ? btl::atomic_flags::bits32 : 0;
        const std::uint64_t addr = remote_address(target_offset);
        struct Step {
            std::uint64_t compare, value, old_expected, after;
        };
        const std::uint64_t a = 0x1122334455667788ull, b = 0x8877665544332211ull;
        const std::uint64_t c = 0x0102030405060708ull;
        const Step steps[] = {
            {a, b, a, b},  // matches: swapped
            {a, c, b, b},  // no longer matches: unchanged, old value still returned
            {b, 0, b, 0},  // to zero
            {0, a, 0, a},  // from zero
        };
        ASSERT_TRUE(set_target(a, bits32));
        for (const Step& st : steps) {
            const std::string what =
                fmt::format("cswap {}-bit: compare {:#x}, value {:#x}", bits32 ? 32 : 64,
                            truncate(st.compare, bits32), truncate(st.value, bits32));
            result[0] = 0xdeadbeefdeadbeefull;
            const Status s = run_atomic(AtomicKind::cswap,
                                        {.local = result,
                                         .remote = addr,
                                         .local_handle = lh,
                                         .remote_handle = remote_handle(),
                                         .operand = st.value,
                                         .compare = st.compare,
                                         .flags = flags},
                                        what);
            ASSERT_TRUE(ok(s)) << what << ": " << to_string(s);
            EXPECT_EQ(get_value(reinterpret_cast<std::byte*>(result), bits32),
                      truncate(st.old_expected, bits32))
                << what << ": fetched value";
            EXPECT_EQ(read_target(bits32, what), truncate(st.after, bits32)) << what;
        }
    }
};

TEST_P(Atomic, Ops64) {
    if (auto why = missing(false, false); !why.empty()) GTEST_SKIP() << why;
    if (run_ops(false, false) == 0) GTEST_SKIP() << component_ << " announces no operation";
}

TEST_P(Atomic, Ops32) {
    if (auto why = missing(false, true); !why.empty()) GTEST_SKIP() << why;
    if (run_ops(false, true) == 0) GTEST_SKIP() << component_ << " announces no operation";
}

TEST_P(Atomic, FetchOps64) {
    if (auto why = missing(true, false); !why.empty()) GTEST_SKIP() << why;
    if (run_ops(true, false) == 0) GTEST_SKIP() << component_ << " announces no operation";
}

TEST_P(Atomic, FetchOps32) {
    if (auto why = missing(true, true); !why.empty()) GTEST_SKIP() << why;
    if (run_ops(true, true) == 0) GTEST_SKIP() << component_ << " announces no operation";
}

TEST_P(Atomic, CompareSwap64) {
    if (auto why = missing(true, false, btl::atomic_support::cswap); !why.empty())
        GTEST_SKIP() << why;
    run_cswap(false);
}

TEST_P(Atomic, CompareSwap32) {
    if (auto why = missing(true, true, btl::atomic_support::cswap); !why.empty())
        GTEST_SKIP() << why;
    run_cswap(true);
}

TEST_P(Atomic, MisalignedTargetIsRefused) {
    if (auto why = missing(true, false); !why.empty()) GTEST_SKIP() << why;
    if (!has_atomics(btl::atomic_support::add))
        GTEST_SKIP() << component_ << " does not announce add";
    alignas(8) std::uint64_t result = 0;
    btl::RegistrationHandle* lh = register_local(&result, sizeof result);
    const Status s = run_atomic(AtomicKind::fop,
                                {.local = &result,
                                 .remote = remote_address(target_offset + 4),
                                 .local_handle = lh,
                                 .remote_handle = remote_handle(),
                                 .op = AtomicOp::add,
                                 .operand = 1},
                                "a 64-bit fetch-add on a 4-byte aligned address");
    EXPECT_FALSE(ok(s)) << "a misaligned 64-bit atomic was accepted";
}

// A value that names no operation (a caller's bug, or a cast from the wire) is
// refused, and neither the target nor the fetch buffer changes.
TEST_P(Atomic, UnknownOpIsRefused) {
    if (auto why = missing(true, false); !why.empty()) GTEST_SKIP() << why;
    constexpr std::uint64_t initial = 0x0123456789abcdefull;
    ASSERT_TRUE(set_target(initial, false));
    alignas(8) std::uint64_t result = 0xdeadbeefdeadbeefull;
    btl::RegistrationHandle* lh = register_local(&result, sizeof result);
    for (const std::uint16_t raw :
         {std::uint16_t{0}, std::uint16_t{0x0013}, std::uint16_t{0xffff}}) {
        const std::string what = fmt::format("a fetching atomic with op code {:#x}", raw);
        const Status s = run_atomic(AtomicKind::fop,
                                    {.local = &result,
                                     .remote = remote_address(target_offset),
                                     .local_handle = lh,
                                     .remote_handle = remote_handle(),
                                     .op = static_cast<AtomicOp>(raw),
                                     .operand = 1},
                                    what);
        EXPECT_FALSE(ok(s)) << what << " was accepted";
        EXPECT_EQ(result, 0xdeadbeefdeadbeefull) << what << ": the fetch buffer was written";
        EXPECT_EQ(read_target(false, what), initial) << what << ": the target changed";
    }
}

INSTANTIATE_TEST_SUITE_P(btl, Atomic, ::testing::ValuesIn(components_under_test()),
                         component_param_name);

}  // namespace
}  // namespace transit::conformance
