// A transport on a device, as the component lists it: what a module opens.
#pragma once

#include <uct/api/uct.h>

#include <string>

namespace transit::uct {

// One transport on one device, as listed by its memory domain.
struct Resource {
    uct_component_h component = nullptr;
    std::string md_name;
    std::string tl_name;
    std::string dev_name;
    uct_device_type_t dev_type = UCT_DEVICE_TYPE_NET;
    std::string name() const { return tl_name + "/" + dev_name; }
};

}  // namespace transit::uct
