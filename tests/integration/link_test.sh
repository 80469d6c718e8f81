#!/usr/bin/env bash
# README's "Linking from outside the tree", as a user would: the example
# compiled with the compiler alone, the headers and the static library.
set -euo pipefail
src="$1"; lib="$2"; build="$3"; out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
c++ -std=c++20 -I"$src/include" -I"$build/include" "$src/examples/producer_worker.cpp" "$lib" \
    -lboost_url -ldate-tz -lhiredis -lssl -lcrypto -lspdlog -lfmt -pthread -o "$out/app"
test -x "$out/app"
echo "linked"
