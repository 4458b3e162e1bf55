# kcap — top-level Makefile.
#
# Each module keeps its own rules in <module>/module.mk (kernels, formats, capture, replay,
# cli, tests); this file holds the shared flags, the public targets and the test runner.
# Outputs land at fixed paths: build/lib/*.so, build/bin/kcap, build/plugins/libh5zstd.so.
#
#   make            build everything (host code, CUDA libraries, tests)
#   make test       CPU tests (what CI runs); ends with "N passed, N failed"
#   make test-gpu   GPU tests (run on a machine with an NVIDIA GPU, e.g. via the device tool)
#   make bench      CPU benchmarks;  make bench-gpu  GPU benchmarks
#   make demo       capture -> check -> replay on the bundled client (GPU if present, else CPU)
#   make asan       host code and CPU tests under AddressSanitizer + UBSan (build-asan/)
#   make deps       install the Debian packages the build needs (root), else print them
#   make install PREFIX=/usr/local ; make clean

SHELL := /bin/bash
.DEFAULT_GOAL := all

BUILD ?= build
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= cc
PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local

DEB_PACKAGES := libhdf5-dev libzstd-dev hdf5-tools python3-h5py python3-numpy python3-pytest \
	clang libclang-rt-dev
HDF5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
HDF5_LIBS := $(shell pkg-config --libs hdf5 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5)

# SAN is set by `make asan`; it applies to host code only (CUDA code is built by nvcc as is).
SAN ?=
OPT ?= -O2
INCLUDES := -Icommon -Ikernels -Iformats -Icapture -Ireplay -Icli -I$(CUDA_HOME)/include
CFLAGS := $(OPT) -g -std=gnu11 -Wall -Wextra -fPIC -pthread -D_GNU_SOURCE $(SAN) $(INCLUDES)
LDFLAGS := -pthread $(SAN)

LIB := $(BUILD)/lib
BIN := $(BUILD)/bin
OBJ := $(BUILD)/obj
TBIN := $(BUILD)/tests

# Filled by the module fragments.
ALL_TARGETS :=
TESTS :=          # executables/scripts run by `make test` (no arguments; exit 0 = pass)
ASAN_TESTS :=     # the subset that is meaningful under `make asan`
GPU_TESTS :=      # run by `make test-gpu`
BENCHES :=        # run by `make bench`
GPU_BENCHES :=    # run by `make bench-gpu`
KCAP_CLI_OBJS :=  # subcommand objects linked into build/bin/kcap

# Generic host compile rule: build/obj/<dir>/<file>.o from <dir>/<file>.c
$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) -MMD -MP -c $< -o $@

include common/module.mk
include kernels/module.mk
include formats/module.mk
include capture/module.mk
include replay/module.mk
include cli/module.mk
include tests/module.mk
include python/module.mk

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)

# Keep intermediate objects (chained rules would otherwise delete and relink them).
.SECONDARY:

.PHONY: all test test-gpu bench bench-gpu demo asan clean deps install check-deps

all: check-deps $(ALL_TARGETS)

# Fails early with the exact packages to install when headers are missing.
check-deps:
	@bash scripts/deps.sh --check $(DEB_PACKAGES)

deps:
	@bash scripts/deps.sh --install $(DEB_PACKAGES)

test: all
	@bash scripts/run_tests.sh $(TESTS)

asan:
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" OPT=-O1 all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  KCAP_BUILD=build-asan bash scripts/run_tests.sh $(subst $(BUILD)/,build-asan/,$(ASAN_TESTS))

test-gpu: all
	@V=1 bash scripts/run_tests.sh $(GPU_TESTS)  # GPU runs are rare: show every summary table

bench: all
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

bench-gpu: all
	@for b in $(GPU_BENCHES); do echo "== $$b"; $$b || exit 1; done

demo: all
	@bash scripts/demo.sh

install: all
	install -d $(PREFIX)/lib $(PREFIX)/bin $(PREFIX)/include $(PREFIX)/lib/kcap/plugins
	install -m 0755 $(BIN)/kcap $(PREFIX)/bin/
	install -m 0755 $(wildcard $(LIB)/*.so) $(PREFIX)/lib/
	install -m 0755 $(wildcard $(BUILD)/plugins/*.so) $(PREFIX)/lib/kcap/plugins/
	install -m 0644 kernels/verify_attn.h $(PREFIX)/include/

clean:
	rm -rf build build-asan
