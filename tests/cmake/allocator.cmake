# unit/allocator: the evald binary runs on the allocator docs/engine.md ("Allocator") says.
# Built with jemalloc, it needs libjemalloc and imports no malloc_trim: jemalloc returns
# freed pages itself, and glibc's trim would only walk an arena that holds nothing
# (common/util.h, evd_memory_trim). Built without it (the sanitizer builds, or
# -DEVALD_JEMALLOC=OFF), evald trims glibc's arenas after large reports.
if(EVALD_JEMALLOC AND NOT EVALD_SANITIZE AND NOT EVALD_TSAN AND NOT EVALD_FUZZ)
  set(EVALD_ALLOCATOR_EXPECTED jemalloc)
else()
  set(EVALD_ALLOCATOR_EXPECTED glibc)
endif()
add_test(NAME unit/allocator
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/support/allocator.sh $<TARGET_FILE:evald>
                 ${EVALD_ALLOCATOR_EXPECTED})
set_tests_properties(unit/allocator PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
