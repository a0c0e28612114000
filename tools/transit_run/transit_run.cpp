// transit_run: the single-node launcher of Transit jobs.  It is a PMIx server
// for its ranks, so a rank uses the same PMIx client path as under mpirun or srun.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <stdexcept>

#include "launcher.hpp"
#include "options.hpp"

int main(int argc, char** argv) {
    using namespace transit::run;
    std::optional<int> early_exit;
    Options opt = parse_options(argc, argv, early_exit);
    if (early_exit) return *early_exit;
    try {
        Launcher launcher(std::move(opt));
        return launcher.run();
    } catch (const std::invalid_argument& e) {
        std::fputs(fmt::format("transit_run: {}\n", e.what()).c_str(), stderr);
        return bad_usage_status;
    } catch (const std::exception& e) {
        std::fputs(fmt::format("transit_run: {}\n", e.what()).c_str(), stderr);
        return 1;
    }
}
