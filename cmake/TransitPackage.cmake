# Installs the CMake package and pkg-config file that out-of-tree plugins use.
include(CMakePackageConfigHelpers)
install(EXPORT TransitTargets NAMESPACE Transit:: DESTINATION lib/cmake/Transit)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TransitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/TransitConfig.cmake INSTALL_DESTINATION lib/cmake/Transit)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TransitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TransitConfig.cmake
  ${PROJECT_BINARY_DIR}/TransitConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/TransitComponent.cmake
  DESTINATION lib/cmake/Transit)
configure_file(${PROJECT_SOURCE_DIR}/cmake/transit.pc.in ${PROJECT_BINARY_DIR}/transit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/transit.pc DESTINATION lib/pkgconfig)
install(FILES ${PROJECT_SOURCE_DIR}/contrib/transit-mca-params.conf DESTINATION etc)
