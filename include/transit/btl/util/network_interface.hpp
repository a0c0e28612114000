// Which network interface a transport that uses one interface per module
// takes (libfabric's tcp provider through btl/ofi, UCT's tcp through btl/uct),
// when the library offers one per interface.  Nodes often carry interfaces
// that other nodes cannot reach (a management or storage network, one subnet
// on every node but not joined): the libraries list them in their own order,
// and the first may be one where no peer answers.  The tcp btl tries every
// address of a peer; a library endpoint has one, so the interface is chosen
// before any peer is known:
//   1. Interfaces named by the include list, or not named by the exclude list
//      (names or CIDR blocks, "eth0,10.1.0.0/16"), as btl_tcp_if_include /
//      btl_tcp_if_exclude take them.
//   2. Among those, the interface holding an address this node's hostname
//      resolves to (the address the other nodes know this node by, in
//      /etc/hosts or DNS; loopback addresses, as Debian's 127.0.1.1, do not
//      count), else the library's first.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace transit::btl::util {

struct InterfaceChoice {
    std::size_t index = 0;  // into the candidates
    std::string why;        // for verbose output: what chose it
};

// Chooses among `candidates` (interface names, in the library's order of
// preference).  Returns nothing, with the reason in `why`, when the lists
// leave no candidate.  Throws std::invalid_argument for a list entry that is
// neither a plain name nor a valid CIDR block, or when both lists are set.
std::optional<InterfaceChoice> choose_interface(std::span<const std::string> candidates,
                                                const std::vector<std::string>& include,
                                                const std::vector<std::string>& exclude,
                                                std::string& why);

// Whether interface `name` is selected by the lists (both empty: it is).
// Throws as choose_interface.
bool interface_selected(const std::string& name, const std::vector<std::string>& include,
                        const std::vector<std::string>& exclude);

}  // namespace transit::btl::util
