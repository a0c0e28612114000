// Catches what Transit logs during a case.  Like UCX's test base, a case fails
// when the code under test logs a warning or an error it did not expect (a
// leaked fragment reported at finalize, a protocol error...).  The captured text
// is passed on to the real stderr, so nothing is hidden.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace transit::conformance {

class LogWatch {
  public:
    LogWatch() = default;
    ~LogWatch() { stop(); }
    LogWatch(const LogWatch&) = delete;
    LogWatch& operator=(const LogWatch&) = delete;

    // Sends stderr (fd 2) to a temporary file until stop().
    void start();
    // Restores stderr, copies the captured text to it, and returns the lines
    // that are Transit warnings or errors.
    std::vector<std::string> stop();

  private:
    std::FILE* file_ = nullptr;
    int saved_fd_ = -1;
};

}  // namespace transit::conformance
