# libFuzzer target for the fragment headers vader reads from a peer's
# segment (data length, atomic target check).  Header-only.
transit_fuzz_target(vader_frag vader ${CMAKE_CURRENT_LIST_DIR}/fuzz_vader_frag.cpp)
