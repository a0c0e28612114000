// The endpoints of an openib module (openib_endpoint_table.hpp).
#include "openib_endpoint_table.hpp"

#include <algorithm>

#include "openib_module.hpp"

namespace transit::openib {

EndpointTable::EndpointTable() = default;

EndpointTable::~EndpointTable() = default;

Endpoint* EndpointTable::find(Rank peer) const noexcept {
    auto it = by_rank_.find(peer);
    return it == by_rank_.end() ? nullptr : it->second;
}

Endpoint* EndpointTable::on_qp(std::uint32_t qpn) const noexcept {
    auto it = by_qpn_.find(qpn);
    return it == by_qpn_.end() ? nullptr : it->second;
}

Endpoint* EndpointTable::owned(const btl::Endpoint* e) const noexcept {
    auto it = std::find_if(endpoints_.begin(), endpoints_.end(),
                           [e](const auto& p) { return p.get() == e; });
    return it == endpoints_.end() ? nullptr : it->get();
}

Endpoint& EndpointTable::add(std::unique_ptr<Endpoint> ep) {
    Endpoint& raw = *ep;
    endpoints_.push_back(std::move(ep));
    by_rank_[raw.peer()] = &raw;
    return raw;
}

void EndpointTable::qp_created(Endpoint& ep) {
    by_qpn_[ep.qp()->qp_num] = &ep;
}

void EndpointTable::forget(Endpoint* ep) noexcept {
    for (Endpoint** p = &attention_head_; *p; p = &(*p)->attention_next) {
        if (*p == ep) {
            *p = ep->attention_next;
            break;
        }
    }
    if (ep->qp()) by_qpn_.erase(ep->qp()->qp_num);
    by_rank_.erase(ep->peer());
}

void EndpointTable::erase(Endpoint* ep) noexcept {
    std::erase_if(endpoints_, [ep](const auto& p) { return p.get() == ep; });
}

void EndpointTable::attention(Endpoint& ep) noexcept {
    if (ep.on_attention) return;
    ep.on_attention = true;
    ep.attention_next = attention_head_;
    attention_head_ = &ep;
}

Endpoint* EndpointTable::take_attention() noexcept {
    Endpoint* list = attention_head_;
    attention_head_ = nullptr;
    return list;
}

bool EndpointTable::rdma_in_flight() const noexcept {
    return std::any_of(endpoints_.begin(), endpoints_.end(),
                       [](const auto& ep) { return ep->rdma_in_flight > 0 && !ep->failed(); });
}

}  // namespace transit::openib
