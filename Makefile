# Thin wrapper over CMake and the scripts in scripts/. The two commands a new user
# needs are `make run` and `make test`; both install missing Debian packages first.
MAKEFLAGS += --no-print-directory
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run stop test test-asan test-tsan bench-smoke build-matrix container-test chaos chaos-smoke fuzz fuzz-smoke fuzz-build format clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Builds only what it serves (evald, evald-stub) and evald-cli; make test builds the rest.
run: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target evald evald-stub evald-cli
	@scripts/run.sh $(BUILD)

# Stops the private PostgreSQL of make run, should a killed run have left it running.
stop:
	@scripts/pg.sh stop $${EVALD_PG_DIR:-var/pg}

# Installs what every suite needs (Node, Chromium, SciPy, wrk, ...: scripts/deps.sh), so
# that a newcomer's run checks what CI checks; the run ends by naming each skipped check.
test: build
	@EVALD_DEPS_TEST_EXTRAS=1 scripts/deps.sh
	@scripts/test.sh $(BUILD)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer, but for the bench
# smoke and the browser test: both drive evald the way the integration suites already do,
# and under the sanitizers they cost CI about a minute.
test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DEVALD_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@CK_FORK=no scripts/test.sh $(ASAN_BUILD) -LE 'bench|browser'

# The suites that exercise threads (engine, webhooks, sessions, adapter) under
# ThreadSanitizer; a report fails them (scripts/ci/tsan.sh).
test-tsan: deps
	@TSAN_BUILD=$(TSAN_BUILD) JOBS=$(JOBS) scripts/ci/tsan.sh

# The benchmark scripts at a tiny size (CTest bench/smoke); bench/run.sh runs the real ones.
# scripts/test.sh starts the private PostgreSQL when needed and stops it afterwards.
bench-smoke: build
	@scripts/test.sh $(BUILD) -R bench/smoke

# Every build type (Debug, Release, RelWithDebInfo, MinSizeRel) with GCC and with Clang,
# each in build-matrix/<cc>-<type>; stops at the first failure, naming it.
build-matrix: deps
	@scripts/ci/build-matrix.sh

# The image built with podman on a debootstrapped base and the compose file's demo profile
# run with it, end to end (docs/openapi.md, "The container in CI"). Needs root.
container-test:
	@EVALD_DEPS_CONTAINER=1 scripts/deps.sh
	@scripts/ci/container.sh

# The chaos suite (tests/chaos/chaos.sh): kill -9, kill -STOP past the lease and immediate
# PostgreSQL restarts under several processes, then every run, result, provider call and
# webhook event is checked. chaos-smoke is the bounded one CI runs (about 2 minutes).
chaos: build
	@CHAOS_PROFILE=full tests/chaos/chaos.sh $(BUILD)

chaos-smoke: build
	@CHAOS_PROFILE=smoke tests/chaos/chaos.sh $(BUILD)

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
	@FUZZ_SECONDS=45 FUZZ_JOBS=2 tests/fuzz/run.sh $(FUZZ_BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) build-matrix
