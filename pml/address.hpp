// The printable address of a listening context (Context::listen), one line:
//   transit:1;token=<32 hex digits>;node=<hex>;<modex key>=<hex blob>...
// token: the context's access token; node: the node id (a client on the same
// node may take node-local paths); then the modex blobs of each transport that
// carries peers outside the job (btl::flags::dynamic_peers), as it published
// them for the job ("btl.tcp.1": its interfaces and ports).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dynamic_runtime.hpp"

namespace transit::pml {

std::string format_address(const rt::PeerAddress& a);

// "" and `out` filled, or why the text is no address.
std::string parse_address(std::string_view text, rt::PeerAddress& out);

}  // namespace transit::pml
