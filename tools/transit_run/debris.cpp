#include "debris.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "process_util.hpp"

namespace transit::run {
namespace {

constexpr const char* job_prefix = "transit-trun-";

// The pid in a job id "trun-<pid>-<hex>", or -1 when the name is not one.
pid_t pid_of_job(std::string_view job_id) {
    if (!job_id.starts_with("trun-")) return -1;
    job_id.remove_prefix(5);
    pid_t pid = -1;
    const auto [end, ec] = std::from_chars(job_id.data(), job_id.data() + job_id.size(), pid);
    if (ec != std::errc() || pid <= 0 || end == job_id.data() + job_id.size() || *end != '-')
        return -1;
    const std::string_view hex(end + 1, job_id.data() + job_id.size() - end - 1);
    if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos)
        return -1;
    return pid;
}

std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// A job directory of ours: a real directory (not a link), owned by this user.
bool ours(const std::filesystem::path& dir) {
    struct stat st {};
    return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid();
}

// Its launcher still runs: the recorded mark matches a live process, or,
// before the launcher wrote its mark, the pid of the name is alive.
bool launcher_alive(const std::filesystem::path& dir, pid_t pid) {
    const std::string mark = first_line(dir / "launcher");
    if (mark.empty()) return !process_mark(pid).empty();
    return process_mark(pid) == mark;
}

void remove_regions_of_dead_ranks(const std::filesystem::path& dir) {
    std::ifstream in(dir / "ranks");
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
    for (pid_t pid = 0; in >> pid;)
        if (pid > 0 && process_mark(pid).empty()) remove_dead_rank_regions(pid, now);
}

}  // namespace

void mark_job_dir(const std::string& dir) {
    std::ofstream(dir + "/launcher") << process_mark(::getpid()) << "\n";
}

void record_rank(const std::string& dir, pid_t pid) {
    std::ofstream(dir + "/ranks", std::ios::app) << pid << "\n";
}

std::vector<std::string> remove_dead_jobs(const std::string& base) {
    std::vector<std::string> removed;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
        const std::string name = entry.path().filename().string();
        if (!name.starts_with(job_prefix)) continue;
        const std::string job_id = name.substr(8);  // after "transit-"
        const pid_t pid = pid_of_job(job_id);
        if (pid <= 0 || !ours(entry.path()) || launcher_alive(entry.path(), pid)) continue;
        remove_regions_of_dead_ranks(entry.path());
        remove_job_shm(job_id);
        remove_tree(entry.path().string());
        removed.push_back(job_id);
    }
    return removed;
}

}  // namespace transit::run
