# Installs the CMake package and pkg-config file that out-of-tree plugins use.
# Every path in the CMake package is relative to the install prefix, so an
# installed Transit can be moved (and `cmake --install --prefix` chosen at
# install time); the pkg-config files name the install prefix.
include(CMakePackageConfigHelpers)
install(EXPORT TransitTargets NAMESPACE Transit:: DESTINATION lib/cmake/Transit)

# The ABI numbers come from the header plugins compile against, so the package
# can never disagree with it.
file(READ ${PROJECT_SOURCE_DIR}/include/transit/version.hpp _transit_version_hpp)
foreach(field abi_major abi_minor btl_interface_version)
  if(NOT _transit_version_hpp MATCHES "${field} = ([0-9]+);")
    message(FATAL_ERROR "include/transit/version.hpp: no '${field} = <number>;'")
  endif()
  set(_transit_${field} ${CMAKE_MATCH_1})
endforeach()
set(TRANSIT_ABI_MAJOR ${_transit_abi_major})
set(TRANSIT_ABI_MINOR ${_transit_abi_minor})
set(TRANSIT_BTL_INTERFACE ${_transit_btl_interface_version})
set(TRANSIT_INCLUDEDIR include)

# Staged in package/, not at the top of the build tree: these files describe
# the installed tree, and find_package pointed at the build tree must not
# take them for a usable package.
set(stage ${PROJECT_BINARY_DIR}/package)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TransitConfig.cmake.in
  ${stage}/TransitConfig.cmake INSTALL_DESTINATION lib/cmake/Transit
  PATH_VARS TRANSIT_PLUGINDIR TRANSIT_INCLUDEDIR)
write_basic_package_version_file(${stage}/TransitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${stage}/TransitConfig.cmake
  ${stage}/TransitConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/TransitComponent.cmake
  DESTINATION lib/cmake/Transit)
# pkg-config files: the version fields now, the prefix when installing (the
# one `cmake --install --prefix` names), so every path in them is absolute.
foreach(pc transit transit-cxx)
  set(TRANSIT_PC_PREFIX "@TRANSIT_PC_PREFIX@")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${stage}/${pc}.pc.in @ONLY)
  install(CODE "set(TRANSIT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
configure_file(\"${stage}/${pc}.pc.in\" \"${stage}/${pc}.pc\" @ONLY)
file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/pkgconfig\" TYPE FILE
  FILES \"${stage}/${pc}.pc\")")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/contrib/transit-mca-params.conf DESTINATION etc)
