# The OTLP exports decoded with the official opentelemetry-proto definitions (tests/otel,
# an npm project on @opentelemetry/otlp-transformer's generated protobufjs code):
# tests/otel/run.sh has test_otel_encode write its JSON and protobuf bodies of the same
# spans, then checks with node --test that both decode to the same request. Skipped (77,
# with a SKIPPED line) without node or tests/otel/node_modules (.ci/run runs npm ci there).
add_test(NAME otel/decode
  COMMAND sh ${CMAKE_SOURCE_DIR}/tests/otel/run.sh $<TARGET_FILE:test_otel_encode>
          ${CMAKE_BINARY_DIR}/otel-fixture)
set_tests_properties(otel/decode PROPERTIES
  LABELS otel
  TIMEOUT 120
  SKIP_RETURN_CODE 77)
