// The UCT objects of one uct module (see uct_interface.hpp).
#include "uct_interface.hpp"

#include <fmt/format.h>
#include <ucs/sys/string.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace transit::uct {
namespace {

[[noreturn]] void fail(const std::string& what, ucs_status_t s) {
    throw std::runtime_error(fmt::format("{} failed: {}", what, ucs_status_string(s)));
}

// A size in an interface configuration ("66K"), or 0 when it has none.
std::size_t config_size(uct_iface_config_t* config, const char* field) noexcept {
    std::array<char, 64> text{};
    std::size_t value = 0;
    if (uct_config_get(config, field, text.data(), text.size()) != UCS_OK ||
        ucs_str_to_memunits(text.data(), &value) != UCS_OK)
        return 0;
    return value;
}

}  // namespace

void AsyncDeleter::operator()(ucs_async_context_t* a) const noexcept {
    ucs_async_context_destroy(a);
}

void UctInterface::open(uct_error_handler_t on_error, void* error_arg, uct_am_callback_t on_message,
                        void* message_arg) {
    user_data_ = error_arg;
    ucs_async_context_t* async = nullptr;
    if (ucs_status_t s = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async);
        s != UCS_OK)
        fail("ucs_async_context_create", s);
    async_.reset(async);
    uct_worker_h worker = nullptr;
    if (ucs_status_t s = uct_worker_create(async_.get(), UCS_THREAD_MODE_SINGLE, &worker);
        s != UCS_OK)
        fail("uct_worker_create", s);
    worker_.reset(worker);

    uct_md_config_t* md_config = nullptr;
    if (ucs_status_t s = uct_md_config_read(resource_.component, nullptr, nullptr, &md_config);
        s != UCS_OK)
        fail("reading the memory domain configuration", s);
    uct_md_h md = nullptr;
    ucs_status_t s = uct_md_open(resource_.component, resource_.md_name.c_str(), md_config, &md);
    uct_config_release(md_config);
    if (s != UCS_OK) fail("uct_md_open " + resource_.md_name, s);
    md_.reset(md);

    uct_iface_config_t* iface_config = nullptr;
    s = uct_md_iface_config_read(md_.get(), resource_.tl_name.c_str(), nullptr, nullptr,
                                 &iface_config);
    if (s != UCS_OK) fail("reading the interface configuration", s);
    std::size_t tx_segment = 0, rx_segment = 0;
    if (resource_.tl_name == "tcp") {
        widen_tcp_segments(iface_config);
        tx_segment = config_size(iface_config, "TX_SEG_SIZE");
        rx_segment = config_size(iface_config, "RX_SEG_SIZE");
    }
    uct_iface_params_t params{};
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS | UCT_IFACE_PARAM_FIELD_FEATURES |
                        UCT_IFACE_PARAM_FIELD_RX_HEADROOM;
    params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name = resource_.tl_name.c_str();
    params.mode.device.dev_name = resource_.dev_name.c_str();
    params.err_handler = on_error;
    params.err_handler_arg = error_arg;
    params.err_handler_flags = 0;  // called from uct_worker_progress, never from a thread
    // Put, get and atomics too when the transport may carry them natively
    // (its own memory domain registering memory: rc, dc on a cluster; or
    // allocating it: atomics over posix and sysv).
    params.features = UCT_IFACE_FEATURE_AM;
    if (config_.rdma != RdmaMode::am)
        params.features |= UCT_IFACE_FEATURE_PUT | UCT_IFACE_FEATURE_GET | UCT_IFACE_FEATURE_AMO32 |
                           UCT_IFACE_FEATURE_AMO64;
    params.rx_headroom = 0;
    uct_iface_h iface = nullptr;
    s = uct_iface_open(md_.get(), worker_.get(), &params, iface_config, &iface);
    uct_config_release(iface_config);
    if (s != UCS_OK) fail("uct_iface_open " + resource_.name(), s);
    iface_.reset(iface);

    if (s = uct_iface_query(iface_.get(), &iface_attr_); s != UCS_OK) fail("uct_iface_query", s);
    // UCT's shared-memory FIFO records a message's length in 16 bits: with
    // segments widened past 64 KiB (UCX_POSIX_SEG_SIZE) a longer message
    // arrives with its length wrapped, as a short or empty one.
    if (resource_.dev_type == UCT_DEVICE_TYPE_SHM)
        iface_attr_.cap.am.max_bcopy =
            std::min<std::size_t>(iface_attr_.cap.am.max_bcopy, shm_message_limit);
    const std::uint64_t caps = iface_attr_.cap.flags;
    if (!(caps & UCT_IFACE_FLAG_AM_BCOPY))
        throw std::runtime_error("the transport has no buffered active messages (am_bcopy)");
    if (!(caps & UCT_IFACE_FLAG_CONNECT_TO_IFACE))
        throw std::runtime_error(
            "the transport connects only endpoint to endpoint, which this component does not "
            "do");
    if (caps & UCT_IFACE_FLAG_AM_DUP)
        throw std::runtime_error("the transport may deliver active messages twice");
    if (iface_attr_.cap.am.max_bcopy <= sizeof(WireHeader) + sizeof(RdmaRequest))
        throw std::runtime_error(
            fmt::format("active messages of {} bytes are too small", iface_attr_.cap.am.max_bcopy));
    largest_accepted_ = accepted_size(iface_attr_.cap.am.max_bcopy, tx_segment, rx_segment);
    if (s = uct_iface_set_am_handler(iface_.get(), am_id, on_message, message_arg, 0); s != UCS_OK)
        fail("uct_iface_set_am_handler", s);
    uct_iface_progress_enable(iface_.get(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

// UCT's tcp buffers 8 KiB per active message by default, so a 64 KiB message
// could only go by rendezvous, whose control messages cost a loopback or
// network round trip each; with segments that hold 64 KiB and the headers it
// goes eagerly in one message (4x the latency, 2.6x the bandwidth of the
// rendezvous at 64 KiB over loopback).  What the user set in UCX's own
// variables is kept: every process must agree on the segment size, and they
// do when they share one environment.
void UctInterface::widen_tcp_segments(uct_iface_config_t* config) {
    for (const char* field : {"TX_SEG_SIZE", "RX_SEG_SIZE"}) {
        const std::string variable = std::string("UCX_TCP_") + field;
        if (std::getenv(variable.c_str()) != nullptr) continue;
        if (ucs_status_t s = uct_config_modify(config, field, std::to_string(tcp_segment).c_str());
            s != UCS_OK)
            out_.verbose(1, "{}: cannot set {} (UCX {}), keeping UCT's default", name_, variable,
                         ucs_status_string(s));
    }
}

// The longest active message this interface takes: what it sends (max_bcopy),
// or over tcp, whose receive segment is set apart from the send segment, that
// less what the receive segment lacks (UCT's header is in both).
std::size_t UctInterface::accepted_size(std::size_t max_bcopy, std::size_t tx_segment,
                                        std::size_t rx_segment) noexcept {
    if (tx_segment == 0 || rx_segment == 0) return max_bcopy;
    if (rx_segment >= tx_segment) return max_bcopy + (rx_segment - tx_segment);
    return max_bcopy - std::min(max_bcopy, tx_segment - rx_segment);
}

// An endpoint to the interface at (device, iface), as a peer sent them;
// nullptr, with the reason, when UCT cannot reach it or make one.
uct_ep_h UctInterface::create_ep(std::span<const std::byte> device,
                                 std::span<const std::byte> iface, std::string* why) {
    // UCT reads the addresses with their natural alignment; the padding keeps
    // a transport that reads a fixed-size device address (tcp: by its address
    // family) inside this buffer when a peer sent less.
    const std::size_t words = (device.size() + 7) / 8;
    std::vector<std::uint64_t> aligned(words + (iface.size() + 7) / 8 + 64, 0);
    if (!device.empty()) std::memcpy(aligned.data(), device.data(), device.size());
    if (!iface.empty()) std::memcpy(aligned.data() + words, iface.data(), iface.size());
    const auto* dev = reinterpret_cast<const uct_device_addr_t*>(aligned.data());
    const auto* ifa = reinterpret_cast<const uct_iface_addr_t*>(aligned.data() + words);
    if (!uct_iface_is_reachable(iface_.get(), dev, ifa)) {
        if (why) *why = "UCT reports its interface unreachable from here";
        return nullptr;
    }
    uct_ep_params_t params{};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR | UCT_EP_PARAM_FIELD_USER_DATA;
    params.iface = iface_.get();
    params.dev_addr = dev;
    params.iface_addr = ifa;
    params.user_data = user_data_;
    uct_ep_h ep = nullptr;
    if (ucs_status_t s = uct_ep_create(&params, &ep); s != UCS_OK) {
        if (why) *why = fmt::format("uct_ep_create failed: {}", ucs_status_string(s));
        return nullptr;
    }
    return ep;
}

// Why a peer whose interface takes active messages of at most `accepted`
// bytes and sends at most `sent` cannot be connected to, or "" when it can (0:
// the peer did not say).  Both sides decide alike, so neither is left sending
// to a peer that refused it.
std::string UctInterface::mismatched_messages(std::uint32_t accepted, std::uint32_t sent) const {
    const std::size_t max_message_ = iface_attr_.cap.am.max_bcopy;  // what the module sends
    std::string what;
    if (accepted != 0 && accepted < max_message_)
        what = fmt::format(
            "its {} interface takes active messages of up to {} bytes, this process "
            "sends up to {}",
            resource_.tl_name, accepted, max_message_);
    else if (sent != 0 && sent > largest_accepted_)
        what = fmt::format(
            "its {} interface sends active messages of up to {} bytes, this "
            "process takes up to {}",
            resource_.tl_name, sent, largest_accepted_);
    else
        return {};
    std::string tl = resource_.tl_name;
    std::transform(tl.begin(), tl.end(), tl.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    const std::string variables =
        tl == "TCP" ? "UCX_TCP_RX_SEG_SIZE and UCX_TCP_TX_SEG_SIZE" : "UCX_" + tl + "_SEG_SIZE";
    return fmt::format("{}: set {} alike in every process", what, variables);
}

// The address: header, device and interface address, then those of the RDMA
// interface when it is a second one (cma).
void UctInterface::build_address(uct_iface_h second, const uct_iface_attr_t& second_attr,
                                 const std::string& second_name) {
    const std::size_t dev_len = iface_attr_.device_addr_len;
    const std::size_t if_len = iface_attr_.iface_addr_len;
    const std::size_t rdev_len = second ? second_attr.device_addr_len : 0;
    const std::size_t rif_len = second ? second_attr.iface_addr_len : 0;
    if (dev_len > 0xffff || if_len > 0xffff || rdev_len > 0xffff || rif_len > 0xffff)
        throw std::runtime_error("address too long");
    address_.assign(sizeof(AddressHeader) + dev_len + if_len + rdev_len + rif_len, std::byte{0});
    const AddressHeader h{address_magic,
                          wire_version,
                          0,
                          static_cast<std::uint16_t>(dev_len),
                          static_cast<std::uint16_t>(if_len),
                          static_cast<std::uint32_t>(::getpid()),
                          static_cast<std::uint16_t>(rdev_len),
                          static_cast<std::uint16_t>(rif_len),
                          on_wire(largest_accepted_),
                          on_wire(iface_attr_.cap.am.max_bcopy),  // the module's max_message_
                          0};
    std::memcpy(address_.data(), &h, sizeof h);
    std::byte* at = address_.data() + sizeof h;
    ucs_status_t s = UCS_OK;
    if (dev_len > 0 && (s = uct_iface_get_device_address(
                            iface_.get(), reinterpret_cast<uct_device_addr_t*>(at))) != UCS_OK)
        fail("uct_iface_get_device_address", s);
    at += dev_len;
    if (if_len > 0 && (s = uct_iface_get_address(
                           iface_.get(), reinterpret_cast<uct_iface_addr_t*>(at))) != UCS_OK)
        fail("uct_iface_get_address", s);
    at += if_len;
    if (rdev_len > 0 && (s = uct_iface_get_device_address(
                             second, reinterpret_cast<uct_device_addr_t*>(at))) != UCS_OK)
        fail("uct_iface_get_device_address (" + second_name + ")", s);
    at += rdev_len;
    if (rif_len > 0 &&
        (s = uct_iface_get_address(second, reinterpret_cast<uct_iface_addr_t*>(at))) != UCS_OK)
        fail("uct_iface_get_address (" + second_name + ")", s);
}

AddressHeader UctInterface::address_header() const noexcept {
    AddressHeader h{};
    std::memcpy(&h, address_.data(), sizeof h);
    return h;
}

void UctInterface::close() noexcept {
    iface_.reset();
    worker_.reset();
    async_.reset();
    md_.reset();
}

}  // namespace transit::uct
