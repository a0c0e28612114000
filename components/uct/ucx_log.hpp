// UCX's own log while Transit's uct modules run.
#pragma once

#include <ucs/config/global_opts.h>

#include <array>
#include <cstdlib>
#include <string>

namespace transit::uct {

// UCX logs an ERROR line of its own for every failure it sees, a peer's
// death among them (a reset connection, a copy from a process that is gone),
// while the module reports that loss to the upper layer, which ends the
// requests with peer_failed: a failure handled that way must not read like a
// crash.  So UCX's log level is lowered to `fatal` while this object lives
// (the component's, from init), unless the user chose one (UCX_LOG_LEVEL).
// The level is UCX's process-wide setting: the one found is put back.
class QuietUcxLog {
  public:
    QuietUcxLog() {
        if (std::getenv("UCX_LOG_LEVEL") != nullptr) return;
        std::array<char, 64> old{};
        if (ucs_global_opts_get_value("LOG_LEVEL", old.data(), old.size()) != UCS_OK) return;
        if (ucs_global_opts_set_value("LOG_LEVEL", "fatal") != UCS_OK) return;
        saved_ = old.data();
    }
    ~QuietUcxLog() {
        if (!saved_.empty()) ucs_global_opts_set_value("LOG_LEVEL", saved_.c_str());
    }
    QuietUcxLog(const QuietUcxLog&) = delete;
    QuietUcxLog& operator=(const QuietUcxLog&) = delete;

    // The level replaced, or empty when UCX's was left alone.
    const std::string& replaced() const noexcept { return saved_; }

  private:
    std::string saved_;
};

}  // namespace transit::uct
