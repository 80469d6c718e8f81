# Embeds lua/redisched.lua into the library, so the client can load the
# Functions library it was built with (FUNCTION LOAD REPLACE).
function(redisched_embed_lua source output)
  add_custom_command(
    OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" -DSOURCE="${source}" -DOUTPUT="${output}"
            -P "${PROJECT_SOURCE_DIR}/cmake/embed_lua_run.cmake"
    DEPENDS "${source}" "${PROJECT_SOURCE_DIR}/cmake/embed_lua_run.cmake"
    COMMENT "Embedding ${source}")
endfunction()
