#!/bin/sh
# CTest entry for the Node SDK suite (tests/cmake/stub.cmake). Exits 77 (reported as
# skipped) when node or tests/js/node_modules is missing; otherwise runs `node --test`
# and returns its status, so a present-but-broken setup fails.
# Install the clients once with: (cd tests/js && npm ci)
dir=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
    echo "SKIPPED: node is not installed; the openai/@anthropic-ai/sdk suite did not run"
    exit 77
fi
if [ ! -d "$dir/node_modules/openai" ] || [ ! -d "$dir/node_modules/@anthropic-ai/sdk" ]; then
    echo "SKIPPED: $dir/node_modules is missing; run 'npm ci' in tests/js to enable the SDK suite"
    exit 77
fi
cd "$dir" && exec node --test stub.test.mjs
