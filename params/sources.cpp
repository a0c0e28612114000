#include "params/sources.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "params/registry_impl.hpp"
#include "params/values.hpp"

extern char** environ;

namespace transit::params {

namespace {

std::mutex override_mutex;
std::string system_file_override;

[[noreturn]] void malformed(const std::string& path, int line, std::string_view why) {
    throw Error(fmt::format("file {}:{}: {}", printable(path), line, why));
}

// Cuts a '#' comment, honouring double quotes so a value may contain '#'.
std::string_view strip_comment(std::string_view line, const std::string& path, int lineno) {
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '"') quoted = !quoted;
        if (line[i] == '#' && !quoted) return line.substr(0, i);
    }
    if (quoted) malformed(path, lineno, "unterminated double quote");
    return line;
}

std::string unquote(std::string_view value) {
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
        return std::string(value.substr(1, value.size() - 2));
    if (value.find('"') != std::string_view::npos)
        throw std::invalid_argument("a double quote may only surround the whole value");
    return std::string(value);
}

void parse_line(std::string_view raw, const std::string& path, int lineno, Origin origin,
                Layer& out) {
    std::string_view line = trim(strip_comment(raw, path, lineno));
    if (line.empty()) return;
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos)
        malformed(path, lineno, fmt::format("expected \"name = value\", got {}", quoted(line)));
    std::string_view name = trim(line.substr(0, eq));
    if (name.empty() || !valid_name(name))
        malformed(
            path, lineno,
            fmt::format("{} is not a parameter name (letters, digits and _ only)", quoted(name)));
    std::string value;
    try {
        value = unquote(trim(line.substr(eq + 1)));
    } catch (const std::invalid_argument& e) {
        malformed(path, lineno, e.what());
    }
    out.insert_or_assign(std::string(name),
                         Setting{std::move(value), Source{origin, path, lineno}});
}

// Any function of libtransit: dladdr on it names the file we were loaded from.
void locate_self() {}

}  // namespace

std::string_view to_string(Origin o) noexcept {
    switch (o) {
        case Origin::default_value:
            return "default";
        case Origin::system_file:
            return "system file";
        case Origin::user_file:
            return "user file";
        case Origin::param_file:
            return "param file";
        case Origin::environment:
            return "environment";
        case Origin::command_line:
            return "command line";
        case Origin::api:
            return "api";
    }
    return "unknown";
}

std::string_view to_string(Type t) noexcept {
    switch (t) {
        case Type::boolean:
            return "bool";
        case Type::integer:
            return "int";
        case Type::unsigned_integer:
            return "unsigned";
        case Type::size:
            return "size";
        case Type::real:
            return "double";
        case Type::string:
            return "string";
        case Type::enumeration:
            return "enum";
        case Type::list:
            return "list";
    }
    return "unknown";
}

std::string Source::describe() const {
    switch (origin) {
        case Origin::default_value:
            return "default";
        case Origin::system_file:
        case Origin::user_file:
        case Origin::param_file:
            return line > 0 ? fmt::format("file {}:{}", printable(where), line)
                            : fmt::format("file {}", printable(where));
        case Origin::environment:
            return fmt::format("environment {}", printable(where));
        case Origin::command_line:
            return where.empty() ? "command line"
                                 : fmt::format("command line {}", printable(where));
        case Origin::api:
            return where.empty() ? "api" : fmt::format("api ({})", printable(where));
    }
    return "unknown";
}

bool valid_name(std::string_view name) noexcept {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
    });
}

void read_file(const std::string& path, Origin origin, bool must_exist, Layer& out) {
    std::error_code ec;
    auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) {
        if (!must_exist) return;
        throw Error(fmt::format("file {}: cannot read it: no such file", printable(path)));
    }
    if (!std::filesystem::is_regular_file(status))
        throw Error(fmt::format("file {}: cannot read it: not a regular file", printable(path)));
    // Refused before a byte is read: a file this large is not a parameter file.
    if (const std::uintmax_t size = std::filesystem::file_size(path, ec);
        !ec && size > max_file_bytes)
        throw Error(fmt::format("file {}: {} bytes, larger than a parameter file may be ({} bytes)",
                                printable(path), size, max_file_bytes));
    std::ifstream in(path);
    if (!in)
        throw Error(
            fmt::format("file {}: cannot read it: {}", printable(path), std::strerror(errno)));
    read_lines(in, path, origin, out);
}

void read_lines(std::istream& in, const std::string& path, Origin origin, Layer& out) {
    // Read by hand rather than with std::getline, which would take a file with
    // no newline into one string, however large, before anything could object.
    std::streambuf* buf = in.rdbuf();
    if (buf == nullptr) throw Error(fmt::format("file {}: read error", printable(path)));
    std::string line;
    std::size_t total = 0;
    for (int lineno = 1;; ++lineno) {
        line.clear();
        int c = buf->sbumpc();
        if (c == std::char_traits<char>::eof()) break;
        for (; c != std::char_traits<char>::eof() && c != '\n'; c = buf->sbumpc()) {
            if (line.size() == max_line_bytes)
                malformed(path, lineno,
                          fmt::format("line longer than {} bytes (a parameter file holds short "
                                      "\"name = value\" lines)",
                                      max_line_bytes));
            line.push_back(static_cast<char>(c));
        }
        total += line.size() + 1;
        if (total > max_file_bytes + 1)
            throw Error(fmt::format("file {}: larger than a parameter file may be ({} bytes)",
                                    printable(path), max_file_bytes));
        parse_line(line, path, lineno, origin, out);
    }
    if (in.bad()) throw Error(fmt::format("file {}: read error", printable(path)));
}

Layer read_environment() {
    Layer out;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        std::string_view entry(*e);
        if (!entry.starts_with(env_prefix)) continue;
        std::size_t eq = entry.find('=');
        if (eq == std::string_view::npos) continue;
        std::string var(entry.substr(0, eq));
        std::string name = var.substr(env_prefix.size());
        out.insert_or_assign(
            name, Setting{std::string(entry.substr(eq + 1)), Source{Origin::environment, var, 0}});
    }
    return out;
}

std::string system_file_path() {
    {
        std::lock_guard lock(override_mutex);
        if (!system_file_override.empty()) return system_file_override;
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&locate_self), &info) == 0 || info.dli_fname == nullptr)
        return {};
    std::filesystem::path lib(info.dli_fname);
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(lib, ec);
    if (!ec) lib = abs;
    return (lib.parent_path() / TRANSIT_SYSCONF_RELATIVE).lexically_normal().string();
}

std::string user_file_path() {
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0') return {};
    return (std::filesystem::path(home) / ".transit" / "mca-params.conf").string();
}

void set_system_file_for_testing(std::string path) {
    std::lock_guard lock(override_mutex);
    system_file_override = std::move(path);
}

}  // namespace transit::params
