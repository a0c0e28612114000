// Parameters bound to the fields of a config struct.  A component writes its
// table once, each entry naming the field its value goes to:
//
//   constexpr params::Field<Config> table[] = {
//       params::to<&Config::eager_limit>({"eager_limit", Type::size, "4k", "...", 4}),
//       params::to<&Config::mode>({"mode", Type::enumeration, "auto", "...", 5, "auto,on,off"}),
//   };
//   params::add_all(registry, "btl", "self", table);      // at registration
//   params::bind(registry, "btl", "self", table, config); // once, at open or init
//
// The registry has already refused a value that does not parse, is out of the
// declared range or is not one of the choices (naming the parameter and the
// allowed values), so binding only stores.  An enumeration is stored into an
// `enum class` whose values are 0, 1, ... in the order of the declared
// choices: it is compared as an enum from then on, never as a string.  A
// std::chrono::duration field takes the number in its own unit (a field of
// milliseconds for a parameter whose help says milliseconds).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "transit/params.hpp"

namespace transit::params {

template <typename Config>
struct Field {
    Decl decl;
    void (*store)(const Variable& value, Config& config) = nullptr;
};

namespace detail {

template <typename M>
struct MemberOf;
template <typename C, typename T>
struct MemberOf<T C::*> {
    using Class = C;
    using Type = T;
};

// The position of the variable's value among its choices (the registry only
// accepts one of them).
inline std::size_t choice_index(const Variable& v) {
    const std::vector<std::string>& choices = v.choices();
    for (std::size_t i = 0; i < choices.size(); ++i)
        if (choices[i] == v.as_string()) return i;
    throw Error(v.full_name() + ": '" + v.as_string() + "' is not one of its choices");
}

template <typename T>
constexpr bool is_duration = false;
template <typename Rep, typename Period>
constexpr bool is_duration<std::chrono::duration<Rep, Period>> = true;

template <typename T>
T value_as(const Variable& v) {
    if constexpr (std::is_same_v<T, bool>) {
        return v.as_bool();
    } else if constexpr (std::is_enum_v<T>) {
        return static_cast<T>(choice_index(v));
    } else if constexpr (std::is_integral_v<T>) {
        // The declared range keeps the value within the field.
        if (v.type() == Type::integer) return static_cast<T>(v.as_int());
        return static_cast<T>(v.as_unsigned());
    } else if constexpr (is_duration<T>) {
        // The field's type carries the unit the parameter's help names.
        return T(static_cast<typename T::rep>(v.as_unsigned()));
    } else if constexpr (std::is_floating_point_v<T>) {
        return static_cast<T>(v.as_real());
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        return v.as_list();
    } else {
        static_assert(std::is_same_v<T, std::string>, "no way to store a parameter in this field");
        return v.as_string();
    }
}

// One function per bound field: its address also names the field
// (variable_of finds a table's entry by it).
template <auto Member, typename Config>
void store(const Variable& v, Config& c) {
    c.*Member = value_as<typename MemberOf<decltype(Member)>::Type>(v);
}

inline std::string full_name(std::string_view framework, std::string_view component,
                             std::string_view name) {
    std::string full;
    full.append(framework).append("_").append(component).append("_").append(name);
    return full;
}

}  // namespace detail

// The declaration `decl`, its value stored in the field `Member` (of Config,
// or of a base of it).
template <auto Member, typename Config = typename detail::MemberOf<decltype(Member)>::Class>
constexpr Field<Config> to(Decl decl) {
    return Field<Config>{decl, &detail::store<Member, Config>};
}

// Registers a bound table (as Registry::add_all does a table of Decl).
template <typename Config, std::size_t N>
void add_all(Registry& registry, std::string_view framework, std::string_view component,
             const Field<Config> (&table)[N]) {
    for (const Field<Config>& f : table) registry.add(framework, component, f.decl);
}

// Fills `config` from the registry's current values of the table's parameters.
template <typename Config, std::size_t N>
void bind(Registry& registry, std::string_view framework, std::string_view component,
          const Field<Config> (&table)[N], Config& config) {
    for (const Field<Config>& f : table)
        f.store(registry.get(detail::full_name(framework, component, f.decl.name)), config);
}

// The variable bound to the field `Member` in `table`: for a check across
// parameters (require_at_most) or the source of its value.  Throws Error
// when the table binds no parameter to that field.
template <auto Member, typename Config, std::size_t N>
Variable& variable_of(Registry& registry, std::string_view framework, std::string_view component,
                      const Field<Config> (&table)[N]) {
    for (const Field<Config>& f : table)
        if (f.store == &detail::store<Member, Config>)
            return registry.get(detail::full_name(framework, component, f.decl.name));
    throw Error(detail::full_name(framework, component, "*") +
                ": no parameter of the table is bound to this field");
}

}  // namespace transit::params
