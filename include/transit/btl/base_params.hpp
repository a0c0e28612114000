// The parameters every transport has, declared once: their names, types,
// levels and ranges, bound to the fields of BaseConfig.  A component's config
// struct derives from BaseConfig, and its table inherits the base parameters it
// has, giving each its own default (and, where it says more, its own help and
// range):
//
//   struct Config : btl::BaseConfig { std::size_t fifo_size = 0; };
//   constexpr params::Field<Config> table[] = {
//       btl::inherit<Config>(btl::BaseParam::eager_limit, {.default_value = "32k"}),
//       btl::inherit<Config>(btl::BaseParam::exclusivity, {.default_value = "65535"}),
//       params::to<&Config::fifo_size>({"fifo_size", Type::unsigned_integer, ...}),
//   };
//
// The user sees btl_<component>_eager_limit and so on, as for any parameter.
// params::add_all and params::bind register and fill the table as a whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "transit/params.hpp"
#include "transit/params_bind.hpp"

namespace transit::btl {

enum class BaseParam : std::uint8_t {
    eager_limit,    // largest message the upper layer sends eagerly
    max_send_size,  // largest fragment of a send
    exclusivity,    // priority among the transports that reach a peer (highest wins)
    latency,        // relative latency, lower is preferred
    bandwidth,      // MB/s, weighs striping
    free_list_max,  // send fragments before alloc reports out-of-resource
};

// The base parameters' values.  `left_default` tells which ones the user did
// not set, for a component whose default means "decide from the device".
struct BaseConfig {
    std::size_t eager_limit = 0;
    std::size_t max_send_size = 0;
    std::uint32_t exclusivity = 0;
    std::uint32_t latency = 0;
    std::uint32_t bandwidth = 0;
    std::uint32_t free_list_max = 0;
    std::uint32_t defaults = 0;  // bit (1 << BaseParam) set: left at the component's default

    bool left_default(BaseParam p) const noexcept {
        return (defaults & (std::uint32_t{1} << static_cast<unsigned>(p))) != 0;
    }
};

// The base table, in the order of BaseParam; each component gives the default.
inline constexpr params::Decl base_params[] = {
    params::Decl{"eager_limit", params::Type::size, "",
                 "Largest message the upper layer sends eagerly", 4}
        .at_least(1),
    params::Decl{"max_send_size", params::Type::size, "", "Largest fragment of a send", 4}.range(
        1, 1 << 30),
    params::Decl{"exclusivity", params::Type::unsigned_integer, "",
                 "Priority among the transports that reach a peer (highest wins)", 7}
        .range(0, UINT32_MAX),
    params::Decl{"latency", params::Type::unsigned_integer, "",
                 "Relative latency, lower is preferred", 7}
        .range(0, UINT32_MAX),
    params::Decl{"bandwidth", params::Type::unsigned_integer, "", "Bandwidth in MB/s", 7}.range(
        0, UINT32_MAX),
    params::Decl{"free_list_max", params::Type::unsigned_integer, "",
                 "Send fragments before alloc reports out-of-resource", 6}
        .range(1, 1 << 20),
};

constexpr const params::Decl& base_decl(BaseParam p) {
    return base_params[static_cast<std::size_t>(p)];
}

// What a component says about a base parameter it has.
struct Inherit {
    std::string_view default_value;
    std::string_view help = {};            // empty: the base table's
    std::optional<std::int64_t> min = {};  // empty: the base table's bound
    std::optional<std::int64_t> max = {};
};

namespace detail {

template <BaseParam P>
constexpr auto base_member() {
    if constexpr (P == BaseParam::eager_limit)
        return &BaseConfig::eager_limit;
    else if constexpr (P == BaseParam::max_send_size)
        return &BaseConfig::max_send_size;
    else if constexpr (P == BaseParam::exclusivity)
        return &BaseConfig::exclusivity;
    else if constexpr (P == BaseParam::latency)
        return &BaseConfig::latency;
    else if constexpr (P == BaseParam::bandwidth)
        return &BaseConfig::bandwidth;
    else
        return &BaseConfig::free_list_max;
}

template <BaseParam P, typename Config>
void store_base(const params::Variable& v, Config& c) {
    BaseConfig& base = c;
    params::detail::store<base_member<P>(), BaseConfig>(v, base);
    const std::uint32_t bit = std::uint32_t{1} << static_cast<unsigned>(P);
    if (v.source().origin == params::Origin::default_value)
        base.defaults |= bit;
    else
        base.defaults &= ~bit;
}

template <typename Config>
constexpr auto base_store(BaseParam p) {
    switch (p) {
        case BaseParam::eager_limit:
            return &store_base<BaseParam::eager_limit, Config>;
        case BaseParam::max_send_size:
            return &store_base<BaseParam::max_send_size, Config>;
        case BaseParam::exclusivity:
            return &store_base<BaseParam::exclusivity, Config>;
        case BaseParam::latency:
            return &store_base<BaseParam::latency, Config>;
        case BaseParam::bandwidth:
            return &store_base<BaseParam::bandwidth, Config>;
        case BaseParam::free_list_max:
            break;
    }
    return &store_base<BaseParam::free_list_max, Config>;
}

}  // namespace detail

// The component's entry for the base parameter `p`: the base declaration with
// the component's default, help and bounds.
template <typename Config>
requires std::is_base_of_v<BaseConfig, Config>
constexpr params::Field<Config> inherit(BaseParam p, Inherit how) {
    params::Decl d = base_decl(p);
    d.default_value = how.default_value;
    if (!how.help.empty()) d.help = how.help;
    if (how.min) d.min = how.min;
    if (how.max) d.max = how.max;
    return params::Field<Config>{d, detail::base_store<Config>(p)};
}

// The variable of the base parameter `p` of a btl component: for a check
// across parameters (params::require_at_most) and the source of its value.
inline params::Variable& base_variable(params::Registry& registry, std::string_view component,
                                       BaseParam p) {
    return registry.get(params::detail::full_name("btl", component, base_decl(p).name));
}

// Refuses an eager limit above the largest fragment, naming both parameters,
// their values and where each was set.
inline void require_eager_fits(params::Registry& registry, std::string_view component) {
    params::require_at_most(base_variable(registry, component, BaseParam::eager_limit),
                            base_variable(registry, component, BaseParam::max_send_size));
}

// The btl framework's verbosity (btl_base_verbose), 0 when it is not registered.
inline int base_verbosity(params::Registry& registry) {
    const params::Variable* v = registry.find("btl_base_verbose");
    return v ? static_cast<int>(v->as_int()) : 0;
}

}  // namespace transit::btl
