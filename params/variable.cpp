#include "params/variable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "params/sources.hpp"

namespace transit::params {

namespace {

std::vector<std::string> name_list(std::string_view text, std::string_view what,
                                   const std::string& owner) {
    std::vector<std::string> out;
    if (trim(text).empty()) return out;
    for (std::string& n : split_trimmed(text, ',')) {
        if (!valid_name(n))
            throw std::invalid_argument(
                fmt::format("parameter {}: bad {} {}", owner, what, quoted(n)));
        out.push_back(std::move(n));
    }
    return out;
}

void check_part(std::string_view part, std::string_view what) {
    if (!part.empty() && !valid_name(part))
        throw std::invalid_argument(
            fmt::format("parameter {} \"{}\" may hold only letters, digits and _", what, part));
}

}  // namespace

std::string make_full_name(std::string_view framework, std::string_view component,
                           std::string_view name) {
    std::string full(framework);
    for (std::string_view part : {component, name})
        if (!part.empty()) full += fmt::format("_{}", part);
    return full;
}

VariableImpl::VariableImpl(std::string_view framework, std::string_view component, const Decl& decl)
    : framework_(framework),
      component_(component),
      name_(decl.name),
      full_name_(make_full_name(framework, component, decl.name)),
      type_(decl.type),
      level_(decl.level),
      help_(decl.help),
      default_(decl.default_value),
      min_(decl.min),
      max_(decl.max),
      real_min_(decl.real_min),
      real_max_(decl.real_max) {
    if (framework.empty())
        throw std::invalid_argument(fmt::format("parameter \"{}\" has no framework", decl.name));
    check_part(framework, "framework");
    check_part(component, "component");
    check_part(decl.name, "name");
    if (level_ < 1 || level_ > 9)
        throw std::invalid_argument(
            fmt::format("parameter {}: level {} is not in 1..9", full_name_, level_));
    choices_ = name_list(decl.choices, "choice", full_name_);
    synonyms_ = name_list(decl.synonyms, "synonym", full_name_);
    deprecated_ = name_list(decl.deprecated, "deprecated name", full_name_);
    if (type_ == Type::enumeration && choices_.empty())
        throw std::invalid_argument(
            fmt::format("parameter {}: an enum needs at least one choice", full_name_));
    try {
        value_ = parse_value(type_, default_, choices_);
    } catch (const std::invalid_argument&) {
        throw std::invalid_argument(fmt::format("parameter {}: default value {} {}", full_name_,
                                                quoted(default_), expected_form(type_, choices_)));
    }
    check_range_decl();
    text_ = default_;
}

// A range on a type without numbers, an empty one or a default outside it is
// a mistake in the component, not in the user's settings.
void VariableImpl::check_range_decl() const {
    const bool integer_range = min_ || max_;
    const bool real_range = real_min_ || real_max_;
    if (!integer_range && !real_range) return;
    const bool integer_type =
        type_ == Type::integer || type_ == Type::unsigned_integer || type_ == Type::size;
    if (integer_range && !integer_type)
        throw std::invalid_argument(
            fmt::format("parameter {}: a range needs an integer, "
                        "unsigned or size type, not {}",
                        full_name_, to_string(type_)));
    if (real_range && type_ != Type::real)
        throw std::invalid_argument(
            fmt::format("parameter {}: a real range needs a double type, not {}", full_name_,
                        to_string(type_)));
    if ((min_ && max_ && *min_ > *max_) || (real_min_ && real_max_ && !(*real_min_ <= *real_max_)))
        throw std::invalid_argument(
            fmt::format("parameter {}: the range {} is empty", full_name_, range_text(*this)));
    if (!within_range(value_))
        throw std::invalid_argument(fmt::format("parameter {}: default value {} is outside {}",
                                                full_name_, quoted(default_), range_text(*this)));
}

bool VariableImpl::within_range(const Value& value) const {
    return std::visit(
        [this](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>)
                return !(min_ && std::cmp_less(v, *min_)) && !(max_ && std::cmp_greater(v, *max_));
            else if constexpr (std::is_same_v<T, double>)
                return !(real_min_ && v < *real_min_) && !(real_max_ && v > *real_max_);
            else
                return true;
        },
        value);
}

std::string range_text(std::optional<std::int64_t> min, std::optional<std::int64_t> max) {
    if (min && max) return fmt::format("{}..{}", *min, *max);
    if (min) return fmt::format("at least {}", *min);
    if (max) return fmt::format("at most {}", *max);
    return "";
}

std::string range_text(const Variable& v) {
    if (v.min() || v.max()) return range_text(v.min(), v.max());
    const std::optional<double> lo = v.real_min();
    const std::optional<double> hi = v.real_max();
    if (lo && hi) return fmt::format("{}..{}", *lo, *hi);
    if (lo) return fmt::format("at least {}", *lo);
    if (hi) return fmt::format("at most {}", *hi);
    return "";
}

std::vector<std::string> VariableImpl::all_names() const {
    std::vector<std::string> names{full_name_};
    names.insert(names.end(), synonyms_.begin(), synonyms_.end());
    names.insert(names.end(), deprecated_.begin(), deprecated_.end());
    return names;
}

bool VariableImpl::is_deprecated_name(std::string_view n) const {
    return std::find(deprecated_.begin(), deprecated_.end(), n) != deprecated_.end();
}

Value VariableImpl::parse(const std::string& text, const Source& source) const {
    Value value = parse_form(text, source);
    if (!within_range(value))
        throw Error(fmt::format("parameter {}: value {} (from {}) is out of range; expected {}",
                                full_name_, quoted(text), source.describe(), range_text(*this)));
    return value;
}

Value VariableImpl::parse_form(const std::string& text, const Source& source) const {
    std::string detail;
    try {
        return parse_value(type_, text, choices_);
    } catch (const RangeError& e) {
        // Range problems deserve their own words; the form alone would mislead.
        detail = fmt::format(" ({})", e.what());
    } catch (const std::invalid_argument&) {
    }
    throw Error(fmt::format("parameter {}: value {} (from {}) {}{}", full_name_, quoted(text),
                            source.describe(), expected_form(type_, choices_), detail));
}

void VariableImpl::assign(std::string text, Source source, Value value) {
    text_ = std::move(text);
    source_ = std::move(source);
    value_ = std::move(value);
}

void require_at_most(const Variable& lower, const Variable& upper) {
    if (lower.as_unsigned() <= upper.as_unsigned()) return;
    throw Error(fmt::format("parameter {}: value {} (from {}) must be at most {} ({}, from {})",
                            lower.full_name(), quoted(lower.text()), lower.source().describe(),
                            upper.full_name(), quoted(upper.text()), upper.source().describe()));
}

void VariableImpl::wrong_view(std::string_view wanted) const {
    throw Error(
        fmt::format("parameter {} is of type {}, not {}", full_name_, to_string(type_), wanted));
}

bool VariableImpl::as_bool() const {
    if (type_ != Type::boolean) wrong_view("bool");
    return std::get<bool>(value_);
}

std::int64_t VariableImpl::as_int() const {
    if (type_ != Type::integer) wrong_view("int");
    return std::get<std::int64_t>(value_);
}

std::uint64_t VariableImpl::as_unsigned() const {
    if (type_ != Type::unsigned_integer && type_ != Type::size) wrong_view("unsigned or size");
    return std::get<std::uint64_t>(value_);
}

double VariableImpl::as_real() const {
    if (type_ != Type::real) wrong_view("double");
    return std::get<double>(value_);
}

const std::string& VariableImpl::as_string() const {
    if (type_ != Type::string && type_ != Type::enumeration) wrong_view("string or enum");
    return std::get<std::string>(value_);
}

std::vector<std::string> VariableImpl::as_list() const {
    if (type_ != Type::list) wrong_view("list");
    return std::get<std::vector<std::string>>(value_);
}

}  // namespace transit::params
