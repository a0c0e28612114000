// btl/unix: the component.  It declares the parameters, binds a UNIX-domain
// datagram socket at init, publishes the socket's name through the modex and
// creates the one module.  The descriptor at the end is the plugin's only
// exported symbol: the loader reads and checks it before calling anything.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>

#include <transit/btl/base_params.hpp>
#include <transit/btl/component.hpp>
#include <transit/params_bind.hpp>
#include <transit/version.hpp>

#include "unix_module.hpp"

namespace unix_btl {
namespace {

using transit::params::Type;

// One table drives registration, transit_info and the documentation, each
// entry bound to a field of Config.  The parameters every transport has
// (eager_limit, max_send_size, free_list_max, exclusivity, ...) come from the
// SDK's base table with their type, level and range: the component gives its
// default, and its own help or bounds where it has more to say.  Full names are
// btl_unix_<name>; set them like any other parameter, e.g.
// TRANSIT_MCA_btl_unix_eager_limit=8k or --mca btl_unix_eager_limit 8k.
// A declared range is checked by the registry: a value outside it is refused,
// naming the parameter, the value and where it was set, before the component
// sees it.
constexpr std::size_t max_message = 128 * 1024;  // fits a default socket send buffer

using btl::BaseParam;

constexpr transit::params::Field<Config> unix_params[] = {
    btl::inherit<Config>(
        BaseParam::eager_limit,
        {.default_value = "4k", .help = "Largest message the upper layer sends in one go"}),
    btl::inherit<Config>(BaseParam::max_send_size,
                         {.default_value = "64k",
                          .help = "Largest message on a socket (fragment, put or get); at most "
                                  "128k, the same on every rank",
                          .min = sizeof(Header),
                          .max = max_message}),
    btl::inherit<Config>(BaseParam::free_list_max,
                         {.default_value = "64",
                          .help = "Send descriptors, created at init; alloc reports "
                                  "out-of-resource when all are in use",
                          .max = 65536}),
    btl::inherit<Config>(BaseParam::exclusivity,
                         {.default_value = "512",
                          .help = "Priority among the transports that reach a peer (highest "
                                  "wins; vader is 65535)"}),
    // Bounds what is in flight from this process (a bounded send queue): a
    // datagram holds its room in the sender's buffer until its receiver has
    // read it.  Linux doubles the value and keeps a floor of a few KiB.
    transit::params::to<&Config::send_buffer>(
        transit::params::Decl{"send_buffer", Type::size, "0",
                              "Bytes of datagrams in flight from this process, not yet read by "
                              "their receivers (the socket's send buffer); past it send reports "
                              "out-of-resource. 0: the system's default (net.core.wmem_default)",
                              9}
            .range(0, 64 << 20)),
    transit::params::to<&Config::verbose>(
        transit::params::Decl{"verbose", Type::integer, "0", "Verbosity of btl/unix", 9}.range(
            0, 100)),
};

// The socket the peers send to.  Binding with no name asks Linux for a
// unique name in the abstract namespace ("autobind"): no file to clean up, and
// only processes in this network namespace, i.e. on this node, can reach it.
Fd bound_socket(std::vector<std::byte>& name, std::size_t send_buffer) {
    Fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const int sndbuf = static_cast<int>(send_buffer);
    if (fd && send_buffer > 0 &&
        ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0)
        throw std::runtime_error(fmt::format("SO_SNDBUF: {}", std::strerror(errno)));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    socklen_t len = sizeof(sa_family_t);
    if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
        throw std::runtime_error(fmt::format("datagram socket: {}", std::strerror(errno)));
    len = sizeof sa;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
        throw std::runtime_error(fmt::format("getsockname: {}", std::strerror(errno)));
    const auto* p = reinterpret_cast<const std::byte*>(sa.sun_path);
    name.assign(p, p + (len - offsetof(sockaddr_un, sun_path)));
    return fd;
}

class UnixComponent final : public btl::Component {
  public:
    void register_params(transit::params::Registry& registry) override {
        registry_ = &registry;
        transit::params::add_all(registry, "btl", "unix", unix_params);
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override {
        const Config config = read_config();
        std::vector<std::byte> name;
        Fd socket;
        try {
            socket = bound_socket(name, config.send_buffer);
        } catch (const std::exception& e) {
            decline_reason_ = e.what();  // no module; transit_info shows why
            return {};
        }
        // Peers read it in add_procs, after the framework's fence.
        if (transit::Status s = ctx.runtime.modex_send("btl.unix.1", name);
            s != transit::Status::success) {
            decline_reason_ = fmt::format("modex_send: {}", transit::to_string(s));
            return {};
        }
        std::vector<std::unique_ptr<btl::Module>> modules;
        modules.push_back(
            std::make_unique<UnixModule>(*this, config, ctx, std::move(socket), std::move(name)));
        return modules;
    }

  private:
    // Read at init, not at registration, so values set in between still count.
    // A bad value is an error naming the parameter, never a silent fallback: the
    // registry checked the declared ranges, and a check across parameters that
    // fails throws params::Error.
    Config read_config() const {
        transit::params::Registry& r = registry_ ? *registry_ : transit::params::registry();
        Config c;
        transit::params::bind(r, "btl", "unix", unix_params, c);
        btl::require_eager_fits(r, "unix");
        return c;
    }

    transit::params::Registry* registry_ = nullptr;
};

}  // namespace
}  // namespace unix_btl

// The descriptor: magic, the SDK ABI and btl interface versions this file was
// compiled against, the names, the component's own version, the compiler
// fingerprint and the factory.  Its name must be transit_<framework>_<name>_component
// and the file transit_<framework>_<name>.so, or the loader refuses it.
extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_unix_component =
    transit::mca::make_descriptor<unix_btl::UnixComponent>("btl", transit::btl_interface_version,
                                                           "unix", {1, 0, 0});
