# libFuzzer target for the tcp wire decoders (frames, handshake, address blob).
# With clang as the compiler it is a normal target; with g++ (CI's main build)
# the ctest entry compiles it with clang++ itself, then runs it for a bounded time.
set(tcp_fuzz_sources
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_tcp_wire.cpp
  ${PROJECT_SOURCE_DIR}/components/tcp/tcp_wire.cpp
  ${PROJECT_SOURCE_DIR}/components/tcp/tcp_interfaces.cpp)
set(TRANSIT_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz target runs under ctest")
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_executable(fuzz_tcp_wire ${tcp_fuzz_sources})
  target_include_directories(fuzz_tcp_wire PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(fuzz_tcp_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_tcp_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  add_test(NAME fuzz.tcp_wire COMMAND fuzz_tcp_wire -max_total_time=${TRANSIT_FUZZ_SECONDS}
           -rss_limit_mb=1024)
  set_tests_properties(fuzz.tcp_wire PROPERTIES LABELS "fuzz;tcp" TIMEOUT 300)
else()
  find_program(TRANSIT_CLANGXX NAMES clang++ clang++-14 DOC "clang++ for the libFuzzer targets")
  if(TRANSIT_CLANGXX)
    add_test(NAME fuzz.tcp_wire
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run_libfuzzer.sh ${TRANSIT_CLANGXX}
              ${CMAKE_CURRENT_BINARY_DIR}/fuzz_tcp_wire ${TRANSIT_FUZZ_SECONDS}
              -I${PROJECT_SOURCE_DIR} -I${PROJECT_SOURCE_DIR}/include -- ${tcp_fuzz_sources})
    set_tests_properties(fuzz.tcp_wire PROPERTIES LABELS "fuzz;tcp" TIMEOUT 600)
  else()
    message(STATUS "clang++ not found: the tcp wire fuzz target is not built")
  endif()
endif()
