// A job of one: no launcher, no PMIx.  The modex is a map in this process, so
// a component can publish and read back its own blob exactly as in a real job.
#include <unistd.h>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>

#include "runtime/job_secret.hpp"
#include "runtime/node_identity.hpp"
#include "runtime/runtime.hpp"
#include "runtime/runtime_base.hpp"

namespace transit::rt {
namespace {

class SingletonRuntime final : public RuntimeBase {
  public:
    SingletonRuntime() {
        id_.secret = random_secret();
        std::uint32_t tag = 0;
        std::memcpy(&tag, id_.secret.data(), sizeof tag);
        // The job id names files (e.g. /dev/shm/transit-<job id>-*): keep it unique
        // among the singletons of this host and free of '/'.
        id_.job_id = fmt::format("singleton-{}-{:08x}", ::getpid(), tag);
        id_.node_id = local_node_id();
        set_local_peers({0});
    }

    bool is_singleton() const noexcept override { return true; }

    // Keys follow the PMIx runtime's rule (no '#', which marks its generations)
    // so a component tested alone fails the same way.
    static bool valid_key(std::string_view key) {
        return !key.empty() && key.find('#') == std::string_view::npos;
    }

    Status modex_send(std::string_view key, std::span<const std::byte> blob) override {
        if (!valid_key(key)) return Status::bad_param;
        pending_[std::string(key)].assign(blob.begin(), blob.end());
        return Status::success;
    }

    Status modex_recv(Rank peer, std::string_view key, std::vector<std::byte>& blob) override {
        if (peer != 0 || !valid_key(key)) return Status::bad_param;
        auto it = visible_.find(key);
        if (it == visible_.end()) return Status::not_found;
        blob = it->second;
        return Status::success;
    }

    // Publication becomes visible at the fence, as it does in a real job, so a
    // component that forgets the fence fails here too.
    Status fence() override {
        for (auto& [key, blob] : pending_) visible_[key] = std::move(blob);
        pending_.clear();
        return Status::success;
    }

  private:
    std::map<std::string, std::vector<std::byte>, std::less<>> pending_;
    std::map<std::string, std::vector<std::byte>, std::less<>> visible_;
};

}  // namespace

std::unique_ptr<Runtime> singleton_runtime() {
    return std::make_unique<SingletonRuntime>();
}

}  // namespace transit::rt
