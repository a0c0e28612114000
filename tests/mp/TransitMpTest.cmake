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
include_guard(GLOBAL)

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
  if(NOT ARG_NP)
    set(ARG_NP 2 3 4)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE transit_mp_gtest_main ${ARG_LIBRARIES})
  # Building a test builds the launcher it needs.
  add_dependencies(${name} transit_run)
  math(EXPR ctest_timeout "${ARG_TIMEOUT} + 30")
  foreach(np IN LISTS ARG_NP)
    add_test(NAME ${name}.np${np}
      COMMAND $<TARGET_FILE:transit_run> -n ${np} --timeout ${ARG_TIMEOUT} --tag-output
              ${ARG_LAUNCHER_ARGS} $<TARGET_FILE:${name}> ${ARG_ARGS})
    set_tests_properties(${name}.np${np} PROPERTIES
      LABELS "mp;${ARG_LABELS}" TIMEOUT ${ctest_timeout} ENVIRONMENT "${ARG_ENV}")
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
    # CI runs as root; Open MPI refuses root unless told twice.
    set_tests_properties(${name}.mpirun.np${np} PROPERTIES
      LABELS "mp;mpirun;${ARG_LABELS}" TIMEOUT 150
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${ARG_ENV}")
  endforeach()
endfunction()
