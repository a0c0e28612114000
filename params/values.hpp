// Parsing a parameter's text into its typed value.  One place knows every
// accepted spelling, so files, the environment, the command line and the API
// all agree on what "4k" or "on" means.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "transit/params.hpp"

namespace transit::params {

using Value =
    std::variant<bool, std::int64_t, std::uint64_t, double, std::string, std::vector<std::string>>;

// A number that is well formed but does not fit (overflow, negative unsigned).
class RangeError : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};

// What a value of `type` must look like, for error messages ("a size; expected ...").
std::string expected_form(Type type, const std::vector<std::string>& choices);

// Parses `text` as `type`; throws std::invalid_argument (with no context: the
// caller knows the parameter and the source) when it does not parse.
Value parse_value(Type type, std::string_view text, const std::vector<std::string>& choices);

bool parse_bool(std::string_view text);
std::int64_t parse_int(std::string_view text);
std::uint64_t parse_unsigned(std::string_view text);
double parse_real(std::string_view text);
std::vector<std::string> parse_list(std::string_view text);

// Splits on `sep`, trimming blanks around every item; keeps empty items.
std::vector<std::string> split_trimmed(std::string_view text, char sep);
std::string_view trim(std::string_view text) noexcept;

// `text` in double quotes, its quotes, backslashes and control characters (NUL,
// escape, newline...) written as escapes: a message that shows a value shows
// all of it, and a NUL in it cannot cut off what the message says next.
std::string quoted(std::string_view text);
// The same escapes of control characters, without quotes, for paths and names.
std::string printable(std::string_view text);

}  // namespace transit::params
