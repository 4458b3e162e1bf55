# replay/module.mk — rules of the replay module: `kcap replay` and `kcap diff` (objects linked
# into build/bin/kcap through KCAP_CLI_OBJS), the snapshot generator used by the tests
# (snapshots made without the interposer), the metrics unit test, and the replay test and
# benchmark scripts.

REPLAY_OBJS := $(addprefix $(OBJ)/replay/, kcap_compare.o kcap_json.o kcap_kernlib.o \
	kcap_devmem.o kcap_bench.o kcap_replay.o kcap_report.o kcap_snapfiles.o kcap_watch.o \
	kcap_cmd_replay.o kcap_cmd_diff.o kcap_saveout.o kcap_junit.o kcap_cmd_dump.o \
	kcap_diffdir.o)
KCAP_CLI_OBJS += $(REPLAY_OBJS)

REPLAY_GEN := $(TBIN)/kcap_gen_snap
REPLAY_CMP_TEST := $(TBIN)/test_kcap_compare

$(REPLAY_GEN): $(OBJ)/tests/replay/kcap_gen_snap.o $(OBJ)/replay/kcap_kernlib.o \
		$(OBJ)/replay/kcap_devmem.o $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS) -lzstd -ldl -lm

$(REPLAY_CMP_TEST): $(OBJ)/tests/replay/test_kcap_compare.o $(OBJ)/replay/kcap_compare.o \
		$(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS) -lzstd -ldl -lm

# Deliberately wrong libraries for the error-path tests (tests/replay/vattn_stub.c).
REPLAY_STUBS := $(TBIN)/libvattn_stub_nosym.so $(TBIN)/libvattn_stub_abi2.so \
	$(TBIN)/libvattn_stub_cuda.so $(TBIN)/libvattn_stub_hang.so $(TBIN)/libvattn_stub_modargs.so \
	$(TBIN)/libvattn_stub_hugews.so $(TBIN)/libvattn_stub_slowws.so $(TBIN)/libvattn_stub_latefail.so \
	$(TBIN)/libvattn_stub_ctor_abort.so $(TBIN)/libvattn_stub_closehang.so $(TBIN)/libvattn_stub_daemon.so \
	$(TBIN)/libvattn_stub_setsid.so
REPLAY_STUB_FLAG_nosym := -DSTUB_NOSYM
REPLAY_STUB_FLAG_abi2 := -DSTUB_ABI2
REPLAY_STUB_FLAG_cuda := -DSTUB_CUDA
REPLAY_STUB_FLAG_hang := -DSTUB_HANG
REPLAY_STUB_FLAG_modargs := -DSTUB_MODARGS
REPLAY_STUB_FLAG_hugews := -DSTUB_HUGEWS
REPLAY_STUB_FLAG_slowws := -DSTUB_SLOWWS
REPLAY_STUB_FLAG_latefail := -DSTUB_LATEFAIL
REPLAY_STUB_FLAG_ctor_abort := -DSTUB_CTOR_ABORT
REPLAY_STUB_FLAG_closehang := -DSTUB_CLOSEHANG
REPLAY_STUB_FLAG_daemon := -DSTUB_DAEMON
REPLAY_STUB_FLAG_setsid := -DSTUB_DAEMON -DSTUB_SETSID
$(TBIN)/libvattn_stub_%.so: tests/replay/vattn_stub.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fvisibility=hidden -shared $(REPLAY_STUB_FLAG_$*) $< -o $@ $(LDFLAGS)

ALL_TARGETS += $(REPLAY_GEN) $(REPLAY_CMP_TEST) $(REPLAY_STUBS)
TESTS += $(REPLAY_CMP_TEST) tests/replay/test_replay_cpu.sh tests/replay/test_report_names.sh
ASAN_TESTS += $(REPLAY_CMP_TEST) tests/replay/test_replay_cpu.sh tests/replay/test_report_names.sh
GPU_TESTS += tests/replay/test_replay_gpu.sh
GPU_BENCHES += tests/replay/bench_replay_gpu.sh
