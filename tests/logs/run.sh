#!/bin/sh
# CTest logs/json: every line the suites' evald processes logged is JSON
# (tests/logs/check_logs.py). Skipped (77) without python3.
#   usage: tests/logs/run.sh LOG_DIR
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIPPED: python3 is not installed; the log lines were not checked"
  exit 77
fi
exec python3 "$(dirname "$0")/check_logs.py" "$1"
