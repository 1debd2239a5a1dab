# Thin wrapper over CMake and the scripts in scripts/. The two commands a new user
# needs are `make run` and `make test`; both install missing Debian packages first.
MAKEFLAGS += --no-print-directory
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test test-asan bench-smoke chaos chaos-smoke format clean

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

# The chaos suite (tests/chaos/chaos.sh): kill -9, kill -STOP past the lease and immediate
# PostgreSQL restarts under several processes, then every run, result, provider call and
# webhook event is checked. chaos-smoke is the bounded one CI runs (about 2 minutes).
chaos: build
	@CHAOS_PROFILE=full tests/chaos/chaos.sh $(BUILD)

chaos-smoke: build
	@CHAOS_PROFILE=smoke tests/chaos/chaos.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
