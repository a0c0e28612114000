// btl/vader: the component.  Registers the parameters, decides on single copy,
// creates this process's segment and publishes its name through the modex.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <system_error>

#include "components/vader/vader_cma.hpp"
#include "components/vader/vader_config.hpp"
#include "components/vader/vader_module.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/join_timeout.hpp"
#include "transit/params_bind.hpp"
#include "transit/version.hpp"

namespace transit::vader {
namespace {

using params::Type;

constexpr params::Field<Config> vader_params[] = {
    btl::inherit<Config>(
        btl::BaseParam::eager_limit,
        {.default_value = "32k",
         .help = "Largest message the upper layer sends eagerly in one fragment to a process on "
                 "this node; larger ones use put/get (single copy) or several fragments.  Left "
                 "at its default it follows a smaller max_send_size; a value set must fit it"}),
    btl::inherit<Config>(btl::BaseParam::max_send_size,
                         {.default_value = "32k",
                          .help = "Largest fragment alloc, prepare_src and sendi accept (the "
                                  "payload room of each shared fragment)",
                          .min = 0,
                          .max = 64 << 20}),
    params::to<&Config::fbox_size>(params::Decl{
        "fbox_size", Type::size, "16k",
        "Bytes of each fast box (per sender, in the receiver's segment; rounded up to a "
        "power of two, at least 256).  Messages up to a quarter of it, and up to "
        "eager_limit, go through the box",
        5}
                                       .range(0, 16 << 20)),
    params::to<&Config::fbox_threshold>(
        params::Decl{"fbox_threshold", Type::unsigned_integer, "16",
                     "Messages sent to a peer through the FIFO before its fast box is used (0: at "
                     "once)",
                     5}
            .range(0, UINT32_MAX - 1)),
    params::to<&Config::dynamic_fast_boxes>(
        params::Decl{"dynamic_fast_boxes", Type::unsigned_integer, "8",
                     "Spare fast boxes in the segment of a process that may meet peers outside "
                     "its job: each peer outside the job on this node is given one at its join "
                     "and hands it back when it leaves; peers beyond that many use the FIFO",
                     5}
            .range(0, 1024)),
    params::to<&Config::join_timeout>(btl::join_timeout_decl),
    params::to<&Config::light_sleep>(params::Decl{
        "light_sleep", Type::unsigned_integer, "1000",
        "Microseconds the first sleep after a wake-up by a peer may last without the "
        "system-wide barrier (membarrier) that makes a sleep safe: a message sent in "
        "the instant the receiver fell asleep waits that long at worst, and the "
        "barrier (up to 50 microseconds on a virtual machine) is not paid between requests "
        "(0: every sleep takes the barrier)",
        6}
                                         .range(0, 10000000)),
    params::to<&Config::fifo_size>(
        params::Decl{"fifo_size", Type::unsigned_integer, "4096",
                     "Minimum number of entries of each process's receive FIFO (rounded up to a "
                     "power of two and raised to hold every fragment of every local process)",
                     6}
            .range(0, 16 << 20)),
    params::to<&Config::segment_size>(
        params::Decl{"segment_size", Type::size, "8M",
                     "Bytes of the shared segment each process creates (fast boxes, FIFO and send "
                     "fragments; the fragment count follows from it, at least 16)",
                     5}
            .range(0, std::int64_t{1} << 40)),
    params::to<&Config::heap_size>(
        params::Decl{"heap_size", Type::size, "1G",
                     "Address space reserved after each segment for mem_alloc: memory the local "
                     "peers load, store and apply atomics to directly.  Pages are taken only when "
                     "allocated; when the backing file system is full mem_alloc falls back to the "
                     "heap (0: never)",
                     5}
            .range(0, std::int64_t{1} << 40)),
    params::to<&Config::mechanism>(params::Decl{
        "single_copy_mechanism", Type::enumeration, "auto",
        "Single copy for put/get and large messages: auto (CMA when a real cross-process read "
        "works), cma (the same, and say so when it does not), none (copy through shared "
        "fragments)",
        3, "auto,cma,none"}),
    params::to<&Config::backing_directory>(params::Decl{
        "backing_directory", Type::string, "/dev/shm",
        "Directory of the shared-memory files (a tmpfs); each is removed as soon as every local "
        "peer has mapped it",
        5}),
    btl::inherit<Config>(btl::BaseParam::exclusivity,
                         {.default_value = "65535",
                          .help = "Priority of vader among the transports that reach a peer "
                                  "(highest wins; self has 65536)"}),
    params::to<&Config::cma_probe_fail>(params::Decl{
        "cma_probe_fail", Type::boolean, "false",
        "Testing only: make the CMA probe fail, to exercise the fallback without single copy", 9}),
};

class VaderComponent final : public btl::Component {
  public:
    void register_params(params::Registry& registry) override {
        registry_ = &registry;
        params::add_all(registry, "btl", "vader", vader_params);
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override {
        std::vector<std::unique_ptr<btl::Module>> modules;
        rt::Runtime& rt = ctx.runtime;
        Config config = read_config();
        log::Stream out("btl:vader", verbosity());
        // A process killed before every local peer mapped its segment leaves
        // the name (1 GiB apparent with the heap); nobody else would remove
        // it, so every process that opens vader clears those of dead owners.
        for (const std::string& name : remove_dead_segments(config.backing_directory))
            out.verbose(5, "removed {}/{}: its owner is gone", config.backing_directory, name);
        const bool alone = rt.local_size() < 2 || rt.local_peers().size() < 2;
        if (alone && rt.dynamic_peers() == nullptr) {
            decline_reason_ = "no other process of the job on this node";
            return modules;
        }
        const Layout layout = Layout::compute(
            static_cast<std::uint32_t>(std::max<std::size_t>(1, rt.local_peers().size())),
            config.segment_size, config.max_send_size, config.fbox_size, config.fifo_size,
            config.heap_size, rt.dynamic_peers() != nullptr ? config.dynamic_fast_boxes : 0);
        // Alone on the node: no segment, no progress, nothing to cost the
        // others, until a peer outside the job comes (the module makes its
        // segment then).
        if (alone) {
            modules.push_back(
                std::make_unique<VaderModule>(*this, ctx, config, layout, SharedFile(), out));
            return modules;
        }
        SharedFile segment;
        try {
            // The fragments get pages as they are first used (VaderModule::supply_frags).
            const SharedFile::Extent now[] = {
                {0, layout.spare_offset},
                {layout.region_offset, layout.total - layout.region_offset}};
            segment = SharedFile::create(config.backing_directory, rt.job_id(), rt.rank(),
                                         layout.total, layout.heap_size, rt.numa_node(), now);
        } catch (const std::system_error& e) {
            decline_reason_ = e.what();
            log::warn("{}; shared memory is not used", e.what());
            return modules;
        }
        const std::string path = segment.path();
        auto module =
            std::make_unique<VaderModule>(*this, ctx, config, layout, std::move(segment), out);
        const auto* bytes = reinterpret_cast<const std::byte*>(path.data());
        if (Status s = rt.modex_send("btl.vader.1", {bytes, path.size()}); s != Status::success) {
            decline_reason_ = fmt::format("cannot publish the segment name: {}", to_string(s));
            return modules;
        }
        out.verbose(10,
                    "segment {} ({} bytes, {} fragments, FIFO {}, {} bytes for mem_alloc), single "
                    "copy {}",
                    path, layout.total, layout.frag_count, layout.fifo_capacity, layout.heap_size,
                    (module->attributes().flags & btl::flags::get) ? "cma" : "none");
        modules.push_back(std::move(module));
        return modules;
    }

    // transit_info --devices: one line, what init would set up; the single
    // copy is what this process's own probe says (init probes each peer too).
    void describe_devices(mca::DeviceReport& report) const {
        const Config c = read_config();
        std::string copy = "none (btl_vader_single_copy_mechanism=none)";
        if (c.single_copy == SingleCopy::cma) {
            const std::string why = cma_self_probe();
            copy = why.empty() ? "CMA (process_vm_readv works here)"
                               : fmt::format("none: CMA does not work here ({})", why);
        }
        report.notes.push_back(
            fmt::format("shared memory with the job's other processes on this node: a segment "
                        "of {} bytes per process in {}; single copy {}",
                        c.segment_size, c.backing_directory, copy));
    }

  private:
    params::Registry& reg() const { return registry_ ? *registry_ : params::registry(); }

    int verbosity() const { return btl::base_verbosity(reg()); }

    Config read_config() const {
        params::Registry& r = reg();
        Config c;
        params::bind(r, "btl", "vader", vader_params, c);
        // The declared ranges keep the sizes and counts within 32 bits.
        // The default eager limit follows a smaller max_send_size; one the user
        // chose must fit it.
        if (c.left_default(btl::BaseParam::eager_limit))
            c.eager_limit = std::min(c.eager_limit, c.max_send_size);
        else
            btl::require_eager_fits(r, "vader");
        if (c.backing_directory.empty())
            throw params::Error("btl_vader_backing_directory must not be empty");
        c.single_copy =
            c.mechanism == SingleCopyMechanism::none ? SingleCopy::none : SingleCopy::cma;
        c.explicit_cma = c.mechanism == SingleCopyMechanism::cma;
        return c;
    }

    params::Registry* registry_ = nullptr;
};

}  // namespace
}  // namespace transit::vader

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_vader_component =
    transit::mca::make_descriptor<transit::vader::VaderComponent>(
        "btl", transit::btl_interface_version, "vader", {1, 0, 0});
