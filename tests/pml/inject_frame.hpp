// Hands a pml message to this process's pml as a transport would: through the
// btl tag table, on the kind's tag, from a peer's endpoint (or none).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "pml/headers.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/module.hpp"

namespace transit::test {

// Delivers `bytes` as a message of kind k that came over `from`'s endpoint
// (any_rank: a transport that does not say; the log then says rank -1) and
// returns what the pml logged.
inline std::string deliver(pml::wire::Kind k, const std::vector<std::byte>& bytes,
                           Rank from = any_rank) {
    StderrCapture capture;
    std::vector<std::byte> copy = bytes;  // a transport's buffer is writable
    btl::Endpoint endpoint(from);
    const btl::Segment seg{copy.data(), copy.size()};
    const btl::ReceiveDescriptor d{from == any_rank ? nullptr : &endpoint, &seg, 1,
                                   pml::wire::tag(k)};
    EXPECT_TRUE(btl::am_table().dispatch(nullptr, d)) << "no pml callback on the tag";
    return capture.text();
}

}  // namespace transit::test
