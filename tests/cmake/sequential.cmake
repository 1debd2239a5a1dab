# The sequential statistics (domain/sequential.h) against an independent Python
# implementation of the contract's formulas: tests/stats/sequential_dump answers the
# sequences, seeds, ids and plans tests/stats/check_sequential.py draws (fixed seed, 2,500
# random sequences), and the script compares every prefix's bounds to 1e-9, the verdicts,
# decided_at, the permutations and the planned cases exactly. tests/stats/run.sh
# skips (exit 77, with a SKIPPED line) when no python3 with scipy is found.
add_executable(sequential_dump ${CMAKE_SOURCE_DIR}/tests/stats/sequential_dump.c)
target_link_libraries(sequential_dump PRIVATE evald_lib)
add_test(NAME unit/sequential_python
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/stats/run.sh check_sequential.py $<TARGET_FILE:sequential_dump>)
set_tests_properties(unit/sequential_python PROPERTIES
  LABELS unit
  TIMEOUT 300
  SKIP_RETURN_CODE 77)
