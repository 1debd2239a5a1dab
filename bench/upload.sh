#!/usr/bin/env bash
# Dataset uploads: the time of POST /v1/datasets for a CSV of N cases and evald's peak
# resident memory while it takes them (the experiments issue's targets: 10,000 cases in at
# most 2 s, RSS under 64 MiB). Starts its own evald (EVALD_BIN, default build/evald) on a
# free loopback port against EVALD_TEST_DATABASE_URL, else the private test PostgreSQL
# (scripts/pg.sh, var/pg-bench), uploads RUNS different files (so none is a repeat, which
# would answer 200 at once) and prints each time, their min/median/max and VmHWM.
#   usage: bench/upload.sh [CASES] [RUNS] [CELL_BYTES]   defaults 10000 5 60
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-10000}
runs=${2:-5}
cell=${3:-60}
bin=${EVALD_BIN:-build/evald}
[ -x "$bin" ] || { echo "upload.sh: $bin is not built (make build)" >&2; exit 1; }
started_pg=""
url=${EVALD_TEST_DATABASE_URL:-}
if [ -z "$url" ]; then
  url=$(scripts/pg.sh start var/pg-bench "${EVALD_BENCH_PG_PORT:-54339}")
  started_pg=var/pg-bench
fi
tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  [ -n "$started_pg" ] && scripts/pg.sh stop "$started_pg"
  rm -rf "$tmp"
}
trap cleanup EXIT
db="evald_upload_$$"
psql -q "$url" -c "CREATE DATABASE $db" >/dev/null
dburl="${url%/*}/$db"
EVALD_DATABASE_URL=$dburl EVALD_LISTEN=127.0.0.1:0 "$bin" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q '"listen"' "$tmp/out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$tmp/out" | head -n 1)
[ -n "$addr" ] || { cat "$tmp/err" >&2; exit 1; }
times=()
for r in $(seq "$runs"); do
  python3 - "$cases" "$cell" "$r" >"$tmp/cases.csv" <<'EOF'
import sys
n, cell, run = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
print("id,question,topic,expected")
for k in range(1, n + 1):
    q = f"Run {run}: what is {k} plus {k}? " + "x" * max(0, cell - 30)
    print(f'q{k},"{q}",t{k % 7},{2 * k}')
EOF
  t=$(curl -s -o "$tmp/answer" -w '%{http_code} %{time_total}' -X POST \
    "http://$addr/v1/datasets?name=upload-$r" -H 'Content-Type: text/csv' --data-binary @"$tmp/cases.csv")
  [ "${t%% *}" = 201 ] || { echo "upload.sh: run $r answered $t: $(cat "$tmp/answer")" >&2; exit 1; }
  times+=("${t#* }")
done
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
bytes=$(stat -c %s "$tmp/cases.csv")
printf '%s\n' "${times[@]}" | sort -n | awk -v n="$cases" -v b="$bytes" -v h="$hwm" '
  { t[NR] = $1 } END {
    printf "%d cases (%.1f MB) x %d uploads: min %.3f s, median %.3f s, max %.3f s; evald VmHWM %.1f MB\n",
      n, b / 1e6, NR, t[1], t[int((NR + 1) / 2)], t[NR], h / 1024 }'
psql -q "$url" -c "DROP DATABASE $db WITH (FORCE)" >/dev/null 2>&1 || true
