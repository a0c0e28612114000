// What a listening context puts in its address (pml/address.hpp): apart from
// the text format (address.cpp), which reads nothing but the text and is
// fuzzed alone (tests/fuzz/fuzz_pml_address.cpp).
#include "pml/address.hpp"
#include "transit/btl/component.hpp"

namespace transit::pml {

rt::PeerAddress listening_address(rt::DynamicRuntime& runtime,
                                  std::span<btl::Module* const> modules) {
    rt::PeerAddress a;
    a.token = runtime.listen_token();
    a.node_id = runtime.node_id();
    for (btl::Module* m : modules) {
        if (!(m->attributes().flags & btl::flags::dynamic_peers)) continue;
        if (auto* l = btl::capability<btl::Listener>(*m); l && !ok(l->listen())) continue;
        const std::string prefix = "btl." + m->component().name() + ".";
        for (const auto& [key, blob] : runtime.published())
            if (key.starts_with(prefix)) a.blobs[key] = blob;
    }
    return a;
}

}  // namespace transit::pml
