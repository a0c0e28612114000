// One registered parameter: its declaration, its current text, typed value and source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "params/values.hpp"
#include "transit/params.hpp"

namespace transit::params {

// Builds <framework>_<component>_<name>, leaving out empty parts: the framework
// selection parameter ("btl", "", "") is just "btl".
std::string make_full_name(std::string_view framework, std::string_view component,
                           std::string_view name);

class VariableImpl final : public Variable {
  public:
    // Checks the declaration (names, level, choices, default); throws
    // std::invalid_argument for a programming error in it.
    VariableImpl(std::string_view framework, std::string_view component, const Decl& decl);

    const std::string& full_name() const override { return full_name_; }
    const std::string& framework() const override { return framework_; }
    const std::string& component() const override { return component_; }
    const std::string& name() const override { return name_; }
    Type type() const override { return type_; }
    int level() const override { return level_; }
    const std::string& help() const override { return help_; }
    const std::string& default_value() const override { return default_; }
    const std::vector<std::string>& choices() const override { return choices_; }
    const std::vector<std::string>& synonyms() const override { return synonyms_; }
    const std::vector<std::string>& deprecated_names() const override { return deprecated_; }
    std::optional<std::int64_t> min() const override { return min_; }
    std::optional<std::int64_t> max() const override { return max_; }
    std::optional<double> real_min() const override { return real_min_; }
    std::optional<double> real_max() const override { return real_max_; }
    const std::string& text() const override { return text_; }
    const Source& source() const override { return source_; }

    bool as_bool() const override;
    std::int64_t as_int() const override;
    std::uint64_t as_unsigned() const override;
    double as_real() const override;
    const std::string& as_string() const override;
    std::vector<std::string> as_list() const override;

    // Every name this parameter answers to: full name, synonyms, deprecated names.
    std::vector<std::string> all_names() const;
    bool is_deprecated_name(std::string_view n) const;

    // Parses `text` for this parameter and checks it against the declared
    // range; throws Error naming the parameter, the value, `source` and the
    // expected form or range.
    Value parse(const std::string& text, const Source& source) const;
    void assign(std::string text, Source source, Value value);

  private:
    [[noreturn]] void wrong_view(std::string_view wanted) const;
    Value parse_form(const std::string& text, const Source& source) const;
    bool within_range(const Value& value) const;
    void check_range_decl() const;

    std::string framework_, component_, name_, full_name_;
    Type type_;
    int level_;
    std::string help_, default_;
    std::vector<std::string> choices_, synonyms_, deprecated_;
    std::optional<std::int64_t> min_, max_;
    std::optional<double> real_min_, real_max_;
    std::string text_;
    Source source_;
    Value value_;
};

}  // namespace transit::params
