// The runtime the pml hands its transports: the launcher's (or the
// singleton's) runtime, plus the peers outside the job (rt::DynamicPeers).
// Every question about a job rank goes to the inner runtime; a dynamic peer's
// modex blobs and node come from the address it was reached by.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/name_choice.hpp"
#include "transit/runtime.hpp"

namespace transit::rt {

// What the address of a listening context says (see the pml's address.hpp).
struct PeerAddress {
    Secret token{};
    std::string node_id;
    std::map<std::string, std::vector<std::byte>, std::less<>> blobs;  // modex key -> blob
};

class DynamicRuntime final : public Runtime, public DynamicPeers {
  public:
    explicit DynamicRuntime(std::unique_ptr<Runtime> inner) : inner_(std::move(inner)) {}

    // --- the context's side ------------------------------------------------------
    // The launcher's (or the singleton's) runtime.
    Runtime& inner() noexcept { return *inner_; }
    // Who keeps this process's names: the launcher, or the node's name directory.
    NameChoice& names() noexcept { return names_; }
    // This process's token, made on first call (random, 128 bits).
    const Secret& listen_token();
    bool listening() const noexcept { return token_.has_value(); }
    // The blobs this process published, by key (for its address).
    const std::map<std::string, std::vector<std::byte>, std::less<>>& published() const noexcept {
        return published_;
    }
    // A server reached by its address: its new id.
    Rank add_server(PeerAddress address);
    // The peer is gone for good: its entry goes, its id is never given again.
    void release(Rank peer) noexcept;
    // Every id given so far is below this.
    Rank id_limit() const noexcept { return next_id_; }
    // Dynamic peers not released (for tests and tools: a released one keeps nothing).
    std::size_t live_count() const noexcept { return entries_.size(); }
    // Called (from inside the transport's progress) with each client admitted.
    void on_admit(void (*fn)(void* cbdata, Rank peer), void* cbdata) noexcept {
        admit_fn_ = fn;
        admit_cbdata_ = cbdata;
    }

    // --- DynamicPeers --------------------------------------------------------------
    bool is_dynamic(Rank peer) const noexcept override;
    bool token_matches(const Secret& token) const noexcept override;
    const Secret* token_for(Rank peer) const noexcept override;
    Rank admit() noexcept override;

    // --- Runtime: job ranks go to the inner runtime ---------------------------------
    Rank rank() const noexcept override { return inner_->rank(); }
    std::uint32_t size() const noexcept override { return inner_->size(); }
    std::uint32_t local_rank() const noexcept override { return inner_->local_rank(); }
    std::uint32_t local_size() const noexcept override { return inner_->local_size(); }
    const std::string& job_id() const noexcept override { return inner_->job_id(); }
    const std::string& node_id() const noexcept override { return inner_->node_id(); }
    bool is_singleton() const noexcept override { return inner_->is_singleton(); }
    std::span<const Rank> local_peers() const noexcept override { return inner_->local_peers(); }
    bool on_this_node(Rank peer) const noexcept override;
    const Secret& job_secret() const noexcept override { return inner_->job_secret(); }
    Status modex_send(std::string_view key, std::span<const std::byte> blob) override;
    Status modex_recv(Rank peer, std::string_view key, std::vector<std::byte>& blob) override;
    Status fence() override { return inner_->fence(); }
    int numa_node() const noexcept override { return inner_->numa_node(); }
    std::string binding() const override { return inner_->binding(); }
    int distance_to_device(std::string_view pci_bus_id) const override {
        return inner_->distance_to_device(pci_bus_id);
    }
    std::uint32_t lost_count() const noexcept override { return inner_->lost_count(); }
    std::vector<Rank> lost_ranks() const override { return inner_->lost_ranks(); }
    void report_lost(Rank peer) noexcept override { inner_->report_lost(peer); }
    DynamicPeers* dynamic_peers() noexcept override { return this; }

  private:
    struct Entry {
        std::optional<PeerAddress> address;  // a server's; none for a client
    };
    const Entry* entry(Rank peer) const noexcept;
    Rank add(Entry e) noexcept;

    std::unique_ptr<Runtime> inner_;
    NameChoice names_{*inner_};  // its directory's names go before the runtime
    std::optional<Secret> token_;
    std::map<std::string, std::vector<std::byte>, std::less<>> published_;
    // Live peers only: a server up for days keeps nothing of the clients gone.
    std::unordered_map<Rank, Entry> entries_;
    Rank next_id_ = inner_->size();
    void (*admit_fn_)(void*, Rank) = nullptr;
    void* admit_cbdata_ = nullptr;
};

}  // namespace transit::rt
