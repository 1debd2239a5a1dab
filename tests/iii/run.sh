#!/bin/sh
# CTest entry for the iii adapter suite (tests/cmake/iii.cmake). Exits 77 (reported as
# skipped, with a SKIPPED line) when node, psql, tests/iii/node_modules or a test
# PostgreSQL server is missing; otherwise runs `node --test` and returns its status, so a
# present-but-broken setup fails. Install the packages once with: (cd tests/iii && npm ci)
dir=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
    echo "SKIPPED: node is not installed; the iii adapter suite did not run"
    exit 77
fi
if [ ! -d "$dir/node_modules/iii-sdk" ] || [ ! -d "$dir/node_modules/ws" ]; then
    echo "SKIPPED: $dir/node_modules is missing; run 'npm ci' in tests/iii to enable the iii adapter suite"
    exit 77
fi
if [ -z "${EVALD_TEST_DATABASE_URL:-}" ]; then
    if [ -n "${EVALD_DATABASE_URL:-}" ]; then
        EVALD_TEST_DATABASE_URL=$EVALD_DATABASE_URL
        export EVALD_TEST_DATABASE_URL
    else
        echo "SKIPPED: set EVALD_TEST_DATABASE_URL to a PostgreSQL server where test databases may be created"
        exit 77
    fi
fi
if ! command -v psql >/dev/null 2>&1; then
    echo "SKIPPED: psql is not installed (postgresql-client); the iii adapter suite did not run"
    exit 77
fi
for bin in "$EVALD_BIN" "$EVALD_STUB_BIN"; do
    if [ ! -x "$bin" ]; then
        echo "iii suite: binary '$bin' is missing (EVALD_BIN / EVALD_STUB_BIN)" >&2
        exit 1
    fi
done
cd "$dir" && exec node --test --test-concurrency=1 iii.test.mjs
