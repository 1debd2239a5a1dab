#!/usr/bin/env bash
# Runs the test suites of a build folder (default: build) with CTest; any further
# arguments go to ctest (scripts/test.sh build -R readme runs one suite).
# Starts a private PostgreSQL under var/pg-test unless EVALD_DATABASE_URL or
# EVALD_TEST_DATABASE_URL names a server where test databases may be created, and stops
# it again when the run ends, passes, fails or is interrupted (a server that was already
# running there, or one named by those variables, is left as it was). Installs the Node
# packages of the Node-driven suites when npm can.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift

pg_dir=var/pg-test
started_pg=0
ctest_pid=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$ctest_pid" ] && kill -0 "$ctest_pid" 2>/dev/null; then
    # ctest leads its own process group (set -m below): stop it with every test it runs.
    kill -TERM -- "-$ctest_pid" 2>/dev/null || true
    wait "$ctest_pid" 2>/dev/null || true
  fi
  if [ "$started_pg" = 1 ]; then scripts/pg.sh stop "$pg_dir"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${EVALD_TEST_DATABASE_URL:-}" ]; then
  if [ -n "${EVALD_DATABASE_URL:-}" ]; then
    export EVALD_TEST_DATABASE_URL=$EVALD_DATABASE_URL
  else
    scripts/pg.sh running "$pg_dir" || started_pg=1
    # Throwaway data: skip fsync for speed.
    EVALD_TEST_DATABASE_URL=$(EVALD_PG_FSYNC=off scripts/pg.sh start "$pg_dir" "${EVALD_TEST_PG_PORT:-54330}")
    export EVALD_TEST_DATABASE_URL
  fi
fi

for dir in tests/js tests/browser tests/openapi tests/iii tests/otel; do
  if [ -f "$dir/package-lock.json" ] && [ ! -d "$dir/node_modules" ] && command -v npm >/dev/null 2>&1; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || echo "test.sh: npm ci failed in $dir; its suite will report it" >&2
  fi
done

mkdir -p artifacts
export EVALD_ARTIFACTS_DIR=${EVALD_ARTIFACTS_DIR:-$PWD/artifacts}
# In the background, so that a signal to this script runs cleanup at once.
set -m
ctest --test-dir "$build" --output-on-failure -j "${EVALD_TEST_JOBS:-2}" "$@" &
ctest_pid=$!
set +m
status=0
wait "$ctest_pid" || status=$?
ctest_pid=""

# Every check that did not run, with its reason: whole suites (exit 77) and the parts of a
# suite that skipped themselves, each of which prints a "SKIPPED: reason" line.
log="$build/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  skipped=$(awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $3 }
    /SKIPPED: / { sub(/.*SKIPPED: /, ""); print "  " name ": " $0 }
  ' "$log" | sort -u)
  if [ -n "$skipped" ]; then
    echo "test.sh: these checks were skipped:"
    echo "$skipped"
  else
    echo "test.sh: no check was skipped"
  fi
fi
exit "$status"
