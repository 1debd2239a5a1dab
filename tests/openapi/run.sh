#!/bin/sh
# Runs one of the Node checks of openapi/ and docker/ for CTest (tests/cmake/openapi.cmake):
#   lint      redocly lint of openapi/openapi.yaml with openapi/redocly.yaml
#   document  tests/openapi/openapi.test.mjs (sync, routes, conventions, examples) and
#             tests/openapi/contract.test.mjs (the contract checker refuses what it must)
#   docker    tests/openapi/docker.test.mjs (Dockerfile and docker-compose.yml structure)
#   contract  tests/openapi/contract.mjs over $EVALD_CONTRACT_RECORD (the recorded traffic)
# Exits 77 (CTest's skip code) with a SKIPPED line when node or tests/openapi/node_modules
# is absent; install them with `npm ci --prefix tests/openapi`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
what=${1:?usage: run.sh lint|document|docker|contract}

if ! command -v node >/dev/null 2>&1; then
    echo "SKIPPED: openapi/$what: node is not installed"
    exit 77
fi
if [ ! -d "$here/node_modules" ]; then
    echo "SKIPPED: openapi/$what: tests/openapi/node_modules is absent (run: npm ci --prefix tests/openapi)"
    exit 77
fi

case $what in
lint)
    # No telemetry and no update check: the linter must not reach the network.
    REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1 \
        exec "$here/node_modules/.bin/redocly" lint --config "$root/openapi/redocly.yaml" \
        "$root/openapi/openapi.yaml"
    ;;
document)
    exec node --test "$here/openapi.test.mjs" "$here/contract.test.mjs"
    ;;
docker)
    exec node --test "$here/docker.test.mjs"
    ;;
contract)
    exec node "$here/contract.mjs" "${EVALD_CONTRACT_RECORD:?EVALD_CONTRACT_RECORD must name the folder of recorded traffic}" --uncovered
    ;;
*)
    echo "run.sh: unknown check '$what' (lint, document, docker or contract)" >&2
    exit 2
    ;;
esac
