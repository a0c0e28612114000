// Which service keeps this process's names.  The launcher's when it has one
// that publishes (transit_run, mpirun); otherwise this user's name directory
// on the node (DirectoryNames): for a singleton, which has no launcher, and
// under a launcher whose PMIx server answers "not supported" (Slurm's srun),
// from that answer on.  The directory is the parameter runtime_names_dir,
// else NameDirectory::default_path().
#pragma once

#include <optional>
#include <string>

#include "runtime/directory_names.hpp"

namespace transit::rt {

class NameChoice final : public NameService {
  public:
    explicit NameChoice(Runtime& runtime) noexcept;
    NameChoice(const NameChoice&) = delete;
    NameChoice& operator=(const NameChoice&) = delete;

    Status publish_name(std::string_view name, std::string_view value, std::string& why) override;
    Status lookup_name(std::string_view name, std::chrono::milliseconds wait, std::string& value,
                       std::string& why) override;
    Status unpublish_name(std::string_view name, std::string& why) override;

    // What keeps the names now, for the log: true (and `which`) when that
    // changed since the last call, i.e. on first use and when the launcher
    // turned out to keep none.
    bool changed(std::string& which);

  private:
    // The launcher's service while it serves, else the directory.
    NameService& current();
    // A launcher's not_supported: the directory from now on.
    bool declined(Status s, std::string& why);

    Runtime& runtime_;
    NameService* launcher_;
    std::string launcher_why_;  // why the launcher's is not used
    std::optional<DirectoryNames> directory_;
    std::string announced_;
};

}  // namespace transit::rt
