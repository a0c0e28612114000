// libFuzzer target for the printable address of a listening context, as a
// client reads it (from the user, from a name lookup): pml::parse_address,
// what Context::connect runs.  An accepted address has a 128-bit token, a node
// and a transport blob, and prints back (format_address) to text that parses
// to the same address.  See pml_address.cmake.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pml/address.hpp"

namespace pml = transit::pml;
namespace rt = transit::rt;

namespace {

bool same(const rt::PeerAddress& a, const rt::PeerAddress& b) {
    return a.token == b.token && a.node_id == b.node_id && a.blobs == b.blobs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    rt::PeerAddress a;
    const std::string bad = pml::parse_address(text, a);
    if (!bad.empty()) {
        // One short printable line, whatever the input: it goes into a log.
        if (bad.size() > 200) __builtin_trap();
        for (const char c : bad)
            if (c < 0x20 || c > 0x7e) __builtin_trap();
        return 0;
    }
    if (a.node_id.empty() && text.find(";node=") == std::string_view::npos) __builtin_trap();
    if (a.blobs.empty()) __builtin_trap();
    for (const auto& [key, blob] : a.blobs)
        if (!key.starts_with("btl.")) __builtin_trap();
    rt::PeerAddress again;
    if (!pml::parse_address(pml::format_address(a), again).empty() || !same(a, again))
        __builtin_trap();
    return 0;
}
