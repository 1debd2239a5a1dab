#!/bin/sh
# Runs a SciPy cross-check of tests/stats (check_scipy.py, check_sequential.py, …) with
# the first python3 that has scipy: $EVALD_PYTHON, python3 on PATH, then Debian's
# /usr/bin/python3. Exit 77 (skipped) with a visible line when there is none.
# Usage: run.sh <check script name> <dump binary> [args...]
check=$1
dump=$2
shift 2
here=${0%/*}
for py in "${EVALD_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  command -v "$py" >/dev/null 2>&1 || continue
  if "$py" -c 'import numpy, scipy.stats, scipy.special' >/dev/null 2>&1; then
    exec "$py" "$here/$check" "$dump" "$@"
  fi
done
echo "SKIPPED: $check needs python3 with scipy (apt-get install python3-scipy)" >&2
exit 77
