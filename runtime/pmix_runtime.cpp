// The runtime of a process started by a PMIx launcher: transit_run, Open MPI's
// mpirun, PRRTE's prterun or Slurm's srun --mpi=pmix.
#include <pmix.h>

#include <fmt/format.h>

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/job_secret.hpp"
#include "runtime/lost_peers.hpp"
#include "runtime/node_identity.hpp"
#include "runtime/pmix_names.hpp"
#include "runtime/pmix_util.hpp"
#include "runtime/rank_list.hpp"
#include "runtime/runtime.hpp"
#include "runtime/runtime_base.hpp"
#include "transit/params.hpp"
#include "transit/progress.hpp"

namespace transit::rt {
namespace {

constexpr const char* node_id_key = "transit.node_id";
constexpr const char* job_id_var = "TRANSIT_JOB_ID";
// Published before each fence as "transit.fence.<n>": a peer that has not
// published fence n's key did not take part (it died before the fence started,
// and PMIx completes such a fence among the survivors without an error).
constexpr const char* fence_key_prefix = "transit.fence.";

// No PMIx key is ever put twice by one process.  OpenPMIx 4.2.2 (Debian 12)
// does not reliably hand an updated value to the other processes of a node:
// here, from about the twelfth put (and fence) of one key on, its readers
// kept getting one old value for good (tests/runtime shows it; upstream,
// openpmix/openpmix#3201, fixed on the v4.2 branch by #3206 which blames the
// shared-memory store, and #3368 for 5.0.2 report updated values that never
// reach readers).  A btl publishing its address at every framework init, as
// in the conformance cases, then sent to an endpoint long closed.  So the
// n-th publication of a key K goes to K (n = 1) or K#n, and a reader takes
// the highest generation present; '#' is therefore not allowed in keys.
constexpr char generation_mark = '#';
// Room for "#4294967295" within PMIx's key length.
constexpr std::size_t max_key_length = PMIX_MAX_KEYLEN - 12;

bool valid_key(std::string_view key) {
    return !key.empty() && key.size() <= max_key_length &&
           key.find(generation_mark) == std::string_view::npos;
}

std::string generation_key(std::string_view key, std::uint32_t generation) {
    if (generation <= 1) return std::string(key);
    return fmt::format("{}{}{}", key, generation_mark, generation);
}

// Launchers that give every job a random value of their own: Open MPI's ORTE
// (4.x) and PRRTE/OMPI 5 hand it to their transports under these names.
constexpr const char* launcher_random_vars[] = {
    "OMPI_MCA_orte_precondition_transports",
    "OMPI_MCA_opal_precondition_transports",
    "PMIX_MCA_opal_precondition_transports",
};

// PMIx_Init in a process no launcher started costs a connection attempt and
// a progress thread for nothing: a launcher always exports its address.
bool launched_by_pmix() {
    for (const char* var : {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                            "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"})
        if (std::getenv(var) != nullptr) return true;
    return false;
}

// Seconds a fence may wait for the slowest rank (0: forever).  A job whose
// rank dies is normally ended by its launcher, and a rank that dies during a
// fence fails it at once; the timeout bounds the wait for a rank that hangs.
int fence_timeout_seconds() {
    register_params();
    const std::uint64_t value = params::registry().get("runtime_fence_timeout").as_unsigned();
    return value > 86400 * 365 ? 86400 * 365 : static_cast<int>(value);
}

Status from_pmix(pmix_status_t rc) {
    switch (rc) {
        case PMIX_SUCCESS:
            return Status::success;
        case PMIX_ERR_NOT_FOUND:
            return Status::not_found;
        case PMIX_ERR_TIMEOUT:
            return Status::timeout;
        case PMIX_ERR_BAD_PARAM:
            return Status::bad_param;
        case PMIX_ERR_PARTIAL_SUCCESS:
        case PMIX_ERR_PROC_ABORTED:
        case PMIX_ERR_PROC_ABORTING:
        case PMIX_ERR_PROC_TERM_WO_SYNC:
        case PMIX_ERR_LOST_CONNECTION:
        case PMIX_ERR_UNREACH:
            return Status::peer_failed;
        default:
            return Status::error;
    }
}

// Keeps PMIx initialised for as long as the runtime lives; PMIx counts
// PMIx_Init calls, so several runtimes in one process are fine.
class Session {
  public:
    explicit Session(const pmix_proc_t& me) : me_(me) {}
    ~Session() { PMIx_Finalize(nullptr, 0); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    const pmix_proc_t& me() const noexcept { return me_; }

  private:
    pmix_proc_t me_;
};

// Names (publish/lookup) go to the launcher through PmixNames.
class PmixRuntime final : public RuntimeBase, public PmixNames {
  public:
    PmixRuntime(const pmix_proc_t& me, FenceMode mode)
        : session_(me), nspace_(me.nspace), mode_(mode), fence_timeout_(fence_timeout_seconds()) {
        id_.job_id = nspace_;
        id_.rank = me.rank;
        id_.node_id = local_node_id();
        read_job_info();
        choose_secret();
        publish_own_identity();
        if (mode_ == FenceMode::self_driven) {
            // Under a host (Open MPI) the host hears of lost processes itself.
            lost_.emplace(nspace_, id_.rank);
            if (Status s = fence(); !ok(s))
                throw std::runtime_error(
                    fmt::format("the first fence of job {} failed ({}): a rank died while starting",
                                id_.job_id, to_string(s)));
        } else {
            commit();
        }
    }

    bool is_singleton() const noexcept override { return false; }

    std::uint32_t lost_count() const noexcept override { return lost_ ? lost_->count() : 0; }
    std::vector<Rank> lost_ranks() const override {
        return lost_ ? lost_->ranks() : std::vector<Rank>{};
    }
    void report_lost(Rank peer) noexcept override {
        if (lost_ && peer < id_.size) lost_->add(peer);
    }

    Status modex_send(std::string_view key, std::span<const std::byte> blob) override {
        if (!valid_key(key)) return Status::bad_param;
        std::uint32_t& generation = published_[std::string(key)];
        const std::string k = generation_key(key, generation + 1);
        pmix_value_t value;
        PMIX_VALUE_CONSTRUCT(&value);
        value.type = PMIX_BYTE_OBJECT;
        // PMIx_Put copies the bytes; the casts only satisfy its non-const field.
        value.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(blob.data()));
        value.data.bo.size = blob.size();
        const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, k.c_str(), &value);
        if (rc != PMIX_SUCCESS) return from_pmix(rc);
        ++generation;
        dirty_ = true;
        return mode_ == FenceMode::host_driven ? commit() : Status::success;
    }

    // The peer's latest visible publication of `key` (see generation_mark):
    // from the highest generation read before, one lookup per newer generation
    // and one that misses.
    Status modex_recv(Rank peer, std::string_view key, std::vector<std::byte>& blob) override {
        if (peer >= id_.size || !valid_key(key)) return Status::bad_param;
        std::uint32_t& seen = seen_[{peer, std::string(key)}];
        pmix::ValuePtr value;
        for (std::uint32_t g = seen + 1;; ++g) {
            pmix::ValuePtr next;
            const Status s = get(peer, generation_key(key, g).c_str(), next);
            if (s == Status::not_found) break;
            if (!ok(s)) return s;
            value = std::move(next);
            seen = g;
        }
        if (seen == 0) return Status::not_found;
        if (!value) {
            // Nothing newer: read the generation found before again (it was
            // put once, so its value is the one the peer published).
            if (Status s = get(peer, generation_key(key, seen).c_str(), value); !ok(s)) return s;
        }
        if (value->type != PMIX_BYTE_OBJECT) return Status::protocol_error;
        const auto* bytes = reinterpret_cast<const std::byte*>(value->data.bo.bytes);
        blob.assign(bytes, bytes + value->data.bo.size);
        return Status::success;
    }

    Status fence() override {
        if (mode_ == FenceMode::host_driven) {
            if (Status s = commit(); !ok(s)) return s;
            learn_peers();
            return Status::success;
        }
        ++fences_;
        pmix_value_t count;
        PMIX_VALUE_CONSTRUCT(&count);
        count.type = PMIX_UINT64;
        count.data.uint64 = fences_;
        if (const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, fence_key(fences_).c_str(), &count);
            rc != PMIX_SUCCESS)
            return from_pmix(rc);
        dirty_ = true;
        if (Status s = commit(); !ok(s)) return s;

        const std::vector<Rank> lost = lost_ranks();
        const std::vector<pmix_proc_t> procs = participants(lost);
        pmix::InfoList info;
        info.add_bool(PMIX_COLLECT_DATA, true);
        if (fence_timeout_ > 0) info.add(PMIX_TIMEOUT, &fence_timeout_, PMIX_INT);
        std::span<pmix_info_t> directives = info.finish();
        const pmix_status_t rc = fence_driving_progress(procs, directives);
        // What the survivors published was exchanged even when a rank failed.
        learn_peers();
        if (rc != PMIX_SUCCESS) return from_pmix(rc);
        return lost.empty() && everyone_took_part() ? Status::success : Status::peer_failed;
    }

  private:
    // Waits for the fence while running the progress engine, as Open MPI's
    // modex waits run opal_progress: a rank whose last message still sits in a
    // transport's queue (a tcp connection being set up, a full shared-memory
    // queue) must keep pushing it, or the peer waiting for that message never
    // reaches the fence and the job hangs.
    static pmix_status_t fence_driving_progress(std::span<const pmix_proc_t> procs,
                                                std::span<pmix_info_t> directives) {
        struct Completion {
            std::atomic<bool> done{false};
            pmix_status_t rc = PMIX_SUCCESS;
        } c;
        auto on_done = [](pmix_status_t status, void* cbdata) {
            auto* done = static_cast<Completion*>(cbdata);
            done->rc = status;
            done->done.store(true, std::memory_order_release);
        };
        pmix_status_t rc = PMIx_Fence_nb(procs.data(), procs.size(), directives.data(),
                                         directives.size(), on_done, &c);
        if (rc == PMIX_OPERATION_SUCCEEDED) return PMIX_SUCCESS;
        if (rc != PMIX_SUCCESS) return rc;
        for (unsigned idle = 0; !c.done.load(std::memory_order_acquire);) {
            if (progress_engine().progress() > 0)
                idle = 0;
            else if (++idle > 64)
                sched_yield();  // oversubscribed ranks must let the others run
        }
        return c.rc;
    }

    // A lookup in data this process already holds (job info, or modex data a
    // fence collected): PMIX_OPTIONAL stops PMIx from asking the server and
    // waiting for a key a peer never publishes.
    Status get(Rank peer, const char* key, pmix::ValuePtr& out) const {
        pmix_proc_t proc = pmix::make_proc(nspace_, peer);
        pmix::InfoList info;
        info.add_bool(PMIX_OPTIONAL, true);
        std::span<pmix_info_t> directives = info.finish();
        pmix_value_t* raw = nullptr;
        const pmix_status_t rc = PMIx_Get(&proc, key, directives.data(), directives.size(), &raw);
        out.reset(raw);
        if (rc != PMIX_SUCCESS) return from_pmix(rc);
        return out ? Status::success : Status::not_found;
    }

    // Who takes part in a fence: the whole job (the wildcard) until a rank is
    // lost, then the survivors by name.  A launcher that keeps the job running
    // after a death (mpirun --enable-recovery) never completes a wildcard fence
    // the dead rank cannot join, and ignores PMIX_TIMEOUT on it; transit_run
    // completes it, and there the wildcard stays.
    std::vector<pmix_proc_t> participants(std::span<const Rank> lost) const {
        if (lost.empty() || wildcard_survives_loss_)
            return {pmix::make_proc(nspace_, PMIX_RANK_WILDCARD)};
        std::vector<pmix_proc_t> procs;
        for (Rank r = 0; r < id_.size; ++r)
            if (std::find(lost.begin(), lost.end(), r) == lost.end())
                procs.push_back(pmix::make_proc(nspace_, r));
        return procs;
    }

    static std::string fence_key(std::uint64_t n) {
        return fmt::format("{}{}", fence_key_prefix, n);
    }

    // A peer took part in fence n when it published fence n's key (a peer
    // already past this fence has published later ones too; a dead peer has
    // not).  One key per fence: a count updated in place would freeze for its
    // readers (see generation_mark).
    bool everyone_took_part() const {
        const std::string key = fence_key(fences_);
        for (Rank r = 0; r < id_.size; ++r) {
            if (r == id_.rank) continue;
            pmix::ValuePtr v;
            if (!ok(get(r, key.c_str(), v)) || v->type != PMIX_UINT64 || v->data.uint64 != fences_)
                return false;
        }
        return true;
    }

    Status commit() {
        if (!dirty_) return Status::success;
        const pmix_status_t rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS) return from_pmix(rc);
        dirty_ = false;
        return Status::success;
    }

    void read_job_info() {
        pmix::ValuePtr v;
        if (!ok(get(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, v)) || v->type != PMIX_UINT32)
            throw std::runtime_error(
                fmt::format("the launcher of job {} did not give the job size", id_.job_id));
        id_.size = v->data.uint32;
        id_.job_id = job_id_given();
        if (id_.rank >= id_.size)
            throw std::runtime_error(
                fmt::format("the launcher gave rank {} in a job of {}", id_.rank, id_.size));
        set_local_peers(launcher_local_peers());
        wildcard_survives_loss_ =
            ok(get(PMIX_RANK_WILDCARD, pmix::wildcard_fence_survives_loss, v)) &&
            v->type == PMIX_BOOL && v->data.flag;
    }

    // transit_run keeps its PMIx namespace secret (a stranger who knows it can
    // pass for a rank) and names the job by TRANSIT_JOB_ID, also given as
    // PMIX_JOBID.  Both must agree: a TRANSIT_JOB_ID inherited from an outer
    // job (mpirun started by a rank) names another job.  Elsewhere the job id
    // is the namespace, as the launcher chose it.
    std::string job_id_given() const {
        const char* env = std::getenv(job_id_var);
        pmix::ValuePtr v;
        if (env && *env && ok(get(PMIX_RANK_WILDCARD, PMIX_JOBID, v)) && v->type == PMIX_STRING &&
            v->data.string && std::string_view(v->data.string) == env)
            return env;
        return nspace_;
    }

    // The launcher's idea of this node; refined by node ids after a fence.
    std::vector<Rank> launcher_local_peers() const {
        pmix::ValuePtr v;
        if (!ok(get(PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS, v)) || v->type != PMIX_STRING ||
            !v->data.string)
            return {id_.rank};
        return parse_rank_list(v->data.string, id_.size);
    }

    void choose_secret() {
        if (const char* fd_text = std::getenv(secret_fd_var)) {
            id_.secret = read_secret_file(fd_text);
            return;
        }
        for (const char* var : launcher_random_vars) {
            if (const char* value = std::getenv(var); value && std::strlen(value) >= 16) {
                id_.secret = derive_secret(id_.job_id, value);
                return;
            }
        }
        // Nothing random from the launcher: rank 0 draws a seed and the first
        // fence hands it to everyone.
        need_seed_ = true;
        if (id_.rank == 0) {
            const Secret seed = random_secret();
            if (Status s = modex_send(secret_seed_key, seed); !ok(s))
                throw std::runtime_error("cannot publish the job secret seed through PMIx");
        }
    }

    void publish_own_identity() {
        const auto* bytes = reinterpret_cast<const std::byte*>(id_.node_id.data());
        if (Status s = modex_send(node_id_key, std::span(bytes, id_.node_id.size())); !ok(s))
            throw std::runtime_error("cannot publish the node id through PMIx");
    }

    // After a fence: peers on this node are those with our node id (the
    // launcher's list is only a fallback for peers that published none yet),
    // and the secret seed of rank 0 is known.
    void learn_peers() {
        if (need_seed_) {
            std::vector<std::byte> seed;
            if (ok(modex_recv(0, secret_seed_key, seed))) {
                const std::string text = to_hex(seed);
                id_.secret = derive_secret(id_.job_id, text);
                need_seed_ = false;
            }
        }
        if (peers_known_) return;
        const std::vector<Rank> fallback = launcher_local_peers();
        std::vector<Rank> peers;
        std::vector<std::byte> blob;
        bool all_known = true;
        for (Rank r = 0; r < id_.size; ++r) {
            if (ok(modex_recv(r, node_id_key, blob))) {
                if (std::string_view(reinterpret_cast<const char*>(blob.data()), blob.size()) ==
                    id_.node_id)
                    peers.push_back(r);
            } else {
                all_known = false;
                if (std::find(fallback.begin(), fallback.end(), r) != fallback.end())
                    peers.push_back(r);
            }
        }
        set_local_peers(std::move(peers));
        peers_known_ = all_known;
    }

    Session session_;
    std::string nspace_;             // PMIx's name of the job; id_.job_id may differ
    std::optional<LostPeers> lost_;  // before session_ goes: its handler is PMIx's
    FenceMode mode_;
    int fence_timeout_ = 0;
    bool wildcard_survives_loss_ = false;  // see participants()
    bool dirty_ = false;
    bool need_seed_ = false;
    bool peers_known_ = false;
    std::uint64_t fences_ = 0;
    std::map<std::string, std::uint32_t, std::less<>> published_;  // generations put, per key
    std::map<std::pair<Rank, std::string>, std::uint32_t> seen_;   // highest read, per peer and key
};

}  // namespace

void register_params() {
    static constexpr params::Decl decls[] = {
        {"fence_timeout", params::Type::unsigned_integer, "0",
         "Seconds a modex fence waits for the slowest rank before it fails with a timeout "
         "(0: no limit)",
         6},
        {"names_dir", params::Type::string, "",
         "Directory of this user's names on the node, kept there when the launcher keeps none "
         "(a singleton; Slurm's srun): made with mode 0700 and refused when it is a symbolic "
         "link, another user's or open to others (empty: $TMPDIR/transit-names-<uid>, else "
         "/tmp/transit-names-<uid>, where transit_run keeps its ranks' names)",
         5},
    };
    params::registry().add_all("runtime", "", decls);
}

std::unique_ptr<Runtime> open_runtime(FenceMode mode) {
    // Before any lookup, also for a singleton: a TRANSIT_MCA_runtime_* setting
    // is then known, not reported as a stray name.
    register_params();
    if (!launched_by_pmix()) return singleton_runtime();
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
    if (rc == PMIX_ERR_UNREACH) {
        // The launcher named in our environment is gone: we are alone.  No
        // PMIx_Finalize: OpenPMIx 4.2.2 crashes in it after a failed connection.
        return singleton_runtime();
    }
    if (rc != PMIX_SUCCESS)
        throw std::runtime_error(
            fmt::format("PMIx_Init failed: {} (the launcher answered but the connection broke)",
                        PMIx_Error_string(rc)));
    return std::make_unique<PmixRuntime>(me, mode);
}

}  // namespace transit::rt
