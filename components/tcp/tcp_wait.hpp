// btl::WaitObject of a tcp module.  Every module of the component shares the
// component's epoll set (its sockets and the listener thread's bell), so the
// module only hands the component's answer on.
#pragma once

#include "tcp_component.hpp"
#include "transit/btl/module.hpp"

namespace transit::tcp {

class TcpWait final : public btl::WaitObject {
  public:
    explicit TcpWait(TcpComponent& tcp) noexcept : tcp_(tcp) {}
    int wait_fd() const noexcept override { return tcp_.wait_fd(); }
    Armed arm() noexcept override { return tcp_.arm(); }
    void disarm() noexcept override {}

  private:
    TcpComponent& tcp_;
};

}  // namespace transit::tcp
