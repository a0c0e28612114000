// Typed run-time parameters.  Every tunable of every layer is registered here with
// a type, a default, a level (1 = everyone, 9 = developers) and a help text; its
// value comes from the highest-precedence source that sets it, and remembers
// that source so tools and error messages can name it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace transit::params {

enum class Type { boolean, integer, unsigned_integer, size, real, string, enumeration, list };

std::string_view to_string(Type t) noexcept;

// Lowest to highest precedence.
enum class Origin {
    default_value,
    system_file,   // <prefix>/etc/transit-mca-params.conf
    user_file,     // ~/.transit/mca-params.conf
    param_file,    // a file named in mca_base_param_files
    environment,   // TRANSIT_MCA_<name>
    command_line,  // --mca <name> <value>
    api,           // set by the program itself
};

std::string_view to_string(Origin o) noexcept;

// Where a value came from: "file /etc/x.conf:12", "environment TRANSIT_MCA_btl", ...
struct Source {
    Origin origin = Origin::default_value;
    std::string where = {};  // file path or variable name; empty for defaults and the API
    int line = 0;            // line in a file, 0 otherwise
    std::string describe() const;
};

// A declarative parameter, written as a constexpr table by each component:
//   constexpr params::Decl params[] = {
//       {"eager_limit", Type::size, "4k", "Largest message sent eagerly", 4},
//       params::Decl{"free_list_max", Type::unsigned_integer, "128", "Fragments", 6}
//           .range(1, 1 << 20),
//   };
struct Decl {
    std::string_view name;  // short name; the full name is <framework>_<component>_<name>
    Type type;
    std::string_view default_value;
    std::string_view help;
    int level = 5;
    std::string_view choices = {};     // enumeration: comma-separated allowed values
    std::string_view synonyms = {};    // comma-separated full names that work silently
    std::string_view deprecated = {};  // comma-separated old full names that warn once
    // Integer, unsigned and size parameters: the smallest and largest value
    // accepted (inclusive).  The registry refuses a value outside them like one
    // that does not parse, so a component reads only values it can use.
    std::optional<std::int64_t> min = {};
    std::optional<std::int64_t> max = {};

    // This declaration, accepting only lo..hi (or lo and above): a constexpr
    // table keeps the positional form for the common fields.
    constexpr Decl range(std::int64_t lo, std::int64_t hi) const {
        Decl d = *this;
        d.min = lo;
        d.max = hi;
        return d;
    }
    constexpr Decl at_least(std::int64_t lo) const {
        Decl d = *this;
        d.min = lo;
        return d;
    }

    // Real parameters: the smallest and largest value accepted (inclusive),
    // refused like min and max.
    std::optional<double> real_min = {};
    std::optional<double> real_max = {};

    constexpr Decl real_range(double lo, double hi) const {
        Decl d = *this;
        d.real_min = lo;
        d.real_max = hi;
        return d;
    }
};

// "1..1048576", "at least 1", "at most 64", or "" without bounds.
std::string range_text(std::optional<std::int64_t> min, std::optional<std::int64_t> max);

class Variable;
// The declared range of `v`, integer or real, in the same words; "" without one.
std::string range_text(const Variable& v);

// The error for any value that does not parse, naming the parameter, the value,
// where it was set and the form that was expected.
class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
    // Out of line, so the class's vtable lives in libtransit: an Error thrown
    // by a plugin is still readable after the plugin is unloaded by the
    // unwinding (transit_info crashed reading it in its catch).
    ~Error() override;
};

class Variable {
  public:
    virtual ~Variable() = default;

    virtual const std::string& full_name() const = 0;
    virtual const std::string& framework() const = 0;
    virtual const std::string& component() const = 0;
    virtual const std::string& name() const = 0;
    virtual Type type() const = 0;
    virtual int level() const = 0;
    virtual const std::string& help() const = 0;
    virtual const std::string& default_value() const = 0;
    virtual const std::vector<std::string>& choices() const = 0;
    virtual const std::vector<std::string>& synonyms() const = 0;
    virtual const std::vector<std::string>& deprecated_names() const = 0;
    // The declared bounds (Decl::min, Decl::max); empty when unbounded.
    virtual std::optional<std::int64_t> min() const = 0;
    virtual std::optional<std::int64_t> max() const = 0;
    // The declared bounds of a real parameter (Decl::real_min, Decl::real_max).
    virtual std::optional<double> real_min() const = 0;
    virtual std::optional<double> real_max() const = 0;

    // The value as set (text), and where it came from.
    virtual const std::string& text() const = 0;
    virtual const Source& source() const = 0;

    // Typed views; calling the wrong one for the type throws Error.
    virtual bool as_bool() const = 0;
    virtual std::int64_t as_int() const = 0;
    virtual std::uint64_t as_unsigned() const = 0;  // unsigned and size
    virtual double as_real() const = 0;
    virtual const std::string& as_string() const = 0;  // string and enumeration
    virtual std::vector<std::string> as_list() const = 0;
};

class Registry {
  public:
    virtual ~Registry() = default;

    // Registers one parameter (idempotent for the same full name and type) and
    // resolves its value from every source.  Throws Error on a bad value.
    virtual Variable& add(std::string_view framework, std::string_view component,
                          const Decl& decl) = 0;

    // Registers a whole table; returns nothing, look values up with get().
    template <std::size_t N>
    void add_all(std::string_view framework, std::string_view component, const Decl (&decls)[N]) {
        for (const Decl& d : decls) add(framework, component, d);
    }

    // By full name, synonym or deprecated name; nullptr when unknown.
    virtual Variable* find(std::string_view name) = 0;
    // Like find, but throws Error naming the parameter when it is unknown.
    virtual Variable& get(std::string_view name) = 0;

    // Sets a value from the program (Origin::api) or a tool's command line.
    // Throws Error when the value does not parse.
    virtual void set(std::string_view name, std::string_view value, Source source) = 0;

    virtual std::vector<Variable*> all() = 0;

    // Warns (once per name and place) about settings in the parameter files,
    // TRANSIT_MCA_* variables and --mca names that match no registered
    // parameter, naming the file and line and suggesting the nearest known name.
    // Returns the warnings it printed.
    virtual std::vector<std::string> warn_unknown() = 0;
};

// The process-wide registry.
Registry& registry();

// Parses "--mca NAME VALUE" pairs out of argv (removing them) into the registry's
// command-line source.  Every tool calls this before anything else.
void parse_command_line(int& argc, char** argv);

// A framework selection list: "a,b,c" (include) or "^a,b" (exclude).
struct Selection {
    bool exclude = false;
    std::vector<std::string> names;
    // True when the component `name` is selected by this list.
    bool selects(std::string_view name) const;
    bool empty() const { return names.empty(); }
};

// Parses a selection list; throws Error for "^" anywhere but the front, empty
// names, or (when `known` is not empty) an included name that is not known.
Selection parse_selection(std::string_view text, const std::vector<std::string>& known,
                          std::string_view param_name);

// For limits that must nest, such as eager_limit <= max_send_size (a check
// across parameters, which a declared range cannot express): throws Error
// naming both parameters, their values and where each came from when
// `lower`'s value is above `upper`'s.  Both must be unsigned or size.
void require_at_most(const Variable& lower, const Variable& upper);

// Parses sizes like "4096", "4k", "1M", "2g" (binary units); throws std::invalid_argument.
std::uint64_t parse_size(std::string_view text);

}  // namespace transit::params
