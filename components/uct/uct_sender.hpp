// The send side of a uct module: sendi's paths (a short message from the
// caller's memory as one am_short or am_short_iov; anything else gathered;
// copied into the endpoint's queue when UCT has no room), send of a
// descriptor, and transmit, the one active message the module's other
// senders go through (replies, one-sided requests, queued sends).  The
// module's virtual sendi and send forward here with a tail call, so an
// operation still costs one virtual call.
//
// Owns: UCT's message sizes as the module uses them (the am_short payload,
// the am_bcopy total, whether am_short_iov works), the scratch buffer a
// scattered short message is gathered into and the count of sendi calls
// refused.  Borrows: the module (which endpoints are its own, its
// attributes, UCT statuses as Transit ones; the send callbacks and alloc
// name it), its fragment pool and its send queue.
#pragma once

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transit/btl/module.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"
#include "uct_gather.hpp"

namespace transit::uct {

class UctModule;
class UctSendQueue;

class UctSender {
  public:
    UctSender(UctModule& module, FragPool& frags, UctSendQueue& send_queue) noexcept
        : module_(module), frags_(frags), send_queue_(send_queue) {}

    // The sizes from the interface's attributes.
    void setup(const uct_iface_attr_t& attr);
    // The am_short payload (after the 64-bit header); the am_bcopy total,
    // header included.
    std::size_t max_short() const noexcept { return max_short_; }
    std::size_t max_message() const noexcept { return max_message_; }
    // sendi calls refused: no fragment free for the queue, or too large.
    std::uint64_t refused() const noexcept { return sendi_refused_; }

    // One message, completed when this returns (UCT copies it): completed, or
    // nothing happened (out_of_resource, errors).
    Status transmit(UctEndpoint* ep, Gather& g) noexcept;
    // UCT's pack callback for uct_ep_am_bcopy: arg is a Gather.
    static std::size_t pack_cb(void* dest, void* arg) noexcept;

    // btl::Module::send.
    Status send(btl::Endpoint* endpoint, btl::Descriptor* descriptor, btl::Tag tag) noexcept;
    // btl::Module::sendi without a header, and with one (the module's sendi
    // picks one with a tail call).
    [[gnu::noinline]] Status sendi_raw(btl::Endpoint* endpoint, btl::Convertor* convertor,
                                       std::size_t payload_size, btl::Tag tag,
                                       btl::Descriptor** descriptor, std::uint8_t order,
                                       std::uint32_t flags) noexcept;
    [[gnu::noinline]] Status sendi_iov(btl::Endpoint* endpoint, btl::Convertor* convertor,
                                       const void* header, std::size_t header_size,
                                       std::size_t payload_size, std::uint8_t order,
                                       std::uint32_t flags, btl::Tag tag,
                                       btl::Descriptor** descriptor) noexcept;

  private:
    const void* short_source(btl::Endpoint* endpoint, btl::Convertor* convertor, std::size_t total,
                             std::size_t payload) noexcept;
    Status short_sent(btl::Convertor* convertor, std::size_t payload,
                      btl::Descriptor** descriptor) noexcept;
    Status sendi_gather(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                        std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                        std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept;
    // sendi when UCT has no room or messages wait: copied into the queue.
    [[gnu::noinline]] Status take_in(btl::Endpoint* endpoint, btl::Convertor* convertor,
                                     const void* header, std::size_t header_size,
                                     std::size_t payload_size, std::uint8_t order, btl::Tag tag,
                                     btl::Descriptor** descriptor) noexcept;
    void finish_send(UctFrag* f, UctEndpoint* ep) noexcept;

    UctModule& module_;
    FragPool& frags_;
    UctSendQueue& send_queue_;
    std::size_t max_short_ = 0;        // am_short payload (after the 64-bit header)
    bool short_iov_ = true;            // am_short_iov works here (else sendi gathers)
    std::size_t max_message_ = 0;      // am_bcopy total, header included
    std::uint64_t sendi_refused_ = 0;  // no fragment free for the queue (or too large)
    std::vector<std::byte> scratch_;   // am_short payload gathered from pieces
};

}  // namespace transit::uct
