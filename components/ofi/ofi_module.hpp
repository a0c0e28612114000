// The ofi module: one libfabric provider/domain with one reliable-datagram
// endpoint (FI_EP_RDM), its completion queue and address vector.
//
// Active messages are fi_send/fi_inject of a WireHeader + payload into
// receive buffers preposted by the peer (and reposted after each delivery);
// put/get are fi_write/fi_read; atomics are libfabric atomics for the
// operations the provider reports through fi_query_atomic.  Completions are
// read from the progress engine, which the module joins while it has peers
// or operations in flight.
//
// Owns: the libfabric objects and buffers (OfiFabric), the job ranks'
// endpoints and address-vector entries, the count of sends in flight, and
// its capabilities (OfiOneSided, OfiAtomics, OfiOutside, OfiPeerWatch,
// OfiCompletions), to which it lends the fabric.  Borrows: the runtime, the
// progress engine and the active message table of its component.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ofi_atomics.hpp"
#include "ofi_completions.hpp"
#include "ofi_endpoint.hpp"
#include "ofi_fabric.hpp"
#include "ofi_frag.hpp"
#include "ofi_one_sided.hpp"
#include "ofi_outside.hpp"
#include "ofi_peer_watch.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/idle_pacer.hpp"
#include "transit/log.hpp"
#include "transit/name_hash.hpp"
#include "transit/progress.hpp"

namespace transit::ofi {

// The default exclusivity of a node-local provider (below vader), the highest
// a module gets unless btl_ofi_exclusivity says otherwise.
inline constexpr std::uint32_t local_exclusivity = 32768;

// The base parameters' exclusivity left at its default: from the provider;
// latency and bandwidth 0: from the provider.
struct OfiConfig : btl::BaseConfig {
    std::string provider_include;  // selections, parsed at open
    std::string provider_exclude;
    std::string if_include;  // interfaces of providers with one domain per interface (tcp)
    std::string if_exclude;
    std::size_t recv_buffers = 64;
    std::size_t max_rdma_ops = 1024;
    std::size_t rcache_size = 16;
    bool rcache_monitor = true;  // follow released memory (or keep nothing unused)
    double join_timeout = 10;    // seconds a server has to answer a client's join
};

// The provider's name in its two forms: "tcp;ofi_rxm" and its core "tcp".
std::string core_provider(const std::string& provider);

// The shared-memory providers: their addresses only mean something on this node.
inline bool node_local(const std::string& core) {
    return core == "shm" || core == "sm2";
}

// Each capability is the object the upper layer calls (one virtual call per
// operation); the objects reach the module only through the calls under "for
// the objects it owns".
class OfiModule final : public btl::Module {
  public:
    // Opens the fabric, domain, endpoint and queues; throws std::runtime_error
    // with the reason when the provider cannot be used.
    OfiModule(btl::Component& component, const fi_info& info, const OfiConfig& config,
              rt::Runtime& runtime, ProgressEngine& progress, btl::AmTable& am_table,
              const log::Stream& out);
    ~OfiModule() override;

    std::string name() const override { return "ofi:" + provider_; }
    const std::string& provider() const noexcept { return provider_; }
    // The endpoint's address, published through the modex.
    const std::vector<std::byte>& address() const noexcept { return fabric_.address; }
    // The provider's name with '+' for ';': the key goes into listening
    // addresses, whose fields ';' separates.
    std::string modex_key() const;
    // This process's id, for peers on the node to watch (one key per process).
    static constexpr const char* pid_key = "btl.ofi.pid";

    btl::Rdma* rdma() noexcept override { return &one_sided_; }
    btl::Atomics* atomics() noexcept override { return &atomics_; }
    void* extension(std::uint32_t id) noexcept override { return outside_.extension(id); }

    Status add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                     btl::Reachability& reachable) override;
    Status del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) override;

    btl::Descriptor* alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                           std::uint32_t flags) noexcept override;
    Status free(btl::Descriptor* descriptor) noexcept override;
    btl::Descriptor* prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                 std::uint8_t order, std::size_t reserve, std::size_t& size,
                                 std::uint32_t flags) noexcept override;
    Status send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                btl::Tag tag) noexcept override;
    Status sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                 std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                 std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept override;

    void dump(btl::Endpoint* endpoint, int verbosity) override;
    Status finalize() override;

    // --- for the objects it owns ------------------------------------------------------
    // A live endpoint of this module (a job rank's or a peer's outside the job).
    bool valid(const btl::Endpoint* e) const noexcept;
    // For a valid endpoint: its peer was lost, so nothing more is issued to it.
    static bool lost(const btl::Endpoint* e) noexcept {
        return static_cast<const OfiEndpoint*>(e)->failed;
    }
    // The endpoint of job rank `rank`, or nullptr.
    OfiEndpoint* job_endpoint(Rank rank) const noexcept {
        return rank < by_rank_.size() ? by_rank_[rank].get() : nullptr;
    }
    // Whether a job rank's address-vector entry is `address`.
    bool job_address(fi_addr_t address) const noexcept;
    // A header-only message of `kind` (and `payload`), posted with a bounded
    // wait for room and, when `wait`, for its completion; tag: what the kind
    // says more (a refuse's reason), 0 for most.
    Status post_control(OfiEndpoint& ep, WireKind kind, bool wait,
                        std::span<const std::byte> payload = {}, btl::Tag tag = 0) noexcept;
    // The provider completed a send (why: nullptr) or failed it (why: its error).
    void end_send(OfiFrag* f, Status status, const char* why) noexcept;
    // Joins or leaves the progress engine as peers, listening and operations
    // in flight say.
    void update_progress() noexcept;
    // btl::Module::report_error, which is the module's own (protected).
    void report(std::uint32_t error_flags, Rank peer, const char* info) noexcept {
        report_error(error_flags, peer, info);
    }

  private:
    // An address add_procs put in the address vector, not yet checked.
    struct Inserted {
        Rank peer;
        fi_addr_t address;
        std::vector<std::byte> blob;
    };

    void open_objects(const fi_info& info);
    void open_endpoint();
    void list_region();
    void setup_buffers();
    void choose_attributes(const fi_info& info);

    static int progress_cb(void* self) noexcept;
    static int check_peers_cb(void* self) noexcept;
    bool aliased(Rank peer, fi_addr_t address, const std::vector<std::byte>& blob,
                 std::span<const Inserted> inserted) const;

    Status post_send(OfiFrag* f, OfiEndpoint* ep, btl::Tag tag,
                     WireKind kind = WireKind::message) noexcept;
    WireHeader wire(const OfiEndpoint& to, btl::Tag tag,
                    WireKind kind = WireKind::message) const noexcept {
        if (to.dynamic) [[unlikely]]
            return WireHeader{tag, wire_version, kind, from_dynamic, to.channel_out};
        return WireHeader{tag, wire_version, kind, 0, runtime_.rank()};
    }

    std::string provider_;
    OfiConfig config_;
    rt::Runtime& runtime_;
    ProgressEngine& progress_;
    btl::AmTable& am_table_;
    log::Stream out_;

    OfiFabric fabric_;
    std::vector<std::unique_ptr<OfiEndpoint>> by_rank_;  // indexed by rank
    std::vector<fi_addr_t> av_addr_;                     // FI_ADDR_NOTAVAIL until inserted
    std::size_t job_peers_ = 0;                          // endpoints in by_rank_
    std::size_t sends_pending_ = 0;
    // A module no peer sends over (the path measurement chose another) reads
    // its completion queue on every 16th pass only: it then costs the chosen
    // transports little.
    btl::util::IdlePacer pacer_;
    std::vector<std::byte> inject_scratch_;
    ProgressEngine::Handle progress_handle_;
    ProgressEngine::Handle check_handle_;  // local peers' exits (low priority)

    // The capabilities, after what they borrow (fabric_, out_).
    OfiCompletions completions_{*this, fabric_, one_sided_, outside_, am_table_, out_};
    OfiOneSided one_sided_{*this, fabric_, completions_, name_hash(provider_), out_};
    OfiAtomics atomics_{*this, fabric_, one_sided_};
    OfiOutside outside_{*this, fabric_, runtime_, peers_, config_.join_timeout, out_};
    OfiPeerWatch peers_{*this, fabric_, runtime_, completions_, one_sided_, outside_, out_};
};

}  // namespace transit::ofi
