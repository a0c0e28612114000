// What a component's init does with each device, provider or transport it
// chose: make its module, publish the module's address for its peers, and keep
// why one could not be opened, so that a component left with none declines
// saying why for each.
//
//   btl::util::ModuleOpener opener(ctx.runtime, out_);
//   for (const Resource& res : chosen)
//       if (auto* m = opener.open(modules, res.name(), [&] {
//               return std::make_unique<MyModule>(res, ctx.runtime, ...);
//           }))
//           out_.verbose(10, "{}: exclusivity {}", m->name(), m->attributes().exclusivity);
//   if (modules.empty()) decline_reason_ = opener.none_opened("no device could be opened");
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transit/btl/module.hpp"
#include "transit/log.hpp"
#include "transit/runtime.hpp"
#include "transit/status.hpp"

namespace transit::btl::util {

class ModuleOpener {
  public:
    // Both must outlive the opener.
    ModuleOpener(rt::Runtime& runtime, const log::Stream& out) noexcept
        : runtime_(runtime), out_(out) {}

    // make() returns a std::unique_ptr to the component's module type, which
    // has modex_key() and address() (the bytes its peers need to reach it).
    // A module whose make() throws (logged at verbosity 1) or whose address
    // cannot be published is left out, with its reason kept under `name`.
    // Returns the module now at the back of `modules`, or nullptr.
    template <typename Make>
    auto open(std::vector<std::unique_ptr<Module>>& modules, std::string_view name, Make&& make)
        -> decltype(make().get()) {
        decltype(make()) m;
        try {
            m = std::forward<Make>(make)();
        } catch (const std::exception& e) {
            failures_.push_back(fmt::format("{}: {}", name, e.what()));
            out_.verbose(1, "{} not used: {}", name, e.what());
            return nullptr;
        }
        if (const Status s = runtime_.modex_send(m->modex_key(), m->address()); !ok(s)) {
            failures_.push_back(
                fmt::format("{}: publishing the address failed: {}", name, to_string(s)));
            return nullptr;
        }
        auto* opened = m.get();
        modules.push_back(std::move(m));
        return opened;
    }

    // "<what> (<name>: <reason>; ...)": the component's decline reason when
    // it opened nothing.
    std::string none_opened(std::string_view what) const {
        return fmt::format("{} ({})", what, fmt::join(failures_, "; "));
    }

  private:
    rt::Runtime& runtime_;
    const log::Stream& out_;
    std::vector<std::string> failures_;
};

}  // namespace transit::btl::util
