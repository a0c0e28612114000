# Installs the CMake package and pkg-config file that out-of-tree plugins use.
# Every path in them is relative to the install prefix, so an installed Transit
# can be moved (and `cmake --install --prefix` chosen at install time).
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

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TransitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/TransitConfig.cmake INSTALL_DESTINATION lib/cmake/Transit
  PATH_VARS TRANSIT_PLUGINDIR TRANSIT_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TransitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TransitConfig.cmake
  ${PROJECT_BINARY_DIR}/TransitConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/TransitComponent.cmake
  DESTINATION lib/cmake/Transit)
foreach(pc transit transit-cxx)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION lib/pkgconfig)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/contrib/transit-mca-params.conf DESTINATION etc)
