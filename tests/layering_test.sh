#!/usr/bin/env bash
# What the per-layer targets of src/CMakeLists.txt cannot check (they make
# an include from a layer above fail to compile): public headers include
# only public headers and name only std types and the product's own (Asio's
# in the opt-in redisched/asio.h alone, the internal redis:: layer in none),
# and core/codec.h (Redis's replies) stays inside the Client. Prints every
# line that breaks a rule and fails if there is one.
set -euo pipefail
src="$1/src"
include="$1/include"
bad=0
while IFS=: read -r file line text; do
  case "$text" in
    *'#include "redisched/'*) ;;
    *) echo "public header includes a private one: ${file#"$1/"}:$line $text"; bad=1 ;;
  esac
done < <(grep -rHn '^#include "' "$include"/redisched --include='*.h' || true)
while IFS=: read -r file line text; do
  echo "public header names an internal or Asio type: ${file#"$1/"}:$line $text"
  bad=1
done < <(grep -rHnE '\b(boost|asio|redis)::' "$include"/redisched --include='*.h' |
  grep -v "^$include/redisched/asio.h:" || true)
while IFS=: read -r file line text; do
  echo "core/codec.h outside the Client: ${file#"$1/"}:$line"
  bad=1
done < <(grep -Hn '^#include "core/codec.h"' "$src"/*/*.{h,cpp} 2>/dev/null | grep -v "^$src/core/" || true)
[ $bad -eq 0 ] && echo "layers: public headers stand alone and name no internal type, the reply codec stays in core"
exit $bad
