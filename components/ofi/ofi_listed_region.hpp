// The shared-memory region a node-local provider makes for this process's
// endpoint (shm: /dev/shm/<pid>:<uid>:<n>, 16 MiB), listed with
// btl::util::Leftovers while the endpoint is open.  libfabric removes the
// region when the endpoint closes, but a killed process never closes it: once
// listed, transit_run removes it when it reaps the rank, and any later Transit
// process of the user on the node (opening the btl framework) does too.
//
// The module declares this before its endpoint, so the name is forgotten
// only after the endpoint (and its region) is gone.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "transit/btl/util/leftovers.hpp"

namespace transit::ofi {

class ListedRegion {
  public:
    ListedRegion() = default;
    ListedRegion(const ListedRegion&) = delete;
    ListedRegion& operator=(const ListedRegion&) = delete;
    ~ListedRegion() { forget(); }

    // The region's name from the endpoint's own address (fi_getname before
    // fi_enable makes the region): "fi_shm://<pid>:<uid>:<n>" or
    // "<pid>:<uid>:<n>", up to a NUL.  Empty when it cannot be a region name.
    static std::string region_name(std::string_view address) {
        address = address.substr(0, address.find('\0'));
        if (const auto scheme = address.find("://"); scheme != std::string_view::npos)
            address.remove_prefix(scheme + 3);
        if (address.empty() || address.find('/') != std::string_view::npos ||
            address.find('\n') != std::string_view::npos)
            return {};
        return "/" + std::string(address);
    }

    // Lists `name` ("/<name>") for `owner`, replacing the one listed before.
    // Throws as Leftovers does (the list cannot be made or written).
    void list(std::string_view owner, const std::string& name) {
        forget();
        if (!list_) list_.emplace(owner);
        list_->add(btl::util::LeftoverKind::posix_shm, name);
        name_ = name;
    }

    const std::string& name() const noexcept { return name_; }

  private:
    void forget() noexcept {
        if (list_ && !name_.empty()) list_->forget(btl::util::LeftoverKind::posix_shm, name_);
        name_.clear();
    }

    std::optional<btl::util::Leftovers> list_;
    std::string name_;
};

}  // namespace transit::ofi
