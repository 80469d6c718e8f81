#!/usr/bin/env bash
# The Debian package as CPack builds it (cmake/package.cmake): its files,
# its control data, a unit file that systemd accepts, and the packaged
# binary serving with the packaged config.
#   package_test.sh <build dir>
set -euo pipefail
build="$1"
tmp="$(mktemp -d)"
serve_pid=
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/out" > "$tmp/cpack.log") || { cat "$tmp/cpack.log"; exit 1; }
deb="$(ls "$tmp"/out/redisched_*_amd64.deb)"
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

dpkg-deb -c "$deb" | awk '{print $6}' > "$tmp/files"
for f in ./usr/bin/redisched ./usr/lib/systemd/system/redisched.service \
         ./etc/redisched/redisched.toml ./usr/share/man/man1/redisched.1.gz \
         ./usr/share/redisched/redisched.lua ./usr/include/redisched/client.h \
         ./usr/lib/libredisched.so.0 ./usr/lib/libredisched.a \
         ./usr/lib/cmake/redisched/redischedConfig.cmake ./usr/lib/pkgconfig/redisched.pc; do
  grep -qxF "$f" "$tmp/files" || fail "the package lacks $f"
done
grep -q "^\./usr/local" "$tmp/files" && fail "files under /usr/local"

depends="$(dpkg-deb -f "$deb" Depends)"
for d in redis-server adduser libhiredis libssl3; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d: $depends"
done
dpkg-deb -e "$deb" "$tmp/control"
grep -qxF /etc/redisched/redisched.toml "$tmp/control/conffiles" || fail "the config is not a conffile"
grep -q "adduser --system" "$tmp/control/postinst" || fail "postinst makes no user"

dpkg-deb -x "$deb" "$tmp/root"
unit="$tmp/root/usr/lib/systemd/system/redisched.service"
grep -q "^ExecStart=/usr/bin/redisched " "$unit" || fail "ExecStart is not the packaged binary"
grep -q "^User=redisched" "$unit" || fail "the service does not run as its own user"
if command -v systemd-analyze >/dev/null; then
  # Checked with ExecStart pointing at the extracted binary.
  sed "s#/usr/bin/redisched#$tmp/root/usr/bin/redisched#" "$unit" > "$tmp/redisched.service"
  systemd-analyze verify --man=no "$tmp/redisched.service" || fail "systemd-analyze verify"
  echo "systemd-analyze verify: ok"
else
  echo "systemd-analyze is not installed here: the unit file was not verified"
fi
# (Outputs read whole: with pipefail, `cmd | grep -q` fails when grep stops
# at its match before cmd has written everything.)
grep -q '^\.TH REDISCHED' <<<"$(zcat "$tmp/root/usr/share/man/man1/redisched.1.gz")" ||
  fail "man page"

bin="$tmp/root/usr/bin/redisched"
grep -q "^redisched " <<<"$("$bin" --version)" || fail "--version"
# The packaged config, as the unit gives it (the address overridden: a test
# must not take localhost:7171).
"$bin" --config "$tmp/root/etc/redisched/redisched.toml" --data-dir "$tmp/data" serve \
  --listen 127.0.0.1:0 > "$tmp/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 200); do grep -q "listening on" "$tmp/serve.log" && break; sleep 0.05; done
grep -q "listening on" "$tmp/serve.log" || { cat "$tmp/serve.log"; fail "serve did not start"; }
kill "$serve_pid"; wait "$serve_pid" || fail "serve did not stop cleanly"
serve_pid=
echo "package: ok"
