# fathom: the two commands of the README.
#   make run    install what is missing, build, run the canned main scenario
#   make test   install what is missing, build, run every test (ctest, sanitizer build, luacheck)
BUILD     ?= build
SAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
MPI_BUILD ?= build-mpi
FUZZ_SECONDS ?= 10
JOBS      ?= 2
PACKAGES  := cmake gcc make pkg-config lua5.4 liblua5.4-dev libyaml-dev lua-cjson lua-busted lua-check \
             protobuf-compiler python3-protobuf libopenmpi-dev openmpi-bin
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run test ctest sanitize lint fuzz-smoke mpi bench install clean

all: build

deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATHOM_WERROR=ON

build: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j$(JOBS)

run: build
	$(BUILD)/fathom scenario run hoti25

ctest: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DFATHOM_WERROR=ON -DFATHOM_SANITIZE=ON
	cmake --build $(SAN_BUILD) -j$(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS)

lint: deps
	luacheck lua scenarios tests

# libFuzzer harnesses (tests/fuzz), a short run of each; skipped without clang.
# Longer: make fuzz-smoke FUZZ_SECONDS=1800
fuzz-smoke: deps
	@if command -v clang >/dev/null 2>&1; then \
	  cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DFATHOM_FUZZ=ON -DFATHOM_BUILD_TESTS=OFF \
	    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && \
	  cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_yaml fuzz_cli && \
	  tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS); \
	else echo "fuzz-smoke: clang not found, skipped (apt-get install clang)"; fi

# The optional MPI build (-DFATHOM_MPI=ON) and its specs: the same sweep and search under
# mpirun -n 4 as in one process, byte for byte; a failing or SIGKILLed rank (tests/spec/parallel_spec.lua).
mpi: deps
	cmake -S . -B $(MPI_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATHOM_WERROR=ON -DFATHOM_MPI=ON -DFATHOM_BUILD_TESTS=OFF
	cmake --build $(MPI_BUILD) -j$(JOBS) --target fathom
	FATHOM_TEST_BIN=$(MPI_BUILD)/fathom $(MPI_BUILD)/fathom tests/run_specs.lua tests/spec/parallel_spec.lua

test: ctest sanitize lint fuzz-smoke mpi
	@echo "all tests passed"

bench: build
	$(BUILD)/fathom_bench
	$(BUILD)/fathom bench/search_bench.lua 1,2
	$(BUILD)/fathom bench/route_bench.lua
	$(BUILD)/fathom bench/parallel_bench.lua
	$(BUILD)/fathom bench/sweep_bench.lua

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD) $(MPI_BUILD)
