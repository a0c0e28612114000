// One rank of a forked vader job: the real component (compiled in), its own
// progress engine and tag table, connected to every other rank.
#pragma once

#include <sched.h>
#include <sys/uio.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/vader/fork_runtime.hpp"
#include "transit/btl/component.hpp"
#include "transit/params.hpp"

extern "C" const transit_component_descriptor transit_btl_vader_component;

namespace transit::vader::test {

using Params = std::vector<std::pair<std::string, std::string>>;

// Prints the failed check in the child (gtest cannot see it) and says no.
inline bool check(bool ok, const char* what, long long detail = 0) {
    if (!ok) std::fprintf(stderr, "[pid %d] check failed: %s (%lld)\n", ::getpid(), what, detail);
    return ok;
}

class Proc {
  public:
    Proc(JobArea* area, Rank rank, std::uint32_t size, const std::string& job, const Params& params)
        : rt_(area, rank, size, job) {
        component_.reset(static_cast<btl::Component*>(transit_btl_vader_component.create()));
        component_->register_params(params::registry());
        for (const auto& [name, value] : params)
            params::registry().set("btl_vader_" + name, value, params::Source{params::Origin::api});
        btl::InitContext ctx{rt_, progress_, am_};
        auto modules = component_->init(ctx);
        if (rt_.fence() != Status::success) throw std::runtime_error("fence failed");
        if (modules.empty()) {
            decline_ = component_->decline_reason();
            return;
        }
        module_ = std::move(modules.front());
        std::vector<Rank> peers(size);
        for (Rank r = 0; r < size; ++r) peers[r] = r;
        endpoints_.assign(size, nullptr);
        btl::Reachability reach(size);
        if (module_->add_procs(peers, endpoints_, reach) != Status::success)
            throw std::runtime_error("add_procs failed");
        // Everyone mapped everyone: no segment name may be left after this.
        if (rt_.fence() != Status::success) throw std::runtime_error("fence failed");
    }
    ~Proc() {
        if (module_) module_->finalize();
    }

    btl::Module& module() { return *module_; }
    bool has_module() const { return module_ != nullptr; }
    const std::string& decline() const { return decline_; }
    btl::Endpoint* ep(Rank r) { return endpoints_[r]; }
    ProgressEngine& engine() { return progress_; }
    btl::AmTable& am() { return am_; }
    ForkRuntime& runtime() { return rt_; }
    // Yields when idle: these jobs run more processes than cores, on a shared
    // machine, and a spinning rank would hold the core its peer needs.
    int progress() {
        const int events = progress_.progress();
        if (events == 0) sched_yield();
        return events;
    }

    // Sends `len` bytes, retrying through progress when out of resources.
    // Returns the final status (completed or success when sent).
    Status send(Rank to, btl::Tag tag, const void* data, std::size_t len) {
        for (;;) {
            btl::Convertor conv(data, len);
            btl::Descriptor* d = nullptr;
            Status s = module_->sendi(ep(to), &conv, nullptr, 0, len, btl::no_order, 0, tag, &d);
            if (s == Status::completed) return s;
            if (s != Status::out_of_resource) return s;
            if (d != nullptr) {
                conv.pack(d->segments[0].addr, len);
                d->segments[0].len = len;
                d->flags |= btl::des_flags::btl_ownership;
                s = module_->send(ep(to), d, tag);
                if (ok(s)) return s;
                module_->free(d);
                if (s != Status::out_of_resource) return s;
            }
            progress();
        }
    }

  private:
    ForkRuntime rt_;
    ProgressEngine progress_;
    btl::AmTable am_;
    std::unique_ptr<btl::Component> component_;
    std::unique_ptr<btl::Module> module_;
    std::vector<btl::Endpoint*> endpoints_;
    std::string decline_;
};

}  // namespace transit::vader::test
