# libFuzzer target for the packed remote keys unpack_key reads.
transit_fuzz_target(remote_key pml
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_remote_key.cpp ${PROJECT_SOURCE_DIR}/pml/remote_key.cpp)
