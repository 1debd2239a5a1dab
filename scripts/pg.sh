#!/usr/bin/env bash
# A private PostgreSQL cluster for development and tests, under a folder of ours.
#   pg.sh start DIR PORT   initdb on first use, start on 127.0.0.1:PORT, create
#                          database "evald", print its URL on stdout
#   pg.sh stop DIR         fast shutdown
#   pg.sh kill DIR         immediate shutdown: to PostgreSQL, a crash (tests restart it
#                          with start and it recovers from its WAL)
#   pg.sh url DIR PORT     print the URL
#   pg.sh running DIR      exit 0 when a postmaster runs on the cluster (its pid file
#                          names a live process), else 1
#   pg.sh freeze DIR       SIGSTOP to the postmaster and every backend: a database that
#                          answers nothing, not even a refusal (tests of evald's HTTP)
#   pg.sh thaw DIR         SIGCONT to them (stop and kill thaw first, so that a test that
#                          failed while the cluster was frozen still stops it)
# PostgreSQL refuses to run as root, so as root the cluster belongs to the
# 'postgres' system user (created by the Debian package). EVALD_PG_OPTIONS adds server
# options at start (e.g. "-c max_connections=20"; later ones win). Trust authentication is
# used, and the server listens on loopback only.
set -euo pipefail

cmd=${1:?usage: pg.sh start|stop|kill|url|running|freeze|thaw DIR [PORT]}
dir=$(realpath -m "${2:?DIR}")
port=${3:-54329}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bindir/initdb" ] || { echo "pg.sh: PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
url() { echo "postgresql://evald@127.0.0.1:$port/evald"; }
# Sends signal $1 to the postmaster of $dir and to every one of its children.
signal_all() {
  local pid
  pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  # Its children from /proc (the fourth field of stat is the parent; a postgres
  # process's name has no space), so that no procps is needed.
  local kids="" f child parent
  for f in /proc/[0-9]*/stat; do
    read -r child _ _ parent _ <"$f" 2>/dev/null || continue
    [ "$parent" = "$pid" ] && kids="$kids $child"
  done
  if [ "$1" = STOP ]; then
    kill -STOP $kids "$pid" 2>/dev/null || true
  else
    kill -CONT "$pid" $kids 2>/dev/null || true
  fi
}

case "$cmd" in
start)
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bindir/initdb" -D "$dir/data" -U evald --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  mkdir -p "$dir/run"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir/run"; fi
  if ! as_owner "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/run -c max_connections=300 -c fsync=${EVALD_PG_FSYNC:-on} ${EVALD_PG_OPTIONS:-}" start >/dev/null ||
      { tail -n 20 "$dir/server.log" >&2; exit 1; }
  fi
  if ! as_owner "$bindir/psql" -h 127.0.0.1 -p "$port" -U evald -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='evald'" | grep -q 1; then
    as_owner "$bindir/createdb" -h 127.0.0.1 -p "$port" -U evald evald
  fi
  url
  ;;
stop)
  if [ -f "$dir/data/PG_VERSION" ]; then
    signal_all CONT
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  ;;
kill)
  if [ -f "$dir/data/PG_VERSION" ]; then
    signal_all CONT
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  ;;
url) url ;;
freeze) signal_all STOP ;;
thaw) signal_all CONT ;;
running)
  pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null) || exit 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
  ;;
*) echo "usage: pg.sh start|stop|kill|url|running|freeze|thaw DIR [PORT]" >&2; exit 2 ;;
esac
