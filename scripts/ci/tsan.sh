#!/usr/bin/env bash
# The suites that exercise evald's threads (engine workers, writer and keeper, starters and
# the HTTP server's deferred answers, its handler pool and stream reads (every request of
# every suite goes through them), idempotent requests that wait for each other, the rate limiters of two processes, webhook
# delivery, sessions, the iii adapter, the common thread queue) under ThreadSanitizer, in
# build-tsan. The integration suites run the TSan evald and evald-stub binaries;
# tests/support/itest.c fails a suite when a child's stderr holds a report, the TSan
# runtime fails a test binary with its own, and the logs under build-tsan/test-logs are
# checked once more at the end. Suppressions (tests/tsan.supp) are for third-party libraries only.
# Starts a private PostgreSQL under var/pg-test (port EVALD_TEST_PG_PORT, default 54330)
# unless EVALD_TEST_DATABASE_URL is set, and stops it again when it started it.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath -m "${TSAN_BUILD:-build-tsan}")
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

scripts/deps.sh
# GCC by default (its TSan runtime, libtsan2, comes with it); TSAN_CC=clang works as well.
cmake -S . -B "$build" -DCMAKE_C_COMPILER="${TSAN_CC:-gcc}" -DCMAKE_BUILD_TYPE=Debug -DEVALD_TSAN=ON >/dev/null
suites=(test_engine test_engine_recovery test_webhooks test_webhooks_subscriptions test_sessions test_run_functions test_starts test_rate_limits
        test_idempotency test_adapter_conn test_adapter_proto test_adapter_ws
        test_webhook_core test_queue test_pool test_experiment_simulator test_runs_ahead test_experiment_batches)
cmake --build "$build" -j "$jobs" --target evald evald-stub "${suites[@]}"

if [ -z "${EVALD_TEST_DATABASE_URL:-}" ]; then
  if [ -n "${EVALD_DATABASE_URL:-}" ]; then
    export EVALD_TEST_DATABASE_URL=$EVALD_DATABASE_URL
  else
    # Throwaway data: no fsync. A server that was already running is left running.
    [ -f var/pg-test/data/postmaster.pid ] || trap 'scripts/pg.sh stop var/pg-test' EXIT
    export EVALD_TEST_DATABASE_URL=$(EVALD_PG_FSYNC=off scripts/pg.sh start var/pg-test "${EVALD_TEST_PG_PORT:-54330}")
  fi
fi
if [ -f tests/iii/package-lock.json ] && [ ! -d tests/iii/node_modules ] && command -v npm >/dev/null 2>&1; then
  (cd tests/iii && npm ci --no-audit --no-fund --loglevel=error) || echo "tsan.sh: npm ci failed in tests/iii; its suite will report it" >&2
fi

# exitcode 66: a test binary with a report fails even when every check passed.
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp ${TSAN_OPTIONS:-}"
rm -rf "$build/test-logs"
mkdir -p "$build/test-logs"
status=0
ctest --test-dir "$build" --output-on-failure -j "${EVALD_TEST_JOBS:-2}" \
  -R '^(unit/test_(adapter_.*|webhook_core|queue|pool)|integration/test_(engine|engine_recovery|webhooks|webhooks_subscriptions|sessions|run_functions|starts|rate_limits|idempotency|experiment_simulator|runs_ahead|experiment_batches))$' || status=$?
# The iii suite (Node) keeps evald's stderr to itself: there the reports go to files.
TSAN_OPTIONS="$TSAN_OPTIONS log_path=$build/test-logs/iii-tsan" \
  ctest --test-dir "$build" --output-on-failure -R '^iii/adapter$' || status=$?

# A report from a child no test waited for (itest.c reads a log when its child is gone).
if [ -d "$build/test-logs" ] && grep -l "WARNING: ThreadSanitizer" "$build"/test-logs/* 2>/dev/null; then
  echo "tsan.sh: the logs above hold ThreadSanitizer reports" >&2
  status=1
fi
exit $status
