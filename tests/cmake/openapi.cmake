# Node-driven checks of the OpenAPI document (openapi/) and the docker deployment (docker/),
# run through tests/openapi/run.sh. Each test is skipped (exit 77) with a SKIPPED line when
# node or tests/openapi/node_modules is absent (`npm ci --prefix tests/openapi`), and fails
# when they are present and the check fails.
foreach(check lint document docker)
  add_test(NAME openapi/${check}
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/openapi/run.sh ${check})
  set_tests_properties(openapi/${check} PROPERTIES
    LABELS openapi
    SKIP_RETURN_CODE 77
    TIMEOUT 300
    ENVIRONMENT "EVALD_SOURCE_DIR=${CMAKE_SOURCE_DIR};EVALD_BIN=$<TARGET_FILE:evald>")
endforeach()
