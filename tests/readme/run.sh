#!/bin/sh
# CTest entry of the README check (tests/cmake/readme.cmake): runs readme.test.mjs against a
# whole stack made for it (tests/stack.sh). Exits 77 (skipped) with a SKIPPED line when
# node, curl or jq is missing or no PostgreSQL server is named; fails when they are present
# and a check fails.
dir=$(cd "$(dirname "$0")" && pwd)
for tool in node curl jq; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIPPED: readme/examples: $tool is not installed (scripts/deps.sh installs it)"; exit 77; }
done
# The stack needs a PostgreSQL server where it may create a database: scripts/test.sh (make
# test) starts a private one and sets the variable; a bare ctest without it skips, saying so.
if [ -z "${EVALD_TEST_DATABASE_URL:-}" ]; then
    if [ -n "${EVALD_DATABASE_URL:-}" ]; then
        EVALD_TEST_DATABASE_URL=$EVALD_DATABASE_URL
        export EVALD_TEST_DATABASE_URL
    else
        echo "SKIPPED: readme/examples: EVALD_TEST_DATABASE_URL is not set (scripts/test.sh build -R readme starts a private PostgreSQL and sets it)"
        exit 77
    fi
fi
# The walkthrough's webhook example targets a receiver on this machine, and subscriptions
# need a key to seal their secrets (as `make run` keeps one in var/secret-key).
key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
EVALD_STACK_ENV="${EVALD_STACK_ENV:-} EVALD_WEBHOOK_ALLOW_HOSTS=127.0.0.1 EVALD_SECRET_KEY=$key"
export EVALD_STACK_ENV
exec "$dir/../stack.sh" node --test "$dir/readme.test.mjs"
