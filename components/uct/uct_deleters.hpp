// The deleters of the UCT/UCS objects a module owns in std::unique_ptr: the
// async context, worker, memory domain and interface, each closed by the
// UCX call that matches its opening.  Owners declare them in the order they
// open them, so they close in reverse.
#pragma once

#include <ucs/async/async_fwd.h>
#include <uct/api/uct.h>

namespace transit::uct {

struct AsyncDeleter {
    void operator()(ucs_async_context_t* a) const noexcept;
};
struct WorkerDeleter {
    void operator()(uct_worker* w) const noexcept { uct_worker_destroy(w); }
};
struct MdDeleter {
    void operator()(uct_md* m) const noexcept { uct_md_close(m); }
};
struct IfaceDeleter {
    void operator()(uct_iface* i) const noexcept { uct_iface_close(i); }
};

}  // namespace transit::uct
