# Regenerates harness/prices_data.c from harness/prices.json (the price table compiled into
# evald). Run from the source root after editing the JSON:
#   cmake -P scripts/harness_prices.cmake
# The unit test prices_data_matches_json fails until both say the same.
file(READ harness/prices.json text)
string(REPLACE "\\" "\\\\" text "${text}")
string(REPLACE "\"" "\\\"" text "${text}")
string(REGEX REPLACE "\n$" "" text "${text}")
string(REPLACE "\n" "\\n\"\n    \"" text "${text}")
file(WRITE harness/prices_data.c
  "/*\n * The price table compiled into the binary: a copy of harness/prices.json, kept identical by\n"
  " * the unit test prices_data_matches_json (regenerate with scripts/harness_prices.cmake).\n"
  " * Read-only data; safe from any thread.\n */\n#include \"harness/providers.h\"\n\n"
  "const char EVD_PRICES_JSON[] =\n    \"${text}\\n\";\n")
