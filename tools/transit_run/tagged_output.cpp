#include "tagged_output.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace transit::run {
namespace {

// 0, or the errno of the write that failed.
int write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
}

}  // namespace

TaggedOutput::~TaggedOutput() {
    for (Stream& s : streams_) {
        if (s.read_fd >= 0) ::close(s.read_fd);
        if (s.write_fd >= 0) ::close(s.write_fd);
    }
}

TaggedOutput::Ends TaggedOutput::add_rank(unsigned rank) {
    Ends ends{};
    for (int target : {1, 2}) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0)
            throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
        streams_.push_back({fds[0], fds[1], rank, target, {}});
        (target == 1 ? ends.out_write : ends.err_write) = fds[1];
    }
    return ends;
}

void TaggedOutput::close_write_ends() {
    for (Stream& s : streams_) {
        if (s.write_fd >= 0) ::close(s.write_fd);
        s.write_fd = -1;
    }
}

std::vector<int> TaggedOutput::open_fds() const {
    std::vector<int> fds;
    for (const Stream& s : streams_)
        if (s.read_fd >= 0) fds.push_back(s.read_fd);
    return fds;
}

void TaggedOutput::emit(Stream& s, std::string_view line) {
    const std::size_t t = static_cast<std::size_t>(s.target);
    if (gone_[t]) return;
    std::string out = fmt::format("[{}] ", s.rank);
    out.append(line);
    out.push_back('\n');
    const int error = write_all(s.target, out);
    if (error == 0) return;
    // Our own output is gone: every later write would fail the same way (a
    // reader gone from a pipe, as with "| head", cost ~9,000 failed writes a
    // second, forever).  Nothing more is forwarded to it.
    gone_[t] = true;
    if (error != EPIPE) return;  // e.g. closed (EBADF): what comes is dropped
    // The ranks' own writes get what they would have got without
    // --tag-output, SIGPIPE, and the launcher ends the job (reader_gone).
    reader_gone_ = true;
    for (Stream& other : streams_)
        if (other.target == s.target && other.read_fd >= 0 && &other != &s) {
            ::close(other.read_fd);
            other.read_fd = -1;
            other.partial.clear();
        }
}

void TaggedOutput::close_stream(Stream& s) {
    if (!s.partial.empty()) emit(s, s.partial);
    s.partial.clear();
    if (s.read_fd >= 0) ::close(s.read_fd);
    s.read_fd = -1;
}

bool TaggedOutput::pump(int fd) {
    for (Stream& s : streams_) {
        if (s.read_fd != fd) continue;
        std::array<char, 65536> buf;
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
        if (n <= 0) {
            close_stream(s);
            return false;
        }
        s.partial.append(buf.data(), static_cast<std::size_t>(n));
        std::size_t start = 0;
        for (std::size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos;
             start = nl + 1)
            emit(s, std::string_view(s.partial).substr(start, nl - start));
        s.partial.erase(0, start);
        if (reader_gone_ && gone_[static_cast<std::size_t>(s.target)]) {
            s.partial.clear();
            close_stream(s);
            return false;
        }
        return true;
    }
    return false;
}

void TaggedOutput::flush_all() {
    for (Stream& s : streams_)
        if (s.read_fd >= 0) close_stream(s);
}

bool TaggedOutput::all_closed() const {
    for (const Stream& s : streams_)
        if (s.read_fd >= 0) return false;
    return true;
}

}  // namespace transit::run
