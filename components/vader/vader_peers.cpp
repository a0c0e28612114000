#include "components/vader/vader_peers.hpp"

#include <string>
#include <system_error>
#include <utility>

#include "components/vader/vader_config.hpp"
#include "components/vader/vader_module.hpp"
#include "components/vader/vader_peer_watch.hpp"

namespace transit::vader {

namespace {

constexpr char modex_key[] = "btl.vader.1";

}  // namespace

void VaderPeers::format() {
    retired_.resize(layout_.local_size);
    counted_.assign(layout_.local_size, false);
}

// What the peer's segment header says, for the endpoint (the segment is
// checked: segment_usable).
void VaderPeers::attach_peer(VaderEndpoint& ep) {
    SegmentHeader& ph = ep.header();
    ep.fifo = Fifo::attach(ep.segment.data() + ph.fifo_offset);
    ep.pid = static_cast<pid_t>(ph.pid);
    ep.process = btl::util::ProcessWatch(ep.pid);
    peer_watch_.watch_exit(ep);
    ep.owner_base = ph.owner_base;
    ep.heap_offset = ph.heap_offset;
    ep.heap_size = ph.heap_size;
    ep.regions = {reinterpret_cast<const btl::RegionSlot*>(ep.segment.data() + ph.region_offset),
                  ph.region_count};
    ep.frag_offset = ph.frag_offset;
    ep.frag_stride = ph.frag_stride;
    ep.frag_count = ph.frag_count;
    ep.frag_payload = ph.frag_stride - frag_header_size;
}

VaderEndpoint* VaderPeers::connect(Rank peer, std::uint32_t local_index) {
    if (retired_[local_index]) return revive(local_index);
    std::vector<std::byte> blob;
    if (Status s = runtime_.modex_recv(peer, modex_key, blob); s != Status::success) {
        out_.verbose(10, "peer {}: no vader address ({})", peer, to_string(s));
        return nullptr;
    }
    const std::string path(reinterpret_cast<const char*>(blob.data()), blob.size());
    SharedFile seg;
    try {
        seg = SharedFile::attach(path);
    } catch (const std::system_error& e) {
        out_.verbose(1, "peer {}: {}", peer, e.what());
        return nullptr;
    }
    if (!segment_usable({reinterpret_cast<const std::byte*>(seg.data()), seg.size()}, local_index,
                        layout_.local_size)) {
        out_.verbose(1, "peer {}: segment {} does not match this process's layout", peer, path);
        return nullptr;
    }
    auto ep = std::make_unique<VaderEndpoint>(peer, local_index, std::move(seg));
    attach_peer(*ep);
    ep->fbox_after = config_.fbox_threshold;
    ep->ref_base = make_ref(my_index_, 0);
    ep->reader = &readers_[local_index];
    ep->fastbox = FastboxWriter(
        ep->segment.data() + ep->header().fbox_offset + my_index_ * ep->header().fbox_stride,
        ep->header().fbox_size);
    SegmentHeader& ph = ep->header();
    // The last peer to map a segment removes its name: from then on a crash
    // leaves nothing in the backing directory.
    // Counted once per peer even if it is deleted and added again.
    if (!counted_[local_index]) {
        counted_[local_index] = true;
        if (ph.attached.fetch_add(1, std::memory_order_acq_rel) + 2 == ph.local_size)
            unlink_path(ep->segment.path());
    }
    module_.probe_single_copy(*ep);
    out_.verbose(10, "peer {} (local {}, pid {}): mapped {}", peer, local_index, ep->pid,
                 ep->segment.path());
    VaderEndpoint* raw = ep.get();
    endpoints_[local_index] = std::move(ep);
    active_.push_back(local_index);
    module_.poll_from(*raw);
    peer_watch_.rebuild();
    return raw;
}

// A deleted peer added again (or sending to us again): its old mapping and
// fast-box position, not a new mapping (its segment may have lost its name).
VaderEndpoint* VaderPeers::revive(std::uint32_t local_index) {
    VaderEndpoint* ep = retired_[local_index].get();
    out_.verbose(10, "peer {} (local {}): added again", ep->peer(), local_index);
    endpoints_[local_index] = std::move(retired_[local_index]);
    active_.push_back(local_index);
    module_.poll_from(*ep);
    peer_watch_.rebuild();
    return ep;
}

}  // namespace transit::vader
