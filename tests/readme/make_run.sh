#!/usr/bin/env bash
# CTest readme/make_run (tests/cmake/readme.cmake): what `make run` runs (scripts/run.sh),
# on a private PostgreSQL in a scratch folder and free ports: it becomes ready with the
# demo evaluation, and a Ctrl-C (SIGINT to its process group, as a terminal sends it)
# stops everything it started, PostgreSQL included. Skipped (77) without python3 or curl.
# Usage: make_run.sh BUILD_DIR
set -u
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null 2>&1 || { echo "SKIPPED: python3 is not installed"; exit 77; }
command -v curl >/dev/null 2>&1 || { echo "SKIPPED: curl is not installed"; exit 77; }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
work=$(mktemp -d /tmp/evald-make-run-XXXXXX)
chmod 755 "$work" # PostgreSQL runs as another user when this runs as root
log=$work/run.log
pid=""
fail() {
    echo "make_run: $*" >&2
    echo "--- scripts/run.sh said:" >&2
    cat "$log" >&2
    [ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null
    "$src/scripts/pg.sh" stop "$work/pg" >/dev/null 2>&1
    rm -rf "$work"
    exit 1
}
listen=127.0.0.1:$(free_port)
# setsid: run.sh leads its own process group, as a job of a terminal does.
EVALD_PG_DIR=$work/pg EVALD_PG_PORT=$(free_port) EVALD_LISTEN=$listen \
    EVALD_STUB_LISTEN=127.0.0.1:$(free_port) EVALD_SECRET_KEY=$(printf '%064d' 0) \
    OPENAI_API_KEY= ANTHROPIC_API_KEY= EVALD_DATABASE_URL= \
    setsid "$src/scripts/run.sh" "$build" >"$log" 2>&1 &
pid=$!
ready=0
for _ in $(seq 1 600); do
    if grep -q "run: demo evaluation submitted" "$log" 2>/dev/null; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || fail "scripts/run.sh exited before it was ready"
    sleep 0.1
done
[ "$ready" = 1 ] || fail "not ready with its demo within 60 s"
grep -q '"evaluation_id":"eval_' "$log" || fail "the demo evaluation was not accepted"
for _ in $(seq 1 100); do
    grep -q "run: demo agent experiment submitted" "$log" && break
    sleep 0.1
done
grep -q '"experiment_id":"exp_' "$log" || fail "the demo agent experiment was not accepted"
curl -fsS "http://$listen/readyz" >/dev/null || fail "evald is not ready at $listen"
postmaster=$(head -n 1 "$work/pg/data/postmaster.pid")
kill -0 "$postmaster" 2>/dev/null || fail "no PostgreSQL runs for $work/pg"

kill -INT -- "-$pid"
for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "scripts/run.sh did not end within 30 s of Ctrl-C"
# A process that ended may stay a zombie until its (adopting) parent reaps it: not running.
state=$(awk '{ print $3 }' "/proc/$postmaster/stat" 2>/dev/null)
if [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]; then
    fail "PostgreSQL ($postmaster, state $state) still runs after Ctrl-C"
fi
curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && fail "evald still answers after Ctrl-C"
grep -q "run: stopped, the private PostgreSQL too" "$log" || fail "run.sh did not say it stopped"
rm -rf "$work"
echo "make_run: ready with the demo, and Ctrl-C stopped evald, the stub and PostgreSQL"
