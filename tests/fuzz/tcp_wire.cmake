# libFuzzer target for the tcp wire decoders (frames, handshake, address blob).
transit_fuzz_target(tcp_wire tcp
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_tcp_wire.cpp
  ${PROJECT_SOURCE_DIR}/components/tcp/tcp_wire.cpp
  ${PROJECT_SOURCE_DIR}/components/tcp/tcp_interfaces.cpp)
