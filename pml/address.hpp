// The printable address of a listening context (Context::listen), one line:
//   transit:1;token=<32 hex digits>;node=<hex>;<modex key>=<hex blob>...
// token: the context's access token; node: the node id (a client on the same
// node may take node-local paths); then the modex blobs of each transport that
// carries peers outside the job (btl::flags::dynamic_peers), as it published
// them for the job ("btl.tcp.1": its interfaces and ports).
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dynamic_runtime.hpp"
#include "transit/btl/module.hpp"

namespace transit::pml {

std::string format_address(const rt::PeerAddress& a);

// What a listening process's address holds: its token (made now if need be),
// its node and the blobs of each of `modules` that carries peers outside the
// job (one with the btl::Listener capability publishes its part now).  No
// blob: none of them carries such peers.  The pml's listen and the Open MPI
// adapter both address themselves so.
rt::PeerAddress listening_address(rt::DynamicRuntime& runtime,
                                  std::span<btl::Module* const> modules);

// "" and `out` filled, or why the text is no address.
std::string parse_address(std::string_view text, rt::PeerAddress& out);

}  // namespace transit::pml
