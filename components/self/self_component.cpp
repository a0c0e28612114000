// btl/self: the component.  Registers the parameters, and at init creates the
// one module that reaches the own process.
#include <fmt/format.h>

#include <cstdint>

#include "self_module.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/component.hpp"
#include "transit/params_bind.hpp"
#include "transit/version.hpp"

namespace transit::self {
namespace {

using params::Type;

// The parameter table: registration, transit_info and the docs all read it.
constexpr params::Field<SelfConfig> self_params[] = {
    btl::inherit<SelfConfig>(
        btl::BaseParam::eager_limit,
        {.default_value = "4k",
         .help = "Largest message the upper layer sends in one fragment to its own process; "
                 "above it, it uses put/get (single memcpy)"}),
    btl::inherit<SelfConfig>(
        btl::BaseParam::max_send_size,
        {.default_value = "64k",
         .help = "Largest fragment alloc and prepare_src hand out (contiguous data above the "
                 "eager limit is passed in place, without a copy)"}),
    btl::inherit<SelfConfig>(
        btl::BaseParam::free_list_max,
        {.default_value = "32",
         .help = "Fragments in each of the two pools (eager_limit and max_send_size bytes), "
                 "created at init; alloc reports out-of-resource when a pool is empty"}),
    btl::inherit<SelfConfig>(
        btl::BaseParam::exclusivity,
        {.default_value = "65536",
         .help = "Priority of self among the transports that reach a peer (highest wins)"}),
};

// The exclusivity default above is spelled out; keep it equal to the SDK's value.
static_assert(btl::exclusivity_high == 65536);

class SelfComponent final : public btl::Component {
  public:
    void register_params(params::Registry& registry) override {
        registry_ = &registry;
        params::add_all(registry, "btl", "self", self_params);
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override {
        SelfConfig config = read_config();
        config.multi_threaded = ctx.multi_threaded;
        std::vector<std::unique_ptr<btl::Module>> modules;
        modules.push_back(
            std::make_unique<SelfModule>(*this, config, ctx.runtime.rank(), ctx.am_table));
        return modules;
    }

    // transit_info --devices: nothing to discover.
    void describe_devices(mca::DeviceReport& report) const {
        report.notes.emplace_back("messages to the process itself, by memcpy");
    }

  private:
    // Parameters are read at init, not at registration, so a value set after the
    // framework opened (a test, the API) still applies to the module.
    SelfConfig read_config() const {
        params::Registry& r = registry_ ? *registry_ : params::registry();
        SelfConfig c;
        params::bind(r, "btl", "self", self_params, c);
        btl::require_eager_fits(r, "self");
        return c;
    }

    params::Registry* registry_ = nullptr;
};

}  // namespace
}  // namespace transit::self

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_self_component =
    transit::mca::make_descriptor<transit::self::SelfComponent>(
        "btl", transit::btl_interface_version, "self", {1, 0, 0});
