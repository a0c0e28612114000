# libFuzzer target for what an ofi module reads from a peer: message headers,
# registration handles, the address blob and the process id.  Header-only (no
# libfabric needed).
transit_fuzz_target(ofi_wire ofi ${CMAKE_CURRENT_LIST_DIR}/fuzz_ofi_wire.cpp)
