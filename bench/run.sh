#!/usr/bin/env bash
# Runs every benchmark of bench/README.md and prints the table: builds evald (RelWithDebInfo),
# starts a private PostgreSQL under var/pg-bench (fsync on unless EVALD_PG_FSYNC=off),
# installs Node 22 and promptfoo outside the repository (bench/install-promptfoo.sh), then
# runs bench/bench.py. Arguments go to bench.py (e.g. --runs 5, --workloads w1,w4);
# --no-promptfoo measures evald alone. Writes every measurement to var/bench-results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
promptfoo=1
args=()
for a in "$@"; do
  if [ "$a" = --no-promptfoo ]; then promptfoo=0; else args+=("$a"); fi
done

command -v wrk >/dev/null 2>&1 || scripts/deps.sh || true
command -v wrk >/dev/null 2>&1 || { [ "$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null; } ||
  echo "run: wrk is not installed (apt-get install wrk); the API latency workload will fail" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null

url=$(EVALD_PG_FSYNC=${EVALD_PG_FSYNC:-on} scripts/pg.sh start var/pg-bench "${EVALD_BENCH_PG_PORT:-54341}")
pf=()
if [ "$promptfoo" = 1 ]; then
  if ! command -v unshare >/dev/null 2>&1 || ! unshare --net true 2>/dev/null; then
    echo "run: cannot create a private network namespace (needs root or user namespaces);" \
      "promptfoo is not measured" >&2
  elif cache=$(bench/install-promptfoo.sh); then
    pf=(--promptfoo-cache "$cache")
  else
    echo "run: promptfoo could not be installed (see above); measuring evald alone" >&2
  fi
fi
mkdir -p var
exec python3 bench/bench.py --evald "$build/evald" --stub "$build/evald-stub" --db-server "$url" \
  --pg-data var/pg-bench/data --json var/bench-results.json "${pf[@]}" "${args[@]}"
