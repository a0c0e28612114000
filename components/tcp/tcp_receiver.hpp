// The receive side of a tcp module: reads a connected link's socket into its
// receive buffer (or a payload straight into its destination) and parses the
// frames, handing active messages to the component's table and one-sided
// requests and replies to the module's TcpRdma and TcpAtomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tcp_endpoint.hpp"
#include "tcp_wire.hpp"

namespace transit::tcp {

class TcpAtomics;
class TcpComponent;
class TcpModule;
class TcpRdma;

class TcpReceiver {
  public:
    // limits: the module's frame limits (filled in by the module's constructor).
    TcpReceiver(TcpModule& module, TcpComponent& tcp, TcpRdma& rdma, TcpAtomics& atomics,
                const wire::Limits& limits) noexcept;

    // The link's socket is readable (or reports an error).
    void on_readable(Link& l) noexcept;

  private:
    void read_direct(Link& l) noexcept;
    void parse(Link& l) noexcept;
    // Handles the frame at rbuf[rhead]; returns false to stop parsing.
    bool handle_frame(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept;

    TcpModule& module_;
    TcpComponent& tcp_;
    TcpRdma& rdma_;
    TcpAtomics& atomics_;
    const wire::Limits& limits_;
};

}  // namespace transit::tcp
