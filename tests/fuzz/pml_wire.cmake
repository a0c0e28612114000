# libFuzzer target for the pml's messages: fixed headers and the handle, user
# header and data behind rndv, am and split headers.
transit_fuzz_target(pml_wire pml ${CMAKE_CURRENT_LIST_DIR}/fuzz_pml_wire.cpp)
