// btl::Rdma of a tcp module, and the one-sided machinery the atomics share.
//
// The origin keeps each operation in an op table and sends a request frame;
// the target performs put and get itself, on memory it registered, after
// checking the registration key, the bounds and the access rights, and
// answers with a reply frame that completes the origin's operation.  The
// module owns this object and hands it the frames its parser finds; the
// object sends through the module's links (TcpModule::enqueue).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "tcp_endpoint.hpp"
#include "tcp_frag.hpp"
#include "tcp_rdma_op.hpp"
#include "tcp_wire.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/free_list.hpp"
#include "transit/btl/util/registration_table.hpp"

namespace transit::tcp {

class TcpComponent;
class TcpModule;

// Writes a request's header + body in front of the fragment's (empty)
// payload, data (if any) going after it; for put, get and the atomics.
template <typename Body>
void fill_request(Frag& f, wire::FrameType type, const Body& body, const void* data,
                  std::size_t size) {
    constexpr std::size_t front = wire::header_size + sizeof(Body);
    std::byte* at = f.payload() - front;
    wire::encode(wire::FrameHeader{wire::frame_magic, type, 0, 0,
                                   static_cast<std::uint32_t>(sizeof(Body) + size)},
                 at);
    wire::encode(body, at + wire::header_size);
    f.iov[0] = {at, front};
    f.iov[1] = {const_cast<void*>(data), size};
    f.iov_count = size ? 2 : 1;
    f.iov_index = 0;
}

class TcpRdma final : public btl::Rdma {
  public:
    using Op = RdmaOp;

    // control: the module's pool of request and reply fragments; limits: the
    // module's frame limits (filled in by the module's constructor).
    TcpRdma(TcpModule& module, TcpComponent& tcp, FragPool& control, const wire::Limits& limits);

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;

    // --- the origin, for TcpAtomics ---------------------------------------------------
    // Takes an op slot and a request fragment, lets fill(frag, key, id) write
    // the request, and sends it; success once it is in flight as `op`.
    template <typename Fill>
    Status start(btl::Endpoint* endpoint, const btl::RegistrationHandle* remote_handle,
                 const Op& op, Fill&& fill) noexcept;
    // Ends every operation in flight to ep (nullptr: all) with `status`.
    void complete_ops(const TcpEndpoint* ep, Status status) noexcept;

    // --- the target, for the module's parser and TcpAtomics ---------------------------
    void handle_put(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept;
    void handle_get(Link& l) noexcept;
    void handle_reply(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept;
    // A payload read straight from the socket is complete.
    void finish_direct(Link& l) noexcept;
    Status check_access(const Link& l, const btl::util::RegistrationKey& key, std::uint64_t address,
                        std::uint64_t size, std::uint32_t access) const noexcept;
    void send_reply(Link& l, std::uint32_t op_id, Status status, std::uint64_t value,
                    const void* data, std::size_t size) noexcept;

  private:
    // Put and get differ in their limit and in which way the data goes.
    Status transfer(const btl::RdmaRequest& req, wire::FrameType type) noexcept;
    // start's two halves that do not depend on the request's type.
    Op* take(Frag*& f) noexcept;
    Status submit(TcpEndpoint& ep, Op& slot, Frag* f, const Op& op) noexcept;
    Op* find_op(const Link& l, std::uint32_t op_id) noexcept;
    void complete_op(std::uint32_t op_id, Status status) noexcept;
    std::uint32_t id_of(const Op& op) const noexcept {
        return static_cast<std::uint32_t>(op.index) |
               (static_cast<std::uint32_t>(op.generation) << 16);
    }
    // Whether a put's or a get reply's payload of `size` bytes is lent to the socket.
    bool lends(std::size_t size) const noexcept;

    TcpModule& module_;
    TcpComponent& tcp_;
    FragPool& control_;
    const wire::Limits& limits_;
    // In flight by id: index (max_rdma_ops <= 65535) | generation << 16.
    btl::util::FreeList<Op> ops_;
    std::span<Op> op_table_;  // ops_'s items, by index
};

template <typename Fill>
Status TcpRdma::start(btl::Endpoint* endpoint, const btl::RegistrationHandle* remote_handle,
                      const Op& op, Fill&& fill) noexcept {
    auto* ep = static_cast<TcpEndpoint*>(endpoint);
    if (ep == nullptr || remote_handle == nullptr) return Status::bad_param;
    if (ep->failed) return Status::peer_failed;
    Frag* f = nullptr;
    Op* slot = take(f);
    if (slot == nullptr) return Status::out_of_resource;
    // The packed handle starts with the target's key (TcpRegistration::key).
    btl::util::RegistrationKey key;
    std::memcpy(&key, static_cast<const void*>(remote_handle), sizeof key);
    fill(*f, key, id_of(*slot));
    return submit(*ep, *slot, f, op);
}

}  // namespace transit::tcp
