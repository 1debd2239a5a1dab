#!/usr/bin/env bash
# Runs a command against a whole evald stack made for it: a throwaway database on
# the test PostgreSQL server (EVALD_TEST_DATABASE_URL), evald-stub and evald on free
# loopback ports. The command sees EVALD_URL, EVALD_STUB_URL and EVALD_STACK_DATABASE_URL;
# extra evald settings can be passed in EVALD_STACK_ENV ("K=V K=V"). When
# EVALD_CONTRACT_RECORD names a folder (and node is installed), EVALD_URL is a recording
# proxy in front of evald (tests/support/contract_proxy.mjs) and EVALD_DIRECT_URL is evald
# itself, so the contract check sees the command's traffic. Everything is stopped and
# dropped afterwards, whatever the command's outcome, whose status is returned; with
# EVALD_TEST_LOG_DIR set, the evald and stub logs are copied there first.
#   usage: tests/stack.sh COMMAND [ARG...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${EVALD_BIN:?EVALD_BIN must name the evald binary}"
: "${EVALD_STUB_BIN:?EVALD_STUB_BIN must name the evald-stub binary}"
: "${EVALD_TEST_DATABASE_URL:?EVALD_TEST_DATABASE_URL must name a PostgreSQL server (make test sets it)}"

work=$(mktemp -d /tmp/evald-stack-XXXXXX)
db="evald_s_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -q "$EVALD_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  # The logs/json check reads every evald and stub log of the suites there.
  if [ -n "${EVALD_TEST_LOG_DIR:-}" ] && mkdir -p "$EVALD_TEST_LOG_DIR"; then
    for name in evald stub; do
      [ -f "$work/$name.log" ] && cp "$work/$name.log" "$EVALD_TEST_LOG_DIR/$(basename "$work")-$name.log"
    done
  fi
  if [ "${EVALD_STACK_KEEP_LOGS:-0}" = 1 ]; then echo "stack: logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

case "$EVALD_TEST_DATABASE_URL" in
  postgres://*|postgresql://*) url=$(printf '%s' "$EVALD_TEST_DATABASE_URL" | sed -E "s#^([^/]*//[^/]*)(/[^?]*)?#\1/$db#") ;;
  *) url="$EVALD_TEST_DATABASE_URL dbname=$db" ;;
esac
psql -q "$EVALD_TEST_DATABASE_URL" -c "CREATE DATABASE $db" >/dev/null

# Starts a binary in the background (recording its pid here, not in a subshell) and
# waits for its {"listen":"host:port"} ready line; the address is left in $addr.
addr=""
start() {
  local name=$1; shift
  "$@" >"$work/$name.out" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 1 300); do
    if grep -q '"listen"' "$work/$name.out" 2>/dev/null; then
      addr=$(sed -E 's/.*"listen":"([^"]+)".*/\1/' "$work/$name.out" | head -n 1)
      return 0
    fi
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "stack: $name did not start; its log:" >&2
  cat "$work/$name.log" >&2
  return 1
}

start stub "$EVALD_STUB_BIN" --listen 127.0.0.1:0
export EVALD_STUB_URL="http://$addr"
# shellcheck disable=SC2086
start evald env EVALD_DATABASE_URL="$url" EVALD_LISTEN=127.0.0.1:0 \
  OPENAI_BASE_URL="$EVALD_STUB_URL/v1" OPENAI_API_KEY=stub-key \
  ANTHROPIC_BASE_URL="$EVALD_STUB_URL" ANTHROPIC_API_KEY=stub-key \
  EVALD_SWEEP_INTERVAL_MS=500 ${EVALD_STACK_ENV:-} "$EVALD_BIN"
export EVALD_URL="http://$addr"
export EVALD_DIRECT_URL="$EVALD_URL"
if [ -n "${EVALD_CONTRACT_RECORD:-}" ] && command -v node >/dev/null 2>&1; then
  mkdir -p "$EVALD_CONTRACT_RECORD"
  start proxy node "$here/support/contract_proxy.mjs" --target "$EVALD_URL" \
    --record "$EVALD_CONTRACT_RECORD" --suite "${EVALD_CONTRACT_SUITE:-stack}"
  export EVALD_URL="http://$addr"
fi
export EVALD_STACK_DATABASE_URL="$url"
set +e
"$@"
status=$?
set -e
if [ $status -ne 0 ]; then
  echo "stack: command failed ($status); evald log tail:" >&2
  tail -n 30 "$work/evald.log" >&2
fi
exit $status
