// The shared pieces' out-of-line parts.
#include "pml/core.hpp"

#include <cstring>

#include "pml/active_messages.hpp"

namespace transit::pml {

void Core::complete_internal(Req* r) noexcept {
    if (r->kind == Req::Kind::recv)
        am->finish(r);
    else if (r->origin_counter)
        r->origin_counter->add(1);
    release(r);
}

void Core::drop(RawMsg* m) noexcept {
    buffers.put(m->data, m->cls);
    m->data = nullptr;
    raws.put(m);
}

RawMsg* Core::keep(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
    RawMsg* m = raws.get();
    if (!m) return nullptr;
    m->data = buffers.get(len ? len : 1, m->cls);
    if (!m->data) {
        raws.put(m);
        return nullptr;
    }
    std::memcpy(m->data, bytes, len);
    m->len = len;
    m->btl_tag = tag;
    return m;
}

}  // namespace transit::pml
