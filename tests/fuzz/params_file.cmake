# libFuzzer target for the parameter-file parser and the value readers behind it.
file(GLOB params_fuzz_library ${PROJECT_SOURCE_DIR}/params/*.cpp)
transit_fuzz_target(params_file params
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_params_file.cpp ${params_fuzz_library}
  DEFINES TRANSIT_SYSCONF_RELATIVE="../etc/transit-mca-params.conf" LIBS fmt)
