# The console in headless Chromium against a real evald, evald-stub and PostgreSQL
# (tests/browser/run.sh → tests/stack.sh). Skipped (exit 77) without node,
# tests/browser/node_modules or Chromium.
add_test(NAME browser/console COMMAND sh ${CMAKE_SOURCE_DIR}/tests/browser/run.sh)
set_tests_properties(browser/console PROPERTIES
  LABELS "integration;browser"
  TIMEOUT 420
  SKIP_RETURN_CODE 77
  ENVIRONMENT "EVALD_BIN=$<TARGET_FILE:evald>;EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub;EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
