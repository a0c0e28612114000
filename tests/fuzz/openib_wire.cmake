# libFuzzer target for the openib wire decoders (fragment headers, atomics,
# connection messages, modex blob, registration handles).  Header-only: it
# needs neither libibverbs nor a device.
transit_fuzz_target(openib_wire openib ${CMAKE_CURRENT_LIST_DIR}/fuzz_openib_wire.cpp)
