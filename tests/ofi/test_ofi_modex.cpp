// btl/ofi against peer addresses that cannot be the provider's: tcp's are
// sockaddr_in (16 bytes), so a blob of another length is refused before it
// reaches fi_av_insert (which would read 16 bytes, or insert a zero-padded
// address leading somewhere else), and the rank is left to other transports.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fixtures/two_rank_runtime.hpp"

namespace {

using namespace transit;
using transit::test::Opened;
using transit::test::TwoRankRuntime;

// The selection must be in the environment before the registry first reads it.
[[maybe_unused]] const bool tcp_selected = [] {
    ::setenv("TRANSIT_MCA_btl", "self,ofi", 1);
    ::setenv("TRANSIT_MCA_btl_ofi_provider_include", "tcp", 1);
    return true;
}();

constexpr const char* module_name = "ofi:tcp;ofi_rxm";

// Whether add_procs accepts rank 1 when its address is `blob` (rank 0, this
// process, must be accepted beside it).
bool accepts_rank1(std::vector<std::byte> blob) {
    TwoRankRuntime runtime;
    runtime.modex_[{1, "btl.ofi.tcp+ofi_rxm"}] = std::move(blob);
    Opened opened(runtime, module_name);
    if (opened.module == nullptr) return false;
    const std::vector<Rank> peers{0, 1};
    std::vector<btl::Endpoint*> endpoints(peers.size(), nullptr);
    btl::Reachability reachable(peers.size());
    EXPECT_EQ(opened.module->add_procs(peers, endpoints, reachable), Status::success);
    EXPECT_TRUE(reachable.test(0)) << "rank 0 (this process) was refused";
    const bool accepted = reachable.test(1);
    EXPECT_EQ(accepted, endpoints[1] != nullptr);
    EXPECT_TRUE(ok(opened.module->del_procs(peers, endpoints)));
    return accepted;
}

bool have_tcp() {
    TwoRankRuntime runtime;
    Opened opened(runtime, module_name);
    return opened.module != nullptr;
}

std::vector<std::byte> bytes(std::initializer_list<int> values) {
    std::vector<std::byte> b;
    for (int v : values) b.push_back(static_cast<std::byte>(v));
    return b;
}

// 127.0.0.1, port 1: nobody listens, but the address is well-formed.
std::vector<std::byte> loopback_address(std::size_t size) {
    std::vector<std::byte> in = bytes({2, 0, 0, 1, 127, 0, 0, 1});
    in.resize(size, std::byte{0x5a});
    return in;
}

TEST(OfiModex, AnAddressOfAnotherLengthThanTheProvidersIsRefused) {
    if (!have_tcp()) GTEST_SKIP() << "libfabric's tcp;ofi_rxm is not available here";
    // Cut short: zero-padded, it would lead to a made-up address.
    EXPECT_FALSE(accepts_rank1(loopback_address(8))) << "an 8-byte address was taken";
    // Longer: libfabric would read the first 16 bytes and ignore the rest.
    EXPECT_FALSE(accepts_rank1(loopback_address(20))) << "a 20-byte address was taken";
    EXPECT_FALSE(accepts_rank1({})) << "an empty address was taken";
}

TEST(OfiModex, AnAddressOfTheProvidersLengthIsTakenAsBefore) {
    if (!have_tcp()) GTEST_SKIP() << "libfabric's tcp;ofi_rxm is not available here";
    std::vector<std::byte> in = loopback_address(8);
    in.resize(16, std::byte{0});
    EXPECT_TRUE(accepts_rank1(in));
}

}  // namespace
