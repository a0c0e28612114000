// The concurrent case's messages (tag_threads): several threads of the driver
// each send numbered pings, the service sends each back as a pong, and each
// pong is checked (its thread, its place in that thread's order, its bytes)
// by whichever thread's progress delivers it.  Unlike the fixture's own
// traffic, which one thread owns, every part of this may run on several
// threads at once: counters are atomics and the only queue (pongs the
// module had no room for) takes a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tests/conformance/wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::conformance {

class ThreadsEcho {
  public:
    static constexpr std::uint32_t max_threads = 16;
    static constexpr std::size_t max_payload = 256;

    // Before the first message; the module and the endpoint pongs go to.
    void attach(btl::Module* module, btl::Endpoint* target) noexcept;
    void detach() noexcept { module_ = nullptr; }

    // The payload size of ping `seq`: empty, small and as large as the
    // module's eager limit allows (at most max_payload).
    std::size_t payload_size(std::uint32_t seq) const noexcept;

    // Sends thread `thread`'s ping `seq`; false when the module is out of
    // resources (nothing sent: try again after progress).
    bool ping(std::uint32_t thread, std::uint32_t seq);
    // Pongs thread `thread` has received, all in order and intact (errors()
    // counts any that were not).
    std::uint32_t pongs(std::uint32_t thread) const noexcept {
        return next_[thread].load(std::memory_order_acquire);
    }
    // Sends the pongs the module had no room for, in order.
    void pump();
    // No pong waits and no send awaits its completion callback.
    bool idle() const;
    int errors() const noexcept { return errors_.load(); }

    static void on_message(btl::Module*, const btl::ReceiveDescriptor& d, void* self);

  private:
    using Frame = std::vector<std::byte>;
    enum class Way { sendi, alloc, prepare_src };
    Status send(const WireHeader& h, std::span<const std::byte> payload, Way way);
    bool fill(btl::Descriptor& d, const WireHeader& h, std::span<const std::byte> payload);
    void answer(Frame frame);
    void check_pong(const WireHeader& h, const btl::ReceiveDescriptor& d);
    void fail(const std::string& what);
    static void on_sent(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s);

    btl::Module* module_ = nullptr;
    btl::Endpoint* target_ = nullptr;
    std::size_t largest_ = 0;
    std::array<std::atomic<std::uint32_t>, max_threads> next_{};
    std::atomic<int> in_flight_{0};
    std::atomic<int> errors_{0};
    mutable std::mutex waiting_mutex_;
    std::deque<Frame> waiting_;  // header + payload of pongs not sent yet
};

}  // namespace transit::conformance
