#!/bin/sh
# CTest entry otel/decode (tests/cmake/otel.cmake): has tests/unit/test_otel_encode write
# its JSON and protobuf encodings of the same spans into a scratch folder, then decodes
# both with the official OTLP definitions (node --test decode.test.mjs). Exits 77 (reported
# as skipped, with a SKIPPED line) only when node or tests/otel/node_modules is missing;
# install the packages once with: (cd tests/otel && npm ci)
# Usage: run.sh <test_otel_encode binary> <scratch folder>
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
bin=$1
work=$2
if ! command -v node >/dev/null 2>&1; then
    echo "SKIPPED: node is not installed; evald's OTLP exports were not decoded"
    exit 77
fi
if [ ! -d "$dir/node_modules/@opentelemetry/otlp-transformer" ]; then
    echo "SKIPPED: $dir/node_modules is missing; run 'npm ci' in tests/otel to decode evald's OTLP exports"
    exit 77
fi
rm -rf "$work"
mkdir -p "$work"
EVALD_OTEL_FIXTURE_DIR=$work CK_RUN_CASE=fixture "$bin"
for f in export.json export.pb; do
    if [ ! -s "$work/$f" ]; then
        echo "otel/decode: $bin wrote no $work/$f" >&2
        exit 1
    fi
done
cd "$dir"
if EVALD_OTEL_FIXTURE_DIR=$work node --test decode.test.mjs; then
    rm -rf "$work"
else
    status=$?
    echo "otel/decode: the bodies are kept in $work" >&2
    exit $status
fi
