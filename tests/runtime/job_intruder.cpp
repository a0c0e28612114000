// A stranger on the node (another user) after a job's secret:
//   job_intruder PID...
// Run with a rank's PMIx and Transit variables in its environment and, for
// the PMIx attempt, fake_uid.so preloaded.  It tries every way it has and
// prints one line per way: "<way> <hex of what it read>" or "<way> refused: <why>".
// A PMIx attempt that gets no answer within pmix_patience prints
// "pmix unanswered ..." and ends the program with exit status 3.
#include <fcntl.h>
#include <pmix.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "runtime/job_secret.hpp"

namespace {

using namespace transit;

void say(const std::string& line) {
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
}

std::string hex(const void* data, std::size_t size) {
    return rt::to_hex(std::span(static_cast<const std::byte*>(data), size));
}

// Whatever a file holds, in hex, or why it could not be read.
std::string read_all(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return fmt::format("refused: {}", std::strerror(errno));
    std::vector<char> buf(1 << 16);
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
    const int err = errno;
    ::close(fd);
    if (n < 0) return fmt::format("refused: {}", std::strerror(err));
    return hex(buf.data(), static_cast<std::size_t>(n));
}

// PMIx_Init has no time limit of its own: a server that drops a client at the
// wrong moment leaves it waiting for good.
constexpr unsigned pmix_patience = 5;  // seconds
constexpr int unanswered_status = 3;

extern "C" void unanswered(int) {
    constexpr char line[] = "pmix unanswered: no reply from the launcher's PMIx server\n";
    [[maybe_unused]] const ssize_t n = ::write(1, line, sizeof line - 1);
    ::_exit(unanswered_status);
}

// The launcher's PMIx server, with a claimed user id.  The watchdog stays
// armed until the program ends.
void through_pmix() {
    struct sigaction on_alarm {};
    on_alarm.sa_handler = unanswered;
    ::sigaction(SIGALRM, &on_alarm, nullptr);
    ::alarm(pmix_patience);
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
        say(fmt::format("pmix refused: {}", PMIx_Error_string(rc)));
        return;
    }
    say("pmix connected");
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_NSPACE(job.nspace, me.nspace);
    job.rank = PMIX_RANK_WILDCARD;
    // The key transit_run registered the secret under, and rank 0's seed
    // (other launchers), asked of the server for at most a second.
    pmix_info_t limit;
    int seconds = 1;
    PMIX_INFO_LOAD(&limit, PMIX_TIMEOUT, &seconds, PMIX_INT);
    const std::pair<const char*, pmix_rank_t> keys[] = {{"transit.secret", PMIX_RANK_WILDCARD},
                                                        {"transit.secret.seed", 0}};
    for (const auto& [key, rank] : keys) {
        job.rank = rank;
        pmix_value_t* v = nullptr;
        const pmix_status_t got = PMIx_Get(&job, key, &limit, 1, &v);
        if (got == PMIX_SUCCESS && v && v->type == PMIX_BYTE_OBJECT)
            say(fmt::format("pmix {} {}", key, hex(v->data.bo.bytes, v->data.bo.size)));
        else
            say(fmt::format("pmix {} refused: {}", key, PMIx_Error_string(got)));
        if (v) PMIX_VALUE_RELEASE(v);
    }
    // No PMIx_Finalize: a stranger just drops the connection.
}

}  // namespace

int main(int argc, char** argv) {
    const char* fd = std::getenv(rt::secret_fd_var);
    for (int i = 1; i < argc; ++i) {
        const std::string proc = fmt::format("/proc/{}", argv[i]);
        if (fd) say(fmt::format("fd {}", read_all(fmt::format("{}/fd/{}", proc, fd))));
        say(fmt::format("environ {}", read_all(proc + "/environ")));
        say(fmt::format("mem {}", read_all(proc + "/mem")));
    }
    if (const char* dir = std::getenv("TRANSIT_JOB_TMPDIR")) {
        std::error_code ec;
        std::filesystem::directory_iterator it(dir, ec);
        say(ec ? fmt::format("tmpdir refused: {}", ec.message()) : std::string("tmpdir listed"));
        for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
            if (it->is_regular_file()) say(fmt::format("file {}", read_all(it->path().string())));
    }
    through_pmix();
    return 0;
}
