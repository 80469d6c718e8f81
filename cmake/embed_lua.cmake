# Embeds lua/redisched.lua into the library, so the client can load the
# Functions library it was built with (FUNCTION LOAD REPLACE), and writes
# limits, a header of the library's integer limits and defaults.
function(redisched_embed_lua source output limits)
  add_custom_command(
    OUTPUT "${output}" "${limits}"
    COMMAND "${CMAKE_COMMAND}" -DSOURCE="${source}" -DOUTPUT="${output}" -DLIMITS="${limits}"
            -P "${PROJECT_SOURCE_DIR}/cmake/embed_lua_run.cmake"
    DEPENDS "${source}" "${PROJECT_SOURCE_DIR}/cmake/embed_lua_run.cmake"
    COMMENT "Embedding ${source}")
endfunction()
