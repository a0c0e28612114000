# transit_add_gtest(<name> SOURCES ... [LIBRARIES ...] [LABELS ...])
# One GoogleTest program; each case becomes its own ctest entry.
function(transit_add_gtest name)
  # SERIAL: never beside another test (one that sets the machine's next pid).
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE transit GTest::gtest GTest::gtest_main ${ARG_LIBRARIES})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 300 RUN_SERIAL ${ARG_SERIAL})
endfunction()
