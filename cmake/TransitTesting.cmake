# Error lines.  Transit's logger writes "[transit HOST:PID rRANK] error: TEXT"
# (params/log.cpp), and such a line means something failed: an entry whose
# output has one fails, whatever its exit status and its pass expression
# (FAIL_REGULAR_EXPRESSION, which ctest checks beside the exit status).  An
# entry that provokes failures on purpose (fault injection, forged frames)
# carries the label logs_errors instead.  The check ctest_entries.exit_status_checked
# fails the suite on an entry with neither, so no entry escapes this unseen.
set(TRANSIT_ERROR_LINE_REGEX "\\[transit [^ ]+( r[^ ]+)?\\] error: ")
set(TRANSIT_LOGS_ERRORS_LABEL logs_errors)

# transit_fail_on_error_lines(): gives every ctest entry of the calling
# directory, at the end of that directory (when its labels are final), the
# error-line expression above, except those labelled logs_errors.  The
# helpers below call it; a directory that calls add_test itself calls it too.
function(transit_fail_on_error_lines)
  get_property(done DIRECTORY PROPERTY TRANSIT_FAILS_ON_ERROR_LINES)
  if(NOT done)
    set_property(DIRECTORY PROPERTY TRANSIT_FAILS_ON_ERROR_LINES TRUE)
    cmake_language(DEFER CALL transit_apply_error_line_check)
  endif()
endfunction()

function(transit_apply_error_line_check)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} LABELS labels)
    if(TRANSIT_LOGS_ERRORS_LABEL IN_LIST labels)
      continue()
    endif()
    get_test_property(${test} FAIL_REGULAR_EXPRESSION fail)
    if(NOT fail)
      set(fail "")
    endif()
    list(APPEND fail "${TRANSIT_ERROR_LINE_REGEX}")
    set_tests_properties(${test} PROPERTIES FAIL_REGULAR_EXPRESSION "${fail}")
  endforeach()
endfunction()

# transit_add_gtest(<name> SOURCES ... [LIBRARIES ...] [LABELS ...]
#                   [LOGS_ERRORS <case regex>...] [SERIAL_CASES <case regex>...])
# One GoogleTest program; each case becomes its own ctest entry.  Each case
# fails on an error line of Transit's log, except the cases whose ctest name
# matches a LOGS_ERRORS expression (they get the label logs_errors).  Cases
# matching a SERIAL_CASES expression never run beside another entry (what
# they check is the whole user's, e.g. what the next launcher of the user
# removes, which any launcher started beside them would remove first).
function(transit_add_gtest name)
  # SERIAL: never beside another test (one that sets the machine's next pid).
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;LIBRARIES;LABELS;LOGS_ERRORS;SERIAL_CASES"
                        ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE transit GTest::gtest GTest::gtest_main ${ARG_LIBRARIES})
  if(TARGET transit_gtest_pch)
    target_precompile_headers(${name} REUSE_FROM transit_gtest_pch)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_LIST ${name}_TESTS
    PROPERTIES TIMEOUT 300 RUN_SERIAL ${ARG_SERIAL})
  # Labels and the error-line expression are set by a script ctest reads
  # after the discovered tests: through gtest_discover_tests' PROPERTIES a
  # list of labels loses its separators on the way to the generated script,
  # so only the first label applied and the others shifted the name/value
  # pairs after it (TIMEOUT was lost that way).  Bracket arguments keep the
  # expressions' backslashes.
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  set(allowed "")
  set(allowed_labels ${ARG_LABELS} ${TRANSIT_LOGS_ERRORS_LABEL})
  foreach(pattern IN LISTS ARG_LOGS_ERRORS)
    string(APPEND allowed " OR case MATCHES [==[${pattern}]==]")
  endforeach()
  file(WRITE ${script} "foreach(case IN LISTS ${name}_TESTS)\n"
    "  if(FALSE${allowed})\n"
    "    set_tests_properties(\${case} PROPERTIES LABELS [==[${allowed_labels}]==])\n"
    "  else()\n"
    "    set_tests_properties(\${case} PROPERTIES LABELS [==[${ARG_LABELS}]==]\n"
    "      FAIL_REGULAR_EXPRESSION [==[${TRANSIT_ERROR_LINE_REGEX}]==])\n"
    "  endif()\n")
  foreach(pattern IN LISTS ARG_SERIAL_CASES)
    file(APPEND ${script} "  if(case MATCHES [==[${pattern}]==])\n"
      "    set_tests_properties(\${case} PROPERTIES RUN_SERIAL TRUE)\n"
      "  endif()\n")
  endforeach()
  file(APPEND ${script} "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

# transit_add_status_test(<name> STATUS <code> [PASS <regex>] [FAIL <regex>...]
#                         [SKIP_RETURN_CODE <skip>] COMMAND <command> [<arg>...])
# A ctest entry that passes only when <command> exits with <code> and, with
# PASS, its output matches <regex> (and no FAIL regex); skipped when it exits
# with <skip> (77: nothing to test on this machine).  ctest ignores the exit
# status of an entry with a PASS_REGULAR_EXPRESSION: the command runs under
# tests/exit_status_is.sh, which prints TRANSIT_STATUS_FAILED_MARKER on any
# other status, and the marker is always among the FAIL regexes.  Set the
# other properties (LABELS, TIMEOUT, ENVIRONMENT ...) with
# set_tests_properties, never PASS_ or FAIL_REGULAR_EXPRESSION: the check
# ctest_entries.check_exit_status fails the suite on an entry that bypasses this.
set(TRANSIT_EXIT_STATUS_IS ${PROJECT_SOURCE_DIR}/tests/exit_status_is.sh)
set(TRANSIT_STATUS_FAILED_MARKER "exit_status_is: FAILED")
function(transit_add_status_test name)
  # PARSE_ARGV: regular expressions keep their brackets and backslashes.
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "STATUS;PASS;SKIP_RETURN_CODE" "FAIL;COMMAND")
  if(NOT DEFINED ARG_STATUS OR NOT ARG_COMMAND)
    message(FATAL_ERROR "transit_add_status_test(${name}): STATUS and COMMAND are required")
  endif()
  set(command ${TRANSIT_EXIT_STATUS_IS})
  if(DEFINED ARG_SKIP_RETURN_CODE)
    list(APPEND command --skip ${ARG_SKIP_RETURN_CODE})
  endif()
  list(APPEND command ${ARG_STATUS})
  # Each word quoted, so that an empty one ("" for a default) stays a word.
  set(words "")
  foreach(word IN LISTS command ARG_COMMAND)
    string(APPEND words " [==[${word}]==]")
  endforeach()
  cmake_language(EVAL CODE "add_test(NAME [==[${name}]==] COMMAND ${words})")
  transit_fail_on_error_lines()
  set(fail ${TRANSIT_STATUS_FAILED_MARKER} ${ARG_FAIL})
  set_tests_properties(${name} PROPERTIES FAIL_REGULAR_EXPRESSION "${fail}")
  if(DEFINED ARG_PASS)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${ARG_PASS}")
  endif()
  if(DEFINED ARG_SKIP_RETURN_CODE)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
  endif()
endfunction()
