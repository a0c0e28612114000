// --tag-output: each rank's stdout and stderr come through a pipe and leave
// transit_run line by line, each line prefixed with "[rank] ".
#pragma once

#include <array>
#include <string>
#include <vector>

namespace transit::run {

class TaggedOutput {
  public:
    TaggedOutput() = default;
    ~TaggedOutput();
    TaggedOutput(const TaggedOutput&) = delete;
    TaggedOutput& operator=(const TaggedOutput&) = delete;

    struct Ends {
        int out_write;
        int err_write;
    };
    // Makes the two pipes of `rank`; the child dup2()s the write ends, the
    // parent calls close_write_ends() once the child is started.
    Ends add_rank(unsigned rank);
    void close_write_ends();

    // Pipes still open, for poll().
    std::vector<int> open_fds() const;
    // Reads what `fd` holds and forwards complete lines; returns false at EOF.
    bool pump(int fd);
    // Forwards any unterminated last lines and closes every pipe.
    void flush_all();
    bool all_closed() const;
    // A reader of our stdout or stderr went away (EPIPE): that output is no
    // longer forwarded, the ranks' pipes to it are closed, and the job should
    // end as it would without --tag-output when a rank gets SIGPIPE.
    bool reader_gone() const { return reader_gone_; }

  private:
    struct Stream {
        int read_fd = -1;
        int write_fd = -1;
        unsigned rank = 0;
        int target = 1;  // 1: our stdout, 2: our stderr
        std::string partial;
    };
    void emit(Stream& s, std::string_view line);
    void close_stream(Stream& s);

    std::vector<Stream> streams_;
    std::array<bool, 3> gone_{};  // by target: its writes failed, nothing more goes there
    bool reader_gone_ = false;
};

}  // namespace transit::run
