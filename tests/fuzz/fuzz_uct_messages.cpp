// libFuzzer target for what a uct module reads from a peer's active messages
// and address: the wire header (read_message, as UctModule::handle and
// deliver_now run it), the one-sided requests a target serves (read_put,
// read_get, read_atomic and the registration check they pass, as on_put,
// on_get and on_atomic run them; a refused request still names the operation
// its error answer goes to), the replies an initiator takes
// (read_rdma_reply, reply_fits, read_atomic_reply) and the modex blob
// (read_address, as connect runs it).  Header-only; see uct_messages.cmake.
//
// The input's first two bytes pick the largest get reply and the size of the
// operation a reply answers; the rest is one message, and also an address.
// The target's registration is 256 bytes at address 0x1000 (a buffer here):
// what the checks accept is written or read there, so ASan sees any byte a
// check let through outside it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "components/uct/uct_wire.hpp"

namespace uct = transit::uct;
namespace btl = transit::btl;
using transit::ok;
using transit::Status;

namespace {

using u128 = unsigned __int128;

constexpr std::uint64_t region_base = 0x1000;
constexpr std::uint64_t region_len = 256;
constexpr std::uint32_t region_access =
    btl::reg_flags::remote_read | btl::reg_flags::remote_write | btl::reg_flags::remote_atomic;

void check(bool holds) {
    if (!holds) __builtin_trap();
}

bool inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
    return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// The registration check as the target runs it, against the exact answer.
Status check_range(std::uint64_t address, std::uint64_t length, std::uint32_t access,
                   std::uint32_t granted = region_access) {
    const Status s = btl::range_permits(region_base, region_len, granted, address, length, access);
    const bool covered =
        address >= region_base && u128{address} + length <= u128{region_base} + region_len;
    if ((granted & access) != access)
        check(s == Status::access_denied);
    else
        check((s == Status::success) == covered && (covered || s == Status::bad_param));
    return s;
}

std::byte* at(std::array<std::byte, region_len>& memory, std::uint64_t address) {
    return memory.data() + (address - region_base);
}

// What a refused request is answered with: its operation, read from the
// body, whenever the body is long enough to name one.
void check_answerable(std::span<const std::byte> body, std::uint32_t op, std::uint32_t generation) {
    if (!uct::answerable(body)) return;
    std::uint32_t want[2];
    std::memcpy(want, body.data(), sizeof want);
    check(op == want[0] && generation == want[1]);
}

void requests(std::span<const std::byte> body, std::size_t max_reply) {
    std::array<std::byte, region_len> memory{};
    uct::RdmaRequest req;
    std::span<const std::byte> data;
    Status s = uct::read_put(body, req, data);
    check_answerable(body, req.op, req.generation);
    if (s == Status::success) {
        check(body.size() == sizeof req + req.length && data.size() == req.length &&
              inside(data, body));
        if (check_range(req.address, data.size(), btl::reg_flags::remote_write) ==
                Status::success &&
            !data.empty())
            std::memcpy(at(memory, req.address), data.data(), data.size());
    } else {
        check(s == Status::bad_param && data.empty() &&
              (body.size() < sizeof req || body.size() - sizeof req != req.length));
    }
    s = uct::read_get(body, max_reply, req);
    check_answerable(body, req.op, req.generation);
    check((s == Status::success) == (body.size() >= sizeof req && req.length <= max_reply));
    if (s == Status::success) s = check_range(req.address, req.length, btl::reg_flags::remote_read);
    if (s == Status::success) {
        std::vector<std::byte> reply(req.length);  // the get_rep's data
        if (!reply.empty()) std::memcpy(reply.data(), at(memory, req.address), reply.size());
    }
    uct::AtomicRequest amo;
    s = uct::read_atomic(body, amo);
    check_answerable(body, amo.op, amo.generation);
    const std::size_t width = uct::atomic_width(amo);
    check(width == (amo.bits32 != 0 ? 4u : 8u));
    check((s == Status::success) ==
          (body.size() >= sizeof amo && amo.mode <= 2 &&
           (amo.mode == 2 || btl::is_atomic_op(amo.amo)) && amo.address % width == 0));
    if (s == Status::success) s = check_range(amo.address, width, btl::reg_flags::remote_atomic);
    if (s == Status::success) {
        // What btl::apply_atomic reads and writes: the aligned word.
        std::uint64_t word = amo.operand;
        std::memcpy(at(memory, amo.address), &word, width);
    }
}

void replies(std::span<const std::byte> body, std::uint64_t op_size) {
    uct::RdmaReply r;
    std::span<const std::byte> data;
    if (uct::read_rdma_reply(body, r, data)) {
        check(body.size() >= sizeof r && data.size() == body.size() - sizeof r &&
              inside(data, body));
        // A status that names none is an error, never success.
        check(ok(transit::status_from_wire(r.status)) == (r.status == 0 || r.status == 1));
        const bool fits = uct::reply_fits(r, data.size(), op_size);
        check(fits == (r.length == data.size() && u128{r.offset} + r.length <= op_size));
        if (fits && !data.empty()) {
            std::vector<std::byte> local(op_size);  // the initiator's buffer
            std::memcpy(local.data() + r.offset, data.data(), data.size());
        }
    } else {
        check(body.size() < sizeof r);
    }
    uct::AtomicReply a;
    check(uct::read_atomic_reply(body, a) == (body.size() >= sizeof a));
}

void address(std::span<const std::byte> blob) {
    uct::AddressHeader h;
    if (uct::read_address(blob, h) != nullptr) return;
    check(h.magic == uct::address_magic && h.version == uct::wire_version);
    const std::size_t total =
        sizeof h + std::size_t{h.device_len} + h.iface_len + h.rdma_device_len + h.rdma_iface_len;
    check(total == blob.size());
    // What connect and connect_native read: each address inside the blob.
    std::vector<std::byte> copy(blob.begin(), blob.end());
    std::size_t offset = sizeof h;
    for (std::size_t len : {std::size_t{h.device_len}, std::size_t{h.iface_len},
                            std::size_t{h.rdma_device_len}, std::size_t{h.rdma_iface_len}}) {
        if (len > 0) check(copy[offset + len - 1] == blob[offset + len - 1]);
        offset += len;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
    if (size < 2) return 0;
    const std::size_t max_reply = std::size_t{bytes[0]} * 64;
    const std::uint64_t op_size = std::uint64_t{bytes[1]} * 97;
    const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(bytes) + 2,
                                             size - 2);

    uct::WireHeader h;
    std::span<const std::byte> body;
    const bool read = uct::read_message(message, h, body);
    check(read == (message.size() >= sizeof h));
    if (read) {
        check(body.data() == message.data() + sizeof h && body.size() == message.size() - sizeof h);
        check(uct::known_kind(h.kind) == (h.kind >= 1 && h.kind <= 11));
        // Every decoder over every body, whatever the kind says: a hostile
        // peer picks the kind as freely as the bytes behind it.
        requests(body, max_reply);
        replies(body, op_size);
        uct::JoinRequest j;
        std::span<const std::byte> addresses;
        if (uct::read_join(body, j, addresses) == nullptr)
            check(addresses.size() == std::size_t{j.device_len} + j.iface_len &&
                  addresses.data() + addresses.size() == body.data() + body.size() &&
                  uct::is_channel(j.server_channel) && uct::is_channel(j.client_channel));
    }
    address(message);
    return 0;
}
