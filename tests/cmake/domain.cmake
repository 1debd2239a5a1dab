# The domain layer stays pure: no database, HTTP or thread headers, and no includes
# of the layers above or beside it. The check script lives in tests/support so that
# the tests/cmake/*.cmake glob does not include it at configure time.
add_test(NAME unit/domain_is_pure
  COMMAND ${CMAKE_COMMAND} -DDOMAIN_DIR=${CMAKE_SOURCE_DIR}/domain
          -P ${CMAKE_SOURCE_DIR}/tests/support/domain_purity.cmake)
set_tests_properties(unit/domain_is_pure PROPERTIES LABELS unit)
