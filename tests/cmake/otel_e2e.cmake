# evald's trace export end to end (tests/otel/e2e.sh, shared/spec/otel.md's checks): the
# real evald and evald-stub against a throwaway PostgreSQL with an OTLP receiver, HTTP tool
# and HTTP evaluator on loopback; JSON and protobuf exports decoded with the official
# opentelemetry-proto definitions (tests/otel/decode.mjs), a collector that is down or
# answers 503, the queue bound, secrets, log lines and invalid OTEL_* settings. Skipped
# (exit 77) without node or tests/otel/node_modules (npm ci there).
add_test(NAME otel/export COMMAND sh ${CMAKE_SOURCE_DIR}/tests/otel/e2e.sh)
set_tests_properties(otel/export PROPERTIES
  LABELS "integration;otel"
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "EVALD_BIN=$<TARGET_FILE:evald>;EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub;EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
