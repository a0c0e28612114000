// Prints what the runtime knows of the job, and every peer's modex blob:
//   transit_run -n 4 --tag-output print_job
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "runtime/runtime.hpp"

int main() {
    using namespace transit;
    try {
        auto rt = rt::open_runtime();
        const std::string hello =
            fmt::format("hello from rank {} (pid {}) on {}", rt->rank(), ::getpid(), rt->node_id());
        const auto* bytes = reinterpret_cast<const std::byte*>(hello.data());
        if (Status s = rt->modex_send("print_job.hello", std::span(bytes, hello.size())); !ok(s))
            throw std::runtime_error(fmt::format("modex_send: {}", to_string(s)));
        if (Status s = rt->fence(); !ok(s))
            throw std::runtime_error(fmt::format("fence: {}", to_string(s)));

        std::string peers;
        for (Rank r : rt->local_peers()) peers += (peers.empty() ? "" : ",") + std::to_string(r);
        std::string out = fmt::format(
            "rank {} of {}{}, job {}, node {}, local rank {} of {} (peers {}), binding {}, "
            "numa node {}\n",
            rt->rank(), rt->size(), rt->is_singleton() ? " (singleton)" : "", rt->job_id(),
            rt->node_id(), rt->local_rank(), rt->local_size(), peers, rt->binding(),
            rt->numa_node());
        for (Rank r = 0; r < rt->size(); ++r) {
            std::vector<std::byte> blob;
            const Status s = rt->modex_recv(r, "print_job.hello", blob);
            out += ok(s) ? fmt::format("  rank {}: \"{}\"\n", r,
                                       std::string_view(reinterpret_cast<const char*>(blob.data()),
                                                        blob.size()))
                         : fmt::format("  rank {}: ({})\n", r, to_string(s));
        }
        std::fputs(out.c_str(), stdout);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "print_job: %s\n", e.what());
        return 1;
    }
}
