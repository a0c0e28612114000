# transit_add_gtest(<name> SOURCES ... [LIBRARIES ...] [LABELS ...])
# One GoogleTest program; each case becomes its own ctest entry.
function(transit_add_gtest name)
  # SERIAL: never beside another test (one that sets the machine's next pid).
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE transit GTest::gtest GTest::gtest_main ${ARG_LIBRARIES})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_LIST ${name}_TESTS
    PROPERTIES TIMEOUT 300 RUN_SERIAL ${ARG_SERIAL})
  # Labels are set by a script ctest reads after the discovered tests: through
  # gtest_discover_tests' PROPERTIES a list of labels loses its separators on
  # the way to the generated script, so only the first label applied and the
  # others shifted the name/value pairs after it (TIMEOUT was lost that way).
  if(ARG_LABELS)
    set(script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
    file(WRITE ${script} "if(DEFINED ${name}_TESTS)\n"
      "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
  endif()
endfunction()
