# The README's curl examples, run against a fresh stack, and its configuration table checked
# against `evald --help` (tests/readme/readme.test.mjs through tests/readme/run.sh). Skipped
# (exit 77) without node, curl or jq. Labelled integration, so its traffic is also recorded
# for contract/openapi (tests/cmake/contract.cmake).
add_test(NAME readme/examples COMMAND sh ${CMAKE_SOURCE_DIR}/tests/readme/run.sh)
set_tests_properties(readme/examples PROPERTIES
  LABELS "integration;readme"
  TIMEOUT 420
  SKIP_RETURN_CODE 77
  ENVIRONMENT "EVALD_BIN=$<TARGET_FILE:evald>;EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub;EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# What `make run` runs (scripts/run.sh) on a scratch PostgreSQL and free ports: ready with
# its demo, and a Ctrl-C stops everything it started, its PostgreSQL included.
add_test(NAME readme/make_run COMMAND bash ${CMAKE_SOURCE_DIR}/tests/readme/make_run.sh ${CMAKE_BINARY_DIR})
set_tests_properties(readme/make_run PROPERTIES
  LABELS readme
  TIMEOUT 120
  SKIP_RETURN_CODE 77)
