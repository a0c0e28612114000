# libFuzzer target for tcp's stream parser (next_frame over a link's receive buffer).
transit_fuzz_target(tcp_stream tcp
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_tcp_stream.cpp ${PROJECT_SOURCE_DIR}/components/tcp/tcp_wire.cpp)
