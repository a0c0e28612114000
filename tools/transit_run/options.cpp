#include "options.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "transit/version.hpp"

namespace transit::run {
namespace {

bool valid_param_name(const std::string& name) {
    if (name.empty()) return false;
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
}

// mpirun's spellings, "-np N", with one dash.  CLI11 reads "-np" as "-n p",
// so it becomes "--np" here, before the program name only: what follows the
// program belongs to the program.
std::vector<std::string> mpirun_spellings(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    for (std::size_t i = 1; i < args.size(); ++i) {
        std::string& a = args[i];
        if (a == "-np") a = "--np";
        if (a == "--") break;
        if (a == "-n" || a == "--np" || a == "--bind-to" || a == "--timeout" || a == "-x")
            ++i;
        else if (a == "--mca")
            i += 2;
        else if (!a.starts_with("-"))
            break;
    }
    return args;
}

// "-x NAME=VALUE" sets NAME in every rank; "-x NAME" forwards this
// environment's NAME, which the ranks inherit anyway: it must only exist.
std::optional<std::string> env_entry_error(const std::string& entry) {
    const std::size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (!valid_param_name(name) || std::isdigit(static_cast<unsigned char>(name.front())))
        return fmt::format("-x: '{}' is not a variable name (NAME or NAME=VALUE)", entry);
    if (eq == std::string::npos && std::getenv(name.c_str()) == nullptr)
        return fmt::format(
            "-x: {} is not set here (the ranks inherit this environment; "
            "use -x {}=VALUE to set it)",
            name, name);
    return std::nullopt;
}

void usage_error(const std::string& why) {
    std::fputs(
        fmt::format("transit_run: {}\nRun 'transit_run --help' for the usage.\n", why).c_str(),
        stderr);
}

// mpirun's options that place ranks on other hosts, found before the program
// name (what follows it is the program's own; args as mpirun_spellings left
// them).
std::optional<std::string> several_nodes_option(const std::vector<std::string>& args) {
    static constexpr std::string_view options[] = {"--host", "-H", "--hostfile", "--machinefile",
                                                   "--default-hostfile"};
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string_view a = args[i];
        const std::string_view name = a.substr(0, a.find('='));
        if (std::find(std::begin(options), std::end(options), name) != std::end(options))
            return std::string(name);
        if (a == "--" || !a.starts_with("-")) break;
        if (a == "-n" || a == "--np" || a == "--bind-to" || a == "--timeout" || a == "-x")
            ++i;
        else if (a == "--mca")
            i += 2;
    }
    return std::nullopt;
}

}  // namespace

Options parse_options(int argc, char** argv, std::optional<int>& exit_status) {
    Options opt;
    CLI::App app{
        "Starts N copies of a program on this node as one Transit job and serves them "
        "PMIx.\n  transit_run [options] -n N program [args...]",
        "transit_run"};
    app.footer(
        "Everything from the program name on is passed to the program untouched.\n"
        "Exit status: the first failed rank's (128+signal if killed), 124 after --timeout,\n"
        "128+signal when transit_run itself is signalled, 2 for a bad command line,\n"
        "141 (128+SIGPIPE) when the reader of its output is gone (\"| head\"; the job\n"
        "ends then, with --tag-output too).  A rank that no selected transport reaches\n"
        "fails init on every rank that cannot reach it (transit::InitError,\n"
        "TRANSIT_UNREACHABLE): the job ends with the first such rank's status.");
    // Everything from the program name on belongs to the program.
    app.prefix_command();
    app.add_option("-n,--np", opt.np, "Number of processes (ranks) to start (also -np N)")
        ->required()
        ->check(CLI::Range(1u, 4096u));
    std::vector<std::string> env;
    app.add_option("-x", env,
                   "Set NAME to VALUE in every rank; '-x NAME' is accepted as mpirun's (the "
                   "ranks inherit this environment); repeatable")
        ->allow_extra_args(false)
        ->type_name("NAME[=VALUE]");
    std::vector<std::string> mca_flat;
    app.add_option("--mca", mca_flat,
                   "Set parameter NAME to VALUE in every rank (as TRANSIT_MCA_NAME); repeatable")
        ->type_size(2)
        ->allow_extra_args(false)
        ->type_name("NAME VALUE");
    app.add_flag("--tag-output", opt.tag_output,
                 "Prefix every line a rank prints with \"[rank] \"");
    std::string bind = "auto";
    app.add_option("--bind-to", bind,
                   "Bind each rank to one core, or not at all (default: core when there "
                   "are no more ranks than cores)")
        ->check(CLI::IsMember({"core", "none"}))
        ->type_name("core|none");
    app.add_flag("--oversubscribe", opt.oversubscribe,
                 "With --bind-to core, bind several ranks to each core when there are more "
                 "ranks than cores (unbound, more ranks than cores is always allowed)");
    app.add_flag("--report-bindings", opt.report_bindings,
                 "Print on stderr the core each rank is bound to, or that it is not bound");
    app.add_option("--timeout", opt.timeout_seconds,
                   "Kill the job if it runs longer than SECONDS (exit status 124)")
        ->check(CLI::Validator(
            [](const std::string& v) -> std::string {
                double d = 0;
                if (!CLI::detail::lexical_cast(v, d) || !(d > 0))
                    return "must be a number of seconds above 0, not '" + v + "'";
                return {};
            },
            "SECONDS>0"))
        ->type_name("SECONDS");
    app.add_flag("--keep-going", opt.keep_going,
                 "A rank that fails does not end the job: the others run on (for fault "
                 "tests); the exit status is still the first failure's");
    app.set_version_flag("--version", std::string("transit_run ") + transit::version_string);

    std::vector<std::string> args = mpirun_spellings(argc, argv);
    if (auto option = several_nodes_option(args)) {
        usage_error(fmt::format(
            "{}: transit_run starts ranks on this node only; for several nodes start the "
            "program with mpirun or srun --mpi=pmix (README, \"Across nodes\")",
            *option));
        exit_status = bad_usage_status;
        return opt;
    }
    std::reverse(args.begin() + 1, args.end());  // CLI11 takes them last first
    args.erase(args.begin());
    try {
        app.parse(args);
    } catch (const CLI::CallForHelp& e) {
        exit_status = app.exit(e);
        return opt;
    } catch (const CLI::CallForVersion& e) {
        exit_status = app.exit(e);
        return opt;
    } catch (const CLI::ParseError& e) {
        usage_error(e.what());
        exit_status = bad_usage_status;
        return opt;
    }

    opt.command = app.remaining();
    // "transit_run -n 2 -- program": the separator itself is not the program.
    if (!opt.command.empty() && opt.command.front() == "--") opt.command.erase(opt.command.begin());
    if (opt.command.empty()) {
        usage_error("no program to run was given (transit_run [options] -n N program [args])");
        exit_status = bad_usage_status;
        return opt;
    }
    if (opt.command.front().starts_with("-")) {
        usage_error(fmt::format("unknown option '{}'", opt.command.front()));
        exit_status = bad_usage_status;
        return opt;
    }
    for (std::size_t i = 0; i + 1 < mca_flat.size(); i += 2) {
        if (!valid_param_name(mca_flat[i])) {
            usage_error(fmt::format("--mca: '{}' is not a parameter name (letters, digits, _)",
                                    mca_flat[i]));
            exit_status = bad_usage_status;
            return opt;
        }
        opt.mca.emplace_back(mca_flat[i], mca_flat[i + 1]);
    }
    for (const std::string& entry : env) {
        if (auto why = env_entry_error(entry)) {
            usage_error(*why);
            exit_status = bad_usage_status;
            return opt;
        }
        if (entry.find('=') != std::string::npos) opt.env.push_back(entry);
    }
    opt.bind_to = bind == "core" ? BindTo::core : bind == "none" ? BindTo::none : BindTo::automatic;
    return opt;
}

}  // namespace transit::run
