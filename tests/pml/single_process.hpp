// Helpers of the pml tests that run as one process (a job of one, no
// launcher): leaving a launcher's job, and capturing the log to assert what
// was said.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace transit::test {

// ctest may run under a launcher: its PMIx variables would make this process
// a rank of that job.  Call before opening a Context.
inline void become_job_of_one() {
    std::vector<std::string> names;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "PMIX_", 5) == 0) names.emplace_back(*e, std::strchr(*e, '=') - *e);
    for (const std::string& n : names) ::unsetenv(n.c_str());
}

// Everything written to fd 2 while it lives goes to a temporary file; text()
// restores stderr, echoes what was captured (so ctest's log still has it) and
// returns it.
class StderrCapture {
  public:
    StderrCapture() : file_(std::tmpfile()), saved_(::dup(STDERR_FILENO)) {
        if (file_ && saved_ >= 0) ::dup2(::fileno(file_.get()), STDERR_FILENO);
    }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;
    ~StderrCapture() { restore(); }

    std::string text() {
        restore();
        std::string out;
        if (!file_) return out;
        std::rewind(file_.get());
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file_.get())) > 0;)
            out.append(buf, n);
        std::fputs(out.c_str(), stderr);
        return out;
    }

  private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, STDERR_FILENO);
        ::close(saved_);
        saved_ = -1;
    }

    struct Close {
        void operator()(std::FILE* f) const { std::fclose(f); }
    };
    std::unique_ptr<std::FILE, Close> file_;
    int saved_;
};

}  // namespace transit::test
