# evald-cli's unit tests link its own library (cli/, without main); the integration suite
# runs the real evald-cli binary (EVALD_CLI_BIN) against a real evald.
if(TARGET test_cli)
  target_link_libraries(test_cli PRIVATE evald_cli_lib)
endif()
foreach(t unit/test_cli integration/test_cli_run integration/test_cli_experiment)
  if(TEST ${t})
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "EVALD_CLI_BIN=$<TARGET_FILE:evald-cli>")
  endif()
endforeach()
