# The OpenAPI contract on real traffic (docs/contract.md). Every test labelled
# `integration` records its HTTP exchanges with evald into one folder of the build
# (EVALD_CONTRACT_RECORD; tests/support/contract_record.c for the C suites,
# tests/support/contract_proxy.mjs in front of stack-based suites), and contract/openapi,
# which runs after all of them, checks each exchange against openapi/openapi.json.
#   contract/reset    empties the folder; a fixture every recording test requires, so a
#                     partial run (ctest -R …) starts from a clean record too
#   contract/openapi  tests/openapi/contract.mjs over the folder; skipped (77) without node
#                     or tests/openapi/node_modules; fails on any mismatch or an empty record
set(EVALD_CONTRACT_DIR ${CMAKE_BINARY_DIR}/contract-traffic)

add_test(NAME contract/reset
         COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\"" reset ${EVALD_CONTRACT_DIR})
set_tests_properties(contract/reset PROPERTIES
  LABELS contract
  FIXTURES_SETUP evald_contract_record)

add_test(NAME contract/openapi
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/openapi/run.sh contract)
# Only the `contract` label: `ctest -L openapi` (the document's own checks) must not need
# recorded traffic; `ctest -L 'integration|contract'` runs the suites and the check.
set_tests_properties(contract/openapi PROPERTIES
  LABELS contract
  SKIP_RETURN_CODE 77
  TIMEOUT 300
  ENVIRONMENT "EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR};EVALD_CONTRACT_RECORD=${EVALD_CONTRACT_DIR}")

# Runs once every tests/cmake/*.cmake file is included, so that suites registered after
# this file (in name order) record too.
function(evald_contract_wire)
  get_property(all DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY TESTS)
  set(recorders)
  foreach(t ${all})
    get_test_property(${t} LABELS labels)
    if(NOT "integration" IN_LIST labels)
      continue()
    endif()
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT
      "EVALD_CONTRACT_RECORD=${EVALD_CONTRACT_DIR}" "EVALD_CONTRACT_SUITE=${t}")
    set_property(TEST ${t} APPEND PROPERTY FIXTURES_REQUIRED evald_contract_record)
    list(APPEND recorders ${t})
  endforeach()
  # DEPENDS orders without requiring success: a failing suite still has its traffic checked.
  set_tests_properties(contract/openapi PROPERTIES DEPENDS "${recorders}")
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL evald_contract_wire)
