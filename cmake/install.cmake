# cmake --install: the headers, the static and the shared library, the
# redisched binary, the Functions library (share/redisched/redisched.lua)
# and the docs under a prefix; then find_package(redisched CONFIG) or
# pkg-config redisched finds the library (tests/install/install_test.sh).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS redisched_lib redisched_shared EXPORT redischedTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(TARGETS redisched RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/redisched"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${PROJECT_BINARY_DIR}/include/redisched/limits.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/redisched")
install(FILES "${PROJECT_SOURCE_DIR}/lua/redisched.lua"
  DESTINATION "${CMAKE_INSTALL_DATADIR}/redisched")
file(GLOB redisched_docs "${PROJECT_SOURCE_DIR}/docs/*.md")
install(FILES "${PROJECT_SOURCE_DIR}/README.md" ${redisched_docs}
  DESTINATION "${CMAKE_INSTALL_DOCDIR}")

set(config_dir "${CMAKE_INSTALL_LIBDIR}/cmake/redisched")
install(EXPORT redischedTargets NAMESPACE redisched:: DESTINATION "${config_dir}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/redischedConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/redischedConfig.cmake" INSTALL_DESTINATION "${config_dir}")
# 0.x: a minor version may break the API.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/redischedConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/redischedConfig.cmake"
  "${PROJECT_BINARY_DIR}/redischedConfigVersion.cmake" DESTINATION "${config_dir}")

# pkg-config, relocatable: the prefix is found from the .pc file's place.
file(RELATIVE_PATH pc_to_prefix "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file("${PROJECT_SOURCE_DIR}/cmake/redisched.pc.in" "${PROJECT_BINARY_DIR}/redisched.pc"
  @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/redisched.pc"
  DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
