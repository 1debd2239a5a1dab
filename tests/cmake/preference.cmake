# The pairwise judge's statistics (domain/preference.h) against an independent Python
# implementation with SciPy: tests/stats/preference_dump answers the random judges, pair
# sets and byte strings tests/stats/check_preference.py draws (fixed seed, 3,000 treatments
# and 3,000 strings), and the script compares outcomes and counts exactly and every real to
# 1e-9. tests/stats/run.sh skips (exit 77, with a SKIPPED line) when no python3 with scipy
# is found.
add_executable(preference_dump ${CMAKE_SOURCE_DIR}/tests/stats/preference_dump.c)
target_link_libraries(preference_dump PRIVATE evald_lib)
add_test(NAME unit/preference_python
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/stats/run.sh check_preference.py $<TARGET_FILE:preference_dump>)
set_tests_properties(unit/preference_python PROPERTIES
  LABELS unit
  TIMEOUT 300
  SKIP_RETURN_CODE 77)
