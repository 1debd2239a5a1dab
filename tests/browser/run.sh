#!/bin/sh
# CTest entry for the console's browser tests (tests/cmake/browser.cmake): the pure
# module tests, then the Playwright scenarios in headless Chromium against a whole
# stack (tests/stack.sh). Exits 77 (skipped) when node, node_modules or Chromium is
# missing; fails when they are present and a check fails.
dir=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null 2>&1 || { echo "SKIPPED: node is not installed; browser tests did not run"; exit 77; }
[ -d "$dir/node_modules/playwright-core" ] || { echo "SKIPPED: run 'npm ci' in tests/browser to enable the browser tests"; exit 77; }
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || { echo "SKIPPED: Chromium is not installed (apt-get install chromium)"; exit 77; }
cd "$dir" || exit 1
node --test units.test.mjs sessions.units.test.mjs experiments.units.test.mjs review.units.test.mjs sequential.units.test.mjs judges.units.test.mjs agents.units.test.mjs || exit 1
# The specs script one shared stub: run them one after the other.
status=0
"$dir/../stack.sh" node --test --test-concurrency=1 console.spec.mjs sessions.spec.mjs experiments.spec.mjs review.spec.mjs sequential.spec.mjs judges.spec.mjs || status=1
# The agents spec prices the stub's models (the others need them unpriced): a stack of its own.
EVALD_STACK_ENV="${EVALD_STACK_ENV:+$EVALD_STACK_ENV }EVALD_PRICES_FILE=$dir/agents.prices.json" \
  "$dir/../stack.sh" node --test agents.spec.mjs || status=1
exit $status
