#include "runtime/dynamic_runtime.hpp"

#include "runtime/job_secret.hpp"

namespace transit::rt {

const Secret& DynamicRuntime::listen_token() {
    if (!token_) token_ = random_secret();
    return *token_;
}

Rank DynamicRuntime::add(Entry e) noexcept {
    if (next_id_ == any_rank) return any_rank;
    try {
        entries_.emplace(next_id_, std::move(e));
    } catch (...) {
        return any_rank;
    }
    return next_id_++;
}

Rank DynamicRuntime::add_server(PeerAddress address) {
    return add({std::move(address)});
}

Rank DynamicRuntime::admit() noexcept {
    const Rank id = add({});
    if (id != any_rank && admit_fn_) admit_fn_(admit_cbdata_, id);
    return id;
}

void DynamicRuntime::release(Rank peer) noexcept {
    entries_.erase(peer);
}

const DynamicRuntime::Entry* DynamicRuntime::entry(Rank peer) const noexcept {
    if (peer < inner_->size()) return nullptr;
    auto it = entries_.find(peer);
    return it == entries_.end() ? nullptr : &it->second;
}

bool DynamicRuntime::is_dynamic(Rank peer) const noexcept {
    return entry(peer) != nullptr;
}

bool DynamicRuntime::token_matches(const Secret& token) const noexcept {
    if (!token_) return false;
    unsigned char diff = 0;  // constant time: no early exit on the first difference
    for (std::size_t i = 0; i < token.size(); ++i)
        diff |= static_cast<unsigned char>(token[i] ^ (*token_)[i]);
    return diff == 0;
}

const Secret* DynamicRuntime::token_for(Rank peer) const noexcept {
    const Entry* e = entry(peer);
    return e && e->address ? &e->address->token : nullptr;
}

bool DynamicRuntime::on_this_node(Rank peer) const noexcept {
    if (peer < inner_->size()) return inner_->on_this_node(peer);
    const Entry* e = entry(peer);
    return e && e->address && e->address->node_id == inner_->node_id();
}

Status DynamicRuntime::modex_send(std::string_view key, std::span<const std::byte> blob) {
    const Status s = inner_->modex_send(key, blob);
    if (ok(s)) published_[std::string(key)].assign(blob.begin(), blob.end());
    return s;
}

Status DynamicRuntime::modex_recv(Rank peer, std::string_view key, std::vector<std::byte>& blob) {
    if (peer < inner_->size()) return inner_->modex_recv(peer, key, blob);
    const Entry* e = entry(peer);
    if (!e) return Status::bad_param;
    if (!e->address) return Status::not_found;  // a client: it connected to us
    auto it = e->address->blobs.find(key);
    if (it == e->address->blobs.end()) return Status::not_found;
    blob = it->second;
    return Status::success;
}

}  // namespace transit::rt
