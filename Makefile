# Thin wrapper over CMake and the scripts in scripts/. The two commands a new user
# needs are `make run` and `make test`; both install missing Debian packages first.
MAKEFLAGS += --no-print-directory
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test test-asan bench-smoke fuzz fuzz-smoke fuzz-build format clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD)

test: build
	@scripts/test.sh $(BUILD)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DEVALD_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@CK_FORK=no scripts/test.sh $(ASAN_BUILD)

# The benchmark scripts at a tiny size (CTest bench/smoke); bench/run.sh runs the real ones.
bench-smoke: build
	@url=$${EVALD_TEST_DATABASE_URL:-$$(EVALD_PG_FSYNC=off scripts/pg.sh start var/pg-test $${EVALD_TEST_PG_PORT:-54330})} && \
	  EVALD_TEST_DATABASE_URL=$$url ctest --test-dir $(BUILD) -R bench/smoke --output-on-failure

# libFuzzer targets of tests/fuzz (clang, ASan, UBSan) in their own build folder; docs/fuzzing.md.
# `make fuzz` runs each for FUZZ_SECONDS, two at a time; `make fuzz-smoke` (CI) for 60 s each.
# Findings go to artifacts/fuzz/<target>/ and fail the target.
fuzz-build: deps
	@echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
	  clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null || { \
	  echo "fuzz: clang cannot link libFuzzer: EVALD_DEPS_TEST_EXTRAS=1 scripts/deps.sh" >&2; exit 1; }
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVALD_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all

fuzz: fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_BUILD)

fuzz-smoke: fuzz-build
	@FUZZ_SECONDS=60 FUZZ_JOBS=2 tests/fuzz/run.sh $(FUZZ_BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
