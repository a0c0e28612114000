// transit_run: the single-node launcher of Transit jobs.  It is a PMIx server
// for its ranks, so a rank uses the same PMIx client path as under mpirun or srun.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "launcher.hpp"
#include "options.hpp"

namespace {

// Started with a standard descriptor closed (">&-"), the next descriptor we
// open (a pipe, a socket of the PMIx server) would take its number and get
// what is written to "stdout": /dev/null takes the place instead.
void fill_closed_standard_descriptors() {
    for (int fd = 0; fd <= 2; ++fd) {
        if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (null >= 0 && null != fd) {
            ::dup2(null, fd);
            ::close(null);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    using namespace transit::run;
    fill_closed_standard_descriptors();
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
