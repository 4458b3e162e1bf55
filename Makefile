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
#   make install [DESTDIR=] [PREFIX=/usr/local] [HDF5_PLUGIN_DIR=] ; make uninstall ; make clean

SHELL := /bin/bash
.DEFAULT_GOAL := all

BUILD ?= build
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= cc
PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local

DEB_PACKAGES := libhdf5-dev libzstd-dev hdf5-tools python3-h5py python3-numpy python3-pytest \
	python3-matplotlib pkg-config clang libclang-rt-dev
HDF5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
HDF5_LIBS := $(shell pkg-config --libs hdf5 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5)

# SAN is set by `make asan`; it applies to host code only (CUDA code is built by nvcc as is).
SAN ?=
OPT ?= -O2
# Without the CUDA toolkit every CPU part still builds: host code needs cuda.h for driver
# API types only (it loads libcuda at run time), so a stub of those types stands in
# (cli/nocuda/cuda.h, checked against the real header by tests/e2e/test_nocuda_header.sh),
# and the targets that need nvcc or cudart are left out below, with a note saying so.
HAVE_CUDA := $(shell test -f $(CUDA_HOME)/include/cuda.h && test -x $(NVCC) && echo 1)
CUDA_INCLUDE := $(if $(HAVE_CUDA),-I$(CUDA_HOME)/include,-Icli/nocuda)
INCLUDES := -Icommon -Ikernels -Iformats -Icapture -Ireplay -Icli $(CUDA_INCLUDE)
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
GPU_PREREQS :=    # built for those two only
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

ifneq ($(HAVE_CUDA),1)
# nvcc / cudart targets of kernels/module.mk (capture/module.mk already falls back to plain
# device copies without nvcc). test-gpu and bench-gpu then run whatever is left.
CUDA_ONLY_TARGETS += $(VATTN_CUDA_LIB) $(TBIN)/test_verify_gpu $(TBIN)/vattn_dev $(VATTN_CUDA_PERTURBED)
ALL_TARGETS := $(filter-out $(CUDA_ONLY_TARGETS),$(ALL_TARGETS))
GPU_TESTS := $(filter-out $(CUDA_ONLY_TARGETS),$(GPU_TESTS))
GPU_PREREQS := $(filter-out $(CUDA_ONLY_TARGETS),$(GPU_PREREQS))
ifeq ($(filter clean deps help,$(MAKECMDGOALS)),)
$(info make: no CUDA toolkit at CUDA_HOME=$(CUDA_HOME) (cuda.h / nvcc): building the CPU parts; skipped: $(notdir $(CUDA_ONLY_TARGETS)) and capture's embedded gather PTX)
endif
endif

# Keep intermediate objects (chained rules would otherwise delete and relink them).
.SECONDARY:

.PHONY: all test test-gpu bench bench-gpu demo asan clean deps install uninstall check-deps

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

test-gpu: all $(GPU_PREREQS)
	@V=1 bash scripts/run_tests.sh $(GPU_TESTS)  # GPU runs are rare: show every summary table

bench: all
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

bench-gpu: all $(GPU_PREREQS)
	@for b in $(GPU_BENCHES); do echo "== $$b"; t0=$$(date +%s); $$b || exit 1; \
	  echo "== $$b: $$(( $$(date +%s) - t0 )) s"; done

demo: all
	@bash scripts/demo.sh

# ---- install / uninstall -----------------------------------------------------------------
# DESTDIR stages (packaging); PREFIX is where it will live. The filter plugin also goes into
# libhdf5's compiled-in default plugin directory (asked of the library: Debian and upstream
# differ), so h5dump / h5py read snapshots with no HDF5_PLUGIN_PATH; override with
# HDF5_PLUGIN_DIR=. The Python package goes where $(PYTHON) looks for PREFIX's packages,
# with python/kcap-VERSION.dist-info, which registers the pytest plugin (pytest --kcap-golden
# needs no -p; in-tree the same with PYTHONPATH=python).
KCAP_VERSION_STR := $(shell sed -n 's/^\#define KCAP_VERSION "\(.*\)"/\1/p' common/kcap_version.h)
PY_VER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)
PYTHON_SITE ?= $(PREFIX)/lib/python$(PY_VER)/dist-packages
HDF5_PLUGIN_DIR ?=
MANDIR ?= $(PREFIX)/share/man
KCAP_DISTINFO := kcap-$(KCAP_VERSION_STR).dist-info
INSTALL_LIBS := $(notdir $(wildcard $(LIB)/*.so))
INSTALL_HEADERS := formats/kcap_export.h formats/kcap_snapshot.h common/kcap_error.h
h5plugindir = $(or $(HDF5_PLUGIN_DIR),$(shell $(BUILD)/tools/kcap_h5plugindir 2>/dev/null),/usr/local/hdf5/lib/plugin)

install: all
	@set -e; D='$(DESTDIR)'; P='$(PREFIX)'; H5="$(h5plugindir)"; S='$(PYTHON_SITE)'; \
	install -d $$D$$P/bin $$D$$P/lib/pkgconfig $$D$$P/include/kcap $$D$$P/lib/kcap/plugins \
	  $$D$$H5 $$D$$S/kcap $$D$$S/$(KCAP_DISTINFO) $$D$(MANDIR)/man1; \
	install -m 0755 $(BIN)/kcap $$D$$P/bin/; \
	for l in $(INSTALL_LIBS); do install -m 0755 $(LIB)/$$l $$D$$P/lib/; done; \
	install -m 0755 $(BUILD)/plugins/libh5zstd.so $$D$$P/lib/kcap/plugins/; \
	install -m 0755 $(BUILD)/plugins/libh5zstd.so $$D$$H5/; \
	install -m 0644 kernels/verify_attn.h $$D$$P/include/; \
	install -m 0644 $(INSTALL_HEADERS) $$D$$P/include/kcap/; \
	install -m 0644 $(PY_PKG_FILES) $$D$$S/kcap/; \
	install -m 0644 python/$(KCAP_DISTINFO)/* $$D$$S/$(KCAP_DISTINFO)/; \
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: kcap\nDescription: kcap snapshot reader (libkcapfmt) and the verify-attention ABI header\nVersion: $(KCAP_VERSION_STR)\nCflags: -I$${includedir} -I$${includedir}/kcap\nLibs: -L$${libdir} -lkcapfmt\n' \
	  "$$P" > $$D$$P/lib/pkgconfig/kcap.pc; \
	install -m 0644 cli/kcap.1 $$D$(MANDIR)/man1/; \
	echo "installed kcap into $$D$$P (python: $$D$$S, HDF5 filter plugin: $$D$$H5)"

uninstall:
	@D='$(DESTDIR)'; P='$(PREFIX)'; H5="$(h5plugindir)"; S='$(PYTHON_SITE)'; \
	rm -f $$D$$P/bin/kcap $(addprefix $$D$$P/lib/,$(INSTALL_LIBS)) \
	  $$D$$P/lib/kcap/plugins/libh5zstd.so $$D$$H5/libh5zstd.so $$D$$P/include/verify_attn.h \
	  $(addprefix $$D$$P/include/kcap/,$(notdir $(INSTALL_HEADERS))) $$D$$P/lib/pkgconfig/kcap.pc \
	  $$D$(MANDIR)/man1/kcap.1; \
	rm -rf $$D$$S/kcap $$D$$S/$(KCAP_DISTINFO); \
	rmdir $$D$$P/lib/kcap/plugins $$D$$P/lib/kcap $$D$$P/include/kcap 2>/dev/null; \
	echo "removed kcap from $$D$$P"

clean:
	rm -rf build build-asan
