// For tests of btl/ofi's address handling: a job of two ranks on one node
// whose modex is a map the test fills, and a framework opened over it.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "framework/btl_framework.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/progress.hpp"
#include "transit/runtime.hpp"

namespace transit::test {

// Rank 0 of two on one node; rank 1 exists only as what the test puts in the modex.
class TwoRankRuntime final : public rt::Runtime {
  public:
    Rank rank() const noexcept override { return 0; }
    std::uint32_t size() const noexcept override { return 2; }
    std::uint32_t local_rank() const noexcept override { return 0; }
    std::uint32_t local_size() const noexcept override { return 2; }
    const std::string& job_id() const noexcept override { return job_; }
    const std::string& node_id() const noexcept override { return node_; }
    bool is_singleton() const noexcept override { return false; }
    std::span<const Rank> local_peers() const noexcept override { return peers_; }
    bool on_this_node(Rank peer) const noexcept override { return peer < 2; }
    const rt::Secret& job_secret() const noexcept override { return secret_; }
    Status modex_send(std::string_view key, std::span<const std::byte> blob) override {
        modex_[{0, std::string(key)}].assign(blob.begin(), blob.end());
        return Status::success;
    }
    Status modex_recv(Rank peer, std::string_view key, std::vector<std::byte>& blob) override {
        auto it = modex_.find({peer, std::string(key)});
        if (it == modex_.end()) return Status::not_found;
        blob = it->second;
        return Status::success;
    }
    Status fence() override { return Status::success; }
    int numa_node() const noexcept override { return -1; }
    std::string binding() const override { return {}; }
    int distance_to_device(std::string_view) const override { return -1; }

    std::map<std::pair<Rank, std::string>, std::vector<std::byte>> modex_;

  private:
    std::string job_ = "ofi-address-test";
    std::string node_ = "this-node";
    std::vector<Rank> peers_{0, 1};
    rt::Secret secret_{};
};

// A framework and its module named `name` ("ofi:shm"), or nullptr there when
// there is none.
struct Opened {
    ProgressEngine progress;
    btl::AmTable am;
    std::unique_ptr<btl::Framework> fw;
    btl::Module* module = nullptr;

    Opened(rt::Runtime& runtime, std::string_view name) {
        fw = std::make_unique<btl::Framework>(runtime, progress, am);
        fw->open();
        fw->init();
        for (btl::Module* m : fw->modules())
            if (m->name() == name) module = m;
    }
};

}  // namespace transit::test
