#!/usr/bin/env python3
"""Checks that every line of the logs the test suites' evald (and evald-stub) processes
wrote is one JSON object (docs/architecture.md, logging). Usage: check_logs.py DIR

Reads every regular file under DIR (build/test-logs: tests/support/itest.c and
tests/stack.sh put each child's stderr there). Prints each bad line as FILE:LINE: why,
then a summary; exits 1 when a line is not strict UTF-8 JSON object text, 77 (skipped)
when DIR holds no log at all, else 0.
"""
import json
import os
import sys


def check_file(path, bad):
    lines = 0
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        return 0
    chunks = data.split(b"\n")
    if chunks[-1] == b"":
        chunks.pop()
    else:
        bad.append((path, len(chunks), "the last line has no newline (cut short)", chunks[-1]))
    for n, raw in enumerate(chunks, 1):
        lines += 1
        try:
            text = raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError as e:
            bad.append((path, n, "not UTF-8 (%s)" % e.reason, raw))
            continue
        try:
            obj = json.loads(text)
        except ValueError as e:
            bad.append((path, n, "not JSON (%s)" % e, raw))
            continue
        if not isinstance(obj, dict):
            bad.append((path, n, "not a JSON object", raw))
    return lines


def main():
    if len(sys.argv) != 2:
        print("usage: check_logs.py DIR", file=sys.stderr)
        return 2
    root = sys.argv[1]
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.join(d, n) for n in names]
    files.sort()
    if not files:
        print("SKIPPED: no logs under %s (run the suites first: they write them)" % root)
        return 77
    bad = []
    total = sum(check_file(f, bad) for f in files)
    for path, n, why, raw in bad[:50]:
        excerpt = raw[:200].decode("utf-8", errors="backslashreplace")
        print("%s:%d: %s: %s" % (path, n, why, excerpt))
    if len(bad) > 50:
        print("... and %d more" % (len(bad) - 50))
    print("logs: %d files, %d lines, %d not JSON" % (len(files), total, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
