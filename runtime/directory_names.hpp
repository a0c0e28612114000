// The name service of a process whose launcher keeps no names: a singleton
// (started by hand) or a rank under a launcher whose PMIx server does not
// publish (Slurm's srun).  Names go to this user's name directory on the node
// (NameDirectory, shared with transit_run's ranks), so a client started by
// hand finds a server started by hand, or under transit_run, on the same node.
// A name lasts as long as this process: it is removed when the service goes
// (the process finalizes), and a process killed outright leaves an entry the
// next reader or publisher finds dead, ignores and removes.
#pragma once

#include <set>
#include <string>

#include "runtime/name_directory.hpp"
#include "runtime/name_service.hpp"

namespace transit::rt {

class DirectoryNames final : public NameService {
  public:
    // `dir`: the directory (NameDirectory::default_path() unless the user
    // chose one); `job_id`, `rank`: this process, recorded in its entries.
    DirectoryNames(std::string dir, std::string job_id, Rank rank);
    ~DirectoryNames();
    DirectoryNames(const DirectoryNames&) = delete;
    DirectoryNames& operator=(const DirectoryNames&) = delete;

    // exists: a live process holds the name; error: the directory is unsafe
    // or cannot be written (`why` says which and how to fix it).
    Status publish_name(std::string_view name, std::string_view value, std::string& why) override;
    // Waits by looking again every few milliseconds, running the progress
    // engine meanwhile.
    Status lookup_name(std::string_view name, std::chrono::milliseconds wait, std::string& value,
                       std::string& why) override;
    // access_denied: another process published it.
    Status unpublish_name(std::string_view name, std::string& why) override;

    const std::string& path() const noexcept { return dir_.path(); }

  private:
    bool usable(std::string& why);
    // Removes `name` when it still is the gone or invalid entry found.
    void clean(std::string_view name);

    NameDirectory dir_;
    std::string job_id_;
    Rank rank_;
    std::string mark_;  // this process
    bool swept_ = false;
    std::set<std::string, std::less<>> mine_;
};

}  // namespace transit::rt
