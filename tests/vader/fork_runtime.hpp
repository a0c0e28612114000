// A job of N fork()ed processes for btl-level tests of vader before (and
// besides) the launcher: the modex is a table in a shared mapping and the fence
// a barrier on it.  Everything vader does (segments, FIFOs, CMA, pids) is real.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "transit/runtime.hpp"

namespace transit::vader::test {

struct JobArea {
    static constexpr int max_ranks = 8;
    std::atomic<std::uint32_t> arrived;
    std::atomic<std::uint32_t> generation;
    struct Blob {
        std::atomic<std::uint32_t> len;
        char data[248];
    } blobs[max_ranks];
    // For a test's own signal between its processes, outside any transport
    // (e.g. "posted": the other side may now stop serving).
    std::atomic<std::uint32_t> signal;
};

class ForkRuntime final : public rt::Runtime {
  public:
    ForkRuntime(JobArea* area, Rank rank, std::uint32_t size, std::string job)
        : area_(area), rank_(rank), size_(size), job_(std::move(job)), peers_(size) {
        std::iota(peers_.begin(), peers_.end(), Rank{0});
    }
    Rank rank() const noexcept override { return rank_; }
    std::uint32_t size() const noexcept override { return size_; }
    std::uint32_t local_rank() const noexcept override { return rank_; }
    std::uint32_t local_size() const noexcept override { return size_; }
    const std::string& job_id() const noexcept override { return job_; }
    const std::string& node_id() const noexcept override { return node_; }
    bool is_singleton() const noexcept override { return size_ == 1; }
    std::span<const Rank> local_peers() const noexcept override { return peers_; }
    bool on_this_node(Rank peer) const noexcept override { return peer < size_; }
    const rt::Secret& job_secret() const noexcept override { return secret_; }
    Status modex_send(std::string_view, std::span<const std::byte> blob) override {
        if (blob.size() > sizeof area_->blobs[0].data) return Status::bad_param;
        std::memcpy(area_->blobs[rank_].data, blob.data(), blob.size());
        area_->blobs[rank_].len.store(static_cast<std::uint32_t>(blob.size()),
                                      std::memory_order_release);
        return Status::success;
    }
    Status modex_recv(Rank peer, std::string_view, std::vector<std::byte>& blob) override {
        if (peer >= size_) return Status::not_found;
        const std::uint32_t len = area_->blobs[peer].len.load(std::memory_order_acquire);
        if (len == 0) return Status::not_found;
        const auto* p = reinterpret_cast<const std::byte*>(area_->blobs[peer].data);
        blob.assign(p, p + len);
        return Status::success;
    }
    Status fence() override {
        const std::uint32_t gen = area_->generation.load(std::memory_order_acquire);
        if (area_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
            area_->arrived.store(0, std::memory_order_relaxed);
            area_->generation.store(gen + 1, std::memory_order_release);
            return Status::success;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (area_->generation.load(std::memory_order_acquire) == gen) {
            if (std::chrono::steady_clock::now() > deadline) return Status::timeout;
            sched_yield();
        }
        return Status::success;
    }
    int numa_node() const noexcept override { return -1; }
    std::string binding() const override { return {}; }
    int distance_to_device(std::string_view) const override { return -1; }

  private:
    JobArea* area_;
    Rank rank_;
    std::uint32_t size_;
    std::string job_;
    std::string node_ = "forked-test-node";
    std::vector<Rank> peers_;
    rt::Secret secret_{};
};

}  // namespace transit::vader::test
