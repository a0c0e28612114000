// A tcp component opened in every rank of a multi-process test, with helpers
// to drive progress and to keep ranks in step over tcp itself (a runtime fence
// would stop progress and could starve a peer waiting for our replies).
#pragma once

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "components/tcp/tcp_component.hpp"
#include "components/tcp/tcp_module.hpp"
#include "tests/mp/mp.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/params.hpp"
#include "transit/progress.hpp"

namespace tcptest {

using namespace transit;

struct Received {
    Rank from;
    std::vector<std::byte> data;
    // How many step() messages had come from `from` before this one: what a
    // rank sends after its k-th step() belongs to the phase after step k.
    std::uint64_t phase = 0;
};

class TcpJob {
  public:
    static constexpr btl::Tag data_tag = btl::AmTable::tag(btl::TagRange::user, 0);
    static constexpr btl::Tag step_tag = btl::AmTable::tag(btl::TagRange::user, 1);

    explicit TcpJob(rt::Runtime& runtime = mp::runtime()) : rt_(runtime) {
        // The framework registers btl_base_verbose; without it, do the same so
        // TRANSIT_MCA_btl_base_verbose works here too.
        if (params::registry().find("btl_base_verbose") == nullptr)
            params::registry().add("btl", "base",
                                   {"verbose", params::Type::integer, "0", "Verbosity", 1});
        component_ = std::make_unique<tcp::TcpComponent>();
        component_->register_params(params::registry());
        if (!component_->open().available) throw std::runtime_error("tcp declined");
        btl::InitContext ctx{rt_, progress_, am_};
        modules_ = component_->init(ctx);
        if (modules_.empty()) throw std::runtime_error(component_->decline_reason());
        am_.register_callback(data_tag, &on_data, this);
        am_.register_callback(step_tag, &on_step, this);
        if (!ok(rt_.fence())) throw std::runtime_error("fence failed");
        std::vector<Rank> all(rt_.size());
        for (Rank r = 0; r < all.size(); ++r) all[r] = r;
        endpoints_.assign(all.size(), nullptr);
        steps_from_.assign(all.size(), 0);
        module_of_.assign(all.size(), nullptr);
        for (auto& m : modules_) {
            m->register_error(&on_error, this);
            std::vector<btl::Endpoint*> eps(all.size(), nullptr);
            btl::Reachability reach(all.size());
            if (!ok(m->add_procs(all, eps, reach))) throw std::runtime_error("add_procs failed");
            for (Rank r = 0; r < all.size(); ++r)
                if (reach.test(r) && endpoints_[r] == nullptr) {
                    endpoints_[r] = eps[r];
                    module_of_[r] = m.get();
                }
        }
    }
    ~TcpJob() {
        for (auto& m : modules_) m->finalize();
        modules_.clear();
        component_->close();
    }

    btl::Module& module(Rank r) { return *module_of_.at(r); }
    btl::Endpoint* endpoint(Rank r) { return endpoints_.at(r); }
    ProgressEngine& progress() { return progress_; }
    tcp::TcpComponent& component() { return *component_; }

    std::vector<Received> received;
    std::vector<std::pair<Rank, std::string>> errors;

    // Drives progress until pred() or the time runs out; returns pred().
    bool progress_until(const std::function<bool()>& pred, double seconds = 30) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!pred()) {
            progress_.progress();
            if (std::chrono::steady_clock::now() > end) return pred();
        }
        return true;
    }

    // Sends bytes as one active message, retrying while the module is busy.
    Status send_bytes(Rank to, btl::Tag tag, const void* data, std::size_t size) {
        btl::Module& m = module(to);
        for (int attempt = 0; attempt < 1000000; ++attempt) {
            btl::Descriptor* d =
                m.alloc(endpoint(to), btl::no_order, size, btl::des_flags::btl_ownership);
            if (d == nullptr) {
                progress_.progress();
                continue;
            }
            if (size) std::memcpy(d->segments[0].addr, data, size);
            d->segments[0].len = size;
            const Status s = m.send(endpoint(to), d, tag);
            if (s == Status::out_of_resource) {
                m.free(d);
                progress_.progress();
                continue;
            }
            return s;
        }
        return Status::out_of_resource;
    }

    // Forgets what arrived before the current phase.  A test starts with it,
    // not with received.clear(): a faster rank may have left its step() and
    // sent the test's first message, delivered in the same progress call as
    // its step message, before this rank left step().
    void clear_earlier_phases() {
        std::erase_if(received, [&](const Received& r) { return r.phase < step_; });
    }

    // Every rank calls it: returns when every rank has called it, progressing
    // tcp meanwhile.
    bool step() {
        ++step_;
        for (Rank r = 0; r < rt_.size(); ++r) {
            if (r == rt_.rank()) continue;
            if (!ok(send_bytes(r, step_tag, &step_, sizeof step_))) return false;
        }
        return progress_until([&] { return steps_seen_ >= step_ * (rt_.size() - 1); });
    }

  private:
    static void on_data(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
        auto* job = static_cast<TcpJob*>(self);
        const Rank from = d.endpoint ? d.endpoint->peer() : any_rank;
        Received r{from, {}, from < job->steps_from_.size() ? job->steps_from_[from] : 0};
        const auto* p = static_cast<const std::byte*>(d.segments[0].addr);
        r.data.assign(p, p + d.segments[0].len);
        job->received.push_back(std::move(r));
    }
    static void on_step(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
        auto* job = static_cast<TcpJob*>(self);
        ++job->steps_seen_;
        const Rank from = d.endpoint ? d.endpoint->peer() : any_rank;
        if (from < job->steps_from_.size()) ++job->steps_from_[from];
    }
    static void on_error(btl::Module*, std::uint32_t, Rank peer, const char* info, void* self) {
        static_cast<TcpJob*>(self)->errors.emplace_back(peer, info ? info : "");
    }

    rt::Runtime& rt_;
    ProgressEngine progress_;
    btl::AmTable am_;
    std::unique_ptr<tcp::TcpComponent> component_;
    std::vector<std::unique_ptr<btl::Module>> modules_;
    std::vector<btl::Endpoint*> endpoints_;
    std::vector<btl::Module*> module_of_;
    std::uint64_t step_ = 0;
    std::uint64_t steps_seen_ = 0;
    std::vector<std::uint64_t> steps_from_;  // by rank
};

}  // namespace tcptest
