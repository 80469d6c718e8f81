# Script mode: writes OUTPUT, a C++ file holding the dashboard's files
# (FILES: a comma-separated list of paths under DIR) as strings, for
# redisched serve.
string(REPLACE "," ";" FILES "${FILES}")
set(entries "")
foreach(name ${FILES})
  file(READ "${DIR}/${name}" content)
  string(FIND "${content}" ")redisched_web\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${name} contains the raw-string delimiter")
  endif()
  string(APPEND entries "    {\"/${name}\", R\"redisched_web(${content})redisched_web\"},\n")
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
