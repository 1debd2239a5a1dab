# Fuzz targets (tests/fuzz/fuzz_<name>.c, docs/fuzzing.md). Every build gets a replay
# executable per target (the target's entry point with tests/fuzz/replay.c as main) and a
# CTest test fuzz/<name> that replays the target's seed corpus and every kept crash under
# tests/fuzz/regressions/<name>/, so a fixed crash stays fixed in `make test` and, under
# ASan/UBSan, in `make test-asan`. With EVALD_FUZZ (clang) the libFuzzer executables
# fuzz_<name> are built as well; `make fuzz` and `make fuzz-smoke` run them.
file(GLOB EVALD_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
set(EVALD_FUZZ_NAMES)
foreach(src ${EVALD_FUZZ_SOURCES})
  get_filename_component(stem ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${stem})
  list(APPEND EVALD_FUZZ_NAMES ${name})

  add_executable(fuzz_replay_${name} ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay.c)
  target_link_libraries(fuzz_replay_${name} PRIVATE evald_lib)

  set(inputs ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name})
  # A glob, so that a newly kept crash makes CMake look again.
  file(GLOB kept CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/regressions/${name}/*)
  if(kept)
    list(APPEND inputs ${CMAKE_SOURCE_DIR}/tests/fuzz/regressions/${name})
  endif()
  add_test(NAME fuzz/${name} COMMAND fuzz_replay_${name} ${inputs})
  set_tests_properties(fuzz/${name} PROPERTIES LABELS "unit;fuzz" TIMEOUT 300)

  if(EVALD_FUZZ)
    add_executable(fuzz_${name} ${src})
    target_link_libraries(fuzz_${name} PRIVATE evald_lib)
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    list(APPEND EVALD_FUZZ_EXECUTABLES fuzz_${name})
  endif()
endforeach()
if(EVALD_FUZZ)
  add_custom_target(fuzz_all DEPENDS ${EVALD_FUZZ_EXECUTABLES})
endif()
