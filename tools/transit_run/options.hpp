// transit_run's command line.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace transit::run {

enum class BindTo { automatic, core, none };

struct Options {
    unsigned np = 0;
    std::vector<std::pair<std::string, std::string>> mca;  // --mca NAME VALUE
    std::vector<std::string> env;                          // -x NAME=VALUE
    bool tag_output = false;
    BindTo bind_to = BindTo::automatic;
    bool oversubscribe = false;        // --bind-to core may put several ranks on a core
    bool report_bindings = false;      // say on stderr where each rank runs
    double timeout_seconds = 0;        // 0: none
    bool keep_going = false;           // a failed rank does not end the job
    std::vector<std::string> command;  // program and its arguments, untouched
};

// Exit status for a command line transit_run cannot use.
inline constexpr int bad_usage_status = 2;

// Parses argv.  On --help or --version prints and returns the status to exit
// with (0); on a bad command line prints why to stderr and returns 2.
// Otherwise returns the options and leaves `exit_status` empty.
Options parse_options(int argc, char** argv, std::optional<int>& exit_status);

}  // namespace transit::run
