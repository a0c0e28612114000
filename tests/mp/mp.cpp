#include "tests/mp/mp.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "tests/mp/mp_internal.hpp"

namespace transit::mp {
namespace {
std::unique_ptr<rt::Runtime> the_runtime;
}

void detail::set_runtime(std::unique_ptr<rt::Runtime> rt) {
    the_runtime = std::move(rt);
}

rt::Runtime& runtime() {
    if (!the_runtime)
        throw std::logic_error("transit::mp::runtime() used outside the harness's main()");
    return *the_runtime;
}

bool barrier() {
    const Status s = runtime().fence();
    EXPECT_TRUE(ok(s)) << "fence failed: " << to_string(s);
    return ok(s);
}

std::vector<std::vector<std::byte>> all_gather(std::string_view key,
                                               std::span<const std::byte> mine) {
    rt::Runtime& rt = runtime();
    std::vector<std::vector<std::byte>> all(rt.size());
    const Status sent = rt.modex_send(key, mine);
    EXPECT_TRUE(ok(sent)) << "modex_send(" << key << "): " << to_string(sent);
    if (!barrier()) return all;
    for (Rank r = 0; r < rt.size(); ++r) {
        const Status got = rt.modex_recv(r, key, all[r]);
        EXPECT_TRUE(ok(got) || got == Status::not_found)
            << "modex_recv(" << r << ", " << key << "): " << to_string(got);
    }
    return all;
}

}  // namespace transit::mp
