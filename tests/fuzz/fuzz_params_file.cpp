// libFuzzer target for the parameter-file parser, with each value then read
// as every parameter type and as a selection list: files are written by hand
// and by other tools, so anything may be in them.  See params_file.cmake.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "params/sources.hpp"
#include "params/values.hpp"
#include "transit/params.hpp"

namespace params = transit::params;

namespace {

void read_as_every_type(const std::string& value) {
    using params::Type;
    for (const Type t : {Type::boolean, Type::integer, Type::unsigned_integer, Type::size,
                         Type::real, Type::string, Type::enumeration, Type::list}) {
        try {
            (void)params::parse_value(t, value, {"tcp", "self", "vader"});
        } catch (const std::invalid_argument&) {
        } catch (const std::out_of_range&) {
        }
    }
    try {
        (void)params::parse_selection(value, {"tcp", "self", "vader"}, "btl");
    } catch (const params::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    params::Layer layer;
    try {
        params::read_lines(in, "fuzz.conf", params::Origin::param_file, layer);
    } catch (const params::Error& e) {
        // A refused file names itself and the line.
        if (std::string_view(e.what()).rfind("file fuzz.conf:", 0) != 0) __builtin_trap();
        return 0;
    }
    for (const auto& [name, setting] : layer) {
        if (!params::valid_name(name) || setting.source.line < 1) __builtin_trap();
        read_as_every_type(setting.value);
    }
    return 0;
}
