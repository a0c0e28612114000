# libFuzzer target for the openib wire decoders (fragment headers, atomics,
# connection messages, modex blob, registration handles).  Header-only: it
# needs neither libibverbs nor a device.  Same scheme as tcp_wire.cmake.
set(openib_fuzz_sources ${CMAKE_CURRENT_LIST_DIR}/fuzz_openib_wire.cpp)
set(TRANSIT_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz target runs under ctest")
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_executable(fuzz_openib_wire ${openib_fuzz_sources})
  target_include_directories(fuzz_openib_wire PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(fuzz_openib_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_openib_wire PRIVATE -fsanitize=fuzzer,address,undefined)
  add_test(NAME fuzz.openib_wire COMMAND fuzz_openib_wire -max_total_time=${TRANSIT_FUZZ_SECONDS}
           -rss_limit_mb=1024)
  set_tests_properties(fuzz.openib_wire PROPERTIES LABELS "fuzz;openib" TIMEOUT 300)
else()
  find_program(TRANSIT_CLANGXX NAMES clang++ clang++-14 DOC "clang++ for the libFuzzer targets")
  if(TRANSIT_CLANGXX)
    add_test(NAME fuzz.openib_wire
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run_libfuzzer.sh ${TRANSIT_CLANGXX}
              ${CMAKE_CURRENT_BINARY_DIR}/fuzz_openib_wire ${TRANSIT_FUZZ_SECONDS}
              -I${PROJECT_SOURCE_DIR} -- ${openib_fuzz_sources})
    set_tests_properties(fuzz.openib_wire PROPERTIES LABELS "fuzz;openib" TIMEOUT 600)
  endif()
endif()
