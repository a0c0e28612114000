// The outbox: control messages (ack, fin, one-sided replies...) and the
// descriptors a btl could not take yet, kept until they go.  Nothing put here
// is dropped while its peer lives.
#pragma once

#include <cstddef>
#include <vector>

#include "pml/core.hpp"
#include "pml/headers.hpp"

namespace transit::pml {

class Sender;
class Failure;

// A queued descriptor the btl refused with out_of_resource.
struct PendingDesc {
    Rank rank;
    btl::Module* module;
    btl::Endpoint* endpoint;
    btl::Descriptor* desc;
    btl::Tag tag;
    // A control message whose sender kept no copy (it was queued here, so
    // send_ctrlv counted it sent): refused for good, it is copied back to
    // the control queue and sent again, like one refused at once.
    bool control = false;
};

class Outbox {
  public:
    explicit Outbox(Core& core) : c_(core) { pending_desc_.reserve(64); }
    void wire_to(Sender* sender, Failure* failure) noexcept {
        sender_ = sender;
        failure_ = failure;
    }

    // What a refusal for good means to the caller: `lost` when nobody sends
    // the message again (its loss is logged and reported), `retried` when the
    // caller keeps a copy to send again.
    enum class Refusal : std::uint8_t { lost, retried };

    // Sends a small control message; queues it when the btl is out of resources.
    Status send_ctrl(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                     const void* data = nullptr, std::size_t data_len = 0) noexcept {
        iovec v{const_cast<void*>(data), data_len};
        return send_ctrlv(p, kind, hdr, hdr_len, &v, 1);
    }
    // A header alone, over `path` first (send_ctrlv).
    Status send_ctrl(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                     const bml::BtlRef* path) noexcept {
        iovec v{nullptr, 0};
        return send_ctrlv(p, kind, hdr, hdr_len, &v, 1, path);
    }
    // `path`: a module of the peer's to try first (Req::data_path), else the
    // eager choice.  A message queued for a retry goes by the eager choice.
    Status send_ctrlv(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                      const iovec* pieces, std::size_t count,
                      const bml::BtlRef* path = nullptr) noexcept;
    // One message now: success when the btl took it (or queued its descriptor
    // on out_of_resource), out_of_resource when nothing happened, another
    // status when the btl refused it for good (its descriptor ended, end_desc).
    Status try_send(Peer* p, btl::Tag tag, const void* hdr, std::size_t hdr_len,
                    const iovec* pieces, std::size_t count, Refusal refusal) noexcept {
        return send_over(p, p->ep->pick_eager(), tag, hdr, hdr_len, pieces, count, refusal);
    }
    // The same over one module of the peer's (a path measurement's probes and
    // their answers go over the path they measure).
    Status send_over(Peer* p, const bml::BtlRef& b, btl::Tag tag, const void* hdr,
                     std::size_t hdr_len, const iovec* pieces, std::size_t count,
                     Refusal refusal) noexcept;
    // Packs header and payload into `d` (the one sendi handed back, or a new
    // one of `b` when null) and sends it (post_desc); out_of_resource when no
    // descriptor is free.  The one copy of a message sendi could not take.
    Status pack_and_post(Peer* p, const bml::BtlRef& b, btl::Descriptor* d, btl::Tag tag,
                         const void* hdr, std::size_t hdr_len, btl::Convertor& conv,
                         std::size_t data_len, Refusal refusal) noexcept;
    // Sends a descriptor, or queues it when the btl is out of resources; one
    // refused otherwise ends with its callback (end_desc).
    Status post_desc(const PendingDesc& pd, Refusal refusal = Refusal::lost) noexcept;
    // Largest payload of one control message to p.
    std::size_t ctrl_payload_limit(Peer* p) const noexcept;

    // Sends what waits; the number of messages that went.
    int drain() noexcept;
    bool busy() const noexcept { return !pending_desc_.empty() || !pending_ctrl_.empty(); }
    // The peer failed: what waits for it can never go.
    void drop_queued_to(Peer* p) noexcept;

  private:
    void end_desc(const PendingDesc& pd, Status s, Refusal refusal = Refusal::lost) noexcept;
    // A descriptor left pending_desc_ (sent, or ended): its peer's count.
    void left_queue(const PendingDesc& pd) noexcept;
    bool requeue_control(const PendingDesc& pd) noexcept;
    // The ack of a departing peer's bye still goes while that peer lingers
    // (farewell.cpp): it is the word that all the peer sent arrived.
    static bool lingering_ack(const Peer& p, btl::Tag tag) noexcept {
        return p.linger_until && tag == wire::tag(wire::bye_ack);
    }
    static void control_sent(Peer* p) noexcept {
        if (p) p->control_refused_since.reset();
    }

    Core& c_;
    Sender* sender_ = nullptr;
    Failure* failure_ = nullptr;
    std::vector<PendingDesc> pending_desc_;
    List<RawMsg> pending_ctrl_;
};

}  // namespace transit::pml
