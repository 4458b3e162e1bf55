# formats/module.mk — rules of the formats module (owned by its developer).
#
# libkcapfmt.a: snapshot in memory, writer, reader, seal, call descriptions (PIC objects, so
# libkcap.so can link it). build/plugins/libh5zstd.so: the zstd filter for stock HDF5 tools,
# compiled against the HDF5 headers only (links libzstd, never libhdf5). Tests, the fuzz
# target and the benchmark live under tests/formats/.

FORMATS_LIB := $(LIB)/libkcapfmt.a
FORMATS_PLUGIN := $(BUILD)/plugins/libh5zstd.so
FORMATS_LIBS := $(HDF5_LIBS) -lzstd -lpthread -lm

# The call descriptions live next to the ABI they describe (kernels/vattn_desc.c, with the
# argument checks they use) and are linked in here: every reader and writer knows the calls.
FORMATS_SRCS := $(filter-out formats/kcap_h5zstd_plugin.c formats/kcap_cmd_%.c,$(wildcard formats/*.c)) \
                kernels/vattn_desc.c kernels/vattn_check.c
FORMATS_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(FORMATS_SRCS))
FORMATS_CMD_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(wildcard formats/kcap_cmd_*.c))

$(FORMATS_LIB): $(FORMATS_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(FORMATS_PLUGIN): $(OBJ)/formats/kcap_h5zstd_plugin.o $(OBJ)/formats/kcap_h5zstd_filter.o
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -o $@ $^ -lzstd

KCAP_CLI_OBJS += $(FORMATS_CMD_OBJS)
ALL_TARGETS += $(FORMATS_LIB) $(FORMATS_PLUGIN)

# ---- tests ----
FORMATS_TEST_SRCS := $(wildcard tests/formats/test_*.c)
FORMATS_TEST_BINS := $(patsubst tests/formats/%.c,$(TBIN)/formats/%,$(FORMATS_TEST_SRCS))

$(TBIN)/formats/%: $(OBJ)/tests/formats/%.o $(OBJ)/tests/formats/fmt_testutil.o $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(FORMATS_LIBS)

ALL_TARGETS += $(FORMATS_TEST_BINS)
TESTS += $(FORMATS_TEST_BINS)
ASAN_TESTS += $(FORMATS_TEST_BINS)

# test helpers (not tests themselves)
FORMATS_TOOLS := $(TBIN)/formats/tool_mksnap $(TBIN)/formats/tool_describe
$(TBIN)/formats/tool_%: $(OBJ)/tests/formats/tool_%.o $(OBJ)/tests/formats/fmt_testutil.o $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(FORMATS_LIBS)
ALL_TARGETS += $(FORMATS_TOOLS)

FORMATS_BENCH := $(TBIN)/formats/bench_formats
$(TBIN)/formats/bench_%: $(OBJ)/tests/formats/bench_%.o $(OBJ)/tests/formats/fmt_testutil.o $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(FORMATS_LIBS)
ALL_TARGETS += $(FORMATS_BENCH)
BENCHES += $(FORMATS_BENCH)

# libFuzzer target over the reader: built only where clang and its libFuzzer runtime exist
# (tests/formats/test_fuzz.sh skips, exit 77, otherwise). All formats sources are compiled
# into it with the sanitizers, libhdf5/libzstd as they are.
FUZZ_CC ?= clang
FORMATS_FUZZ := $(TBIN)/formats/fuzz_reader
HAVE_LIBFUZZER := $(shell printf 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){(void)d;(void)n;return 0;}' | \
  $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null && echo yes)
ifeq ($(HAVE_LIBFUZZER),yes)
$(FORMATS_FUZZ): tests/formats/fuzz_reader.c $(FORMATS_SRCS) common/kcap_error.c $(wildcard formats/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) -O1 -g -std=gnu11 -D_GNU_SOURCE -pthread -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined $(INCLUDES) $(HDF5_CFLAGS) -o $@ \
	  tests/formats/fuzz_reader.c $(FORMATS_SRCS) common/kcap_error.c $(FORMATS_LIBS)
ALL_TARGETS += $(FORMATS_FUZZ)
endif

FORMATS_SCRIPTS := tests/formats/test_h5tools.sh tests/formats/test_cli.sh tests/formats/test_fuzz.sh \
	tests/formats/test_bounded.sh
TESTS += $(FORMATS_SCRIPTS)
ASAN_TESTS += tests/formats/test_cli.sh

# The resealing fuzzer (tests/formats/fuzz_reseal.c): mutated snapshots with a recomputed
# seal through every reader path. A bounded run is part of `make test`
# (tests/formats/test_reseal_fuzz.sh, KCAP_RESEAL_SECONDS, default 20); `make fuzz-long`
# runs KCAP_FUZZ_LONG_SECONDS (default 3600) on every core, crashes saved to build/fuzz-crashes.
FORMATS_RESEAL := $(TBIN)/formats/fuzz_reseal
$(FORMATS_RESEAL): $(OBJ)/tests/formats/fuzz_reseal.o $(OBJ)/tests/formats/fmt_testutil.o $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(FORMATS_LIBS)
ALL_TARGETS += $(FORMATS_RESEAL)
TESTS += tests/formats/test_reseal_fuzz.sh tests/formats/test_format_tables.sh

# FORMAT.md's per-call tables, regenerated from the descriptions (the test above fails when
# they drift).
.PHONY: format-tables
format-tables: $(TBIN)/formats/tool_describe
	bash scripts/format_tables.sh --write

.PHONY: fuzz-long
fuzz-long: $(FORMATS_RESEAL)
	@mkdir -p $(BUILD)/fuzz-crashes
	@n=$$(nproc); for i in $$(seq 1 $$n); do \
	  KCAP_READ_MAX_BYTES=$${KCAP_READ_MAX_BYTES:-1073741824} $(FORMATS_RESEAL) -t $${KCAP_FUZZ_LONG_SECONDS:-3600} -s $$i -o $(BUILD)/fuzz-crashes \
	    tests/formats/corpus/ok-*.h5 > $(BUILD)/fuzz-crashes/run-$$i.log 2>&1 & done; \
	  wait; cat $(BUILD)/fuzz-crashes/run-*.log | grep -v '^fuzz_reseal: [0-9]* execs'; \
	  ! ls $(BUILD)/fuzz-crashes/crash-*.h5 >/dev/null 2>&1
