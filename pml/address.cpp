#include "pml/address.hpp"

#include "runtime/job_secret.hpp"

#include <algorithm>
#include <cstdint>
#include <span>

namespace transit::pml {

namespace {

constexpr std::string_view scheme = "transit:1";
constexpr std::size_t max_address = 64 * 1024;

int nibble(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool unhex(std::string_view text, std::vector<std::byte>& out) {
    if (text.size() % 2 != 0) return false;
    out.clear();
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        const int hi = nibble(text[i]);
        const int lo = nibble(text[i + 1]);
        if (hi < 0 || lo < 0) return false;
        out.push_back(static_cast<std::byte>(hi << 4 | lo));
    }
    return true;
}

// At most 32 characters of a peer's text, anything unprintable as '?': a
// reason goes into one log line, whatever the text held.
std::string shown(std::string_view text) {
    std::string out(text.substr(0, 32));
    for (char& c : out)
        if (c < 0x20 || c > 0x7e) c = '?';
    return out;
}

}  // namespace

std::string format_address(const rt::PeerAddress& a) {
    std::string s(scheme);
    s += ";token=" + rt::to_hex(a.token);
    const auto* node = reinterpret_cast<const std::byte*>(a.node_id.data());
    s += ";node=" + rt::to_hex({node, a.node_id.size()});
    for (const auto& [key, blob] : a.blobs) s += ";" + key + "=" + rt::to_hex(blob);
    return s;
}

std::string parse_address(std::string_view text, rt::PeerAddress& out) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
        text.remove_suffix(1);
    if (text.size() > max_address) return "longer than any address";
    if (text.substr(0, scheme.size()) != scheme ||
        (text.size() > scheme.size() && text[scheme.size()] != ';'))
        return "does not start with '" + std::string(scheme) + ";'";
    text.remove_prefix(scheme.size());
    bool has_token = false;
    bool has_node = false;
    std::vector<std::byte> bytes;
    while (!text.empty()) {
        text.remove_prefix(1);  // the ';'
        const std::size_t end = text.find(';');
        const std::string_view field = text.substr(0, end);
        text.remove_prefix(end == std::string_view::npos ? text.size() : end);
        const std::size_t eq = field.find('=');
        if (eq == std::string_view::npos || eq == 0)
            return "field '" + shown(field) + "' is not key=value";
        const std::string_view key = field.substr(0, eq);
        if (!unhex(field.substr(eq + 1), bytes))
            return "the value of '" + shown(key) + "' is not hexadecimal";
        if (key == "token") {
            if (bytes.size() != out.token.size()) return "the token is not 128 bits";
            std::copy(bytes.begin(), bytes.end(), out.token.begin());
            has_token = true;
        } else if (key == "node") {
            out.node_id.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
            has_node = true;
        } else if (key.substr(0, 4) == "btl.") {
            out.blobs[std::string(key)] = bytes;
        } else {
            return "unknown field '" + shown(key) + "'";
        }
    }
    if (!has_token) return "no token";
    if (!has_node) return "no node";
    if (out.blobs.empty()) return "no transport address in it";
    return {};
}

}  // namespace transit::pml
