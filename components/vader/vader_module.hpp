// The vader module: sends through fast boxes and the receiver's FIFO, put/get
// through CMA, atomics performed by the target; every one-sided operation
// inside a live registration of the target (transit/btl/region_table.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "components/vader/vader_atomics.hpp"
#include "components/vader/vader_config.hpp"
#include "components/vader/vader_endpoint.hpp"
#include "components/vader/vader_fastbox.hpp"
#include "components/vader/vader_fifo.hpp"
#include "components/vader/vader_frag.hpp"
#include "components/vader/vader_layout.hpp"
#include "components/vader/vader_one_sided.hpp"
#include "components/vader/vader_outside.hpp"
#include "components/vader/vader_pass.hpp"
#include "components/vader/vader_peer_watch.hpp"
#include "components/vader/vader_peers.hpp"
#include "components/vader/vader_progress_hook.hpp"
#include "components/vader/vader_segment.hpp"
#include "components/vader/vader_sleep.hpp"
#include "components/vader/vader_spare_boxes.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/util/free_list.hpp"
#include "transit/log.hpp"

namespace transit::vader {

class VaderModule final : public btl::Module {
  public:
    // Formats `segment` (already created and zeroed) and publishes nothing: the
    // component does the modex.  Without a segment (a process alone on its
    // node) the module waits: it makes one when the context listens or
    // connects to a server on this node (VaderOutside).
    VaderModule(btl::Component& component, btl::InitContext& ctx, const Config& config,
                const Layout& layout, SharedFile segment, log::Stream out);
    ~VaderModule() override;

    std::string name() const override { return "vader"; }

    btl::Rdma* rdma() noexcept override { return &one_sided_; }
    btl::Atomics* atomics() noexcept override { return &atomics_; }
    void* extension(std::uint32_t id) noexcept override {
        if (id == btl::Listener::id) return static_cast<btl::Listener*>(&outside_);
        if (id == btl::DynamicPeerRecords::id)
            return static_cast<btl::DynamicPeerRecords*>(&outside_);
        if (id == btl::WaitObject::id && sleep_.can_sleep())
            return static_cast<btl::WaitObject*>(&sleep_);
        return nullptr;
    }

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

    // One pass over the fast boxes and the FIFO.
    int progress() noexcept;

    // --- used by VaderOneSided and VaderAtomics -----------------------------------
    // A send fragment to ep from the free list (its pages supplied), or nullptr.
    Frag* take_frag(VaderEndpoint* ep) noexcept;
    // Publishes f in ep's FIFO (after the join, for a server outside the job);
    // false when the FIFO is full.
    bool push(VaderEndpoint* ep, Frag* frag) noexcept;
    // A peer's request refused: the upper layer hears why, the peer stays.
    void report_peer_error(const VaderEndpoint* ep, const char* why) noexcept {
        report_error(btl::error_flags::nonfatal, ep->peer(), why);
    }

    // --- used by VaderSleep -------------------------------------------------------
    // Something is waiting to be read or retried (arm's second look).
    bool has_work() const noexcept;

    // --- used by VaderPeerWatch and VaderOutside ------------------------------------
    // The peer is given up: its pending operations end with an error and the
    // upper layer hears of it once.  (The watch calls progress too.)
    void peer_lost(VaderEndpoint* ep, const char* why, std::uint32_t flags = 0) noexcept;

    // --- used by VaderOutside -----------------------------------------------------
    // Lays out the own segment (made and zeroed: VaderOutside::ensure_segment
    // makes the one of a process alone on its node), deciding single copy,
    // and announces what it allows.
    void format_segment();
    void probe_single_copy(const VaderEndpoint& ep);
    // The progress pass reads box `index` of our segment (a spare), written
    // by ep; false when it cannot.
    bool read_box(VaderEndpoint& ep, std::uint32_t index) noexcept;
    void unpoll(VaderEndpoint* ep) noexcept;
    int poll_box(FastboxReader& box, VaderEndpoint* ep, int max) noexcept;
    void receive(VaderEndpoint* ep, std::uint64_t ref) noexcept;
    // Gives ep's fragment `back` (a reference with the return bit) back now,
    // or at the next pass when its FIFO is full.
    void return_frag(VaderEndpoint* ep, std::uint64_t back) noexcept;
    void complete(Frag* frag, Status status) noexcept;
    // A deleted peer: no return waits for it, the exit watch skips it.
    void forget(VaderEndpoint* ep) noexcept;

    // After every message, fragment or return published to ep's segment: wakes
    // the peer when it declared it sleeps.  While it polls this costs a
    // compiler barrier and a read of a line that stays in our cache.
    void ring(SegmentHeader& peer) noexcept {
        if (sender_fences_) [[unlikely]]
            std::atomic_thread_fence(std::memory_order_seq_cst);
        else
            std::atomic_signal_fence(std::memory_order_seq_cst);
        if (peer.sleeping.load(std::memory_order_relaxed) == asleep) [[unlikely]]
            sleep_.ring_slow(peer);
    }
    void ring(VaderEndpoint* ep) noexcept { ring(ep->header()); }

    // --- used by VaderPeers -------------------------------------------------------
    // The progress pass reads the peer's box from now on.
    void poll_from(VaderEndpoint& ep);

  private:
    VaderEndpoint* endpoint_for(std::uint32_t local_index) noexcept;

    [[gnu::noinline]] bool supply_frags(std::uint32_t index) noexcept;
    [[gnu::noinline]] Status sendi_fragment(VaderEndpoint* ep, btl::Convertor* convertor,
                                            const void* header, std::size_t header_size,
                                            std::size_t payload_size, std::uint8_t order,
                                            std::uint32_t flags, btl::Tag tag,
                                            btl::Descriptor** descriptor) noexcept;

    void do_pass_chores() noexcept;
    int poll_fifo(int max) noexcept;
    void deliver(VaderEndpoint* ep, const char* data, std::size_t size, btl::Tag tag) noexcept;

    rt::Runtime& runtime_;
    ProgressEngine& progress_engine_;
    btl::AmTable& am_table_;
    Config config_;
    Layout layout_;
    SharedFile segment_;
    SegmentHeader* header_;
    log::Stream out_;
    SingleCopy single_copy_;
    std::uint32_t my_index_;
    std::uint32_t fbox_max_;
    // Read by ring() on every send: beside the other fields the send path
    // reads, not with the sleep's state (VaderSleep) at the end.
    bool sender_fences_ = true;  // Doorbell::sender_fences()

    Fifo fifo_;
    std::uint64_t fifo_head_ = 0;
    std::vector<FastboxReader> readers_;                     // by sender's local index
    std::vector<std::unique_ptr<VaderEndpoint>> endpoints_;  // by local index
    std::vector<std::uint32_t> active_;                      // local indexes with an endpoint
    // The fast boxes a progress pass reads, each with the peer that writes it:
    // the job's local peers and the peers outside the job given a spare box,
    // in one list so that a pass costs the same whoever the peers are.  A
    // peer deleted during a pass leaves a null entry, erased at the start of
    // the next; room is reserved for every box twice, so adding one during a
    // pass does not allocate.
    struct PolledBox {
        FastboxReader* reader;
        VaderEndpoint* ep;
    };
    std::vector<PolledBox> boxes_;
    // Whether a pass runs, its chores, a peer's exit seen (vader_pass.hpp):
    // read on every pass, beside boxes_.  VaderOutside, VaderSleep and
    // VaderPeerWatch borrow it.
    VaderPass pass_;
    btl::util::FreeList<Frag> frags_;
    // Fragments [0, supplied_frags_) have pages in the segment.  The list hands
    // fragments out in index order until it first runs dry, so what a job uses
    // is a prefix: a light job never pays for the whole segment.
    std::uint32_t supplied_frags_ = 0;
    std::vector<std::pair<VaderEndpoint*, std::uint64_t>> pending_returns_;
    bool warned_cma_ = false;
    bool warned_supply_ = false;
    // The capabilities, after the state they borrow; at the end, past the
    // fields the send and poll paths read.
    VaderAtomics atomics_{*this, frags_};
    VaderOneSided one_sided_{single_copy_, atomics_, progress_hook_, segment_, config_, out_};
    VaderOutside outside_{*this,   runtime_, segment_, header_,     pass_,          frags_,
                          config_, layout_,  peers_,   peer_watch_, progress_hook_, out_};
    VaderSleep sleep_{*this, header_, pass_, config_, out_};  // opened at construction
    VaderPeerWatch peer_watch_{*this,      progress_engine_, sleep_, outside_, frags_,
                               endpoints_, active_,          pass_,  out_};
    VaderPeers peers_{*this,    runtime_,   config_, layout_,     my_index_,
                      readers_, endpoints_, active_, peer_watch_, out_};
    VaderProgressHook progress_hook_{*this, progress_engine_, peer_watch_, outside_, active_};
};

}  // namespace transit::vader
