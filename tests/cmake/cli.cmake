# evald-cli's unit tests link its own library (cli/, without main); the integration suites
# run the real evald-cli binary (EVALD_CLI_BIN) against a real evald.
if(TARGET test_cli)
  target_link_libraries(test_cli PRIVATE evald_cli_lib)
endif()
foreach(t unit/test_cli integration/test_cli_run integration/test_cli_experiment
          integration/test_cli_experiment_errors integration/test_cli_experiment_plan
          integration/test_cli_agents)
  if(TEST ${t})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "EVALD_CLI_BIN=$<TARGET_FILE:evald-cli>")
  endif()
endforeach()

# docs/ci.md, run: its workflow's steps executed as a runner would, against a local evald
# and evald-stub (tests/cli/ci_example.c). It reads the workflow with evald-cli's loader.
add_executable(ci_example ${CMAKE_SOURCE_DIR}/tests/cli/ci_example.c)
target_link_libraries(ci_example PRIVATE evald_testsupport evald_cli_lib)
add_dependencies(ci_example evald evald-cli evald-stub)
add_test(NAME cli/ci_example COMMAND ci_example)
set_tests_properties(cli/ci_example PROPERTIES
  LABELS "integration;cli"
  TIMEOUT 300
  ENVIRONMENT "EVALD_BIN=$<TARGET_FILE:evald>;EVALD_CLI_BIN=$<TARGET_FILE:evald-cli>;EVALD_STUB_BIN=${CMAKE_BINARY_DIR}/evald-stub;EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR};EVALD_TEST_LOG_DIR=${CMAKE_BINARY_DIR}/test-logs")

# The bash completion, run in bash (tests/cli/completion.sh).
add_test(NAME cli/completion COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/completion.sh)
set_tests_properties(cli/completion PROPERTIES
  LABELS "unit;cli"
  TIMEOUT 60
  ENVIRONMENT "EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
