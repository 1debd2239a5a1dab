#!/usr/bin/env bash
# `make run`: serve evald on 127.0.0.1:8080 (EVALD_LISTEN) with a private PostgreSQL
# under var/pg (EVALD_PG_DIR; unless EVALD_DATABASE_URL is set). Without provider API keys
# it also starts evald-stub, the scripted model server, and points the providers at it, so
# the demo evaluation it submits works offline. Ctrl-C stops everything it started: evald,
# the stub and the private PostgreSQL (its data stays for the next start; a server that was
# already running there is left running). `make stop` stops a private PostgreSQL left
# behind by a run that was killed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
listen=${EVALD_LISTEN:-127.0.0.1:8080}
pg_dir=${EVALD_PG_DIR:-var/pg}
pids=()
started_pg=0
cleanup() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$started_pg" = 1 ]; then
    scripts/pg.sh stop "$pg_dir"
    echo "run: stopped, the private PostgreSQL too (its data stays in $pg_dir)"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${EVALD_DATABASE_URL:-}" ]; then
  scripts/pg.sh running "$pg_dir" || started_pg=1
  EVALD_DATABASE_URL=$(scripts/pg.sh start "$pg_dir" "${EVALD_PG_PORT:-54329}")
  export EVALD_DATABASE_URL
  echo "run: private PostgreSQL at $EVALD_DATABASE_URL (data in $pg_dir)"
fi

# Webhook secrets are stored sealed under EVALD_SECRET_KEY; keep a development key
# next to the private database (created once, readable by its owner only).
if [ -z "${EVALD_SECRET_KEY:-}" ]; then
  if [ ! -s var/secret-key ]; then
    mkdir -p var
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >var/secret-key)
  fi
  EVALD_SECRET_KEY=$(cat var/secret-key)
  export EVALD_SECRET_KEY
fi

demo_model=""
if [ -z "${OPENAI_API_KEY:-}" ] && [ -z "${ANTHROPIC_API_KEY:-}" ] && [ -x "$build/evald-stub" ]; then
  stub_listen=${EVALD_STUB_LISTEN:-127.0.0.1:8089}
  "$build/evald-stub" --listen "$stub_listen" >/dev/null &
  pids+=($!)
  export OPENAI_BASE_URL="http://$stub_listen/v1" OPENAI_API_KEY=stub-key
  export ANTHROPIC_BASE_URL="http://$stub_listen" ANTHROPIC_API_KEY=stub-key
  demo_model="stub-model"
  echo "run: no provider API key set; using evald-stub at http://$stub_listen"
fi

EVALD_LISTEN=$listen "$build/evald" &
evald_pid=$!
pids+=($evald_pid)

for _ in $(seq 1 200); do
  curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && break
  kill -0 "$evald_pid" 2>/dev/null || { echo "run: evald exited" >&2; exit 1; }
  sleep 0.1
done
echo "run: evald is ready at http://$listen/ (console), http://$listen/v1 (API)"

if [ -n "$demo_model" ] && [ "${EVALD_DEMO:-1}" = 1 ]; then
  auth=()
  [ -n "${EVALD_API_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $EVALD_API_TOKEN")
  demo=$(curl -sS "${auth[@]}" -X POST "http://$listen/v1/evaluations" \
    -H 'Content-Type: application/json' -d @scripts/demo-evaluation.json || true)
  echo "run: demo evaluation submitted: $demo"
  # An agent experiment too (docs/agents.md): conversations, a mocked tool, a simulated user.
  demo=$(curl -sS "${auth[@]}" -X POST "http://$listen/v1/experiments" \
    -H 'Content-Type: application/json' -d @scripts/demo-agent-experiment.json || true)
  echo "run: demo agent experiment submitted: $demo"
fi
wait "$evald_pid"
