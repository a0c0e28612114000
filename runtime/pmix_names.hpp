// The name service of a PMIx client (PMIx_Publish, PMIx_Lookup,
// PMIx_Unpublish): the launcher's PMIx server keeps the names (transit_run,
// tools/transit_run/name_table.hpp; mpirun its own).  A PMIx runtime derives
// from it.
#pragma once

#include <set>
#include <string>

#include "runtime/name_service.hpp"

namespace transit::rt {

class PmixNames : public NameService {
  public:
    Status publish_name(std::string_view name, std::string_view value, std::string& why) override;
    Status lookup_name(std::string_view name, std::chrono::milliseconds wait, std::string& value,
                       std::string& why) override;
    Status unpublish_name(std::string_view name, std::string& why) override;

  protected:
    ~PmixNames() = default;

  private:
    // What this process published: a second publish of one of them is
    // `exists`, and only they are unpublished, whatever the launcher allows
    // (Open MPI's lets a publisher replace its own value, and any process
    // of the job remove a name).
    std::set<std::string, std::less<>> mine_;
};

// What transit_run reads of a lookup's wait, in milliseconds (PMIX_TIMEOUT
// counts whole seconds; it is given too, for other launchers).
inline constexpr char lookup_wait_ms_key[] = "transit.lookup.wait_ms";

}  // namespace transit::rt
