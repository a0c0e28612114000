// One status code shared by every layer, from the transports up to the user API.
#pragma once

#include <cstdint>
#include <string_view>

namespace transit {

// Values follow the BTL contract: 1 means "completed inline, no callback will
// follow", 0 means "accepted, the callback comes later from progress", negative
// values are errors.  out_of_resource is never fatal: the caller queues and retries.
enum class Status : int {
    completed = 1,
    success = 0,
    error = -1,
    out_of_resource = -2,
    not_available = -3,
    unreachable = -4,
    bad_param = -5,
    not_found = -6,
    not_supported = -7,
    truncated = -8,
    cancelled = -9,
    timeout = -10,
    peer_failed = -11,
    exists = -12,
    access_denied = -13,
    protocol_error = -14,
    peer_departed = -15,  // a peer outside the job disconnected (on purpose)
};

constexpr std::string_view to_string(Status s) noexcept {
    switch (s) {
        case Status::completed:
            return "completed";
        case Status::success:
            return "success";
        case Status::error:
            return "error";
        case Status::out_of_resource:
            return "out of resource";
        case Status::not_available:
            return "not available";
        case Status::unreachable:
            return "unreachable";
        case Status::bad_param:
            return "bad parameter";
        case Status::not_found:
            return "not found";
        case Status::not_supported:
            return "not supported";
        case Status::truncated:
            return "truncated";
        case Status::cancelled:
            return "cancelled";
        case Status::timeout:
            return "timeout";
        case Status::peer_failed:
            return "peer failed";
        case Status::exists:
            return "already exists";
        case Status::access_denied:
            return "access denied";
        case Status::protocol_error:
            return "protocol error";
        case Status::peer_departed:
            return "peer departed";
    }
    return "unknown status";
}

// True for success and inline completion alike.
constexpr bool ok(Status s) noexcept {
    return static_cast<int>(s) >= 0;
}

// A status another process sent: a value that names none is an error, never
// taken for success.
constexpr Status status_from_wire(std::int32_t v) noexcept {
    if (v >= static_cast<int>(Status::peer_departed) && v <= static_cast<int>(Status::completed))
        return static_cast<Status>(v);
    return Status::error;
}

}  // namespace transit
