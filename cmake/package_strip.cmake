# CPack runs this after staging the package: CPACK_STRIP_FILES strips the
# binary and the shared library, not the static one; its debug info goes
# here (80 MB of a 2 MB library).
file(GLOB_RECURSE archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(a IN LISTS archives)
  execute_process(COMMAND strip --strip-debug "${a}" COMMAND_ERROR_IS_FATAL ANY)
endforeach()
