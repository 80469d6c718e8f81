#!/usr/bin/env bash
# The layers of docs/architecture.md, checked on every include: each layer
# of src/ includes only itself, the public headers (redisched/) and the
# layers below it; public headers include only public headers. Prints every
# include that runs the wrong way and fails if there is one.
set -euo pipefail
src="$1/src"
include="$1/include"
# layer: the layers of src/ it may include besides itself.
declare -A allowed=(
  [redis]=""
  [runtime]=""
  [embedded]=""
  [core]="redis runtime"
  [worker]="core runtime"
  [wire]="core"
  [server]="core wire embedded runtime"
  [cli]="server core wire embedded runtime"
)
# Headers of a lower layer that stay inside the Client: the reply codec
# speaks Redis's replies, which nothing above core sees.
private_headers="core/codec.h"
bad=0
for layer in "${!allowed[@]}"; do
  [ -d "$src/$layer" ] || continue
  while IFS=: read -r file line text; do
    target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$text")
    top=${target%%/*}
    [ "$top" = "$layer" ] && continue
    [ "$top" = redisched ] && continue
    ok=false
    for a in ${allowed[$layer]}; do [ "$top" = "$a" ] && ok=true; done
    for p in $private_headers; do [ "$target" = "$p" ] && [ "$layer" != core ] && ok=false; done
    if ! $ok; then
      echo "wrong way: ${file#"$1/"}:$line includes $target ($layer may use: ${allowed[$layer]:-nothing})"
      bad=1
    fi
  done < <(grep -Hn '^#include "' "$src/$layer"/*.{h,cpp} 2>/dev/null || true)
done
while IFS=: read -r file line text; do
  case "$text" in
    *'#include "redisched/'*) ;;
    *) echo "public header includes a private one: ${file#"$1/"}:$line $text"; bad=1 ;;
  esac
done < <(grep -Hn '^#include "' "$include"/redisched/*.h || true)
[ $bad -eq 0 ] && echo "layers: every include runs downwards"
exit $bad
