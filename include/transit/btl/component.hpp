// A BTL component: discovers its devices and creates modules.
#pragma once

#include <memory>
#include <vector>

#include "transit/btl/am_table.hpp"
#include "transit/btl/module.hpp"
#include "transit/component.hpp"
#include "transit/progress.hpp"
#include "transit/runtime.hpp"

namespace transit::btl {

// What a component receives at init: the job, the progress engine, the tag table.
struct InitContext {
    rt::Runtime& runtime;
    ProgressEngine& progress;
    AmTable& am_table;
    bool progress_threads = false;
    bool multi_threaded = false;
};

class Component : public mca::Component {
public:
    // Creates 0..n modules (0: nothing usable, with the reason in decline_reason()).
    // Publishes the modules' addresses through ctx.runtime.modex_send().
    virtual std::vector<std::unique_ptr<Module>> init(InitContext& ctx) = 0;

    // Set when init returns no module, for transit_info and verbose output.
    const std::string& decline_reason() const noexcept { return decline_reason_; }

protected:
    std::string decline_reason_;
};

}  // namespace transit::btl
