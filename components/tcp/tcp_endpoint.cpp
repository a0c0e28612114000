#include "tcp_endpoint.hpp"

namespace transit::tcp {

const char* to_string(LinkState s) noexcept {
    switch (s) {
        case LinkState::idle:
            return "idle";
        case LinkState::connecting:
            return "connecting";
        case LinkState::hello_sent:
            return "waiting for the handshake answer";
        case LinkState::await_incoming:
            return "waiting for the peer's connection";
        case LinkState::accepting:
            return "waiting for the peer's handshake";
        case LinkState::connected:
            return "connected";
        case LinkState::closed:
            return "closed";
        case LinkState::probing:
            return "trying a path";
    }
    return "?";
}

TcpEndpoint::TcpEndpoint(TcpModule& module, Rank peer, std::size_t links)
    : btl::Endpoint(peer), module_(&module) {
    for (std::size_t i = 0; i < links; ++i) {
        auto l = std::make_unique<Link>();
        l->module = &module;
        l->endpoint = this;
        l->index = static_cast<std::uint32_t>(i);
        links_.push_back(std::move(l));
    }
}

}  // namespace transit::tcp
