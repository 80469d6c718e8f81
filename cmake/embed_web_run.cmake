# Script mode: writes OUTPUT, a C++ file holding the dashboard's files
# (FILES: a comma-separated list of paths under DIR, served as /<path>) and
# the libraries it uses (VENDOR: a comma-separated list of paths, served as
# /vendor/<file name>) as strings, for redisched serve. Each file is a
# string made of raw literals of at most 30,000 bytes: compilers need only
# take 65,536 in one (clang's -Woverlength-strings), and dygraphs is twice
# that.
string(REPLACE "," ";" FILES "${FILES}")
string(REPLACE "," ";" VENDOR "${VENDOR}")
set(strings "")
set(entries "")
set(count 0)
function(embed path served)
  file(READ "${path}" content)
  string(FIND "${content}" ")redisched_web\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw-string delimiter")
  endif()
  string(LENGTH "${content}" size)
  set(parts "")
  set(at 0)
  while(at LESS size)
    string(SUBSTRING "${content}" ${at} 30000 part)
    if(parts STREQUAL "")
      set(parts "std::string(R\"redisched_web(${part})redisched_web\")")
    else()
      string(APPEND parts "\n      + R\"redisched_web(${part})redisched_web\"")
    endif()
    math(EXPR at "${at} + 30000")
  endwhile()
  if(parts STREQUAL "")
    set(parts "std::string()")
  endif()
  string(APPEND strings "  static const std::string file_${count} = ${parts};\n")
  string(APPEND entries "      {\"${served}\", file_${count}},\n")
  math(EXPR next "${count} + 1")
  set(strings "${strings}" PARENT_SCOPE)
  set(entries "${entries}" PARENT_SCOPE)
  set(count ${next} PARENT_SCOPE)
endfunction()
foreach(name ${FILES})
  embed("${DIR}/${name}" "/${name}")
endforeach()
foreach(path ${VENDOR})
  get_filename_component(name "${path}" NAME)
  embed("${path}" "/vendor/${name}")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from web/ and the dashboard's libraries; do not edit.
#include <string>

#include \"server/web_assets.h\"
namespace redisched::server {
const std::vector<WebAsset>& web_assets() {
${strings}  static const std::vector<WebAsset> assets = {
${entries}  };
  return assets;
}
}  // namespace redisched::server
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
