#!/usr/bin/env bash
# Runs every test suite of a build folder (default: build). Starts a private
# PostgreSQL under var/pg-test unless EVALD_DATABASE_URL or EVALD_TEST_DATABASE_URL
# names a server where test databases may be created; installs the Node packages
# of the Node-driven suites when npm can.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

if [ -z "${EVALD_TEST_DATABASE_URL:-}" ]; then
  if [ -n "${EVALD_DATABASE_URL:-}" ]; then
    export EVALD_TEST_DATABASE_URL=$EVALD_DATABASE_URL
  else
    # Throwaway data: skip fsync for speed.
    export EVALD_TEST_DATABASE_URL=$(EVALD_PG_FSYNC=off scripts/pg.sh start var/pg-test "${EVALD_TEST_PG_PORT:-54330}")
  fi
fi

for dir in tests/js tests/browser tests/openapi tests/iii; do
  if [ -f "$dir/package-lock.json" ] && [ ! -d "$dir/node_modules" ] && command -v npm >/dev/null 2>&1; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || echo "test.sh: npm ci failed in $dir; its suite will report it" >&2
  fi
done

mkdir -p artifacts
export EVALD_ARTIFACTS_DIR=${EVALD_ARTIFACTS_DIR:-$PWD/artifacts}
ctest --test-dir "$build" --output-on-failure -j "${EVALD_TEST_JOBS:-2}"
