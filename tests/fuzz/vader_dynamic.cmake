# libFuzzer target for what vader reads of a peer outside the job: a server's
# listen blob and a client's join fragment in its segment.  Header-only.
transit_fuzz_target(vader_dynamic vader ${CMAKE_CURRENT_LIST_DIR}/fuzz_vader_dynamic.cpp)
