# libFuzzer target for the uct registration handles (packed remote keys).  Header-only.
transit_fuzz_target(uct_wire uct ${CMAKE_CURRENT_LIST_DIR}/fuzz_uct_wire.cpp)
