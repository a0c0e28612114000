#include "params/values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace transit::params {

namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

// from_chars must consume the whole text: "12abc" is garbage, not 12.
template <typename T>
T parse_number(std::string_view text, std::string_view what) {
    std::string_view t = trim(text);
    if (!t.empty() && t.front() == '+') t.remove_prefix(1);
    T value{};
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
    if (ec == std::errc::result_out_of_range)
        throw RangeError(fmt::format("{} is out of range for {}", quoted(text), what));
    if (t.empty() || ec != std::errc{} || end != t.data() + t.size())
        throw std::invalid_argument(fmt::format("{} is not {}", quoted(text), what));
    return value;
}

// Binary multiplier for a size suffix ("k", "KiB", "mb", ...), 0 when not one.
std::uint64_t size_multiplier(std::string_view suffix) noexcept {
    if (suffix.empty()) return 1;
    int shift = 0;
    switch (std::tolower(static_cast<unsigned char>(suffix.front()))) {
        case 'k':
            shift = 10;
            break;
        case 'm':
            shift = 20;
            break;
        case 'g':
            shift = 30;
            break;
        case 't':
            shift = 40;
            break;
        default:
            return 0;
    }
    std::string_view rest = suffix.substr(1);
    if (rest.empty() || iequals(rest, "b") || iequals(rest, "ib")) return std::uint64_t{1} << shift;
    return 0;
}

}  // namespace

std::string_view trim(std::string_view text) noexcept {
    auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!text.empty() && blank(text.front())) text.remove_prefix(1);
    while (!text.empty() && blank(text.back())) text.remove_suffix(1);
    return text;
}

namespace {

void append_escaped(std::string& out, std::string_view text, bool in_quotes) {
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (in_quotes && (c == '"' || c == '\\')) {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (byte < 0x20 || byte == 0x7f) {
            out += fmt::format("\\x{:02x}", byte);
        } else {
            out += c;
        }
    }
}

}  // namespace

std::string quoted(std::string_view text) {
    std::string out = "\"";
    append_escaped(out, text, true);
    out += '"';
    return out;
}

std::string printable(std::string_view text) {
    std::string out;
    append_escaped(out, text, false);
    return out;
}

std::vector<std::string> split_trimmed(std::string_view text, char sep) {
    std::vector<std::string> out;
    for (;;) {
        std::size_t pos = text.find(sep);
        out.emplace_back(trim(text.substr(0, pos)));
        if (pos == std::string_view::npos) return out;
        text.remove_prefix(pos + 1);
    }
}

std::uint64_t parse_size(std::string_view text) {
    std::string_view t = trim(text);
    std::size_t digits = 0;
    while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
    if (digits == 0)
        throw std::invalid_argument(
            fmt::format("{} is not a size (no digits first)", quoted(text)));
    std::uint64_t number = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + digits, number);
    if (ec == std::errc::result_out_of_range)
        throw RangeError(fmt::format("{} is too large for a size", quoted(text)));
    std::uint64_t mult = size_multiplier(t.substr(digits));
    if (mult == 0)
        throw std::invalid_argument(fmt::format("{} is not a size (unknown suffix {})",
                                                quoted(text), quoted(t.substr(digits))));
    if (number > std::numeric_limits<std::uint64_t>::max() / mult)
        throw RangeError(fmt::format("{} is too large for a size", quoted(text)));
    return number * mult;
}

bool parse_bool(std::string_view text) {
    std::string_view t = trim(text);
    for (std::string_view yes : {"true", "yes", "on", "1"})
        if (iequals(t, yes)) return true;
    for (std::string_view no : {"false", "no", "off", "0"})
        if (iequals(t, no)) return false;
    throw std::invalid_argument(fmt::format("{} is not a boolean", quoted(text)));
}

std::int64_t parse_int(std::string_view text) {
    return parse_number<std::int64_t>(text, "a 64-bit integer");
}

std::uint64_t parse_unsigned(std::string_view text) {
    // from_chars would reject "-1" anyway; say why in words.
    if (!trim(text).empty() && trim(text).front() == '-')
        throw RangeError(fmt::format("{} is negative", quoted(text)));
    return parse_number<std::uint64_t>(text, "an unsigned 64-bit integer");
}

double parse_real(std::string_view text) {
    double v = parse_number<double>(text, "a number");
    if (!std::isfinite(v))
        throw std::invalid_argument(fmt::format("{} is not finite", quoted(text)));
    return v;
}

std::vector<std::string> parse_list(std::string_view text) {
    if (trim(text).empty()) return {};
    std::vector<std::string> items = split_trimmed(text, ',');
    if (std::any_of(items.begin(), items.end(), [](const std::string& s) { return s.empty(); }))
        throw std::invalid_argument(fmt::format("{} has an empty item", quoted(text)));
    return items;
}

std::string expected_form(Type type, const std::vector<std::string>& choices) {
    switch (type) {
        case Type::boolean:
            return "is not a boolean; expected true/false, yes/no, on/off or 1/0";
        case Type::integer:
            return "is not an integer; expected a whole number such as -3 or 42";
        case Type::unsigned_integer:
            return "is not an unsigned integer; expected a whole number such as 0 or 42";
        case Type::size:
            return "is not a size; expected a number with an optional k, M or g suffix, e.g. 4k";
        case Type::real:
            return "is not a number; expected a decimal number such as 0.5 or 1e-3";
        case Type::string:
            return "is not a string";
        case Type::enumeration:
            return fmt::format("is not one of the choices; expected one of: {}",
                               fmt::join(choices, ", "));
        case Type::list:
            return "is not a list; expected comma-separated items with none empty, e.g. a,b,c";
    }
    return "is not valid";
}

Value parse_value(Type type, std::string_view text, const std::vector<std::string>& choices) {
    switch (type) {
        case Type::boolean:
            return parse_bool(text);
        case Type::integer:
            return parse_int(text);
        case Type::unsigned_integer:
            return parse_unsigned(text);
        case Type::size:
            return parse_size(text);
        case Type::real:
            return parse_real(text);
        case Type::string:
            return std::string(text);
        case Type::enumeration: {
            std::string_view t = trim(text);
            if (std::find(choices.begin(), choices.end(), t) == choices.end())
                throw std::invalid_argument(fmt::format("{} is not a choice", quoted(text)));
            return std::string(t);
        }
        case Type::list:
            return parse_list(text);
    }
    throw std::invalid_argument("unknown parameter type");
}

}  // namespace transit::params
