#!/bin/sh
# CTest entry otel/export (tests/cmake/otel_e2e.cmake): the end-to-end suites of evald's
# trace export (tests/otel/*.e2e.mjs, node --test) against the real evald and evald-stub
# (EVALD_BIN, EVALD_STUB_BIN), throwaway databases on the test PostgreSQL server
# (EVALD_TEST_DATABASE_URL; scripts/test.sh provides one) and an OTLP receiver, HTTP tool
# and HTTP evaluator in the test process, all on 127.0.0.1. Each suite starts the evald
# processes it needs with its own OTEL_* settings. Exits 77 (reported as skipped, with a
# SKIPPED line) only when node or tests/otel/node_modules is missing; install the packages
# once with: (cd tests/otel && npm ci)
dir=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null 2>&1 || { echo "SKIPPED: node is not installed; evald's trace export was not tested end to end"; exit 77; }
[ -d "$dir/node_modules" ] || { echo "SKIPPED: $dir/node_modules is missing; run 'npm ci' in tests/otel to test evald's trace export end to end"; exit 77; }
for var in EVALD_BIN EVALD_STUB_BIN EVALD_TEST_DATABASE_URL; do
    eval "value=\${$var:-}"
    if [ -z "$value" ]; then
        echo "otel/export: $var must be set (CTest sets the binaries; scripts/test.sh sets EVALD_TEST_DATABASE_URL)" >&2
        exit 1
    fi
done
cd "$dir" || exit 1
# Two files at a time: the suites mostly wait (a collector down for 10 s, scripted latency),
# and each has its own database, stub, receivers and evald processes.
exec node --test --test-concurrency="${EVALD_OTEL_E2E_JOBS:-2}" \
    resilience.e2e.mjs export.e2e.mjs experiment.e2e.mjs config.e2e.mjs
