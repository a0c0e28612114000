// The completion queue of an ofi module: poll reads it and hands each entry
// to the owner of its operation (a send to the module, a one-sided operation
// to OfiOneSided); a delivery goes to the active message table, or to
// OfiOutside for a join or a control message from a peer outside the job,
// and its buffer is reposted.
//
// Owns: the completions read and not yet handled, and the receive buffers
// waiting to be reposted.  Borrows: the module's OfiFabric (queue, endpoint,
// receive buffers), its active message table, its OfiOneSided and
// OfiOutside, and the module for the endpoints of job ranks, the end of a
// send and error reports.
#pragma once

#include <rdma/fi_eq.h>

#include <array>
#include <cstddef>

#include "ofi_frag.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/module.hpp"
#include "transit/log.hpp"

namespace transit::ofi {

class OfiModule;
class OfiOneSided;
class OfiOutside;
struct OfiFabric;

class OfiCompletions {
  public:
    OfiCompletions(OfiModule& module, OfiFabric& fabric, OfiOneSided& one_sided,
                   OfiOutside& outside, btl::AmTable& am_table, const log::Stream& out) noexcept
        : m_(module),
          f_(fabric),
          one_sided_(one_sided),
          outside_(outside),
          am_table_(am_table),
          out_(out) {}

    int poll() noexcept;

  private:
    void complete(OpContext* ctx, std::size_t len) noexcept;
    void complete_error() noexcept;
    void on_receive(OfiRecv* r, std::size_t len) noexcept;
    void on_control(Received what, const WireHeader& h) noexcept;
    void repost(OfiRecv* r) noexcept;
    void retry_reposts() noexcept;

    OfiModule& m_;
    OfiFabric& f_;
    OfiOneSided& one_sided_;
    OfiOutside& outside_;
    btl::AmTable& am_table_;
    const log::Stream& out_;

    OfiRecv* repost_head_ = nullptr;
    std::array<fi_cq_msg_entry, 16> batch_{};  // completions read, not yet handled
    std::size_t batch_pos_ = 0;
    std::size_t batch_len_ = 0;
};

}  // namespace transit::ofi
