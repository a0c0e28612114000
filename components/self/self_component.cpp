// btl/self: the component.  Registers the parameters, and at init creates the
// one module that reaches the own process.
#include <fmt/format.h>

#include <cstdint>

#include "self_module.hpp"
#include "transit/btl/component.hpp"
#include "transit/params_bind.hpp"
#include "transit/version.hpp"

namespace transit::self {
namespace {

using params::Type;

// The parameter table: registration, transit_info and the docs all read it.
constexpr params::Field<SelfConfig> self_params[] = {
    params::to<&SelfConfig::eager_limit>(
        params::Decl{"eager_limit", Type::size, "4k",
                     "Largest message the upper layer sends in one fragment to its own process; "
                     "above it, it uses put/get (single memcpy)",
                     4}
            .at_least(1)),
    params::to<&SelfConfig::max_send_size>(
        params::Decl{"max_send_size", Type::size, "64k",
                     "Largest fragment alloc and prepare_src hand out (contiguous data above the "
                     "eager limit is passed in place, without a copy)",
                     4}
            .range(1, 1 << 30)),
    params::to<&SelfConfig::free_list_max>(
        params::Decl{"free_list_max", Type::unsigned_integer, "32",
                     "Fragments in each of the two pools (eager_limit and max_send_size bytes), "
                     "created at init; alloc reports out-of-resource when a pool is empty",
                     6}
            .range(1, 1 << 20)),
    params::to<&SelfConfig::exclusivity>(
        params::Decl{"exclusivity", Type::unsigned_integer, "65536",
                     "Priority of self among the transports that reach a peer (highest wins)", 7}
            .range(0, UINT32_MAX)),
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

  private:
    // Parameters are read at init, not at registration, so a value set after the
    // framework opened (a test, the API) still applies to the module.
    SelfConfig read_config() const {
        params::Registry& r = registry_ ? *registry_ : params::registry();
        SelfConfig c;
        params::bind(r, "btl", "self", self_params, c);
        params::require_at_most(r.get("btl_self_eager_limit"), r.get("btl_self_max_send_size"));
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
