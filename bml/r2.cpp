#include "bml/r2.hpp"

#include <algorithm>

#include "transit/params.hpp"
#include "transit/params_bind.hpp"

namespace transit::bml {

namespace {

struct Config {
    int verbose = 0;
    bool measure = true;
};

constexpr params::Field<Config> bml_params[] = {
    params::to<&Config::verbose>(
        params::Decl{"verbose", params::Type::integer, "0",
                     "Verbosity of the bml: 10 prints each peer's endpoint table and why each "
                     "module was taken or left",
                     5}
            .range(0, 100)),
    params::to<&Config::measure>(params::Decl{
        "measure", params::Type::boolean, "true",
        "Across nodes, choose the transport by what is measured: every transport that sends "
        "and reaches a rank on another node is probed at start-up (a few 8 B round trips and "
        "bursts of large frames, about 1 MiB each): the fastest at 8 B carries the rank's small "
        "messages, the widest its large messages and put/get; false: the highest exclusivity, "
        "striped by nominal bandwidth",
        4}),
};

}  // namespace

void register_params() {
    params::add_all(params::registry(), "bml", "base", bml_params);
}

namespace {

Config read_config() {
    register_params();
    Config c;
    params::bind(params::registry(), "bml", "base", bml_params, c);
    return c;
}

std::string describe(const BtlRef& r) {
    const auto& a = r.module->attributes();
    return fmt::format("{} (exclusivity {}, latency {}, bandwidth {} MB/s, weight {:.2f})",
                       r.module->name(), a.exclusivity, a.latency, a.bandwidth, r.weight);
}

// A module belongs in the rdma list when it hands out the interface and its
// flags say put or get works.
bool offers_rdma(const BtlRef& r) {
    return r.rdma != nullptr &&
           (r.module->attributes().flags & (btl::flags::put | btl::flags::get)) != 0;
}

}  // namespace

R2::R2(std::span<btl::Module* const> modules, std::vector<ComponentInfo> components, Rank self,
       std::uint32_t job_size)
    : modules_(modules.begin(), modules.end()),
      components_(std::move(components)),
      endpoints_(job_size),
      reported_(job_size, false),
      self_(self),
      job_size_(job_size) {
    const Config config = read_config();
    measure_ = config.measure;
    out_ = log::Stream("bml", config.verbose);
    for (const ComponentInfo& c : components_)
        if (c.state != mca::ComponentState::active)
            out_.verbose(10, "{} not used: {}{}{}", c.name, mca::to_string(c.state),
                         c.reason.empty() ? "" : ": ", c.reason);
}

R2::~R2() {
    for (std::size_t peer = 0; peer < endpoints_.size(); ++peer)
        if (endpoints_[peer]) delete_endpoint(static_cast<Rank>(peer), *endpoints_[peer]);
    for (auto& [peer, ep] : dynamic_) delete_endpoint(peer, *ep);
}

void R2::delete_endpoint(Rank r, Endpoint& ep) noexcept {
    // Each module that holds an endpoint of the peer lets it go once: the
    // send list's, the rdma-only ones (lower exclusivity) and the candidates
    // measuring kept.
    std::vector<btl::Module*> released;
    auto release = [&](const std::vector<BtlRef>& list) {
        for (const BtlRef& ref : list) {
            if (std::find(released.begin(), released.end(), ref.module) != released.end()) continue;
            released.push_back(ref.module);
            btl::Endpoint* e = ref.endpoint;
            ref.module->del_procs({&r, 1}, {&e, 1});
        }
    };
    release(ep.send);
    release(ep.rdma);
    release(ep.candidates);
}

void R2::release(Rank peer) noexcept {
    if (peer < job_size_ || peer == any_rank) return;
    // A client we only received from has no endpoint here, but its transport
    // holds its connection: built now, so that deleting it closes that.
    if (!existing(peer)) create(peer, false);
    auto it = dynamic_.find(peer);
    if (it == dynamic_.end()) return;
    const std::unique_ptr<Endpoint> ep = std::move(it->second);
    dynamic_.erase(it);
    delete_endpoint(peer, *ep);
}

Endpoint* R2::create(Rank peer, bool explain) noexcept {
    if (peer == any_rank) {
        last_error_ = "any_rank names no peer";
        return nullptr;
    }
    // Ids past the job are peers outside it (the pml asks only for those it
    // knows, and never again for one released).
    const bool dynamic = peer >= job_size_;
    if (Endpoint* known = dynamic ? existing(peer) : nullptr) return known;
    if (!dynamic && reported_[peer])
        return nullptr;  // known unreachable: the error was printed once
    try {
        auto ep = std::make_unique<Endpoint>();
        ep->peer = peer;
        std::vector<std::string> why;
        build(peer, *ep, why);
        if (ep->send.empty()) {
            last_error_ = unreachable_message(peer, why);
            if (!explain) {
                out_.verbose(10, "{}", last_error_);
                return nullptr;
            }
            log::error("{}", last_error_);
            if (!dynamic) reported_[peer] = true;
            return nullptr;
        }
        if (out_.enabled(10)) print_table(*ep, why);
        auto& slot = dynamic ? dynamic_[peer] : endpoints_[peer];
        slot = std::move(ep);
        return slot.get();
    } catch (const std::exception& e) {
        last_error_ = fmt::format("building the endpoint of rank {} failed: {}", peer, e.what());
        log::error("{}", last_error_);
        if (!dynamic) reported_[peer] = true;
        return nullptr;
    }
}

void R2::build(Rank peer, Endpoint& ep, std::vector<std::string>& why) {
    // A module left out of the send list stays for one-sided work only if it
    // can do something the send list cannot: otherwise it would never be
    // chosen, yet its endpoint would keep it in every progress poll (tcp next
    // to vader on one node).
    constexpr std::uint32_t rdma_caps = btl::flags::one_sided;
    // A rank on another node: every module that sends is asked and kept, to
    // be measured (which one is fastest there is a property of the network
    // and the software on both ends, not of a fixed rank).
    const bool measuring =
        measure_ && peer < job_size_ && peer < other_node_.size() && other_node_[peer];
    // Modules are asked from the highest exclusivity down, so one that could
    // only be left out (lower exclusivity, nothing to add) is never asked:
    // its add_procs may connect (a UCX endpoint per peer) for nothing.
    std::vector<std::uint32_t> order(modules_.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return modules_[a]->attributes().exclusivity > modules_[b]->attributes().exclusivity;
    });
    std::vector<BtlRef> reach;
    std::uint32_t top = 0;
    bool top_sends = false;
    std::uint32_t top_caps = 0;
    for (std::uint32_t i : order) {
        btl::Module* m = modules_[i];
        const auto& a = m->attributes();
        if (peer >= job_size_ && !(a.flags & btl::flags::dynamic_peers)) {
            why.push_back(fmt::format("{}: does not carry peers outside the job", m->name()));
            continue;
        }
        if (!measuring && top_sends && a.exclusivity < top &&
            (a.flags & rdma_caps & ~top_caps) == 0) {
            why.push_back(
                fmt::format("{}: left out of the send list, exclusivity {} < {} (its rdma "
                            "adds nothing to the send list's; not asked)",
                            m->name(), a.exclusivity, top));
            continue;
        }
        btl::Endpoint* e = nullptr;
        btl::Reachability bits(1);
        Status s = m->add_procs({&peer, 1}, {&e, 1}, bits);
        if (!ok(s)) {
            why.push_back(fmt::format("{}: add_procs failed ({})", m->name(), to_string(s)));
        } else if (!bits.test(0)) {
            const auto* u = btl::capability<btl::UnreachedReason>(*m);
            const std::string reason = u ? u->unreached_reason(peer) : std::string();
            why.push_back(fmt::format("{}: does not reach rank {}{}{}", m->name(), peer,
                                      reason.empty() ? "" : ": ", reason));
        } else {
            reach.push_back({.module = m,
                             .endpoint = e,
                             .index = i,
                             .rdma = m->rdma(),
                             .atomics = m->atomics()});
            if (!top_sends || a.exclusivity == top) {
                if (a.flags & btl::flags::send) {
                    top = a.exclusivity;
                    top_sends = true;
                    top_caps |= a.flags & rdma_caps;
                }
            }
        }
    }
    if (reach.empty()) return;
    // A peer outside the job knows us by the one connection we open: a second
    // module (another interface) would open another and be taken for another
    // client.  The first that sends (highest exclusivity) carries everything.
    if (peer >= job_size_) keep_one_module(peer, reach, why);
    // The lists below are built in the framework's module order, as before.
    std::sort(reach.begin(), reach.end(),
              [](const BtlRef& a, const BtlRef& b) { return a.index < b.index; });
    top = 0;
    for (const BtlRef& r : reach) top = std::max(top, r.module->attributes().exclusivity);
    std::uint32_t send_caps = 0;
    std::vector<BtlRef> unused;
    for (const BtlRef& r : reach) {
        const auto& a = r.module->attributes();
        if (a.exclusivity == top && (a.flags & btl::flags::send)) {
            ep.send.push_back(r);
            send_caps |= a.flags & rdma_caps;
            if (offers_rdma(r)) ep.rdma.push_back(r);
        } else {
            unused.push_back(r);
        }
    }
    for (const BtlRef& r : unused) {
        const auto& a = r.module->attributes();
        const bool adds = (a.flags & rdma_caps & ~send_caps) != 0;
        const bool rdma = adds && offers_rdma(r);
        if (rdma) ep.rdma.push_back(r);
        const char* note = rdma                    ? " (kept for rdma)"
                           : (a.flags & rdma_caps) ? " (its rdma adds nothing to the send list's)"
                                                   : "";
        if (!(a.flags & btl::flags::send))
            why.push_back(fmt::format("{}: reaches rank {} but cannot send{}", r.module->name(),
                                      peer, rdma ? " (rdma only)" : note));
        else
            why.push_back(fmt::format("{}: left out of the send list, exclusivity {} < {}{}",
                                      r.module->name(), a.exclusivity, top, note));
        if (measuring && (a.flags & btl::flags::send)) {
            ep.candidates.push_back(r);
            why.push_back(
                fmt::format("{}: kept as a candidate, measured at start-up", r.module->name()));
        } else if (!rdma) {
            btl::Endpoint* e = r.endpoint;
            r.module->del_procs({&peer, 1}, {&e, 1});
        }
    }
    // Weights: each module's share of the total bandwidth (equal when unknown).
    auto weigh = [](std::vector<BtlRef>& list) {
        double total = 0;
        for (const BtlRef& r : list) total += r.module->attributes().bandwidth;
        for (BtlRef& r : list)
            r.weight = total > 0 ? r.module->attributes().bandwidth / total
                                 : 1.0 / static_cast<double>(list.size());
    };
    weigh(ep.send);
    weigh(ep.rdma);
    if (measuring) {
        ep.candidates.insert(ep.candidates.begin(), ep.send.begin(), ep.send.end());
        if (ep.candidates.size() < 2) ep.candidates.clear();  // nothing to choose from
    }
    // The pml takes the first rdma module that can do an operation: one whose
    // put/get proceed without the target goes first, so a target busy
    // computing does not hold them up (vader's CMA before uct's active messages).
    std::stable_partition(ep.rdma.begin(), ep.rdma.end(), [](const BtlRef& r) {
        return (r.module->attributes().flags & btl::flags::rdma_without_target) != 0;
    });
    std::sort(ep.send.begin(), ep.send.end(), [](const BtlRef& a, const BtlRef& b) {
        return a.module->attributes().bandwidth > b.module->attributes().bandwidth;
    });
    ep.eager = ep.send;
    std::stable_sort(ep.eager.begin(), ep.eager.end(), [](const BtlRef& a, const BtlRef& b) {
        return a.module->attributes().latency < b.module->attributes().latency;
    });
    std::uint32_t lat = ep.eager[0].module->attributes().latency;
    ep.eager_equal = 0;
    ep.eager_limit = ep.eager[0].module->attributes().eager_limit;
    for (const BtlRef& r : ep.eager) {
        if (r.module->attributes().latency == lat) ++ep.eager_equal;
        ep.eager_limit = std::min(ep.eager_limit, r.module->attributes().eager_limit);
    }
}

void R2::choose(Endpoint& ep, std::size_t small, std::size_t bulk, std::string_view figures) {
    const BtlRef fast = ep.candidates.at(small);
    const BtlRef wide = ep.candidates.at(bulk);
    ep.eager.assign(1, fast);
    ep.eager[0].weight = 1.0;
    ep.eager[0].current = 0;
    ep.next_eager = 0;
    ep.eager_equal = 1;
    ep.eager_limit = fast.module->attributes().eager_limit;
    ep.send.assign(1, wide);
    ep.send[0].weight = 1.0;
    ep.send[0].current = 0;
    // Large messages go by one-sided transfers where the list offers them:
    // the module measured widest goes first when it has them.
    if (offers_rdma(wide)) {
        auto at = std::find_if(ep.rdma.begin(), ep.rdma.end(),
                               [&](const BtlRef& r) { return r.module == wide.module; });
        if (at != ep.rdma.end()) ep.rdma.erase(at);
        ep.rdma.insert(ep.rdma.begin(), wide);
        ep.rdma[0].weight = 1.0;
    }
    out_.verbose(10, "rank {} measured (least 8 B round trip, best 1 MiB transfer): {}", ep.peer,
                 figures);
    out_.verbose(10, "rank {}: small messages over {}, large over {}{}{}", ep.peer,
                 fast.module->name(), wide.module->name(),
                 ep.rdma.empty() ? "" : ", put/get first over ",
                 ep.rdma.empty() ? "" : ep.rdma[0].module->name());
}

void R2::keep_one_module(Rank peer, std::vector<BtlRef>& reach, std::vector<std::string>& why) {
    auto sends = [](const BtlRef& r) {
        return (r.module->attributes().flags & btl::flags::send) != 0;
    };
    auto best = std::find_if(reach.begin(), reach.end(), sends);
    if (best == reach.end()) return;
    for (auto it = reach.begin(); it != reach.end(); ++it) {
        if (it == best) continue;
        why.push_back(fmt::format("{}: left out, a peer outside the job is reached by one module",
                                  it->module->name()));
        btl::Endpoint* e = it->endpoint;
        it->module->del_procs({&peer, 1}, {&e, 1});
    }
    const BtlRef kept = *best;
    reach.assign(1, kept);
}

void R2::print_table(const Endpoint& ep, const std::vector<std::string>& why) const {
    out_.verbose(10, "endpoint of rank {}{}:", ep.peer, ep.peer == self_ ? " (self)" : "");
    for (const BtlRef& r : ep.eager) out_.verbose(10, "  eager: {}", describe(r));
    for (const BtlRef& r : ep.send) out_.verbose(10, "  send:  {}", describe(r));
    for (const BtlRef& r : ep.rdma)
        out_.verbose(10, "  rdma:  {}{}", describe(r),
                     r.module->attributes().flags & btl::flags::rdma_without_target
                         ? ", put/get without the target"
                         : ", put/get served by the target");
    if (ep.rdma.size() > 1) {
        std::string order;
        for (const BtlRef& r : ep.rdma) order += (order.empty() ? "" : ", ") + r.module->name();
        out_.verbose(
            10, "  rdma order: {} (put/get without the target first, then the framework's order)",
            order);
    }
    for (const std::string& w : why) out_.verbose(10, "  left:  {}", w);
}

std::string R2::unreachable_message(Rank peer, const std::vector<std::string>& why) const {
    std::string msg = fmt::format("no transport reaches rank {} from rank {}:", peer, self_);
    for (const std::string& w : why) msg += "\n  " + w;
    for (const ComponentInfo& c : components_) {
        if (c.state == mca::ComponentState::active) continue;
        msg += fmt::format("\n  {}: {}{}{}", c.name, mca::to_string(c.state),
                           c.reason.empty() ? "" : ": ", c.reason);
    }
    if (modules_.empty() && components_.empty()) msg += "\n  no btl component was loaded";
    return msg;
}

}  // namespace transit::bml
