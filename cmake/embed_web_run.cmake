# Script mode: writes OUTPUT, a C++ file holding the dashboard's files
# (FILES: a comma-separated list of paths under DIR, served as /<path>) and
# the libraries it uses (VENDOR: a comma-separated list of paths, served as
# /vendor/<file name>) as strings, for redisched serve.
string(REPLACE "," ";" FILES "${FILES}")
string(REPLACE "," ";" VENDOR "${VENDOR}")
set(entries "")
function(embed path served)
  file(READ "${path}" content)
  string(FIND "${content}" ")redisched_web\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw-string delimiter")
  endif()
  string(APPEND entries "    {\"${served}\", R\"redisched_web(${content})redisched_web\"},\n")
  set(entries "${entries}" PARENT_SCOPE)
endfunction()
foreach(name ${FILES})
  embed("${DIR}/${name}" "/${name}")
endforeach()
foreach(path ${VENDOR})
  get_filename_component(name "${path}" NAME)
  embed("${path}" "/vendor/${name}")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from web/; do not edit.
#include \"server/web_assets.h\"
namespace redisched::server {
const std::vector<WebAsset>& web_assets() {
  static const std::vector<WebAsset> assets = {
${entries}  };
  return assets;
}
}  // namespace redisched::server
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
