# The statistics module against SciPy: tests/stats/stats_dump answers the requests that
# tests/stats/check_scipy.py generates (fixed seed, 10,000+ inputs per function) and the
# script compares every value with SciPy's to 1e-9 relative. tests/stats/run.sh skips
# (exit 77, with a SKIPPED line) when no python3 with scipy is found.
add_executable(stats_dump ${CMAKE_SOURCE_DIR}/tests/stats/stats_dump.c)
target_link_libraries(stats_dump PRIVATE evald_lib)
add_test(NAME unit/stats_scipy
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/stats/run.sh check_scipy.py $<TARGET_FILE:stats_dump>)
set_tests_properties(unit/stats_scipy PROPERTIES
  LABELS unit
  TIMEOUT 300
  SKIP_RETURN_CODE 77)
