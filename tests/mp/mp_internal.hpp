// Between the harness's main() and its helpers; not for tests.
#pragma once

#include <memory>

#include "transit/runtime.hpp"

namespace transit::mp::detail {
void set_runtime(std::unique_ptr<rt::Runtime> rt);
}
