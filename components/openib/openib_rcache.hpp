// The openib module's registration cache: the toolkit's, recording verbs keys.
#pragma once

#include <cstdint>

#include "transit/btl/util/registration_cache.hpp"

namespace transit::openib {

struct VerbsKeys {
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
};

using Registration = btl::util::Registration<VerbsKeys>;
using RegistrationBackend = btl::util::RegistrationBackend<VerbsKeys>;
using RegistrationCache = btl::util::RegistrationCache<VerbsKeys>;

}  // namespace transit::openib
