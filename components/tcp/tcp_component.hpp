// The tcp component: parameters, interface discovery, the shared epoll set and
// its registration with the progress engine, and the listener thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tcp_endpoint.hpp"
#include "tcp_interfaces.hpp"
#include "tcp_splice_choice.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/util/idle_pacer.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/btl/util/registration_table.hpp"
#include "transit/log.hpp"
#include "transit/log_limiter.hpp"

namespace transit::tcp {

class TcpModule;

// A registration's packed form (what travels to peers): the whole struct.
struct TcpRegistration {
    btl::util::RegistrationKey key{};
    std::uint64_t base = 0;
    std::uint64_t size = 0;
    std::uint32_t access = 0;       // btl::reg_flags
    std::uint32_t peer = any_rank;  // registered for one endpoint only, or any_rank
};
inline constexpr std::size_t packed_registration_size = sizeof(TcpRegistration);
static_assert(packed_registration_size == 40);

// A registration's record in the component's table; the handle given out is
// the address of `packed`, its first member.
struct TcpRecord {
    TcpRegistration packed;
    TcpRecord* next_free = nullptr;
    bool in_use = false;
    btl::util::RegistrationKey key() const noexcept { return packed.key; }
};

// Values of the btl_tcp_* parameters, read once at open.
struct TcpParams : btl::BaseConfig {
    std::vector<std::string> if_include;
    std::vector<std::string> if_exclude;
    unsigned port_min = 0;
    unsigned port_range = 0;
    unsigned links = 1;
    std::size_t sndbuf = 0;
    std::size_t rcvbuf = 0;
    std::size_t max_rdma_size = 4 << 20;
    std::size_t splice_min = 0;        // 0: always copy
    std::size_t splice_max = 1 << 20;  // 0: no limit
    bool coalesce = true;
    unsigned max_rdma_ops = 1024;
    double connect_timeout = 10.0;
    double server_connect_timeout = 1.0;  // 0: not in Context::connect
    std::uint64_t refusals_logged = 5;
    double refusal_log_interval = 60;
};

class TcpComponent : public btl::Component {
  public:
    TcpComponent();
    ~TcpComponent() override;

    void register_params(params::Registry& registry) override;
    mca::OpenResult open() override;
    void close() override;
    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override;
    // The interfaces and addresses it listens on, and why each other one is left
    // out (tcp_devices.cpp); the descriptor's describe_devices hook.
    void describe_devices(mca::DeviceReport& report) const;

    const TcpParams& params() const noexcept { return params_; }
    // How put and get payloads are sent (copied or lent), and why.
    const SpliceChoice& splice_choice() const noexcept { return splice_; }
    const log::Stream& out() const noexcept { return out_; }
    rt::Runtime& runtime() const noexcept { return *runtime_; }
    ProgressEngine& progress_engine() const noexcept { return *progress_; }
    btl::AmTable& am_table() const noexcept { return *am_table_; }
    bool has_loopback_module() const noexcept { return has_loopback_; }
    const std::vector<IpAddress>& own_addresses() const noexcept { return own_addresses_; }
    const std::vector<Interface>& interfaces() const noexcept { return interfaces_; }
    // The module that published address `index` of our modex blob, or null.
    TcpModule* module_of_address(std::uint32_t index) const noexcept {
        return index < address_owners_.size() ? address_owners_[index] : nullptr;
    }

    // --- used by the modules ---
    // Adds a socket to the epoll set; the component stays registered for
    // progress while any socket is open.
    bool watch(Link& link, bool want_write) noexcept;
    void rewatch(Link& link, bool want_write) noexcept;
    void unwatch(Link& link) noexcept;  // before the fd is closed
    void watch_listener(int fd, TcpModule* module);
    void forget_module(TcpModule* module);
    // Frees at the end of the current poll (a list through the objects
    // themselves: nothing to allocate, nothing to fail).
    void defer_free(std::unique_ptr<Link> link) noexcept;
    void defer_free(std::unique_ptr<TcpEndpoint> endpoint) noexcept;
    // Logs an incoming connection refused (rate-limited, see btl_tcp_refusals_logged).
    void refused(std::string_view where, std::string_view peer, std::string_view reason) noexcept;
    // Logs a peer's put, get or atomic refused (a wrong key, outside its
    // registration, not the access granted): the same limit, counted apart.
    void rdma_refused(std::string_view where, const char* what, std::uint64_t address, Rank peer,
                      Status why) noexcept;
    // A link waiting for the peer's connection holds the component active too,
    // so its deadline is checked.
    void hold(int delta) noexcept;
    // Connected links.  With only a few and nothing else going on, progress
    // reads them directly instead of asking epoll first: one system call per
    // poll instead of two on the latency path.
    void link_up(Link& link) noexcept;
    void link_down(Link& link) noexcept;
    // A burst of small messages just started on a link with nothing queued: it
    // is written at the start of the next poll, without arming EPOLLOUT (two
    // epoll_ctl calls and an epoll_wait saved per burst).
    void flush_at_next_poll(Link& link) noexcept;
    void count_event() noexcept { ++events_; }
    // A module sends: its answer is looked for on every pass again.
    void sending() noexcept { pacer_.wake(); }
    // Counts progress passes: two sends in one pass belong to one burst.
    std::uint64_t poll_count() const noexcept { return poll_count_; }

    // Registrations are shared by every module, so a key is honoured whichever
    // interface the request arrives on.
    btl::RegistrationHandle* register_mem(Rank peer, void* base, std::size_t size,
                                          std::uint32_t access);
    Status deregister_mem(btl::RegistrationHandle* handle);
    const TcpRegistration* find_registration(const btl::util::RegistrationKey& key) const noexcept {
        const TcpRecord* r = registrations_.find(key);
        return r == nullptr ? nullptr : &r->packed;
    }

    static std::uint64_t now_ns() noexcept;

    // btl::WaitObject for every module: epoll_ is readable whenever a socket
    // has input (or room a queue waits for) and when the listener thread has
    // accepted a connection; arm() answers busy for work only a poll finds
    // (accepted sockets not adopted yet, bursts to flush).
    int wait_fd() const noexcept { return epoll_.get(); }
    btl::WaitObject::Armed arm() noexcept;

  private:
    static int progress_active(void* self) noexcept;
    static int progress_idle(void* self) noexcept;
    int poll() noexcept;
    void adopt_accepted() noexcept;
    void drain_accept_bell() noexcept;
    void check_timeouts(std::uint64_t now) noexcept;
    void set_active(bool active) noexcept;
    void report_unlogged_refusals(log::Limiter::Clock::time_point now) noexcept;
    void listener_main();
    void accept_from(TcpModule* module);
    void cannot_accept(int error);
    void accepting_again();
    void arm_listeners(bool armed);
    void stop_listener() noexcept;
    // Sets params_.splice_min and splice_max: the user's, or the host's measurement.
    void choose_splice_range(params::Registry& r);

    params::Registry* registry_ = nullptr;
    TcpParams params_;
    SpliceChoice splice_;
    log::Stream out_;
    std::vector<Interface> discovered_;  // before btl_tcp_if_include/exclude
    std::vector<Interface> interfaces_;
    std::vector<IpAddress> own_addresses_;
    bool has_loopback_ = false;

    rt::Runtime* runtime_ = nullptr;
    ProgressEngine* progress_ = nullptr;
    btl::AmTable* am_table_ = nullptr;
    std::vector<TcpModule*> modules_;
    std::vector<TcpModule*> address_owners_;  // by index in the published blob

    Fd epoll_;
    std::size_t open_sockets_ = 0;
    std::size_t held_ = 0;
    static constexpr std::size_t max_direct_links = 4;
    std::vector<Link*> connected_;
    bool bursts_due_ = false;  // some link set burst_due since the last poll
    void flush_bursts() noexcept;
    std::uint32_t polls_ = 0;
    // Across nodes the path measurement may leave tcp unused beside another
    // transport: its sockets are then read on every 16th pass only.
    btl::util::IdlePacer pacer_;
    int events_ = 0;  // frames handled during the current poll
    std::uint64_t poll_count_ = 0;
    btl::util::RegistrationTable<TcpRecord> registrations_;
    ProgressEngine::Handle active_handle_{};
    ProgressEngine::Handle idle_handle_{};
    std::uint64_t next_timeout_check_ = 0;
    std::unique_ptr<Link> graveyard_;  // chained by next_dead
    std::unique_ptr<TcpEndpoint> endpoint_graveyard_;
    void bury() noexcept {
        // One at a time: a long chain freed by recursion could exhaust the stack.
        while (graveyard_) graveyard_ = std::move(graveyard_->next_dead);
        while (endpoint_graveyard_) endpoint_graveyard_ = std::move(endpoint_graveyard_->next_dead);
    }
    btl::util::RefusalLog refusals_{"connections"};
    btl::util::RefusalLog rdma_refusals_{"one-sided requests"};

    // Accepting runs on a thread that sleeps in epoll_wait, so an idle tcp costs
    // the progress loop one atomic load.  Accepted sockets are handed over here.
    struct Accepted {
        int fd;
        TcpModule* module;
        std::string peer;
    };
    Fd listen_epoll_;
    Fd wake_;         // eventfd that stops the thread
    Fd accept_bell_;  // eventfd in epoll_, written after each accepted batch
    std::thread listener_;
    std::mutex accepted_lock_;
    std::vector<Accepted> accepted_;
    std::vector<std::pair<int, TcpModule*>> listen_fds_;  // guarded by accepted_lock_
    std::atomic<bool> accepted_pending_{false};
    // The listener thread's own: a pause in accepting when descriptors run out.
    static constexpr int accept_retry_ms = 100;
    bool accept_paused_ = false;
    std::chrono::steady_clock::time_point exhausted_since_{};
    bool exhaustion_logged_ = false;
    log::Limiter exhaustion_log_{1, std::chrono::minutes(1)};
};

}  // namespace transit::tcp
