#!/usr/bin/env bash
# Runs every libFuzzer target of a build folder (default build-fuzz) for a bounded time.
#   tests/fuzz/run.sh [build-dir]      env: FUZZ_SECONDS (300), FUZZ_JOBS (2, targets at once),
#                                           FUZZ_TARGETS (names; default all), FUZZ_ARGS (extra)
# Each target starts from its seed corpus (tests/fuzz/corpus/<name>, read only) and keeps
# what it finds under artifacts/fuzz/corpus/<name>; a crash, leak, UB report or timeout is
# written to artifacts/fuzz/<name>/ and fails the run. Prints one line per target with its
# executions and executions per second, and the total time.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-300}
jobs=${FUZZ_JOBS:-2}
out=artifacts/fuzz
targets=${FUZZ_TARGETS:-$(for f in tests/fuzz/fuzz_*.c; do n=${f##*/fuzz_}; echo "${n%.c}"; done)}

mkdir -p "$out"
start=$(date +%s)

run_one() {
  local name=$1 bin=$build/fuzz_$1
  local dict=() log=$out/$1.log
  [ -x "$bin" ] || { echo "fuzz: $bin is missing (make fuzz builds it)" >&2; return 1; }
  [ -f "tests/fuzz/$1.dict" ] && dict=(-dict="tests/fuzz/$1.dict")
  mkdir -p "$out/$1" "$out/corpus/$1"
  # Leaks are findings; UBSan stops at the first report (the build sets no-recover).
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$out/$1/" "${dict[@]}" ${FUZZ_ARGS:-} \
      "$out/corpus/$1" "tests/fuzz/corpus/$1" >"$log" 2>&1
  local rc=$?
  local execs eps
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    printf 'fuzz: %-12s ok      %10s execs  %7s exec/s  %4ss  (log %s)\n' "$1" "${execs:-?}" "${eps:-?}" "$seconds" "$log"
  else
    printf 'fuzz: %-12s FAILED  %10s execs  %7s exec/s  (exit %d; inputs in %s/, log %s)\n' "$1" "${execs:-?}" "${eps:-?}" "$rc" "$out/$1" "$log"
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" | sed 's/^/fuzz:   /'
  fi
  return $rc
}

failed=0
pids=()
names=()
for t in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$t" &
  pids+=($!)
  names+=("$t")
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed=1
done
echo "fuzz: total $(( $(date +%s) - start ))s for $(echo $targets | wc -w) targets at ${seconds}s each, $jobs at a time"
exit $failed
