#!/usr/bin/env bash
# The chaos suite: several evald processes on one database of their own, against
# evald-stub with latency, while evaluations keep being started: repeated kill -9 (the
# process is started again), kill -STOP past the lease then kill -CONT, and immediate
# restarts of PostgreSQL. Afterwards it checks that every run was counted once, that no
# result was lost or doubled, that no run was ever in flight twice at once at the provider
# (the stub's record of sessions in flight twice) and that every evaluation's completion
# reached the webhook receiver as one event. Prints the figures; exits 1 when a check
# fails.
#
#   tests/chaos/chaos.sh [BUILD]       (default build; EVALD_BIN / EVALD_STUB_BIN override)
#   CHAOS_PROFILE=smoke (default: about 2 minutes) or full (about 8 minutes)
#   CHAOS_SECONDS, CHAOS_PROCS, CHAOS_LEASE_MS, CHAOS_LATENCY_MS override the profile.
# Needs curl, jq, python3 (the webhook receiver) and the PostgreSQL server binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
evald=${EVALD_BIN:-$build/evald}
stub_bin=${EVALD_STUB_BIN:-$build/evald-stub}
case "${CHAOS_PROFILE:-smoke}" in
smoke) seconds=90 procs=3 per_round=2 runs=3 pg_restarts=3 ;;
full) seconds=420 procs=4 per_round=3 runs=4 pg_restarts=12 ;;
*) echo "chaos: CHAOS_PROFILE must be smoke or full" >&2; exit 2 ;;
esac
seconds=${CHAOS_SECONDS:-$seconds}
procs=${CHAOS_PROCS:-$procs}
lease=${CHAOS_LEASE_MS:-12000}
# Half the evaluations are slow: their calls outlast a restart of PostgreSQL, so a claim
# that such a restart undid would let a second worker start a run still in flight. Both
# stay below a quarter of the lease: a call in flight when its process is frozen has ended
# at the provider before the lease runs out (README, "Scaling out").
latency=${CHAOS_LATENCY_MS:-400}
slow=${CHAOS_SLOW_MS:-2500}
workers=4
for b in "$evald" "$stub_bin"; do
  [ -x "$b" ] || { echo "chaos: $b not found (make build)" >&2; exit 2; }
done
for t in curl jq python3; do
  command -v "$t" >/dev/null || { echo "chaos: $t is needed" >&2; exit 2; }
done
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
psql_bin=$bindir/psql

work=$(mktemp -d /tmp/evald-chaos-XXXXXX)
chmod 755 "$work"
pgdir=$work/pg
declare -a pid base stopped
stub_pid="" recv_pid=""
kills=0 stops=0 restarts_done=0 started=0 start_retries=0

log() { printf 'chaos: %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sql() { "$psql_bin" "$url" -X -q -tA -c "$1"; }

cleanup() {
  local rc=$?
  for i in "${!pid[@]}"; do
    [ -n "${pid[$i]}" ] && { kill -CONT "${pid[$i]}" 2>/dev/null; kill -KILL "${pid[$i]}" 2>/dev/null; } || true
  done
  [ -n "$stub_pid" ] && kill "$stub_pid" 2>/dev/null || true
  [ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  scripts/pg.sh stop "$pgdir" >/dev/null 2>&1 || true
  if [ "$rc" = 0 ]; then rm -rf "$work"; else log "logs kept in $work"; fi
}
trap cleanup EXIT

# Waits for the {"listen":...} line a child prints on its stdout file; echoes the address.
listen_of() {
  local file=$1 child=$2
  for _ in $(seq 1 300); do
    if [ -s "$file" ]; then jq -r .listen "$file" 2>/dev/null | head -n 1 && return 0; fi
    kill -0 "$child" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

port=$(free_port)
url=$(EVALD_PG_FSYNC=off scripts/pg.sh start "$pgdir" "$port")

# Each run is two generations around one tool call, so that a process that comes back from
# a stop would have more to send for a run it no longer holds.
call='{"tool_calls":[{"name":"agent_trigger","arguments":{"function_id":"chaos.add","payload":{"a":2,"b":3}}}]}'
cat >"$work/script.json" <<EOF
{"rules":[
  {"when":{"has_tool_result":false,"prompt_contains":"slow"},"latency_ms":$slow,"reply":$call},
  {"when":{"has_tool_result":false},"latency_ms":$latency,"reply":$call},
  {"when":{"has_tool_result":true,"prompt_contains":"slow"},"latency_ms":$slow,"reply":{"text":"OK"}}],
 "default":{"latency_ms":$latency,"reply":{"text":"OK"}}}
EOF
"$stub_bin" --listen 127.0.0.1:0 --script "$work/script.json" --log-level warn \
  >"$work/stub.out" 2>"$work/stub.log" &
stub_pid=$!
stub="http://$(listen_of "$work/stub.out" "$stub_pid")"

python3 tests/chaos/receiver.py "$work/hooks.jsonl" >"$work/recv.out" 2>"$work/recv.log" &
recv_pid=$!
receiver="http://$(listen_of "$work/recv.out" "$recv_pid")"

secret_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_proc() {
  local i=$1
  : >"$work/p$i.out"
  EVALD_DATABASE_URL=$url EVALD_LISTEN=127.0.0.1:0 OPENAI_BASE_URL=$stub/v1 \
    OPENAI_API_KEY=stub-key EVALD_WORKERS=$workers EVALD_LEASE_MS=$lease \
    EVALD_SWEEP_INTERVAL_MS=1000 EVALD_SECRET_KEY=$secret_key \
    EVALD_WEBHOOK_ALLOW_HOSTS=127.0.0.1 EVALD_WEBHOOK_BACKOFF_MS=500 \
    "$evald" >"$work/p$i.out" 2>>"$work/p$i.log" &
  pid[$i]=$!
  stopped[$i]=0
  local addr
  addr=$(listen_of "$work/p$i.out" "${pid[$i]}") || { log "evald $i did not start"; tail "$work/p$i.log" >&2; exit 1; }
  base[$i]="http://$addr"
}
for i in $(seq 0 $((procs - 1))); do start_proc "$i"; done

# The base URL of a process that runs (not stopped).
any_base() {
  for i in "${!pid[@]}"; do
    [ "${stopped[$i]}" = 0 ] && { echo "${base[$i]}"; return; }
  done
}

request() {
  local pace=fast
  [ $(($1 % 2)) = 1 ] && pace=slow
  cat <<EOF
{"dimension":"prompt","model":{"model":"stub-model","provider":"openai"},
 "control":{"prompt":"chaos $1 $pace control: add 2 and 3, then reply OK."},
 "treatment":{"prompt":"chaos $1 $pace treatment: add 2 and 3, then answer OK."},
 "functions":{"allow":["chaos.*"],"deny":[],"expose":"agent_trigger"},
 "evaluator":{"function_id":"eval::assert::normalized_text","arguments":{"expected":"OK"}},
 "runs":$runs,"concurrency":2}
EOF
}

# Starts an evaluation, trying again (another process, a moment later) while the
# database is away. A start that failed is not known to exist; the checks cover every
# evaluation in the database anyway.
start_eval() {
  local body code
  body=$(request "$started")
  for _ in $(seq 1 60); do
    code=$(curl -s -o "$work/start.json" -w '%{http_code}' -m 10 -X POST \
      -H 'Content-Type: application/json' -d "$body" "$(any_base)/v1/evaluations" || true)
    if [ "$code" = 202 ]; then
      jq -r .evaluation_id "$work/start.json" >>"$work/ids"
      started=$((started + 1))
      return 0
    fi
    start_retries=$((start_retries + 1))
    sleep 0.5
  done
  log "could not start an evaluation: $code $(cat "$work/start.json" 2>/dev/null)"
  exit 1
}

# The runs' tool, and one subscription for every evaluation that finishes from now on.
code=$(curl -s -o "$work/tool.json" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
  -d "{\"description\":\"Adds a and b.\",\"request_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}},\"url\":\"$receiver/tool\",\"timeout_ms\":5000}" \
  "$(any_base)/v1/tools/chaos.add" || true)
[ "$code" = 201 ] || [ "$code" = 200 ] || { log "could not register the tool: $code $(cat "$work/tool.json")"; exit 1; }
for _ in $(seq 1 50); do
  code=$(curl -s -o "$work/sub.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d "{\"url\":\"$receiver/hook\",\"secret\":\"chaos-secret-of-at-least-32-characters\"}" \
    "$(any_base)/v1/subscriptions" || true)
  [ "$code" = 201 ] || [ "$code" = 200 ] && break
  sleep 0.2
done
[ "$code" = 201 ] || [ "$code" = 200 ] || { log "could not subscribe: $code $(cat "$work/sub.json")"; exit 1; }

: >"$work/ids"
for _ in $(seq 1 $((per_round * 2))); do start_eval; done

pick() { echo $((RANDOM % procs)); }
deadline=$((SECONDS + seconds))
round=0
log "chaos for ${seconds}s: $procs processes, lease ${lease} ms, stub latency ${latency}/${slow} ms"
while [ $SECONDS -lt $deadline ]; do
  round=$((round + 1))
  i=$(pick)
  # New evaluations first: their claims are what an immediate restart may catch.
  for _ in $(seq 1 "$per_round"); do start_eval; done
  sleep 0.3
  case $((round % 4)) in
  1 | 3)
    kill -KILL "${pid[$i]}" 2>/dev/null || true
    wait "${pid[$i]}" 2>/dev/null || true
    kills=$((kills + 1))
    start_proc "$i"
    ;;
  2)
    kill -STOP "${pid[$i]}"
    stopped[$i]=1
    stops=$((stops + 1))
    sleep $(((lease + 2500) / 1000))
    kill -CONT "${pid[$i]}"
    stopped[$i]=0
    ;;
  0)
    if [ $restarts_done -lt $pg_restarts ]; then
      scripts/pg.sh kill "$pgdir"
      scripts/pg.sh start "$pgdir" "$port" >/dev/null
      restarts_done=$((restarts_done + 1))
    fi
    ;;
  esac
  sleep 1
done

log "chaos over after $round rounds; waiting for every evaluation to finish"
for _ in $(seq 1 600); do
  open=$(sql "SELECT count(*) FROM evaluations WHERE status IN ('queued', 'running')" || echo -1)
  [ "$open" = 0 ] && break
  sleep 0.5
done
# Let the last deliveries arrive.
for _ in $(seq 1 120); do
  pending=$(sql "SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'" 2>/dev/null || echo 0)
  [ "$pending" = 0 ] && break
  sleep 0.5
done
stats=$(curl -s "$stub/_stub/stats")
for i in "${!pid[@]}"; do kill -TERM "${pid[$i]}" 2>/dev/null || true; done
for i in "${!pid[@]}"; do wait "${pid[$i]}" 2>/dev/null || true; pid[$i]=""; done

# ---- checks -----------------------------------------------------------------------
evals=$(sql "SELECT count(*) FROM evaluations")
unfinished=$(sql "SELECT count(*) FROM evaluations WHERE status <> 'completed'")
missing_ids=0
while read -r id; do
  [ "$(sql "SELECT count(*) FROM evaluations WHERE id = '$id' AND status = 'completed'")" = 1 ] ||
    missing_ids=$((missing_ids + 1))
done <"$work/ids"
total_runs=$(sql "SELECT count(*) FROM runs")
planned=$(sql "SELECT coalesce(sum(total_runs), 0) FROM evaluations")
# A run lost: not completed (failed for a reason of the chaos, or never finished).
lost=$(sql "SELECT count(*) FROM runs WHERE status <> 'completed'")
# Counted twice (or not at all): counters and reports that disagree with the runs.
miscounted=$(sql "SELECT count(*) FROM evaluations e WHERE e.terminal_runs <> e.total_runs
  OR e.terminal_runs <> (SELECT count(*) FROM runs r WHERE r.evaluation_id = e.id
                         AND r.status IN ('completed', 'failed', 'cancelled'))
  OR e.passed_runs <> (SELECT count(*) FROM runs r WHERE r.evaluation_id = e.id AND r.passed)")
missing_events=$(sql "SELECT count(*) FROM evaluations e WHERE e.status = 'completed'
  AND NOT EXISTS (SELECT 1 FROM completion_events c WHERE c.evaluation_id = e.id)")
restarted=$(sql "SELECT count(*) FROM runs WHERE attempt > 1")
twice=$(jq '.sessions_in_flight_twice | length' <<<"$stats")
overlaps=$(jq '.overlaps' <<<"$stats")
calls=$(jq '.requests' <<<"$stats")
# Webhooks: one event per evaluation, each evaluation's event arrived; the same event may
# come again after a process died between sending and recording (at least once).
hooks=$(wc -l <"$work/hooks.jsonl" 2>/dev/null || echo 0)
hook_events=$(jq -r .event_id "$work/hooks.jsonl" 2>/dev/null | sort -u | wc -l)
hook_evals=$(jq -r .body.evaluation_id "$work/hooks.jsonl" 2>/dev/null | sort -u | wc -l)
doubled_hooks=$(jq -r '[.body.evaluation_id, .event_id] | @tsv' "$work/hooks.jsonl" 2>/dev/null |
  sort -u | cut -f1 | sort | uniq -d | wc -l)
redelivered=$(jq -r .delivery_id "$work/hooks.jsonl" 2>/dev/null | sort | uniq -d | wc -l)
missing_hooks=$((evals - hook_evals))
failures=$(sql "SELECT coalesce(string_agg(DISTINCT f->>'message', '; '), '') FROM runs r,
  jsonb_array_elements(coalesce(r.failures, '[]'::jsonb)) f WHERE r.status <> 'completed'")

cat <<EOF
chaos figures ($(date -u +%FT%TZ), profile ${CHAOS_PROFILE:-smoke}, ${seconds}s, $procs processes x $workers workers, lease $lease ms, latency $latency ms, slow $slow ms)
  kills survived:            kill -9 $kills, kill -STOP past the lease $stops, PostgreSQL immediate restarts $restarts_done
  evaluations:               $evals in the database ($started started, $start_retries start retries), not completed $unfinished, started but not completed $missing_ids
  runs:                      $total_runs of $planned planned; lost $lost; miscounted evaluations $miscounted; restarted after an interruption $restarted
  provider calls:            $calls; runs twice in flight at once $twice ($overlaps overlapping requests)
  completion events missing: $missing_events
  webhooks:                  $hooks requests, $hook_events events for $hook_evals evaluations; doubled $doubled_hooks, missing $missing_hooks; redelivered (at least once, after a kill) $redelivered
EOF
[ -n "$failures" ] && echo "  failures of lost runs:     $failures"
[ "$twice" != 0 ] && echo "  twice in flight:           $(jq -c '.sessions_in_flight_twice[:5]' <<<"$stats")"

ok=1
[ "$unfinished" = 0 ] && [ "$missing_ids" = 0 ] || ok=0
[ "$total_runs" = "$planned" ] && [ "$lost" = 0 ] && [ "$miscounted" = 0 ] || ok=0
[ "$twice" = 0 ] && [ "$missing_events" = 0 ] || ok=0
[ "$doubled_hooks" = 0 ] && [ "$missing_hooks" = 0 ] || ok=0
if [ "$ok" = 1 ]; then echo "chaos: passed"; else echo "chaos: FAILED"; exit 1; fi
