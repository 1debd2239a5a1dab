# Every line the suites' own evald and evald-stub processes log must be JSON
# (docs/architecture.md, logging). The C suites put each child's stderr under
# build/test-logs (tests/support/itest.c); tests/stack.sh, the iii suite and bench/smoke
# copy their processes' logs there too, all through EVALD_TEST_LOG_DIR.
#   logs/reset  empties the folder; a fixture every `integration` test requires, so a
#               partial run (ctest -R …) checks only its own logs
#   logs/json   tests/logs/check_logs.py over the folder, after every integration test
#               (DEPENDS orders without requiring success); prints FILE:LINE of each line
#               that is not a JSON object and fails; skipped (77) without python3 or logs
set(EVALD_TEST_LOG_DIR ${CMAKE_BINARY_DIR}/test-logs)

add_test(NAME logs/reset
         COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\"" reset ${EVALD_TEST_LOG_DIR})
set_tests_properties(logs/reset PROPERTIES LABELS logs FIXTURES_SETUP evald_test_logs)

add_test(NAME logs/json COMMAND sh ${CMAKE_SOURCE_DIR}/tests/logs/run.sh ${EVALD_TEST_LOG_DIR})
set_tests_properties(logs/json PROPERTIES
  LABELS logs
  SKIP_RETURN_CODE 77
  TIMEOUT 120)

# Runs once every tests/cmake/*.cmake file is included, so that suites registered after
# this file (in name order) are covered too.
function(evald_logs_wire)
  get_property(all DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY TESTS)
  set(writers)
  foreach(t ${all})
    get_test_property(${t} LABELS labels)
    if(NOT "integration" IN_LIST labels)
      continue()
    endif()
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "EVALD_TEST_LOG_DIR=${EVALD_TEST_LOG_DIR}")
    set_property(TEST ${t} APPEND PROPERTY FIXTURES_REQUIRED evald_test_logs)
    list(APPEND writers ${t})
  endforeach()
  set_tests_properties(logs/json PROPERTIES DEPENDS "${writers}")
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL evald_logs_wire)
