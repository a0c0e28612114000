// The names ranks publish (PMIx publish/lookup/unpublish, served by PmixHost).
// They are kept where every transit_run of the same user on this node, and
// every process of that user without a launcher, finds them: this user's name
// directory, <$TMPDIR>/transit-names-<uid>/ (rt::NameDirectory).  An entry
// names its launcher (pid and start time) as owner: when that launcher is
// gone (killed outright), its names are gone too, whatever files it left.  A
// launcher removes a rank's names when the rank ends (per-process names,
// PMIx's PMIX_PERSIST_PROC) and all its job's names when the job ends.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/name_directory.hpp"

namespace transit::run {

class NameTable {
  public:
    // job: seen by the ranks of the publishing job only (PMIx's namespace
    // range); node: by every transit_run job of this user on the node.
    enum class Scope { job, node };
    enum class Result { ok, duplicate, not_found, not_owner, bad_name, failed };

    struct Entry {
        std::string value;
        std::string job_id;  // of the publisher
        unsigned rank = 0;
        Scope scope = Scope::node;
        bool per_process = true;  // removed when the rank ends, else when its job ends
        std::string launcher;     // its launcher's "<pid> <start time>" (set by publish)
    };

    // Longest name kept (its file name is its hex spelling).
    static constexpr std::size_t max_name = 120;

    // `dir`: the name directory (rt::NameDirectory); `job_id`: this launcher's job.
    NameTable(std::string dir, std::string job_id);

    // Publishes every (name, value) of `data` or none: duplicate when one is
    // taken by a live publisher.  `why` says what went wrong.
    Result publish(const std::vector<std::pair<std::string, std::string>>& data, const Entry& how,
                   std::string& why);
    // The entry under `name` as a rank of this launcher's job sees it.
    std::optional<Entry> find(const std::string& name);
    // Removes `name`, published by `rank` of this job.
    Result unpublish(const std::string& name, unsigned rank, std::string& why);
    // Removes every name `rank` published: per-process ones only, or all.
    void forget_rank(unsigned rank, bool per_process_only);
    // Removes every name this job published (it ends).
    void forget_all();

  private:
    bool ready(std::string& why);
    // The live entry under `name`, as kept.
    std::optional<Entry> live(const std::string& name) const;
    void remove_if_ours(const rt::NameDirectory::Lock& lock, const std::string& name);

    rt::NameDirectory dir_;
    std::string job_id_;
    std::string mark_;  // this launcher: "<pid> <start time>"
    bool ready_ = false;
    std::mutex mutex_;
    std::map<std::string, std::pair<unsigned, bool>> mine_;  // name -> (rank, per_process)
};

}  // namespace transit::run
