#!/bin/sh
# Runs the sequential cross-check (check_sequential.py) with the first python3 that has
# scipy: $EVALD_PYTHON, python3 on PATH, then Debian's /usr/bin/python3. Exit 77 (skipped)
# with a visible line when there is none. Usage: run_sequential.sh <sequential_dump> [args...]
dump=$1
shift
here=${0%/*}
for py in "${EVALD_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  command -v "$py" >/dev/null 2>&1 || continue
  if "$py" -c 'import scipy.stats' >/dev/null 2>&1; then
    exec "$py" "$here/check_sequential.py" "$dump" "$@"
  fi
done
echo "SKIPPED: sequential_python needs python3 with scipy (apt-get install python3-scipy)" >&2
exit 77
