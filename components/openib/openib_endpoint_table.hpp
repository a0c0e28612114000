// The endpoints of an openib module: owned here, found by peer rank and by
// the number of their RC queue pair, and the list of those that need
// attention at the next progress pass (queued work, credits to return, an
// atomic request waiting for a fragment, a failure to report).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "transit/runtime.hpp"

namespace transit::btl {
class Endpoint;
}

namespace transit::openib {

class Endpoint;

class EndpointTable {
  public:
    EndpointTable();
    ~EndpointTable();
    EndpointTable(const EndpointTable&) = delete;
    EndpointTable& operator=(const EndpointTable&) = delete;

    Endpoint* find(Rank peer) const noexcept;
    Endpoint* on_qp(std::uint32_t qpn) const noexcept;
    // One of ours, or nullptr (a caller's handle checked before use).
    Endpoint* owned(const btl::Endpoint* e) const noexcept;
    const std::vector<std::unique_ptr<Endpoint>>& all() const noexcept { return endpoints_; }

    Endpoint& add(std::unique_ptr<Endpoint> ep);
    // ep made its queue pair: completions name it by the pair's number.
    void qp_created(Endpoint& ep);
    // Takes ep out of the lookups and the attention list (it is still owned:
    // a completion already polled may name it until it is freed).
    void forget(Endpoint* ep) noexcept;
    // Frees a forgotten endpoint, or all of them.
    void erase(Endpoint* ep) noexcept;
    void clear() noexcept { endpoints_.clear(); }

    void attention(Endpoint& ep) noexcept;
    bool needs_attention() const noexcept { return attention_head_ != nullptr; }
    // The list of endpoints that asked for attention, now emptied.
    Endpoint* take_attention() noexcept;

    // Some live endpoint has RDMA work in flight.
    bool rdma_in_flight() const noexcept;

  private:
    std::vector<std::unique_ptr<Endpoint>> endpoints_;
    std::unordered_map<Rank, Endpoint*> by_rank_;
    std::unordered_map<std::uint32_t, Endpoint*> by_qpn_;
    Endpoint* attention_head_ = nullptr;
};

}  // namespace transit::openib
