# The benchmarks themselves do not run in CI; this smoke run of every workload at a tiny
# size (bench/smoke.sh: evald only, a few seconds) keeps bench/ working. Skipped (77)
# without python3 or a test database.
add_test(NAME bench/smoke COMMAND sh ${CMAKE_SOURCE_DIR}/bench/smoke.sh)
set_tests_properties(bench/smoke PROPERTIES
  LABELS "integration;bench"
  TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "EVALD_BIN=$<TARGET_FILE:evald>;EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub")
