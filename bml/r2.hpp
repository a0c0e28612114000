// The bml (r2): per-peer endpoint tables over the btl modules.  An endpoint is
// built the first time a peer is used, so memory grows with the peers a
// process talks to, not with the job.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/repository.hpp"
#include "transit/btl/module.hpp"
#include "transit/log.hpp"

namespace transit::bml {

// Registers the bml's parameters (for transit_info; the bml does it itself too).
void register_params();

// One module's way to a peer.
struct BtlRef {
    btl::Module* module = nullptr;
    btl::Endpoint* endpoint = nullptr;
    double weight = 1.0;      // share of striped traffic, from bandwidth
    std::uint32_t index = 0;  // position of the module in the framework's list
    double current = 0;       // smooth weighted round robin state
    // The module's capabilities, asked once here so that each one-sided
    // operation is one virtual call (nullptr: not offered).
    btl::Rdma* rdma = nullptr;
    btl::Atomics* atomics = nullptr;
};

struct Endpoint {
    Rank peer = any_rank;
    std::vector<BtlRef> eager;      // send list ordered by latency, lowest first
    std::vector<BtlRef> send;       // highest exclusivity that reaches the peer
    std::vector<BtlRef> rdma;       // every module offering rdma() with put or get
    std::uint32_t next_eager = 0;   // round robin over equal-latency eager modules
    std::uint32_t eager_equal = 1;  // how many at the head share the lowest latency
    std::size_t eager_limit = 0;    // smallest eager limit of the eager modules
    // A rank on another node reached by several modules that send: all of
    // them, kept (they also carry what the peer's own choice sends us) until
    // the pml has measured each and told choose() which is fastest.
    std::vector<BtlRef> candidates;

    // The module for the next first fragment: round robin among the fastest.
    const BtlRef& pick_eager() noexcept {
        if (eager_equal == 1) return eager[0];
        const BtlRef& r = eager[next_eager];
        if (++next_eager == eager_equal) next_eager = 0;
        return r;
    }
    // The module for the next fragment: smooth weighted round robin over the
    // send list, so each module carries its bandwidth share.
    BtlRef& pick_send() noexcept {
        if (send.size() == 1) return send[0];
        BtlRef* best = &send[0];
        for (BtlRef& r : send) {
            r.current += r.weight;
            if (r.current > best->current) best = &r;
        }
        best->current -= 1.0;
        return *best;
    }
};

// Why each component did or did not reach a peer (for errors and verbose output).
struct ComponentInfo {
    std::string name;
    mca::ComponentState state;
    std::string reason;
};

class R2 {
  public:
    R2(std::span<btl::Module* const> modules, std::vector<ComponentInfo> components, Rank self,
       std::uint32_t job_size);
    ~R2();
    R2(const R2&) = delete;
    R2& operator=(const R2&) = delete;

    // The peer's endpoint, built on first use; nullptr when nothing reaches it
    // (the error has then been printed once) or when peer is out of range.
    Endpoint* endpoint(Rank peer) noexcept {
        if (peer < endpoints_.size() && endpoints_[peer]) [[likely]]
            return endpoints_[peer].get();
        return create(peer);
    }
    // Releases a peer outside the job (ids >= the job size): its endpoints go
    // (the modules close what they hold) and nothing of it stays here; the
    // pml never asks for it again (ids are not reused).
    void release(Rank peer) noexcept;
    // The same, without building.
    Endpoint* existing(Rank peer) const noexcept {
        if (peer < endpoints_.size()) return endpoints_[peer].get();
        auto it = dynamic_.find(peer);
        return it == dynamic_.end() ? nullptr : it->second.get();
    }
    // Endpoints of peers outside the job (for tests and tools).
    std::size_t dynamic_count() const noexcept { return dynamic_.size(); }
    std::span<btl::Module* const> modules() const noexcept { return modules_; }
    const std::string& last_error() const noexcept { return last_error_; }

    // The job's ranks on other nodes (true at their index): their endpoints
    // keep every module that sends as a candidate to measure
    // (bml_base_measure).  Before the first endpoint is built.
    void set_other_nodes(std::vector<bool> other_node) { other_node_ = std::move(other_node); }
    // What measuring found (`figures`, for the log): candidates[small]
    // carries the peer's messages, candidates[bulk] the fragments and
    // one-sided transfers of large ones.
    void choose(Endpoint& ep, std::size_t small, std::size_t bulk, std::string_view figures);
    // A line at bml_base_verbose 10 (what measuring could not decide).
    void explain(std::string_view line) const { out_.verbose(10, "{}", line); }

  private:
    // explain: log why nothing reaches the peer (false when releasing one: a
    // peer gone is reached by nothing, and that is no error).
    Endpoint* create(Rank peer, bool explain = true) noexcept;
    void build(Rank peer, Endpoint& ep, std::vector<std::string>& why);
    void keep_one_module(Rank peer, std::vector<BtlRef>& reach, std::vector<std::string>& why);
    void delete_endpoint(Rank peer, Endpoint& ep) noexcept;
    void print_table(const Endpoint& ep, const std::vector<std::string>& why) const;
    std::string unreachable_message(Rank peer, const std::vector<std::string>& why) const;

    std::vector<btl::Module*> modules_;
    std::vector<ComponentInfo> components_;
    std::vector<std::unique_ptr<Endpoint>> endpoints_;             // the job's ranks
    std::vector<bool> reported_;                                   // the job's ranks
    std::unordered_map<Rank, std::unique_ptr<Endpoint>> dynamic_;  // peers outside the job
    Rank self_;
    std::uint32_t job_size_;
    std::vector<bool> other_node_;
    bool measure_ = true;
    log::Stream out_;
    std::string last_error_;
};

}  // namespace transit::bml
