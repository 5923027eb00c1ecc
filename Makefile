# User-facing targets. `make demo` and `make test` work on a fresh Debian machine:
# they install what is missing, build, and run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CCACHE_DIR ?= $(HOME)/.cache/strata-ccache
export CCACHE_DIR

# Every Debian package the project needs, to build, test and run on CPU.
PACKAGES := cmake ninja-build ccache g++ \
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools \
  libflatbuffers-dev flatbuffers-compiler libopenblas-dev \
  libopenmpi-dev openmpi-bin googletest libgtest-dev \
  python3-torch fortunes-min

# Not a Debian package: the CUDA Toolkit the machines carry: its headers
# build the cuda backend, its NVRTC and ptxas make and check the cuda
# target's kernels (no GPU needed).
CUDA_HOME ?= /usr/local/cuda
export CUDA_HOME

BIN := $(BUILD_DIR)/bin
LIT := /usr/lib/llvm-22/bin/lit

.PHONY: all deps cuda-toolkit configure build test test-tsan demo clean format

all: build

deps:
	@missing=$$(for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

cuda-toolkit:
	@ls $(CUDA_HOME)/lib64/libnvrtc.so* >/dev/null 2>&1 && [ -x $(CUDA_HOME)/bin/ptxas ] || \
	  { echo "error: strata needs the CUDA Toolkit (its headers, NVRTC and ptxas; no GPU) in $(CUDA_HOME) (CUDA_HOME=... to point elsewhere)"; exit 1; }

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCUDAToolkit_ROOT=$(CUDA_HOME)

configure: deps cuda-toolkit $(BUILD_DIR)/build.ninja

build: configure
	ninja -C $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure

# The parity layouts under ThreadSanitizer alone (make test runs them too).
test-tsan: build
	$(LIT) -sv $(BUILD_DIR)/test --filter parity-tsan

demo: build
	@./examples/demo.sh $(BIN)

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
