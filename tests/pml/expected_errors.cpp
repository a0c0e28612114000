#include "tests/pml/expected_errors.hpp"

#include <algorithm>

namespace transit::test {

ExpectedErrors::ExpectedErrors(std::initializer_list<std::string_view> lines) {
    for (std::string_view l : lines) lines_.emplace_back(l.begin(), l.end());
    log::set_sink(&ExpectedErrors::take, this);
}

ExpectedErrors::~ExpectedErrors() {
    log::set_sink(nullptr, nullptr);
}

void ExpectedErrors::take(const log::Line& line, void* self) {
    auto& me = *static_cast<ExpectedErrors*>(self);
    const bool expected =
        line.severity == log::Severity::error &&
        std::any_of(me.lines_.begin(), me.lines_.end(), [&](const std::regex& expected) {
            return std::regex_search(line.text.begin(), line.text.end(), expected);
        });
    if (expected) {
        me.kept_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // Written from inside the sink, the line goes to stderr as usual.
    log::write(line.severity, line.verbosity, line.source, line.text);
}

}  // namespace transit::test
