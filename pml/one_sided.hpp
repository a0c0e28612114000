// One-sided operations: over the btl's put/get/atomics where the peer's
// module can do them with the region's key, emulated otherwise (the target
// applies the operation and answers).  The Engine's flush waits until every
// operation to a peer is answered or completed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pml/core.hpp"
#include "pml/outbox.hpp"
#include "pml/remote_key.hpp"

namespace transit::pml {

// Registered local memory.  Peers name it by its slot in OneSided's table
// and a random secret (both in the packed key); `scope` says which peers may
// reach it at all.
struct RegionImpl {
    void* base = nullptr;
    std::size_t size = 0;
    std::uint32_t slot = 0;
    std::uint64_t secret = 0;
    RegionScope::Kind scope = RegionScope::Kind::everyone;
    std::vector<Rank> peers;  // sorted: RegionScope::Kind::peers only
    // Whether `peer` (a rank of the job, or our id for a peer outside it,
    // numbered from `job_size` on) may reach the region.
    bool allows(Rank peer, std::uint32_t job_size) const noexcept;
    struct Entry {
        btl::Module* module;
        std::uint32_t component;
        btl::RegistrationHandle* handle;
        std::size_t handle_len;
    };
    std::vector<Entry> entries;
};

// One-sided operation in flight: over a btl, or emulated by the target (one
// message each way; the request names the operation by its handle, which the
// reply echoes: never an address of ours).
struct OscOp {
    OscOp* next_free = nullptr;  // the pool's
    bool in_use = false;
    std::uint32_t slot = ~std::uint32_t{0};  // the pool's: what names it to peers
    std::uint32_t generation = 0;
    Peer* peer = nullptr;
    btl::Module* module = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    // A fetching atomic's old value lands here first: the caller's is written
    // only once the target applied the operation.
    std::uint64_t result = 0;
    std::uint64_t* fetched = nullptr;
    bool bits32 = false;
    // Emulated: the reply it waits for (kind_count over a btl), and for a get
    // where its bytes land and how many (its flush units).
    wire::Kind reply = wire::kind_count;
    std::byte* dest = nullptr;
    std::size_t len = 0;
};

class OneSided {
  public:
    OneSided(Core& core, Outbox& outbox) : c_(core), outbox_(outbox) {}
    // The modules the regions are registered with (set once they are open).
    void set_modules(std::span<btl::Module* const> modules) noexcept { modules_ = modules; }
    // Deregisters every region still registered (before the modules close).
    void release_regions() noexcept;

    Status register_memory(void* base, std::size_t size, const RegionScope& scope,
                           RegionImpl*& out);
    Status deregister_memory(RegionImpl* region);
    std::vector<std::byte> pack_key(const RegionImpl* region) const;
    Status unpack_key(std::span<const std::byte> bytes, RemoteKeyImpl*& out);
    Status rma(bool is_put, Rank dst, void* local, std::size_t len, const RemoteKeyImpl* key,
               std::uint64_t offset) noexcept;
    Status atomic(Rank dst, std::uint8_t op, AtomicWidth width, const RemoteKeyImpl* key,
                  std::uint64_t offset, std::uint64_t operand, std::uint64_t compare,
                  std::uint64_t* fetched) noexcept;

    // Operations not yet answered or completed, to every peer.
    std::uint64_t outstanding() const noexcept { return outstanding_total_; }
    // What a flush of p returns once nothing is outstanding to it (clears
    // the refusal it reports); of every peer for flush_all.
    Status flush_result(Peer* p) noexcept;
    Status flush_all_result() noexcept;
    // The peer failed: the replies it would have sent are written off.
    void write_off(Peer* p) noexcept;

    // Received messages (the engine's dispatch).
    void on_request(wire::Kind k, const std::byte* b, std::size_t n) noexcept;
    void on_reply(wire::Kind k, const std::byte* b, std::size_t n, Rank from) noexcept;

  private:
    bool handle_size_fits(std::uint32_t component, std::size_t len) const noexcept;
    // The live region a peer's request names by slot and secret, or nullptr.
    const RegionImpl* region_named(std::uint32_t slot, std::uint64_t secret) const noexcept;
    // Why the request h of kind k from peer `from` is refused (nullptr: it is
    // not) and with which status.
    const char* screen(wire::Kind k, const wire::OscHdr& h, Rank from, const RegionImpl*& region,
                       Status& refusal) const noexcept;
    void note_refused(Peer* p, Status s) noexcept;
    static Status take_refused(Peer* p) noexcept;
    // One put/get or atomic over one btl with one of the key's handles:
    // success when issued or done, else what the btl said.
    OscOp* new_osc_op(Peer* p, btl::Module* module) noexcept;
    // One emulated operation, answered by a reply of kind `reply`.
    OscOp* new_emulated_op(Peer* p, wire::Kind reply, std::byte* dest, std::size_t len) noexcept;
    Status emulate(OscOp* op, wire::Kind k, wire::OscHdr& h, const void* data,
                   std::size_t len) noexcept;
    void count_emulated(Peer* p, std::uint64_t units, bool add) noexcept;
    Status rma_over(const bml::BtlRef& b, Peer* p, bool is_put, void* local, std::size_t len,
                    std::uint64_t raddr, const btl::RegistrationHandle* rh) noexcept;
    Status atomic_over(const bml::BtlRef& b, Peer* p, std::uint8_t op, bool bits32,
                       std::uint64_t raddr, const btl::RegistrationHandle* rh,
                       std::uint64_t operand, std::uint64_t compare,
                       std::uint64_t* fetched) noexcept;
    // The btl's operation (rma_over or atomic_over, in `issue`) with each of
    // the key's handles for its component until one is its own.
    template <typename Issue>
    Status over_each_handle(const bml::BtlRef& b, const RemoteKeyImpl* key, Issue issue) noexcept;
    static void osc_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*,
                         void*, Status) noexcept;

    Core& c_;
    Outbox& outbox_;
    std::span<btl::Module* const> modules_;
    // By slot; nullptr: free (in free_slots_ for reuse).
    std::vector<RegionImpl*> regions_;
    std::vector<std::uint32_t> free_slots_;
    NamedPool<OscOp> osc_ops_;
    std::uint64_t outstanding_total_ = 0;
    bool any_refused_ = false;  // some peer's osc_refused is set
};

}  // namespace transit::pml
