# Keeps the layers of docs/architecture.md: common < domain, schema, harness, store <
# otel (above harness, whose HTTP transport it sends with) < engine, webhooks < handlers <
# server, adapter. Fails when
#   - a file outside store/ (tests/, stub/ and bench/ are not checked) includes libpq-fe.h,
#     calls a libpq function (PQ...) or holds a SQL statement: every query lives in store/;
#   - a file includes an evald layer its own layer may not use (the table below).
# The exceptions that remain are listed one by one with their reason.
# Run with -DSOURCE_DIR=<source>.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "run with -DSOURCE_DIR=<source>")
endif()

# The evald layers each layer may include (besides its own).
set(allowed_common "")
set(allowed_domain "common;schema")
set(allowed_schema "common")
set(allowed_harness "common;schema")
set(allowed_store "common")
# the OTLP exporter sends through the harness's HTTP transport; the harness only fills in
# spans (common/trace.h) and never includes otel/
set(allowed_otel "common;harness")
set(allowed_engine "common;domain;schema;harness;store;otel")
set(allowed_webhooks "common;domain;schema;harness;store")
# handlers reach the store, the harness, the schema and the domain only through the engine
set(allowed_handlers "common;engine;webhooks")
set(allowed_server "common;domain;schema;harness;store;otel;engine;webhooks;handlers;adapter")
set(allowed_adapter "common;engine;store")
set(allowed_cli "common")
set(layers common domain schema harness otel store engine webhooks handlers server adapter cli)

# "<file>|<included header>": includes the table does not allow, kept for a reason.
set(include_exceptions
  # the adapter answers invocations through the REST mirror's dispatch table
  # (evd_function_call) and its request/response contract, by design (docs/iii.md)
  "adapter/conn.c|handlers/api.h"
  "adapter/proto.c|handlers/functions.h")

# Files outside store/ that may use libpq or hold SQL: none.
set(libpq_exceptions "")

set(sql_pattern "\"[ \t]*(SELECT|INSERT INTO|DELETE FROM|LISTEN|NOTIFY|UPDATE [a-z_]+ SET|WITH [a-z_]+ AS)[ \t(]")
set(bad "")
set(n 0)
foreach(layer ${layers})
  file(GLOB sources ${SOURCE_DIR}/${layer}/*.c ${SOURCE_DIR}/${layer}/*.h)
  if(NOT sources AND NOT layer STREQUAL "cli")
    message(FATAL_ERROR "no sources under ${SOURCE_DIR}/${layer}")
  endif()
  foreach(src ${sources})
    math(EXPR n "${n} + 1")
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${src})
    file(STRINGS ${src} includes REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${includes})
      if(line MATCHES "\"([a-z_]+)/([A-Za-z0-9_.]+)\"")
        set(target ${CMAKE_MATCH_1})
        set(header "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}")
        list(FIND layers ${target} known)
        list(FIND allowed_${layer} ${target} ok)
        list(FIND include_exceptions "${rel}|${header}" excused)
        if(NOT known EQUAL -1 AND NOT target STREQUAL layer AND ok EQUAL -1 AND excused EQUAL -1)
          list(APPEND bad "${rel}: ${layer}/ may not include ${header}")
        endif()
      endif()
      if(NOT layer STREQUAL "store" AND line MATCHES "libpq-fe\\.h")
        list(FIND libpq_exceptions "${rel}" excused)
        if(excused EQUAL -1)
          list(APPEND bad "${rel}: only store/ includes libpq-fe.h")
        endif()
      endif()
    endforeach()
    if(NOT layer STREQUAL "store")
      list(FIND libpq_exceptions "${rel}" excused)
      file(STRINGS ${src} calls REGEX "(^|[^A-Za-z0-9_])PQ[a-zA-Z]+[ \t]*\\(")
      file(STRINGS ${src} sql REGEX "${sql_pattern}")
      if(excused EQUAL -1)
        foreach(line ${calls})
          string(STRIP "${line}" line)
          string(REPLACE ";" "," line "${line}")
          list(APPEND bad "${rel}: a libpq call outside store/: ${line}")
        endforeach()
        foreach(line ${sql})
          string(STRIP "${line}" line)
          string(REPLACE ";" "," line "${line}")
          list(APPEND bad "${rel}: a SQL statement outside store/: ${line}")
        endforeach()
      endif()
    endif()
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n" bad "${bad}")
  message(FATAL_ERROR "the layers are crossed:\n${bad}")
endif()
message(STATUS "layers hold (${n} files checked)")
