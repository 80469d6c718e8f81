# The Debian package (cpack -G DEB in the build dir, scripts/package.sh):
# redisched_<version>_amd64.deb with the binary, the library, headers,
# CMake and pkg-config files, the man page, the Functions library, and the
# service: a systemd unit for `redisched serve` under its own user, data in
# /var/lib/redisched, config in /etc/redisched/redisched.toml (a conffile),
# logs in the journal. `dpkg -i` then `systemctl start redisched`.

# The man page, from --help (help2man; without it, no man page).
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(man "${PROJECT_BINARY_DIR}/redisched.1")
  add_custom_command(OUTPUT "${man}.gz"
    COMMAND "${HELP2MAN}" --no-info --no-discard-stderr
            --name "a delayed/priority job queue on Redis" --output "${man}" "$<TARGET_FILE:redisched>"
    COMMAND gzip -9nf "${man}"
    DEPENDS redisched
    COMMENT "Writing the man page from --help")
  add_custom_target(redisched_man ALL DEPENDS "${man}.gz")
  install(FILES "${man}.gz" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1")
else()
  message(STATUS "help2man not found: no man page (apt-get install help2man)")
endif()

# The service's files have absolute places: the package's only (a plain
# cmake --install under a prefix leaves them out).
install(FILES "${PROJECT_SOURCE_DIR}/packaging/redisched.service"
  DESTINATION /usr/lib/systemd/system COMPONENT service EXCLUDE_FROM_ALL)
install(FILES "${PROJECT_SOURCE_DIR}/packaging/redisched.toml"
  DESTINATION /etc/redisched COMPONENT service EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME redisched)
set(CPACK_PACKAGE_VENDOR redisched)
set(CPACK_PACKAGE_CONTACT "redisched maintainers <maintainers@redisched.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "delayed/priority job queue on Redis: server, CLI and C++ library")
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)  # the service's absolute places go into the package too
set(CPACK_STRIP_FILES ON)  # no debug info in the package, as Debian's
set(CPACK_PRE_BUILD_SCRIPTS "${PROJECT_SOURCE_DIR}/cmake/package_strip.cmake")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified service)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# tzdata: the time zones of recurring jobs (libdate-tz reads them there).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "redis-server (>= 5:7.0), adduser, tzdata")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${PROJECT_SOURCE_DIR}/packaging/postinst" "${PROJECT_SOURCE_DIR}/packaging/prerm"
  "${PROJECT_SOURCE_DIR}/packaging/postrm" "${PROJECT_SOURCE_DIR}/packaging/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
