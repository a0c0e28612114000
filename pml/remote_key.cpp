#include "pml/remote_key.hpp"

#include <cstring>

namespace transit::pml {

namespace {

template <typename T>
bool get_bytes(std::span<const std::byte>& in, T& v) {
    if (in.size() < sizeof v) return false;
    std::memcpy(&v, in.data(), sizeof v);
    in = in.subspan(sizeof v);
    return true;
}

}  // namespace

Status decode_key(std::span<const std::byte> in, RemoteKeyImpl& out) {
    std::uint32_t magic = 0, count = 0;
    if (!get_bytes(in, magic) || magic != key_magic || !get_bytes(in, out.region) ||
        !get_bytes(in, out.secret) || !get_bytes(in, out.base) || !get_bytes(in, out.size) ||
        !get_bytes(in, count) || count > max_key_entries)
        return Status::bad_param;
    for (std::uint32_t i = 0; i < count; ++i) {
        RemoteKeyImpl::Entry e;
        std::uint32_t len = 0;
        if (!get_bytes(in, e.component) || !get_bytes(in, len) || len > in.size() ||
            len > btl::max_registration_handle_size)
            return Status::bad_param;
        e.handle.assign(in.begin(), in.begin() + len);
        in = in.subspan(len);
        out.entries.push_back(std::move(e));
    }
    return in.empty() ? Status::success : Status::bad_param;
}

}  // namespace transit::pml
