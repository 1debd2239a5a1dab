# evald-stub's Node suite: the official openai and @anthropic-ai/sdk clients against the
# real stub. tests/js/run.sh skips (exit 77) without node or node_modules and fails
# when they are present and a check fails. CI runs `npm ci` in tests/js first.
add_test(NAME js/stub_sdk COMMAND sh ${CMAKE_SOURCE_DIR}/tests/js/run.sh)
set_tests_properties(js/stub_sdk PROPERTIES
  LABELS "integration;js"
  TIMEOUT 180
  SKIP_RETURN_CODE 77
  ENVIRONMENT "EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub")
