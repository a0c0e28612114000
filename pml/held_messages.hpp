// Messages kept while the context is set up, replayed in arrival order once
// it is: those that came before the peer table existed (Engine) and active
// messages for handlers not registered yet (ActiveMessages).  The list is
// intrusive (RawMsg's own links), so keeping a message allocates no node and
// cannot fail after its copy was made.
#pragma once

#include <cstddef>
#include <utility>

#include "pml/core.hpp"

namespace transit::pml {

class HeldMessages {
  public:
    explicit HeldMessages(std::size_t limit) noexcept : limit_(limit) {}

    // Keeps a copy of the message; false when the bound or memory ran out.
    bool hold(Core& c, const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
        if (list_.size() >= limit_) return false;
        RawMsg* m = c.keep(bytes, len, tag);
        if (m == nullptr) return false;
        list_.push_back(m);
        return true;
    }

    // Hands every message held to `f`, oldest first, then releases it; one
    // held again meanwhile waits for the next call.  The number replayed.
    template <typename F>
    std::size_t replay(Core& c, F f) noexcept {
        List<RawMsg> now;
        std::swap(now, list_);
        std::size_t n = 0;
        while (RawMsg* m = now.pop_front()) {
            f(*m);
            c.drop(m);
            ++n;
        }
        return n;
    }

    void drop_all(Core& c) noexcept {
        while (RawMsg* m = list_.pop_front()) c.drop(m);
    }
    bool empty() const noexcept { return list_.empty(); }

  private:
    List<RawMsg> list_;
    std::size_t limit_;
};

}  // namespace transit::pml
