# Cohen's kappa (domain/agreement.h) against an exact rational computation in Python's
# standard library: tests/stats/kappa_dump answers the tables tests/stats/check_kappa.py
# draws (fixed seed, 10,000 tables) and the script compares to 1e-12.
add_executable(kappa_dump ${CMAKE_SOURCE_DIR}/tests/stats/kappa_dump.c)
target_link_libraries(kappa_dump PRIVATE evald_lib)
find_program(EVALD_PYTHON3 python3)
if(EVALD_PYTHON3)
  add_test(NAME unit/stats_kappa
    COMMAND ${EVALD_PYTHON3} ${CMAKE_SOURCE_DIR}/tests/stats/check_kappa.py $<TARGET_FILE:kappa_dump>)
  set_tests_properties(unit/stats_kappa PROPERTIES LABELS unit TIMEOUT 300)
endif()
