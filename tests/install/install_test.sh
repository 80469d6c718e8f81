#!/usr/bin/env bash
# The library from outside the tree, as a user gets it: the build installed
# under a temporary prefix (cmake --install), then the producer/worker
# example built four ways and run against a redis-server: a CMake project
# with find_package(redisched), static and shared, and the compiler with
# pkg-config, shared and static.
#   install_test.sh <source dir> <build dir>
set -euo pipefail
src="$1"; build="$2"
tmp="$(mktemp -d)"
redis_pid=
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
for f in bin/redisched include/redisched/client.h share/redisched/redisched.lua; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
pc_dir="$(dirname "$(find "$prefix" -name redisched.pc)")"
lib_dir="$(dirname "$(find "$prefix" -name libredisched.a)")"

redis-server --port 0 --unixsocket "$tmp/redis.sock" --save "" --dir "$tmp" > /dev/null &
redis_pid=$!
for _ in $(seq 100); do [ -S "$tmp/redis.sock" ] && break; sleep 0.05; done
url="unix://$tmp/redis.sock"

# runs an app: it must put, reserve and ack its job. Each run on a database
# of its own: the same job put again within the topic's retry window (60 s,
# library version 20) is not made again, by design.
runs=0
check() {
  local what="$1" app="$2" out
  runs=$((runs + 1))
  out="$("$app" "$url?db=$runs")" || { echo "$what: the app failed: $out"; exit 1; }
  grep -q "sending welcome_42" <<<"$out" || { echo "$what: unexpected output: $out"; exit 1; }
  echo "$what: ok"
}

for kind in static shared; do
  cmake -S "$src/tests/install/consumer" -B "$tmp/cmake-$kind" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DREDISCHED_KIND="$kind" > "$tmp/configure-$kind.log" ||
    { cat "$tmp/configure-$kind.log"; exit 1; }
  cmake --build "$tmp/cmake-$kind" > "$tmp/build-$kind.log" || { cat "$tmp/build-$kind.log"; exit 1; }
  check "find_package, $kind" "$tmp/cmake-$kind/consumer"
done
# (Each output is read whole first: with pipefail, `ldd | grep -q` fails
# when grep stops at its match before ldd has written everything.)
if grep -q libredisched <<<"$(ldd "$tmp/cmake-static/consumer")"; then
  echo "the static consumer loads libredisched.so"; exit 1
fi
grep -q libredisched.so <<<"$(ldd "$tmp/cmake-shared/consumer")" ||
  { echo "the shared consumer does not load libredisched.so"; exit 1; }

export PKG_CONFIG_PATH="$pc_dir"
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
c++ -std=c++20 $(pkg-config --cflags redisched) "$src/examples/producer_worker.cpp" \
  $(pkg-config --libs redisched) -Wl,-rpath,"$lib_dir" -o "$tmp/pc-shared"
check "pkg-config, shared" "$tmp/pc-shared"
# The static archive by name: with both installed, -lredisched means the .so.
# shellcheck disable=SC2046
c++ -std=c++20 $(pkg-config --cflags redisched) "$src/examples/producer_worker.cpp" \
  $(pkg-config --static --libs redisched | sed 's/-lredisched /-l:libredisched.a /') \
  -o "$tmp/pc-static"
check "pkg-config --static" "$tmp/pc-static"
