// A peer of a uct module written with UCT alone (no Transit module): it
// publishes an address in the format the module reads, sends it any active
// message the test composes, and keeps what the module sends back.  It plays
// the other process of a job, honest or not, so a test can send the module
// requests no Transit module would send and answer its requests as no Transit
// module would.
#pragma once

#include <uct/api/uct.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "components/uct/uct_wire.hpp"

namespace transit::test {

class RawUctPeer {
  public:
    // Opens transport `tl` of memory domain `md` ("posix", "posix"), on
    // `device` (empty: its first).  Throws std::runtime_error when UCT has no
    // such transport.
    RawUctPeer(std::string_view md, std::string_view tl, Rank rank, std::string_view device = {})
        : rank_(rank) {
        open(md, tl, device);
    }
    RawUctPeer(const RawUctPeer&) = delete;
    RawUctPeer& operator=(const RawUctPeer&) = delete;
    ~RawUctPeer() {
        if (ep_) uct_ep_destroy(ep_);
        if (iface_) uct_iface_close(iface_);
        if (worker_) uct_worker_destroy(worker_);
        if (async_) ucs_async_context_destroy(async_);
        if (md_) uct_md_close(md_);
    }

    // The modex blob a uct module publishes, for this interface.
    std::vector<std::byte> address() const {
        const uct::AddressHeader h{uct::address_magic,
                                   uct::wire_version,
                                   0,
                                   static_cast<std::uint16_t>(attr_.device_addr_len),
                                   static_cast<std::uint16_t>(attr_.iface_addr_len),
                                   static_cast<std::uint32_t>(::getpid()),
                                   0,
                                   0,
                                   0,
                                   0,
                                   0};
        std::vector<std::byte> blob(sizeof h + attr_.device_addr_len + attr_.iface_addr_len);
        std::memcpy(blob.data(), &h, sizeof h);
        std::byte* at = blob.data() + sizeof h;
        check(uct_iface_get_device_address(iface_, reinterpret_cast<uct_device_addr_t*>(at)),
              "uct_iface_get_device_address");
        check(uct_iface_get_address(
                  iface_, reinterpret_cast<uct_iface_addr_t*>(at + attr_.device_addr_len)),
              "uct_iface_get_address");
        return blob;
    }

    // Connects to the module whose modex blob is `blob`.
    void connect(const std::vector<std::byte>& blob) {
        uct::AddressHeader h{};
        if (const char* why = uct::read_address(blob, h))
            throw std::runtime_error(std::string("the module's address ") + why);
        std::vector<std::uint64_t> aligned((blob.size() + 7) / 8, 0);
        std::memcpy(aligned.data(), blob.data(), blob.size());
        const auto* base = reinterpret_cast<const std::byte*>(aligned.data());
        uct_ep_params_t params{};
        params.field_mask =
            UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface = iface_;
        params.dev_addr = reinterpret_cast<const uct_device_addr_t*>(base + sizeof h);
        params.iface_addr =
            reinterpret_cast<const uct_iface_addr_t*>(base + sizeof h + h.device_len);
        check(uct_ep_create(&params, &ep_), "uct_ep_create");
    }

    // Sends a message of kind `kind` from this peer's rank with `body`
    // behind the header; false when UCT has no room now.
    bool send(uct::Kind kind, std::span<const std::byte> body, std::uint8_t tag = 0) {
        Outgoing out{
            uct::WireHeader{static_cast<std::uint8_t>(kind), tag, uct::wire_version, 0, rank_},
            body};
        const ssize_t n = uct_ep_am_bcopy(ep_, uct::am_id, &RawUctPeer::pack, &out, 0);
        if (n == UCS_ERR_NO_RESOURCE) return false;
        if (n < 0) check(static_cast<ucs_status_t>(n), "uct_ep_am_bcopy");
        return true;
    }
    template <typename T>
    requires std::is_trivially_copyable_v<T>
    bool send(uct::Kind kind, const T& body) {
        return send(kind, std::as_bytes(std::span(&body, 1)));
    }

    unsigned progress() { return uct_worker_progress(worker_); }

    // The source its messages carry from now on (a rank, a channel: anything).
    void set_source(Rank source) noexcept { rank_ = source; }

    // Every message received, whole (header first), oldest first.
    std::vector<std::vector<std::byte>> received;

  private:
    struct Outgoing {
        uct::WireHeader header;
        std::span<const std::byte> body;
    };

    static void check(ucs_status_t s, const char* what) {
        if (s != UCS_OK) throw std::runtime_error(std::string(what) + ": " + ucs_status_string(s));
    }

    static std::size_t pack(void* dest, void* arg) {
        const auto* out = static_cast<const Outgoing*>(arg);
        auto* d = static_cast<std::byte*>(dest);
        std::memcpy(d, &out->header, sizeof out->header);
        if (!out->body.empty())
            std::memcpy(d + sizeof out->header, out->body.data(), out->body.size());
        return sizeof out->header + out->body.size();
    }

    static ucs_status_t on_message(void* arg, void* data, std::size_t length, unsigned) {
        const auto* p = static_cast<const std::byte*>(data);
        static_cast<RawUctPeer*>(arg)->received.emplace_back(p, p + length);
        return UCS_OK;
    }

    void open(std::string_view md_name, std::string_view tl, std::string_view want_device) {
        uct_component_h* components = nullptr;
        unsigned count = 0;
        check(uct_query_components(&components, &count), "uct_query_components");
        std::unique_ptr<uct_component_h, void (*)(uct_component_h*)> guard(
            components, uct_release_component_list);
        uct_component_h component = nullptr;
        for (unsigned i = 0; i < count && component == nullptr; ++i) {
            uct_component_attr_t attr{};
            attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
            check(uct_component_query(components[i], &attr), "uct_component_query");
            std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
            attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
            attr.md_resources = mds.data();
            check(uct_component_query(components[i], &attr), "uct_component_query");
            for (const auto& m : mds)
                if (md_name == m.md_name) component = components[i];
        }
        if (component == nullptr)
            throw std::runtime_error("no UCT memory domain " + std::string(md_name));
        uct_md_config_t* md_config = nullptr;
        check(uct_md_config_read(component, nullptr, nullptr, &md_config), "uct_md_config_read");
        const ucs_status_t opened =
            uct_md_open(component, std::string(md_name).c_str(), md_config, &md_);
        uct_config_release(md_config);
        check(opened, "uct_md_open");

        uct_tl_resource_desc_t* resources = nullptr;
        unsigned n = 0;
        check(uct_md_query_tl_resources(md_, &resources, &n), "uct_md_query_tl_resources");
        std::string device;
        for (unsigned i = 0; i < n && device.empty(); ++i)
            if (tl == resources[i].tl_name &&
                (want_device.empty() || want_device == resources[i].dev_name))
                device = resources[i].dev_name;
        uct_release_tl_resource_list(resources);
        if (device.empty())
            throw std::runtime_error("no UCT transport " + std::string(tl) + " " +
                                     std::string(want_device));

        check(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async_),
              "ucs_async_context_create");
        check(uct_worker_create(async_, UCS_THREAD_MODE_SINGLE, &worker_), "uct_worker_create");
        const std::string tl_name(tl);
        uct_iface_config_t* iface_config = nullptr;
        check(uct_md_iface_config_read(md_, tl_name.c_str(), nullptr, nullptr, &iface_config),
              "uct_md_iface_config_read");
        uct_iface_params_t params{};
        params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                            UCT_IFACE_PARAM_FIELD_FEATURES;
        params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name = tl_name.c_str();
        params.mode.device.dev_name = device.c_str();
        params.features = UCT_IFACE_FEATURE_AM;
        const ucs_status_t s = uct_iface_open(md_, worker_, &params, iface_config, &iface_);
        uct_config_release(iface_config);
        check(s, "uct_iface_open");
        check(uct_iface_query(iface_, &attr_), "uct_iface_query");
        check(uct_iface_set_am_handler(iface_, uct::am_id, &RawUctPeer::on_message, this, 0),
              "uct_iface_set_am_handler");
        uct_iface_progress_enable(iface_, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }

    Rank rank_;
    uct_md_h md_ = nullptr;
    ucs_async_context_t* async_ = nullptr;
    uct_worker_h worker_ = nullptr;
    uct_iface_h iface_ = nullptr;
    uct_iface_attr_t attr_{};
    uct_ep_h ep_ = nullptr;
};

}  // namespace transit::test
