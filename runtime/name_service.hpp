// Names under a launcher: a process publishes a string (its listen address)
// under a name, another looks the name up (PMIx publish/lookup/unpublish,
// served by the launcher: transit_run or mpirun).  Only a runtime with a
// launcher offers it; name_service() is null for a singleton.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "transit/runtime.hpp"

namespace transit::rt {

// 1..max_name_length bytes, no control characters or spaces, not starting
// with "pmix." (PMIx's own keys): what a launcher can keep as a key and a
// file name.
inline constexpr std::size_t max_name_length = 120;

// "" when `name` is a valid name, else why it is not.
std::string name_problem(std::string_view name);

class NameService {
  public:
    // `value` under `name`, for as long as this process lives or until it
    // unpublishes it.  exists: the name is taken (by anyone, this process
    // included); not_supported: the launcher keeps no names.  `why` says
    // what went wrong.
    virtual Status publish_name(std::string_view name, std::string_view value,
                                std::string& why) = 0;
    // The value published under `name`, waiting up to `wait` for it to be
    // published (0: not at all).  not_found: no such name (at once);
    // timeout: none was published within `wait`.
    virtual Status lookup_name(std::string_view name, std::chrono::milliseconds wait,
                               std::string& value, std::string& why) = 0;
    // not_found: this name is not published; access_denied: another process
    // published it.
    virtual Status unpublish_name(std::string_view name, std::string& why) = 0;

  protected:
    ~NameService() = default;
};

// The runtime's name service, or nullptr (a singleton: no launcher).
NameService* name_service(Runtime& runtime) noexcept;

}  // namespace transit::rt
