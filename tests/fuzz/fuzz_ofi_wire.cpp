// libFuzzer target for what an ofi module reads from other processes: the
// header of a received message (read_message, as OfiModule::on_receive runs
// it, with the length the provider reports; a client's join, read_join), a peer's registration
// handle (remote_refusal, as check_remote runs it before every put, get and atomic), a peer's
// address blob (av_address, what add_procs hands fi_av_insert) and its process id (read_pid).
// Header-only; see ofi_wire.cmake.
//
// The input's first two bytes pick the length the provider reports, the
// provider's own address size and how its addresses end; the rest is the
// bytes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "components/ofi/ofi_wire.hpp"

namespace ofi = transit::ofi;
namespace btl = transit::btl;
using transit::Status;

namespace {

using u128 = unsigned __int128;

void check(bool holds) {
    if (!holds) __builtin_trap();
}

void message(std::span<const std::byte> buffer, std::size_t length) {
    ofi::WireHeader h;
    std::span<const std::byte> body;
    const ofi::Received what = ofi::read_message(buffer, length, h, body);
    const std::size_t received = std::min(length, buffer.size());
    if (received < sizeof h) {
        check(what == ofi::Received::too_short);
        return;
    }
    check(what != ofi::Received::too_short);
    check(body.data() == buffer.data() + sizeof h && body.size() == received - sizeof h);
    std::uint8_t version = 0, kind = 0;
    std::memcpy(&version, buffer.data() + offsetof(ofi::WireHeader, version), 1);
    std::memcpy(&kind, buffer.data() + offsetof(ofi::WireHeader, kind), 1);
    if (version != ofi::wire_version)
        check(what == ofi::Received::other_version);
    else if (kind > 5)
        check(what == ofi::Received::unknown_kind);
    else
        check(static_cast<std::uint8_t>(what) == kind);  // message ... welcome in order
    if (what == ofi::Received::join) {
        // A client's join: the address it names lies inside the body.
        ofi::JoinPayload p;
        std::span<const std::byte> address;
        if (ofi::read_join(body, p, address))
            check(!address.empty() && address.size() <= ofi::max_address_size &&
                  address.data() == body.data() + sizeof p &&
                  sizeof p + address.size() <= body.size());
    }
    if (what == ofi::Received::message && !body.empty()) {
        // What the tag's callback may read: the whole body.
        std::vector<std::byte> copy(body.begin(), body.end());
        check(copy.back() == body.back());
    }
}

// A handle as the pml hands it over: a whole registration handle's bytes.
void handle(std::span<const std::byte> bytes, std::uint64_t address, std::uint64_t size) {
    std::array<std::byte, btl::max_registration_handle_size> raw{};
    std::memcpy(raw.data(), bytes.data(), std::min(bytes.size(), raw.size()));
    const auto* h = reinterpret_cast<const btl::RegistrationHandle*>(raw.data());
    constexpr std::uint64_t provider = 0x5a5a5a5a5a5a5a5a;
    for (std::uint32_t access : {btl::reg_flags::remote_read, btl::reg_flags::remote_write,
                                 btl::reg_flags::remote_atomic}) {
        ofi::PackedHandle p;
        const Status s = ofi::remote_refusal(h, provider, address, size, access, p);
        if (s != Status::success) continue;
        check(p.magic == ofi::handle_magic && p.provider == provider &&
              (p.access & access) == access && address >= p.base &&
              u128{address} + size <= u128{p.base} + p.len);
    }
    ofi::PackedHandle p;
    check(!ofi::unpack(nullptr, p));
    check(ofi::remote_refusal(nullptr, provider, address, size, btl::reg_flags::remote_read, p) ==
          Status::bad_param);
}

void address_blob(std::span<const std::byte> blob, std::size_t own_size, ofi::AddressForm form) {
    std::vector<std::byte> out{std::byte{1}};
    const bool usable = ofi::av_address(blob, own_size, form, out);
    const bool expected = !blob.empty() && blob.size() <= ofi::max_address_size &&
                          (form != ofi::AddressForm::fixed || blob.size() == own_size);
    check(usable == expected);
    if (!usable) {
        check(out.empty());
        return;
    }
    // The provider reads up to its own size, or up to a NUL: both inside.
    check(out.size() >= own_size && out.size() > blob.size());
    check(std::memcmp(out.data(), blob.data(), blob.size()) == 0);
    for (std::size_t i = blob.size(); i < out.size(); ++i) check(out[i] == std::byte{0});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::size_t length = std::size_t{data[0]} * 4;
    const std::size_t own_size = data[1] & 0x3f;
    const auto form = static_cast<ofi::AddressForm>((data[1] >> 6) % 3);
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 2, size - 2);

    message(bytes, length);
    message(bytes, bytes.size());

    // The handle's address and size from the bytes behind it (what a pml
    // puts in a request), so the fuzzer can steer them into the bounds.
    std::uint64_t address = 0, span_size = 0;
    if (bytes.size() >= 64) {
        std::memcpy(&address, bytes.data() + 48, 8);
        std::memcpy(&span_size, bytes.data() + 56, 8);
    }
    handle(bytes, address, span_size);

    address_blob(bytes, own_size, form);

    std::uint32_t pid = 0;
    const bool is_pid = ofi::read_pid(bytes, pid);
    check(is_pid == (bytes.size() == 4 && pid != 0 && pid <= 0x7fffffffu));
    return 0;
}
