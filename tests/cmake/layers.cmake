# Every query in store/, and no layer including one it may not use (docs/architecture.md).
# The check script lives in tests/support so that the tests/cmake/*.cmake glob does not
# include it at configure time.
add_test(NAME unit/layers_hold
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -P ${CMAKE_SOURCE_DIR}/tests/support/layers.cmake)
set_tests_properties(unit/layers_hold PROPERTIES LABELS unit)
# The check itself fails on planted violations.
add_test(NAME unit/layers_check_fails
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DWORK_DIR=${CMAKE_BINARY_DIR}/layers-selftest
          -P ${CMAKE_SOURCE_DIR}/tests/support/layers_selftest.cmake)
set_tests_properties(unit/layers_check_fails PROPERTIES LABELS unit)
