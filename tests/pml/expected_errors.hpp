// Error lines a test program provokes on purpose (a forged key refused, a
// frame naming nothing dropped) kept from stderr while an ExpectedErrors
// lives: the suite fails an entry whose output holds an error line of
// Transit's log (cmake/TransitTesting.cmake), and these are no failure.  An
// error line that matches none of the expected expressions, and every other
// line, goes to stderr as it would without it.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <regex>
#include <string_view>
#include <vector>

#include "transit/log.hpp"

namespace transit::test {

class ExpectedErrors {
  public:
    // Installs the log sink; `lines` are ECMAScript expressions an expected
    // line's text (without the "[transit ...] error: " prefix) matches.
    explicit ExpectedErrors(std::initializer_list<std::string_view> lines);
    ~ExpectedErrors();
    ExpectedErrors(const ExpectedErrors&) = delete;
    ExpectedErrors& operator=(const ExpectedErrors&) = delete;

    // How many error lines were expected and kept from stderr.
    std::uint64_t kept() const noexcept { return kept_.load(std::memory_order_relaxed); }

  private:
    static void take(const log::Line& line, void* self);
    std::vector<std::regex> lines_;
    // The sink may be called from a progress thread.
    std::atomic<std::uint64_t> kept_{0};
};

}  // namespace transit::test
