// The tally of a pml test that runs as several processes: every failed
// condition is printed at once, flushed (the ranks' outputs interleave and a
// rank may be killed), and the program ends with one PASS or FAILED line and
// exit status 1 when anything failed, so ctest fails it.
//
//   namespace { transit::test::Checks check{"peer_failure"}; }
//   check(ok(ctx.send(...)), "send go");   // prints "peer_failure: FAIL: send go"
//   return check.verdict();                // "peer_failure: PASS", 0
#pragma once

#include <cstdio>
#include <string>

namespace transit::test {

class Checks {
  public:
    explicit constexpr Checks(const char* program) noexcept : program_(program) {}

    void operator()(bool cond, const std::string& what) noexcept {
        if (cond) return;
        std::printf("%s: FAIL: %s\n", program_, what.c_str());
        std::fflush(stdout);
        ++failures_;
    }

    int failures() const noexcept { return failures_; }
    int exit_status() const noexcept { return failures_ ? 1 : 0; }

    // Prints the program's last line; returns its exit status.
    int verdict() const noexcept {
        std::printf("%s: %s\n", program_, failures_ ? "FAILED" : "PASS");
        return exit_status();
    }

  private:
    const char* program_;
    int failures_ = 0;
};

}  // namespace transit::test
