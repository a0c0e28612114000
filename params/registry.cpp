// The process-wide registry.  Settings from every source are read up front and
// kept by name; a parameter takes its value when it registers, and is resolved
// again whenever a source changes (command line, API), so the order in which
// settings and registrations arrive never matters.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include "params/registry_impl.hpp"
#include "params/sources.hpp"
#include "params/suggest.hpp"
#include "params/variable.hpp"
#include "transit/log.hpp"

namespace transit::params {

namespace {

constexpr std::string_view param_files_name = "mca_base_param_files";

constexpr Decl core_params[] = {
    {"param_files", Type::string, "",
     "Colon separated parameter files (~/ is $HOME) read after ~/.transit/mca-params.conf; "
     "a file listed earlier overrides one listed later, and the environment and the command "
     "line override them all",
     4},
    {"component_path", Type::string, "",
     "Colon separated directories searched for plugins after <libdir>/transit", 4},
};

// "~/x" is the user's x, as a shell would read it in a file list.
std::string expand_home(const std::string& path) {
    const char* home = std::getenv("HOME");
    if (!path.starts_with("~/") || home == nullptr || *home == '\0') return path;
    return std::string(home) + path.substr(1);
}

// The setting a parameter takes: the highest source that names it, and within
// one source the full name before synonyms before deprecated names.
struct Choice {
    std::string text;
    Source source;
    std::string used_name;
};

struct Pending {
    VariableImpl* var;
    Choice choice;
    Value value;
};

class RegistryImpl final : public Registry {
  public:
    RegistryImpl();

    Variable& add(std::string_view framework, std::string_view component,
                  const Decl& decl) override;
    Variable* find(std::string_view name) override;
    Variable& get(std::string_view name) override;
    void set(std::string_view name, std::string_view value, Source source) override;
    std::vector<Variable*> all() override;
    std::vector<std::string> warn_unknown() override;

    void add_command_line(const std::vector<std::pair<std::string, std::string>>& pairs);

  private:
    VariableImpl* lookup(std::string_view name) const;
    Choice pick(const VariableImpl& v) const;
    Variable& add_locked(std::string_view framework, std::string_view component, const Decl& decl);
    void reload_param_files();
    void refresh();
    template <typename Change>
    void change_sources(Change&& change);
    void warn_if_deprecated(const VariableImpl& v, const Choice& c);
    void store(Origin origin, std::string_view name, Setting setting);

    std::mutex mutex_;
    Layers layers_;
    std::string param_files_read_;  // the mca_base_param_files value the layer was read for
    std::map<std::string, std::unique_ptr<VariableImpl>, std::less<>> vars_;  // by full name
    std::map<std::string, VariableImpl*, std::less<>> names_;  // every name a parameter answers to
    std::set<std::string, std::less<>> warned_deprecated_;
    std::set<std::string, std::less<>> warned_unknown_;
};

RegistryImpl::RegistryImpl() {
    read_file(system_file_path(), Origin::system_file, false, layer(layers_, Origin::system_file));
    std::string user = user_file_path();
    if (!user.empty()) read_file(user, Origin::user_file, false, layer(layers_, Origin::user_file));
    layer(layers_, Origin::environment) = read_environment();
    for (const Decl& d : core_params) add_locked("mca", "base", d);
    refresh();
}

VariableImpl* RegistryImpl::lookup(std::string_view name) const {
    auto it = names_.find(name);
    return it == names_.end() ? nullptr : it->second;
}

Choice RegistryImpl::pick(const VariableImpl& v) const {
    const std::vector<std::string> names = v.all_names();
    for (int o = static_cast<int>(Origin::api); o > static_cast<int>(Origin::default_value); --o) {
        const Layer& l = layer(layers_, static_cast<Origin>(o));
        for (const std::string& n : names)
            if (auto it = l.find(n); it != l.end()) return {it->second.value, it->second.source, n};
    }
    return {v.default_value(), Source{}, v.full_name()};
}

void RegistryImpl::warn_if_deprecated(const VariableImpl& v, const Choice& c) {
    if (!v.is_deprecated_name(c.used_name)) return;
    if (!warned_deprecated_.insert(c.used_name).second) return;
    log::warn("parameter {} (from {}) is deprecated; use {} instead", c.used_name,
              c.source.describe(), v.full_name());
}

Variable& RegistryImpl::add_locked(std::string_view framework, std::string_view component,
                                   const Decl& decl) {
    auto var = std::make_unique<VariableImpl>(framework, component, decl);
    if (auto it = vars_.find(var->full_name()); it != vars_.end()) {
        if (it->second->type() != var->type())
            throw std::invalid_argument(fmt::format("parameter {} registered again as {}, was {}",
                                                    var->full_name(), to_string(var->type()),
                                                    to_string(it->second->type())));
        return *it->second;
    }
    for (const std::string& n : var->all_names())
        if (VariableImpl* other = lookup(n))
            throw std::invalid_argument(fmt::format("parameter {}: the name {} is taken by {}",
                                                    var->full_name(), n, other->full_name()));
    Choice c = pick(*var);
    Value value = var->parse(c.text, c.source);
    VariableImpl& v = *var;
    v.assign(c.text, c.source, std::move(value));
    for (const std::string& n : v.all_names()) names_.emplace(n, &v);
    vars_.emplace(v.full_name(), std::move(var));
    warn_if_deprecated(v, c);
    return v;
}

Variable& RegistryImpl::add(std::string_view framework, std::string_view component,
                            const Decl& decl) {
    std::lock_guard lock(mutex_);
    return add_locked(framework, component, decl);
}

// Files named earlier win, like a search path; within one file the last line wins.
void RegistryImpl::reload_param_files() {
    VariableImpl& files = *lookup(param_files_name);
    Choice c = pick(files);
    if (c.text == param_files_read_) return;
    Layer merged;
    for (const std::string& path : split_trimmed(c.text, ':')) {
        if (path.empty()) continue;
        Layer one;
        try {
            read_file(expand_home(path), Origin::param_file, true, one);
        } catch (const Error& e) {
            throw Error(fmt::format("{} (named by {} from {})", e.what(), param_files_name,
                                    c.source.describe()));
        }
        for (auto& [name, setting] : one) {
            if (lookup(name) == &files)
                throw Error(fmt::format("file {}:{}: {} cannot be set in a file it names",
                                        setting.source.where, setting.source.line, name));
            merged.try_emplace(name, std::move(setting));
        }
    }
    layer(layers_, Origin::param_file) = std::move(merged);
    param_files_read_ = c.text;
}

// Re-resolves every parameter; nothing changes unless all of them parse.
void RegistryImpl::refresh() {
    reload_param_files();
    std::vector<Pending> pending;
    pending.reserve(vars_.size());
    for (auto& [full, var] : vars_) {
        Choice c = pick(*var);
        Value value = var->parse(c.text, c.source);
        pending.push_back({var.get(), std::move(c), std::move(value)});
    }
    for (Pending& p : pending) {
        warn_if_deprecated(*p.var, p.choice);
        p.var->assign(std::move(p.choice.text), std::move(p.choice.source), std::move(p.value));
    }
}

// Applies `change` to the sources; if any parameter then fails to parse, the
// sources are put back as they were and the error goes to the caller.
template <typename Change>
void RegistryImpl::change_sources(Change&& change) {
    Layers saved = layers_;
    std::string saved_read = param_files_read_;
    try {
        change();
        refresh();
    } catch (...) {
        layers_ = std::move(saved);
        param_files_read_ = std::move(saved_read);
        throw;
    }
}

// The newest setting of a parameter wins within one source, whatever name it
// used, so an older setting under another of its names is dropped.
void RegistryImpl::store(Origin origin, std::string_view name, Setting setting) {
    Layer& l = layer(layers_, origin);
    if (VariableImpl* v = lookup(name))
        for (const std::string& other : v->all_names()) l.erase(other);
    l.insert_or_assign(std::string(name), std::move(setting));
}

Variable* RegistryImpl::find(std::string_view name) {
    std::lock_guard lock(mutex_);
    return lookup(name);
}

Variable& RegistryImpl::get(std::string_view name) {
    std::lock_guard lock(mutex_);
    if (VariableImpl* v = lookup(name)) return *v;
    throw Error(fmt::format("unknown parameter {}", name));
}

void RegistryImpl::set(std::string_view name, std::string_view value, Source source) {
    std::lock_guard lock(mutex_);
    if (source.origin == Origin::default_value)
        throw std::invalid_argument(fmt::format("parameter {}: a default cannot be set", name));
    std::string text(value);
    // Check the value itself even when a higher source hides it.
    if (VariableImpl* v = lookup(name)) (void)v->parse(text, source);
    change_sources([&] { store(source.origin, name, Setting{std::move(text), source}); });
}

std::vector<Variable*> RegistryImpl::all() {
    std::lock_guard lock(mutex_);
    std::vector<Variable*> out;
    out.reserve(vars_.size());
    for (auto& [full, var] : vars_) out.push_back(var.get());
    return out;
}

// What a warning about an unknown setting names: the variable or --mca pair
// itself, or for a file its place and the name as written there.
std::string unknown_subject(const std::string& name, const Setting& setting) {
    switch (setting.source.origin) {
        case Origin::system_file:
        case Origin::user_file:
        case Origin::param_file:
            return fmt::format("{}: {}", setting.source.describe(), name);
        default:
            return printable(setting.source.where);
    }
}

std::vector<std::string> RegistryImpl::warn_unknown() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> known;
    known.reserve(names_.size());
    for (const auto& [n, v] : names_) known.push_back(n);
    std::vector<std::string> warnings;
    for (Origin o : {Origin::system_file, Origin::user_file, Origin::param_file,
                     Origin::environment, Origin::command_line}) {
        for (const auto& [name, setting] : layer(layers_, o)) {
            if (lookup(name) != nullptr) continue;
            std::string subject = unknown_subject(name, setting);
            if (!warned_unknown_.insert(subject).second) continue;
            std::string msg = fmt::format("{} names no known parameter", subject);
            std::string near = nearest_name(name, known);
            if (!near.empty()) msg += fmt::format(" (did you mean {}?)", lookup(near)->full_name());
            log::warn("{}", msg);
            warnings.push_back(std::move(msg));
        }
    }
    return warnings;
}

void RegistryImpl::add_command_line(const std::vector<std::pair<std::string, std::string>>& pairs) {
    std::lock_guard lock(mutex_);
    change_sources([&] {
        for (const auto& [name, value] : pairs)
            store(Origin::command_line, name,
                  Setting{value, Source{Origin::command_line, fmt::format("--mca {}", name), 0}});
    });
}

std::mutex instance_mutex;
std::unique_ptr<RegistryImpl> instance;

RegistryImpl& instance_impl() {
    std::lock_guard lock(instance_mutex);
    if (!instance) instance = std::make_unique<RegistryImpl>();
    return *instance;
}

}  // namespace

Registry& registry() {
    return instance_impl();
}

void reset_for_testing() {
    std::lock_guard lock(instance_mutex);
    instance.reset();
}

void parse_command_line(int& argc, char** argv) {
    if (argv == nullptr || argc <= 1) {
        (void)registry();
        return;
    }
    std::vector<std::pair<std::string, std::string>> pairs;
    std::vector<char*> kept{argv[0]};
    for (int i = 1; i < argc; ++i) {
        std::string_view arg(argv[i]);
        if (arg == "--") {  // the rest belongs to the program
            kept.insert(kept.end(), argv + i, argv + argc);
            break;
        }
        if (arg != "--mca") {
            kept.push_back(argv[i]);
            continue;
        }
        if (i + 2 >= argc)
            throw Error(fmt::format(
                "--mca needs a parameter name and a value, e.g. --mca btl "
                "self,tcp{}",
                i + 1 < argc ? fmt::format(" (got only {})", quoted(argv[i + 1])) : ""));
        std::string name = argv[i + 1];
        if (!valid_name(name))
            throw Error(fmt::format("--mca {}: not a parameter name (letters, digits and _ only)",
                                    printable(name)));
        pairs.emplace_back(std::move(name), argv[i + 2]);
        i += 2;
    }
    instance_impl().add_command_line(pairs);
    if (pairs.empty()) return;
    std::copy(kept.begin(), kept.end(), argv);
    argc = static_cast<int>(kept.size());
    argv[argc] = nullptr;  // within the old array: it shrank
}

Error::~Error() = default;

}  // namespace transit::params
