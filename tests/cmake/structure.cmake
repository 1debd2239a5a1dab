# The project's shape (docs/engine.md): no loop of calls between the engine's files, read
# from the compiled objects of evald_lib, and no source file over 1,000 lines. The scripts
# live in tests/support so that the tests/cmake/*.cmake glob does not include them.
add_test(NAME unit/engine_calls_acyclic
  COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/support/structure.py calls
          ${CMAKE_BINARY_DIR}/CMakeFiles/evald_lib.dir/engine ${CMAKE_SOURCE_DIR}/engine)
add_test(NAME unit/source_files_short
  COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/support/structure.py lengths ${CMAKE_SOURCE_DIR})
# The checks themselves fail on planted loops and long files.
add_test(NAME unit/structure_check_fails
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/support/structure_selftest.sh
          ${CMAKE_SOURCE_DIR}/tests/support/structure.py ${CMAKE_C_COMPILER}
          ${CMAKE_BINARY_DIR}/structure-selftest)
set_tests_properties(unit/engine_calls_acyclic unit/source_files_short
  unit/structure_check_fails PROPERTIES LABELS unit)
