#include "tests/conformance/log_watch.hpp"

#include <unistd.h>

#include <cstring>
#include <sstream>

namespace transit::conformance {

void LogWatch::start() {
    if (file_ != nullptr) return;
    std::fflush(stderr);
    file_ = std::tmpfile();
    if (file_ == nullptr) return;  // no capture: the case still runs
    saved_fd_ = ::dup(STDERR_FILENO);
    if (saved_fd_ < 0 || ::dup2(::fileno(file_), STDERR_FILENO) < 0) {
        if (saved_fd_ >= 0) ::close(saved_fd_);
        saved_fd_ = -1;
        std::fclose(file_);
        file_ = nullptr;
    }
}

std::vector<std::string> LogWatch::stop() {
    std::vector<std::string> bad;
    if (file_ == nullptr) return bad;
    std::fflush(stderr);
    ::dup2(saved_fd_, STDERR_FILENO);
    ::close(saved_fd_);
    saved_fd_ = -1;
    std::string text;
    std::rewind(file_);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text.append(buf, n);
    std::fclose(file_);
    file_ = nullptr;
    if (!text.empty()) {
        std::fwrite(text.data(), 1, text.size(), stderr);
        std::fflush(stderr);
    }
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        // log::warn and log::error lines: "[transit host:pid ...] warning: ..."
        if (line.rfind("[transit ", 0) == 0 && (line.find("] warning: ") != std::string::npos ||
                                                line.find("] error: ") != std::string::npos))
            bad.push_back(line);
    }
    return bad;
}

}  // namespace transit::conformance
