// Single copy between local processes with Cross Memory Attach
// (process_vm_readv / process_vm_writev).
//
// Whether CMA works is decided by a real transfer, never by reading settings:
// seccomp filters (containers), Yama ptrace scope and user namespaces all pass
// a configuration check and then fail on the first transfer.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "transit/status.hpp"

namespace transit::vader {

// Lets sibling processes (not only ancestors) read us under Yama ptrace scope 1.
void allow_peer_access() noexcept;

// Reads a word of this process through the kernel's cross-process path: catches
// seccomp filters and kernels without CMA.  Returns "" or the reason.
std::string cma_self_probe();

// Reads `expected` back from `address` in process `pid`.  Returns "" or the reason.
std::string cma_peer_probe(pid_t pid, std::uint64_t address, std::uint64_t expected);

// Copies `size` bytes between `local` and `remote` in process `pid`, looping
// over partial transfers.  peer_failed when the process is gone, error otherwise.
Status cma_read(pid_t pid, void* local, std::uint64_t remote, std::size_t size) noexcept;
Status cma_write(pid_t pid, const void* local, std::uint64_t remote, std::size_t size) noexcept;

}  // namespace transit::vader
