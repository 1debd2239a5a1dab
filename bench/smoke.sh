#!/bin/sh
# CTest entry (tests/cmake/bench.cmake): every workload of bench/bench.py, and bench/otel.py,
# at a tiny size, evald only (no promptfoo), on the test PostgreSQL server, so the scripts
# cannot rot (with --statements: the figures where the server has pg_stat_statements, a
# note where it has not). Fails when a run fails its checks (every run completed and
# passed, every span received) or the table is incomplete; skips (77) without python3 or a
# test database.
# Without wrk the API workload is left out.
dir=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null 2>&1 || { echo "SKIPPED: python3 is not installed"; exit 77; }
[ -n "${EVALD_TEST_DATABASE_URL:-}" ] || { echo "SKIPPED: EVALD_TEST_DATABASE_URL is not set (make test sets it)"; exit 77; }
workloads=w1,w2,w3,w4
if ! command -v wrk >/dev/null 2>&1; then
  echo "bench smoke: wrk is not installed (apt-get install wrk); W4 left out"
  workloads=w1,w2,w3
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
python3 "$dir/bench.py" --evald "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --workloads "$workloads" --runs 1 --startups 2 \
  --n1 40 --n2 8 --c-list 2,4 --workers 8 --api-evaluations 100 --wrk-seconds 1 \
  --wrk-rate 100 --api-runs 1 --statements >"$out" || { cat "$out"; exit 1; }
cat "$out"
for row in "W1 calls/s, N=40 C=2" "W1 calls/s, N=40, one evaluation" \
  "W2 makespan / ideal, C=4, 4 evaluations, every pair open" \
  "W2 makespan / ideal, C=4, 4 sequential evaluations" \
  "W3 start-up" "W5 storage bytes per run"; do
  grep -q "$row" "$out" || { echo "bench smoke: row '$row' is missing"; exit 1; }
done
if [ "$workloads" = w1,w2,w3,w4 ]; then
  grep -q "W4 POST /v1/functions/eval::status" "$out" || { echo "bench smoke: W4 rows missing"; exit 1; }
fi
# The trace export benchmark (bench/otel.py) at a tiny size: one round off and on, every
# span received. It exits non-zero when a run fails or a span is lost, not on the ratio.
python3 "$dir/otel.py" --evald "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --rounds 1 --n 40 --c 2 --schedule-delay 200 >"$out" ||
  { cat "$out"; echo "bench smoke: bench/otel.py failed"; exit 1; }
cat "$out"
grep -q "summary over 1 valid rounds of 1" "$out" || { echo "bench smoke: otel.py's summary is missing"; exit 1; }
# The HTTP load and the large-start memory benchmarks at a tiny size, the build against
# itself: they exit non-zero when a run fails; the figures are not judged here.
python3 "$dir/http_load.py" --evald "$EVALD_BIN" --evald-b "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --rounds 1 --clients 4 --seconds 1 --warmup 0 >"$out" ||
  { cat "$out"; echo "bench smoke: bench/http_load.py failed"; exit 1; }
cat "$out"
grep -q "^| B | " "$out" || { echo "bench smoke: http_load.py's table is missing"; exit 1; }
python3 "$dir/start_memory.py" --evald "$EVALD_BIN" --evald-b "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --rounds 1 --cases 50 --case-bytes 200 >"$out" ||
  { cat "$out"; echo "bench smoke: bench/start_memory.py failed"; exit 1; }
cat "$out"
grep -q "^| B | " "$out" || { echo "bench smoke: start_memory.py's table is missing"; exit 1; }
# The sequential experiment benchmark at a tiny size: both rules complete.
python3 "$dir/sequential.py" --evald "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --cases 60 --repeats 1 --no-targets >"$out" ||
  { cat "$out"; echo "bench smoke: bench/sequential.py failed"; exit 1; }
cat "$out"
grep -q "^S1 anytime: .* of the fixed rule's calls" "$out" ||
  { echo "bench smoke: sequential.py's summary is missing"; exit 1; }
# The judge benchmark at a tiny size: every pair judged once, the judged experiment ends
# after its last judge call.
python3 "$dir/judges.py" --evald "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --cases 40 --concurrency 4 --no-targets >"$out" ||
  { cat "$out"; echo "bench smoke: bench/judges.py failed"; exit 1; }
cat "$out"
grep -q "^J1 bound: " "$out" || { echo "bench smoke: judges.py's summary is missing"; exit 1; }
# The simulated-user benchmark at a tiny size: every run ends at max_turns with its calls
# counted alike in spend.calls, at the stub and in the runs' benchmarks.
python3 "$dir/agents.py" --evald "$EVALD_BIN" --stub "$EVALD_STUB_BIN" \
  --db-server "$EVALD_TEST_DATABASE_URL" --cases 20 --concurrency 4 --no-targets >"$out" ||
  { cat "$out"; echo "bench smoke: bench/agents.py failed"; exit 1; }
cat "$out"
grep -q "^A1 bound: " "$out" || { echo "bench smoke: agents.py's summary is missing"; exit 1; }
echo "bench smoke: passed"
