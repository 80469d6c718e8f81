#!/usr/bin/env bash
# Quick start: installs the Debian packages, builds, and runs redisched serve
# on the embedded default (its own redis-server, data under ./redisched-data)
# at http://127.0.0.1:7171. Arguments go to serve (try --help). Ctrl-C stops
# it and its Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh release
exec build/redisched serve "$@"
