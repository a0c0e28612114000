// The ofi module: one libfabric provider/domain with one reliable-datagram
// endpoint (FI_EP_RDM), its completion queue and address vector.
//
// Active messages are fi_send/fi_inject of a WireHeader + payload into
// receive buffers preposted by the peer (and reposted after each delivery);
// put/get are fi_write/fi_read; atomics are libfabric atomics for the
// operations the provider reports through fi_query_atomic.  Completions are
// read from the progress engine, which the module joins while it has peers
// or operations in flight.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ofi_atomics.hpp"
#include "ofi_completions.hpp"
#include "ofi_endpoint.hpp"
#include "ofi_frag.hpp"
#include "ofi_library.hpp"
#include "ofi_listed_region.hpp"
#include "ofi_one_sided.hpp"
#include "ofi_outside.hpp"
#include "ofi_peer_watch.hpp"
#include "ofi_rcache.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_links.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/btl/util/registration_table.hpp"
#include "transit/btl/util/unreached_reasons.hpp"
#include "transit/log.hpp"
#include "transit/progress.hpp"

namespace transit::ofi {

struct InfoDeleter {
    void operator()(fi_info* i) const noexcept { libfabric().freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

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

// The module's capabilities are objects it owns (OfiOneSided, OfiAtomics,
// OfiOutside, OfiPeerWatch, OfiCompletions); they work on the module's
// state, hence the friendship.
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
    const std::vector<std::byte>& address() const noexcept { return address_; }
    // The provider's name with '+' for ';': the key goes into listening
    // addresses, whose fields ';' separates.
    std::string modex_key() const;
    // This process's id, for peers on the node to watch (one key per process).
    static constexpr const char* pid_key = "btl.ofi.pid";

    btl::Rdma* rdma() noexcept override { return &one_sided_; }
    btl::Atomics* atomics() noexcept override { return &atomics_; }
    void* extension(std::uint32_t id) noexcept override;

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

  private:
    friend class OfiOneSided;
    friend class OfiAtomics;
    friend class OfiOutside;
    friend class OfiPeerWatch;
    friend class OfiCompletions;

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
    // tag: what the kind says more (a refuse's reason), 0 for most.
    Status post_control(OfiEndpoint& ep, WireKind kind, bool wait,
                        std::span<const std::byte> payload = {}, btl::Tag tag = 0) noexcept;
    void update_progress() noexcept;
    bool aliased(Rank peer, fi_addr_t address, const std::vector<std::byte>& blob,
                 std::span<const Inserted> inserted) const;

    std::size_t& live_to(OfiEndpoint& ep) noexcept {
        return ep.dynamic ? ep.rdma_live : rdma_live_to_[ep.peer()];
    }

    OfiFrag* take(std::size_t bytes) noexcept;
    void release_frag(OfiFrag* f) noexcept;
    Status post_send(OfiFrag* f, OfiEndpoint* ep, btl::Tag tag,
                     WireKind kind = WireKind::message) noexcept;
    WireHeader wire(const OfiEndpoint& to, btl::Tag tag,
                    WireKind kind = WireKind::message) const noexcept {
        if (to.dynamic) [[unlikely]]
            return WireHeader{tag, wire_version, kind, from_dynamic, to.channel_out};
        return WireHeader{tag, wire_version, kind, 0, runtime_.rank()};
    }
    std::uint64_t target_address(const PackedHandle& p, std::uint64_t address) const noexcept {
        return virt_addr_ ? address : address - p.mr_base;
    }
    // A job rank's count outlives its endpoint; a peer outside the job's
    // operations are abandoned before its endpoint goes.
    std::size_t& live_to(const OfiRdma& op) noexcept {
        return op.peer < rdma_live_to_.size() ? rdma_live_to_[op.peer] : op.endpoint->rdma_live;
    }
    void end_live(const OfiRdma& op) noexcept {
        --rdma_live_;
        --live_to(op);
    }
    bool valid(const btl::Endpoint* e) const noexcept;
    // For a valid endpoint: its peer was lost, so nothing more is issued to it.
    static bool lost(const btl::Endpoint* e) noexcept {
        return static_cast<const OfiEndpoint*>(e)->failed;
    }

    std::string provider_;
    std::uint64_t provider_id_;  // in the handles this module packs
    OfiConfig config_;
    rt::Runtime& runtime_;
    ProgressEngine& progress_;
    btl::AmTable& am_table_;
    log::Stream out_;

    // Declaration order is teardown order in reverse: the endpoint closes
    // before the buffers it receives into, registrations before the endpoint.
    InfoPtr info_;
    FidPtr<fid_fabric> fabric_;
    FidPtr<fid_domain> domain_;
    FidPtr<fid_cq> cq_;
    FidPtr<fid_av> av_;
    FragPool eager_;
    FragPool large_;
    std::unique_ptr<std::byte[]> recv_storage_;
    std::vector<OfiRecv> recvs_;
    Pool<OfiRdma> rdma_;
    ListedRegion region_;  // a node-local provider's region, forgotten once ep_ closed
    FidPtr<fid_ep> ep_;
    Rcache rcache_;
    std::vector<CacheEntry*> pool_registrations_;
    btl::util::RegistrationTable<OfiRegistration> registrations_;

    std::vector<std::byte> address_;
    std::vector<std::unique_ptr<OfiEndpoint>> by_rank_;  // indexed by rank
    // Per rank, outliving its endpoint: we said goodbye to it and, should it
    // be added again, owe it a hello.
    std::vector<bool> owe_hello_;
    std::vector<fi_addr_t> av_addr_;  // FI_ADDR_NOTAVAIL until inserted
    std::size_t peer_count_ = 0;
    std::size_t sends_pending_ = 0;
    std::size_t rdma_pending_ = 0;  // one-sided operations the provider holds
    // Of those, the ones not abandoned: all, and per rank (outliving the
    // endpoint).  flush waits for these alone.
    std::size_t rdma_live_ = 0;
    std::vector<std::size_t> rdma_live_to_;
    // Peers outside the job, live ones only: by id, and by the channel their
    // messages name (ours for a server, the client's choice for a client).
    std::unordered_map<Rank, std::unique_ptr<OfiEndpoint>> dynamic_;
    btl::util::UnreachedReasons unreached_;  // servers join_server could not reach
    std::unordered_map<std::uint32_t, OfiEndpoint*> channels_;
    bool listening_ = false;
    // Deleted peers' address-vector entries, removed once their goodbye left.
    struct Retiring {
        fi_addr_t address;
        std::chrono::steady_clock::time_point after;
    };
    std::vector<Retiring> retiring_;
    std::mt19937 channel_rng_{std::random_device{}()};
    btl::util::RefusalLog refusals_{"clients"};
    btl::util::OutsideLinks links_;  // counts our joins no server has answered yet
    OfiRecv* repost_head_ = nullptr;
    std::array<fi_cq_msg_entry, 16> batch_{};  // completions read, not yet handled
    std::size_t batch_pos_ = 0;
    std::size_t batch_len_ = 0;
    ProgressEngine::Handle progress_handle_;
    ProgressEngine::Handle check_handle_;  // local peers' exits (low priority)
    btl::util::WatchPace check_pace_;      // every 16th low-priority pass, at most every 100 ms

    btl::util::WatchPace dynamic_pace_;  // the same for peers outside the job
    bool node_local_ = false;            // the provider reaches this node only

    std::size_t inject_limit_ = 0;
    std::uint64_t mr_mode_ = 0;
    AddressForm address_form_ = AddressForm::variable;  // from fi_info's addr_format
    bool virt_addr_ = false;
    bool local_mr_ = false;
    std::uint64_t delivery_complete_ = 0;  // flag for puts
    std::vector<std::byte> inject_scratch_;
    void* recv_desc_ = nullptr;  // local registrations (FI_MR_LOCAL providers)
    void* rdma_desc_ = nullptr;

    OfiCompletions completions_{*this};
    OfiPeerWatch peers_{*this};
    OfiOneSided one_sided_{*this};
    OfiAtomics atomics_{*this, one_sided_};
    OfiOutside outside_{*this};
};

}  // namespace transit::ofi
