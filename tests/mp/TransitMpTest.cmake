# The multi-process test harness, for any test folder:
#   include(${PROJECT_SOURCE_DIR}/tests/mp/TransitMpTest.cmake)
#   transit_add_mp_test(<name> SOURCES a.cpp ... [NP 2 3 4] [LIBRARIES ...]
#                       [ENV VAR=value ...] [ARGS ...] [LAUNCHER_ARGS ...]
#                       [LABELS ...] [TIMEOUT seconds])
# builds <name> with the harness's main() and registers one ctest entry per
# process count, "<name>.np<N>", running
#   transit_run -n <N> --timeout <TIMEOUT> --tag-output <LAUNCHER_ARGS> <name> <ARGS>
#   transit_add_mpirun_test(<name> [NP 2 ...] [ENV ...] [ARGS ...])
# registers "<name>.mpirun.np<N>" running the same program under Open MPI's
# mpirun, when mpirun was found (TRANSIT_MPIRUN).
#   transit_add_mp_run(<name> PROGRAM <command...> [BTL <list> | EACH_BTL <list>...]
#                      [NP 2 ...] [ENV ...] [LAUNCHER_ARGS ...] [LABELS ...]
#                      [TIMEOUT seconds] [PASS regex...] [FAIL regex...]
#                      [STATUS code] [SKIP_RETURN_CODE code])
# registers "<name>.np<N>" running a program already built (any command) the
# same way, with TRANSIT_MCA_btl=<list> before ENV ("default" or no BTL: the
# default selection).  EACH_BTL registers that set once per list, named
# "<name>_<list with commas as underscores>.np<N>".  With PASS the launcher
# must also exit with STATUS (default 0): see transit_add_status_test.
include_guard(GLOBAL)
include(TransitTesting)

set(TRANSIT_MP_DIR ${CMAKE_CURRENT_LIST_DIR})
find_program(TRANSIT_MPIRUN NAMES mpirun DOC "Open MPI's mpirun, to run multi-process tests under it")

if(NOT TARGET transit_mp_gtest_main)
  add_library(transit_mp_gtest_main STATIC ${TRANSIT_MP_DIR}/mp_main.cpp ${TRANSIT_MP_DIR}/mp.cpp)
  target_include_directories(transit_mp_gtest_main PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(transit_mp_gtest_main PUBLIC transit GTest::gtest)
endif()

function(transit_add_mp_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;NP;LIBRARIES;ENV;ARGS;LAUNCHER_ARGS;LABELS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "transit_add_mp_test(${name}): SOURCES is required")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE transit_mp_gtest_main ${ARG_LIBRARIES})
  # Building a test builds the launcher it needs.
  add_dependencies(${name} transit_run)
  transit_add_mp_run(${name} PROGRAM $<TARGET_FILE:${name}> ${ARG_ARGS} NP ${ARG_NP}
    ENV ${ARG_ENV} LAUNCHER_ARGS ${ARG_LAUNCHER_ARGS} LABELS ${ARG_LABELS} TIMEOUT ${ARG_TIMEOUT})
endfunction()

function(transit_add_mp_run name)
  cmake_parse_arguments(ARG "" "BTL;TIMEOUT;STATUS;SKIP_RETURN_CODE"
    "PROGRAM;EACH_BTL;NP;ENV;LAUNCHER_ARGS;LABELS;PASS;FAIL" ${ARGN})
  if(NOT ARG_PROGRAM)
    message(FATAL_ERROR "transit_add_mp_run(${name}): PROGRAM is required")
  endif()
  if(ARG_EACH_BTL)
    set(pass_on "")
    foreach(key NP ENV LAUNCHER_ARGS LABELS PASS FAIL TIMEOUT STATUS SKIP_RETURN_CODE)
      if(DEFINED ARG_${key})
        list(APPEND pass_on ${key} ${ARG_${key}})
      endif()
    endforeach()
    foreach(btl IN LISTS ARG_EACH_BTL)
      string(REPLACE "," "_" suffix ${btl})
      transit_add_mp_run(${name}_${suffix} PROGRAM ${ARG_PROGRAM} BTL ${btl} ${pass_on})
    endforeach()
    return()
  endif()
  if(NOT ARG_NP)
    set(ARG_NP 2 3 4)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT DEFINED ARG_STATUS)
    set(ARG_STATUS 0)
  endif()
  set(env ${ARG_ENV})
  if(ARG_BTL AND NOT ARG_BTL STREQUAL "default")
    list(PREPEND env "TRANSIT_MCA_btl=${ARG_BTL}")
  endif()
  math(EXPR ctest_timeout "${ARG_TIMEOUT} + 30")
  # A process count strictly between the smallest and the largest of the list
  # (np3 of 2 3 4) runs the code the others run: the sanitizer stage of CI
  # leaves it out (label np_between).
  set(sizes ${ARG_NP})
  list(SORT sizes COMPARE NATURAL)
  list(GET sizes 0 smallest)
  list(GET sizes -1 largest)
  foreach(np IN LISTS ARG_NP)
    set(test ${name}.np${np})
    set(size_label "")
    if(np GREATER smallest AND np LESS largest)
      set(size_label ";np_between")
    endif()
    set(job $<TARGET_FILE:transit_run> -n ${np} --timeout ${ARG_TIMEOUT} --tag-output
            ${ARG_LAUNCHER_ARGS} ${ARG_PROGRAM})
    if(ARG_PASS)
      set(skip "")
      if(ARG_SKIP_RETURN_CODE)
        set(skip SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
      endif()
      transit_add_status_test(${test} STATUS ${ARG_STATUS} PASS "${ARG_PASS}" FAIL ${ARG_FAIL}
        ${skip} COMMAND ${job})
    else()
      add_test(NAME ${test} COMMAND ${job})
      transit_fail_on_error_lines()
      if(ARG_FAIL)
        set_tests_properties(${test} PROPERTIES FAIL_REGULAR_EXPRESSION "${ARG_FAIL}")
      endif()
      if(ARG_SKIP_RETURN_CODE)
        set_tests_properties(${test} PROPERTIES SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
      endif()
    endif()
    set_tests_properties(${test} PROPERTIES
      LABELS "mp;${ARG_LABELS}${size_label}" TIMEOUT ${ctest_timeout} ENVIRONMENT "${env}")
  endforeach()
endfunction()

function(transit_add_mpirun_test name)
  cmake_parse_arguments(ARG "" "" "NP;ENV;ARGS;LABELS" ${ARGN})
  if(NOT TRANSIT_MPIRUN)
    return()
  endif()
  if(NOT ARG_NP)
    set(ARG_NP 2)
  endif()
  foreach(np IN LISTS ARG_NP)
    add_test(NAME ${name}.mpirun.np${np}
      COMMAND ${TRANSIT_MPIRUN} -n ${np} --oversubscribe --bind-to none
              $<TARGET_FILE:${name}> ${ARG_ARGS})
    transit_fail_on_error_lines()
    # CI runs as root; Open MPI refuses root unless told twice.
    set_tests_properties(${name}.mpirun.np${np} PROPERTIES
      LABELS "mp;mpirun;${ARG_LABELS}" TIMEOUT 150
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${ARG_ENV}")
  endforeach()
endfunction()
