# Shows that tests/support/layers.cmake can fail: copies the layer folders to WORK_DIR,
# plants one violation of each kind and requires the check to fail naming every one, and
# to pass on the unplanted copy. Run with -DSOURCE_DIR=<source> -DWORK_DIR=<scratch>.
set(layers common domain schema harness otel store engine webhooks handlers server adapter cli)
file(REMOVE_RECURSE ${WORK_DIR})
foreach(layer ${layers})
  if(EXISTS ${SOURCE_DIR}/${layer})
    file(COPY ${SOURCE_DIR}/${layer} DESTINATION ${WORK_DIR})
  endif()
endforeach()
set(check ${CMAKE_COMMAND} -DSOURCE_DIR=${WORK_DIR} -P ${SOURCE_DIR}/tests/support/layers.cmake)
execute_process(COMMAND ${check} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the check fails on an unplanted copy:\n${out}")
endif()
file(APPEND ${WORK_DIR}/store/db.c "\n#include \"engine/engine.h\"\n")
file(APPEND ${WORK_DIR}/engine/review.c "\n#include \"handlers/api.h\"\n")
file(APPEND ${WORK_DIR}/adapter/ws.c "\n#include \"server/config.h\"\n")
file(APPEND ${WORK_DIR}/harness/http.c "\n#include \"otel/otel.h\"\n")
file(APPEND ${WORK_DIR}/handlers/api.c "\n#include <libpq-fe.h>\n")
file(APPEND ${WORK_DIR}/handlers/tools.c "\n#include \"store/tools.h\"\n")
file(APPEND ${WORK_DIR}/handlers/system.c "\n#include \"schema/jsonschema.h\"\n")
file(APPEND ${WORK_DIR}/webhooks/policy.c
  "\nstatic void planted(void *c) { PQfinish(c); }\nstatic const char PLANTED[] = \"DELETE FROM jobs\";\n")
execute_process(COMMAND ${check} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "the check passes a tree with planted violations")
endif()
foreach(expect
    "store/db.c: store/ may not include engine/engine.h"
    "engine/review.c: engine/ may not include handlers/api.h"
    "adapter/ws.c: adapter/ may not include server/config.h"
    "harness/http.c: harness/ may not include otel/otel.h"
    "handlers/api.c: only store/ includes libpq-fe.h"
    "handlers/tools.c: handlers/ may not include store/tools.h"
    "handlers/system.c: handlers/ may not include schema/jsonschema.h"
    "webhooks/policy.c: a libpq call outside store/"
    "webhooks/policy.c: a SQL statement outside store/")
  string(FIND "${out}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the check did not report \"${expect}\":\n${out}")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "the layer check catches every planted violation")
