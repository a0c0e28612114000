// What makes two processes "on the same node" for Transit: the same kernel
// (boot id), the same network namespace, the same IPC namespace and the same
// /dev/shm file system.  Two containers on one host, or two network namespaces
// standing in for two nodes in the tests, get different node ids.
#pragma once

#include <string>

namespace transit::rt {

// "<hostname>-<16 hex digits>", the digits hashing the identities above.
// Stable for the life of the process; computed on each call.
std::string local_node_id();

}  // namespace transit::rt
