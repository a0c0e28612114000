# Every dependency comes from a Debian package (see README).
find_package(PkgConfig REQUIRED)
pkg_check_modules(PMIX REQUIRED IMPORTED_TARGET pmix)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(Threads REQUIRED)

find_path(LTDL_INCLUDE_DIR ltdl.h REQUIRED)
find_library(LTDL_LIBRARY ltdl REQUIRED)
add_library(Transit_ltdl INTERFACE)
target_include_directories(Transit_ltdl INTERFACE ${LTDL_INCLUDE_DIR})
target_link_libraries(Transit_ltdl INTERFACE ${LTDL_LIBRARY})

if(TRANSIT_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
