#!/usr/bin/env bash
# Runs a command (e.g. `make test`) and then fails when a process of this checkout is
# still running: the PostgreSQL of var/pg-test, or an evald or evald-stub binary built
# here (any build folder of this checkout). Processes of other checkouts or servers named
# by EVALD_TEST_DATABASE_URL are not ours and are ignored. A leftover is named, and then
# stopped so that the next step of CI starts clean.
#   usage: scripts/ci/leftovers.sh [COMMAND [ARG...]]     e.g. scripts/ci/leftovers.sh make test
# Without a command it only checks. The command's own failure is this script's status.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
pg_data=$root/var/pg-test/data

# A PostgreSQL already running on var/pg-test before the command is the user's, not the
# command's: it is left alone and not counted.
pg_pid_before=""
if [ -f "$pg_data/postmaster.pid" ]; then
  pg_pid_before=$(head -n 1 "$pg_data/postmaster.pid")
  kill -0 "$pg_pid_before" 2>/dev/null || pg_pid_before=""
fi

status=0
if [ $# -gt 0 ]; then
  "$@"
  status=$?
fi

# Our processes: "<pid> <what>" lines.
ours() {
  local p exe args
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case "$exe" in
    "$root"/*/evald | "$root"/*/evald-stub) echo "${p#/proc/} $exe" ;;
    */postgres)
      args=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
      # The postmaster only (its children go with it), and not one that ran before.
      case "$args" in
      *"-D $pg_data "* | *"-D $pg_data") [ "${p#/proc/}" = "$pg_pid_before" ] || echo "${p#/proc/} postgres -D $pg_data" ;;
      esac
      ;;
    esac
  done
}

# A process may take a moment to exit after its parent returned.
left=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
  left=$(ours)
  [ -z "$left" ] && break
  sleep 0.5
done
if [ -n "$left" ]; then
  echo "leftovers: FAILED: still running after ${*:-the check}:" >&2
  printf '  %s\n' "$left" >&2
  while read -r pid what; do
    case "$what" in
    postgres*) scripts/pg.sh stop var/pg-test ;;
    *) kill "$pid" 2>/dev/null || true ;;
    esac
  done <<<"$left"
  [ "$status" -ne 0 ] || status=1
else
  echo "leftovers: no process of this checkout is left running"
fi
exit "$status"
