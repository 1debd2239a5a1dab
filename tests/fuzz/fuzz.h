/*
 * The entry point every fuzz target defines (libFuzzer's). A target is one .c file in
 * this folder; it is linked either with libFuzzer (EVALD_FUZZ, clang) or with replay.c,
 * whose main feeds it each file named on the command line. Targets must not keep state
 * between inputs other than what they set up once, must release everything they allocate
 * (leaks are findings), and must not touch the network, the database or the disk.
 */
#ifndef EVD_TESTS_FUZZ_H
#define EVD_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
