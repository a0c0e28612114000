# libFuzzer target for the checks a candidate plugin file passes before dlopen
# (mca::check_plugin_file reading the input from a memfd).
transit_fuzz_target(plugin_file framework
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_plugin_file.cpp ${PROJECT_SOURCE_DIR}/framework/plugin_file.cpp
  LIBS fmt)
