# capture/module.mk — rules of the capture module: build/lib/libkcap.so (the LD_PRELOAD
# interposer), the `kcap record` / `kcap arm` subcommands, and capture's tests and benches.
#
# libkcap.so links formats (static, PIC, with the call descriptions of kernels/vattn_desc.c
# and the libraries' own argument checks, given the real library's workspace size: libkcap
# rejects what the library would and defines no kernel symbol it does not forward) + common,
# and exports only the interposed symbols: its version script is generated from the one list
# of hooked calls (kernels/vattn_hooks.def) and capture/libkcap.map.in. The gather/staging kernels
# are compiled to PTX by nvcc when it exists and embedded (capture/kcap_ptx.S); without nvcc
# the library still builds and uses plain copies on the device.

KCAP_LIB := $(LIB)/libkcap.so
CAPTURE_SRCS := kcap_interpose kcap_interpose_graph kcap_graphexec kcap_capture kcap_shadow kcap_state kcap_tags kcap_budget kcap_queue kcap_arm kcap_mem kcap_gpu kcap_gpu_drain kcap_gpu_shadow kcap_gpu_shadow_async kcap_gpu_shadow_graph kcap_shadow_summary kcap_shadow_load kcap_stage_layout \
                kcap_ring kcap_config kcap_log kcap_meta kcap_names kcap_size kcap_callrec
# shadow mode judges with replay's comparison rules (one definition of "correct")
CAPTURE_OBJS := $(patsubst %,$(OBJ)/capture/%.o,$(CAPTURE_SRCS)) $(OBJ)/capture/kcap_ptx.o \
                $(OBJ)/replay/kcap_compare.o
# formats/module.mk defines FORMATS_LIB once it can build it; until then nothing here that
# links it is part of `make all` (keeps the tree green for everyone).
KCAP_FORMATS_READY := $(if $(FORMATS_LIB),1,)
FORMATS_LIB ?= $(LIB)/libkcapfmt.a

$(OBJ)/capture/%.o: CFLAGS += -fvisibility=hidden

KCAP_HAVE_NVCC := $(shell test -x $(NVCC) && echo 1)
KCAP_PTX := $(OBJ)/capture/kcap_gather.ptx
ifeq ($(KCAP_HAVE_NVCC),1)
# compute_75 PTX is JIT-compiled by the driver for the GPU actually present.
$(KCAP_PTX): capture/kcap_gather.cu capture/kcap_shadow_cmp.cuh capture/kcap_shadow_cmp.h capture/kcap_stage_dev.h capture/kcap_ring.h
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_75 -O3 -Icapture -o $@ $<
$(OBJ)/capture/kcap_ptx.o: capture/kcap_ptx.S $(KCAP_PTX)
	@mkdir -p $(@D)
	$(CC) -c -DKCAP_PTX_FILE='"$(KCAP_PTX)"' $< -o $@
else
$(OBJ)/capture/kcap_ptx.o: capture/kcap_ptx.S
	@mkdir -p $(@D)
	$(CC) -c $< -o $@
endif

KCAP_MAP := $(OBJ)/capture/libkcap.map
$(KCAP_MAP): capture/libkcap.map.in kernels/vattn_hooks.def
	@mkdir -p $(@D)
	sed -n 's/^KCAP_HOOK(\([A-Za-z0-9_]*\),.*/    \1;/p' kernels/vattn_hooks.def > $@.hooks
	sed -e '/@HOOKS@/r $@.hooks' -e '/@HOOKS@/d' capture/libkcap.map.in > $@ && rm -f $@.hooks

$(KCAP_LIB): $(CAPTURE_OBJS) $(FORMATS_LIB) $(COMMON_OBJS) $(KCAP_MAP)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-z,defs -Wl,-soname,libkcap.so -Wl,--version-script=$(KCAP_MAP) \
	  -Wl,-z,nodelete -Wl,--wrap=kcap_h5_lock,--wrap=kcap_h5_unlock $(LDFLAGS) -o $@ $(CAPTURE_OBJS) $(FORMATS_LIB) $(COMMON_OBJS) \
	  $(HDF5_LIBS) -lzstd -ldl -lm

KCAP_CLI_OBJS += $(OBJ)/capture/kcap_cmd_record.o $(OBJ)/capture/kcap_cmd_arm.o \
                 $(OBJ)/capture/kcap_cmd_shadow.o $(OBJ)/capture/kcap_shadow_gate.o $(OBJ)/capture/kcap_child.o $(OBJ)/capture/kcap_shadow_loadcheck.o $(OBJ)/capture/kcap_arm_client.o \
                 $(OBJ)/capture/kcap_config_cli.o $(OBJ)/capture/kcap_names_cli.o

# the CLI gets its own copy of the parsers (default visibility, no libkcap internals)
$(OBJ)/capture/kcap_config_cli.o: capture/kcap_config.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) -MMD -MP -c $< -o $@

$(OBJ)/capture/kcap_names_cli.o: capture/kcap_names.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# ---- tests ------------------------------------------------------------------------------
CAPT := $(TBIN)/capture
# the C test kit: these rules compile their sources directly (no dependency files)
TESTKIT_H := tests/testkit.h tests/testkit_vattn.h
CAPTURE_TEST_BINS := $(CAPT)/test_capture_config $(CAPT)/test_capture_budget $(CAPT)/capture_client \
                     $(CAPT)/snapcmp $(CAPT)/libvattn_null.so $(CAPT)/bench_dormant \
                     $(CAPT)/test_capture_ring $(CAPT)/test_capture_layout $(CAPT)/badargs_client \
                     $(CAPT)/test_capture_state $(CAPT)/test_capture_queue $(CAPT)/test_capture_arm_watch \
                     $(CAPT)/test_capture_graphexec $(CAPT)/test_capture_shadow_dev $(CAPT)/test_capture_shadow_worker $(CAPT)/test_capture_cmp_plan \
                     $(CAPT)/test_capture_summary $(CAPT)/test_capture_gate $(CAPT)/test_capture_child
$(CAPT)/test_capture_config: tests/capture/test_capture_config.c $(OBJ)/capture/kcap_config_cli.o $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(filter-out %.h,$^) -o $@ $(LDFLAGS)

# shadow mode's compare launch plan, walked on the host as the kernel walks it
$(CAPT)/test_capture_cmp_plan: tests/capture/test_capture_cmp_plan.c capture/kcap_shadow_cmp.h $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests $< -o $@ $(LDFLAGS)

# kcap shadow's replay gate on its own: replay documents read, the pass rule, what it says
$(CAPT)/test_capture_gate: tests/capture/test_capture_gate.c capture/kcap_shadow_gate.c capture/kcap_shadow_gate.h \
                           capture/kcap_child.c capture/kcap_child.h $(OBJ)/capture/kcap_config_cli.o $(OBJ)/capture/kcap_names_cli.o $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_gate.c capture/kcap_shadow_gate.c capture/kcap_child.c \
	  $(OBJ)/capture/kcap_config_cli.o $(OBJ)/capture/kcap_names_cli.o $(COMMON_OBJS) -o $@ $(LDFLAGS)

# the checks' interrupt (kcap shadow's signal handler) on its own
$(CAPT)/test_capture_child: tests/capture/test_capture_child.c capture/kcap_child.c capture/kcap_child.h \
                            $(OBJ)/capture/kcap_names_cli.o $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_child.c capture/kcap_child.c \
	  $(OBJ)/capture/kcap_names_cli.o $(COMMON_OBJS) -o $@ $(LDFLAGS)

# shadow mode's summary file on its own, written from several threads at once
$(CAPT)/test_capture_summary: tests/capture/test_capture_summary.c capture/kcap_shadow_summary.c capture/kcap_shadow_summary.h \
                              capture/kcap_names.c $(FORMATS_LIB) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_summary.c capture/kcap_shadow_summary.c capture/kcap_names.c \
	  $(FORMATS_LIB) $(COMMON_OBJS) -o $@ $(LDFLAGS) -pthread

# the snapshot budget (KCAP_MAX, arming counts) on its own, threaded
$(CAPT)/test_capture_budget: tests/capture/test_capture_budget.c capture/kcap_budget.c capture/kcap_budget.h $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture tests/capture/test_capture_budget.c capture/kcap_budget.c -o $@ $(LDFLAGS) -pthread

# the process-wide state, the queue + writer and the arming watcher on their own
CAPTURE_UNIT_SRCS := capture/kcap_state.c capture/kcap_budget.c capture/kcap_log.c capture/kcap_config.c
$(CAPT)/test_capture_state: tests/capture/test_capture_state.c $(CAPTURE_UNIT_SRCS) $(wildcard capture/*.h) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_state.c $(CAPTURE_UNIT_SRCS) $(COMMON_OBJS) -o $@ $(LDFLAGS) -pthread -ldl
$(CAPT)/test_capture_queue: tests/capture/test_capture_queue.c capture/kcap_queue.c capture/kcap_names.c capture/kcap_size.c $(CAPTURE_UNIT_SRCS) $(FORMATS_LIB) $(wildcard capture/*.h) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) -Icapture -Itests tests/capture/test_capture_queue.c capture/kcap_queue.c capture/kcap_names.c capture/kcap_size.c \
	  $(CAPTURE_UNIT_SRCS) $(FORMATS_LIB) $(COMMON_OBJS) -o $@ $(LDFLAGS) $(FORMATS_LIBS) -ldl \
	  -Wl,--wrap=kcap_h5_lock,--wrap=kcap_h5_unlock # as libkcap.so: the queue's fork gate around libhdf5
# the clean graph twins on a fake driver (it stands in for kcap_cu_load: common's loader left out)
$(CAPT)/test_capture_graphexec: tests/capture/test_capture_graphexec.c tests/capture/fake_cugraph.h capture/kcap_graphexec.c $(CAPTURE_UNIT_SRCS) $(COMMON_OBJS) $(wildcard capture/*.h) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_graphexec.c capture/kcap_graphexec.c $(CAPTURE_UNIT_SRCS) \
	  $(filter-out %/kcap_cu.o,$(COMMON_OBJS)) -o $@ $(LDFLAGS) -pthread -ldl
$(CAPT)/test_capture_arm_watch: tests/capture/test_capture_arm_watch.c capture/kcap_arm.c capture/kcap_names.c $(CAPTURE_UNIT_SRCS) $(wildcard capture/*.h) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_arm_watch.c capture/kcap_arm.c capture/kcap_names.c \
	  $(CAPTURE_UNIT_SRCS) $(FORMATS_LIB) $(COMMON_OBJS) -o $@ $(LDFLAGS) $(FORMATS_LIBS) -ldl

# the staging layout from the call descriptions, and its cache (no GPU)
$(CAPT)/test_capture_layout: tests/capture/test_capture_layout.c capture/kcap_stage_layout.c capture/kcap_stage_layout.h $(FORMATS_LIB) $(COMMON_OBJS) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture tests/capture/test_capture_layout.c capture/kcap_stage_layout.c $(FORMATS_LIB) $(COMMON_OBJS) -o $@ $(LDFLAGS) $(FORMATS_LIBS)

# shadow mode on the device, eager and CUDA-graph paths, on a fake driver (kcap_gpu.c stood in by the test)
$(CAPT)/test_capture_shadow_dev: tests/capture/test_capture_shadow_dev.c tests/capture/shadow_fakedrv.h capture/kcap_gpu_shadow_graph.c capture/kcap_gpu_shadow.c capture/kcap_gpu_shadow_async.c \
    capture/kcap_stage_layout.c capture/kcap_tags.c capture/kcap_ring.c $(CAPTURE_UNIT_SRCS) $(OBJ)/replay/kcap_compare.o $(FORMATS_LIB) $(COMMON_OBJS) $(wildcard capture/*.h) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_shadow_dev.c capture/kcap_gpu_shadow_graph.c \
	  capture/kcap_gpu_shadow.c capture/kcap_gpu_shadow_async.c capture/kcap_stage_layout.c capture/kcap_tags.c capture/kcap_ring.c $(CAPTURE_UNIT_SRCS) \
	  $(OBJ)/replay/kcap_compare.o $(FORMATS_LIB) $(filter-out %/kcap_cu.o,$(COMMON_OBJS)) -o $@ $(LDFLAGS) $(FORMATS_LIBS) -pthread -ldl -lm

# shadow mode's worker-thread path (KCAP_SHADOW_THREAD=1) on the same fake driver
$(CAPT)/test_capture_shadow_worker: tests/capture/test_capture_shadow_worker.c tests/capture/shadow_fakedrv.h capture/kcap_gpu_shadow_graph.c capture/kcap_gpu_shadow.c capture/kcap_gpu_shadow_async.c \
    capture/kcap_stage_layout.c capture/kcap_tags.c capture/kcap_ring.c $(CAPTURE_UNIT_SRCS) $(OBJ)/replay/kcap_compare.o $(FORMATS_LIB) $(COMMON_OBJS) $(wildcard capture/*.h) $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture -Itests tests/capture/test_capture_shadow_worker.c capture/kcap_gpu_shadow_graph.c \
	  capture/kcap_gpu_shadow.c capture/kcap_gpu_shadow_async.c capture/kcap_stage_layout.c capture/kcap_tags.c capture/kcap_ring.c $(CAPTURE_UNIT_SRCS) \
	  $(OBJ)/replay/kcap_compare.o $(FORMATS_LIB) $(filter-out %/kcap_cu.o,$(COMMON_OBJS)) -o $@ $(LDFLAGS) $(FORMATS_LIBS) -pthread -ldl -lm

# the staging ring's placement, release order and sizing on a fake device (no GPU)
$(CAPT)/test_capture_ring: tests/capture/test_capture_ring.c capture/kcap_ring.c capture/kcap_ring.h $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icapture tests/capture/test_capture_ring.c capture/kcap_ring.c -o $@ $(LDFLAGS)

# linked by soname against the CPU library (the dynamic-linker binding path)
$(CAPT)/capture_client: tests/capture/capture_client.c $(LIB)/libverify_attn_cpu.so $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -L$(LIB) -lverify_attn_cpu \
	  -Wl,-rpath,'$$ORIGIN/../../lib' -lm

$(CAPT)/badargs_client: tests/capture/badargs_client.c $(LIB)/libverify_attn_cpu.so $(TESTKIT_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -L$(LIB) -lverify_attn_cpu -Wl,-rpath,'$$ORIGIN/../../lib' -ldl

$(CAPT)/snapcmp: tests/capture/snapcmp.c $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(HDF5_CFLAGS) -Itests $< -o $@ $(LDFLAGS) $(FORMATS_LIB) $(COMMON_OBJS) \
	  $(HDF5_LIBS) -lzstd -ldl -lm

# shadow candidates that write their inputs, or (workspace function) their outputs
# (test_capture_shadow_hostile.sh)
$(TBIN)/libvattn_winput.so: tests/capture/vattn_winput.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared $< -o $@ $(LDFLAGS)
$(TBIN)/libvattn_wswrite.so: tests/capture/vattn_winput.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -DWS_WRITES_O $< -o $@ $(LDFLAGS)
# the CPU library with a constructor that floods, then hides, stdout: a correct candidate
$(TBIN)/libvattn_cpu_redir.so: tests/capture/vattn_ctor_stdout.c $(OBJ)/kernels/verify_attn_cpu.o $(OBJ)/kernels/vattn_check.o
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared $^ -o $@ $(LDFLAGS) -lm
ALL_TARGETS += $(TBIN)/libvattn_winput.so $(TBIN)/libvattn_wswrite.so $(TBIN)/libvattn_cpu_redir.so

# a library with the verify ABI that returns at once: the dormant-overhead benchmark
$(CAPT)/libvattn_null.so: tests/capture/vattn_null.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libvattn_null.so $< -o $@ $(LDFLAGS)
$(CAPT)/bench_dormant: tests/capture/bench_dormant.c $(CAPT)/libvattn_null.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -L$(CAPT) -lvattn_null -Wl,-rpath,'$$ORIGIN' -ldl

ifeq ($(KCAP_FORMATS_READY),1)
ALL_TARGETS += $(KCAP_LIB) $(CAPTURE_TEST_BINS)
TESTS += $(CAPT)/test_capture_config $(CAPT)/test_capture_budget $(CAPT)/test_capture_ring $(CAPT)/test_capture_layout \
         $(CAPT)/test_capture_state $(CAPT)/test_capture_queue $(CAPT)/test_capture_arm_watch $(CAPT)/test_capture_graphexec $(CAPT)/test_capture_shadow_dev $(CAPT)/test_capture_shadow_worker \
         $(CAPT)/test_capture_cmp_plan $(CAPT)/test_capture_summary $(CAPT)/test_capture_gate $(CAPT)/test_capture_child tests/capture/test_capture_c.sh tests/capture/test_capture_py.sh tests/capture/test_capture_select.sh \
         tests/capture/test_capture_arm.sh tests/capture/test_capture_faults.sh \
         tests/capture/test_capture_concurrency.sh tests/capture/test_capture_faults_host.sh \
         tests/capture/test_capture_faults_files.sh tests/capture/test_capture_faults_load.sh \
         tests/capture/test_capture_arm_misuse.sh tests/capture/test_capture_log_pipe.sh \
         tests/capture/test_capture_layers.sh tests/capture/test_capture_extend.sh \
         tests/capture/test_capture_tags.sh tests/capture/test_capture_shadow.sh \
         tests/capture/test_capture_shadow_swap.sh tests/capture/test_capture_shadow_off.sh \
         tests/capture/test_capture_shadow_hostile.sh tests/capture/test_capture_privcopy.sh \
         tests/capture/test_capture_env_hostile.sh tests/capture/test_capture_shadow_force.sh
ASAN_TESTS += $(CAPT)/test_capture_config $(CAPT)/test_capture_budget $(CAPT)/test_capture_ring $(CAPT)/test_capture_layout \
         $(CAPT)/test_capture_state $(CAPT)/test_capture_queue $(CAPT)/test_capture_arm_watch $(CAPT)/test_capture_graphexec $(CAPT)/test_capture_shadow_dev $(CAPT)/test_capture_shadow_worker \
              $(CAPT)/test_capture_cmp_plan $(CAPT)/test_capture_summary $(CAPT)/test_capture_gate $(CAPT)/test_capture_child tests/capture/test_capture_c.sh tests/capture/test_capture_faults_host.sh
GPU_TESTS += tests/capture/test_capture_gpu.sh tests/capture/test_capture_gpu_graphexec.sh tests/capture/test_capture_gpu_long.sh tests/capture/test_capture_gpu_extend.sh \
             tests/capture/test_capture_gpu_faults.sh tests/capture/test_capture_gpu_shadow.sh \
             tests/capture/test_capture_gpu_cmp.sh
BENCHES += tests/capture/bench_dormant.sh tests/capture/bench_shadow_host.sh
GPU_BENCHES += tests/capture/bench_capture_gpu.sh tests/capture/bench_host_gpu.sh tests/capture/bench_graph_cost.sh tests/capture/bench_shadow_kernels.sh
endif

# shadow mode's device work on its own (dev harness: checks the compare against a double judge,
# then times every node it adds per call); GPU only, built by test-gpu / bench-gpu
KCAP_SHADOW_KBENCH := $(CAPT)/bench_shadow_kernels
$(KCAP_SHADOW_KBENCH): tests/capture/bench_shadow_kernels.cu capture/kcap_gather.cu capture/kcap_shadow_cmp.cuh capture/kcap_shadow_cmp.h capture/kcap_stage_dev.h capture/kcap_ring.h
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120 \
	  -Icapture -o $@ $<
GPU_PREREQS += $(KCAP_SHADOW_KBENCH)
CUDA_ONLY_TARGETS += $(KCAP_SHADOW_KBENCH)

# host-thread time per eager call from C (bench_host_gpu.sh; links no CUDA library, so it
# builds everywhere; runs only where a GPU is)
$(CAPT)/bench_host_gpu: $(OBJ)/tests/capture/bench_host_gpu.o $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl -lpthread
ALL_TARGETS += $(CAPT)/bench_host_gpu

# ---- host-invariant test (test_capture_host.sh): errno, fork during a capture, dlsym scope,
# transient process_vm_readv errors. A test-only preload shim and a RTLD_LOCAL library pair.
$(CAPT)/libkcap_testshim.so: tests/capture/kcap_testshim.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared $< -o $@ $(LDFLAGS) -ldl
$(CAPT)/libdl_scope_dep.so: tests/capture/dl_scope_dep.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libdl_scope_dep.so $< -o $@ $(LDFLAGS)
$(CAPT)/libdl_scope_user.so: tests/capture/dl_scope_user.c $(CAPT)/libdl_scope_dep.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared $< -o $@ $(LDFLAGS) -L$(CAPT) -ldl_scope_dep -Wl,-rpath,'$$ORIGIN' -ldl
$(CAPT)/dl_scope_main: tests/capture/dl_scope_main.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS) -ldl
CAPTURE_HOST_BINS := $(CAPT)/libkcap_testshim.so $(CAPT)/libdl_scope_dep.so \
                     $(CAPT)/libdl_scope_user.so $(CAPT)/dl_scope_main
ifeq ($(KCAP_FORMATS_READY),1)
ALL_TARGETS += $(CAPTURE_HOST_BINS)
TESTS += tests/capture/test_capture_host.sh
endif
