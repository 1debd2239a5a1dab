# The iii adapter's Node suite: evald against a fake iii engine, with a second worker
# written with the real iii-sdk. tests/iii/run.sh skips (exit 77, SKIPPED line) without
# node, psql, a test database or tests/iii/node_modules, and fails when they are present
# and a check fails. CI runs `npm ci` in tests/iii first (scripts/test.sh does).
add_test(NAME iii/adapter COMMAND sh ${CMAKE_SOURCE_DIR}/tests/iii/run.sh)
set_tests_properties(iii/adapter PROPERTIES
  LABELS "integration;iii"
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "EVALD_BIN=$<TARGET_FILE:evald>;EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub;EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
