# kernels/module.mk — rules of the kernels module (owned by its developer).
#
# Outputs:
#   build/lib/libverify_attn_cpu.so               host reference library (C only)
#   build/tests/libverify_attn_cpu_perturbed.so   the same with one documented output shifted
#   build/lib/libverify_attn.so                   CUDA library (scripts/build_nvcc.sh)
#   build/tests/libverify_attn_dev.so             the same built with -DVATTN_DEV: reads the
#                                                 VATTN_VARIANT / VATTN_FORCE_NSPLIT / VATTN_DEV_*
#                                                 knobs (verify_attn.cu)
#   build/tests/test_verify_cpu                   CPU test (TESTS, ASAN_TESTS)
#   build/tests/test_vattn_plan                   the launch policy, CPU only (TESTS, ASAN_TESTS)
#   build/tests/test_vattn_swizzle                the KV stages' layout, CPU only (TESTS, ASAN_TESTS)
#   build/tests/test_verify_gpu, build/tests/vattn_dev   GPU test and dev harness (GPU_TESTS)

VATTN_CPU_LIB := $(LIB)/libverify_attn_cpu.so
VATTN_CPU_PERTURBED := $(TBIN)/libverify_attn_cpu_perturbed.so
VATTN_CUDA_LIB := $(LIB)/libverify_attn.so

# Only the vattn_* ABI leaves the libraries; the hot loop is worth -O3 even in CI.
$(OBJ)/kernels/%.o: CFLAGS += -fvisibility=hidden
$(OBJ)/kernels/verify_attn_cpu.o $(OBJ)/kernels/verify_attn_cpu_perturbed.o: CFLAGS += -O3

$(OBJ)/kernels/verify_attn_cpu_perturbed.o: kernels/verify_attn_cpu.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DVATTN_PERTURB -MMD -MP -c $< -o $@

$(VATTN_CPU_LIB): $(OBJ)/kernels/verify_attn_cpu.o $(OBJ)/kernels/vattn_check.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libverify_attn_cpu.so -Wl,--no-undefined $(LDFLAGS) $^ -o $@ -lm

$(VATTN_CPU_PERTURBED): $(OBJ)/kernels/verify_attn_cpu_perturbed.o $(OBJ)/kernels/vattn_check.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libverify_attn_cpu_perturbed.so -Wl,--no-undefined $(LDFLAGS) $^ -o $@ -lm

VATTN_CPU_SLOW := $(TBIN)/libverify_attn_cpu_slow.so
$(OBJ)/kernels/verify_attn_cpu_slow.o: kernels/verify_attn_cpu.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -O3 -DVATTN_SLOW_US=20000 -MMD -MP -c $< -o $@
$(VATTN_CPU_SLOW): $(OBJ)/kernels/verify_attn_cpu_slow.o $(OBJ)/kernels/vattn_check.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libverify_attn_cpu_slow.so -Wl,--no-undefined $(LDFLAGS) $^ -o $@ -lm

# Tests link the library by soname and find it through an rpath relative to themselves, so
# build/ and build-asan/ each use their own copy.
VATTN_TEST_RPATH := -Wl,-rpath,'$$ORIGIN/../lib'
# The kernel tests' own headers list their includes by hand; the test kit is one of them.
KCAP_TESTKIT_HDRS := tests/testkit.h tests/testkit_vattn.h

# The kernel tests judge outputs with replay's kcap_compare (one definition of "correct"), which
# needs kcap_dtype_size from the formats library (named by path: formats/module.mk is read later).
VATTN_TEST_CMP_OBJS := $(OBJ)/replay/kcap_compare.o $(LIB)/libkcapfmt.a $(OBJ)/common/kcap_error.o
$(TBIN)/test_verify_cpu: tests/kernels/test_verify_cpu.c tests/kernels/vattn_cpu_checks.h tests/kernels/vattn_cpu_extend.h tests/kernels/vattn_extend_util.h tests/kernels/vattn_test_util.h $(KCAP_TESTKIT_HDRS) $(VATTN_TEST_CMP_OBJS) $(VATTN_CPU_LIB) | $(VATTN_CPU_PERTURBED)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< $(VATTN_TEST_CMP_OBJS) -o $@ $(LDFLAGS) -L$(LIB) -lverify_attn_cpu $(VATTN_TEST_RPATH) -ldl -lm

# The fast kernels' launch policy is header-only host C (kernels/vattn_plan.h): tested without a GPU.
$(TBIN)/test_vattn_plan: tests/kernels/test_vattn_plan.c kernels/vattn_plan.h tests/testkit.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS)

# The KV stages' swizzle is header-only C too (kernels/vattn_swizzle.h): tested without a GPU.
$(TBIN)/test_vattn_swizzle: tests/kernels/test_vattn_swizzle.c kernels/vattn_swizzle.h tests/testkit.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDFLAGS)

ALL_TARGETS += $(VATTN_CPU_LIB) $(VATTN_CPU_PERTURBED) $(VATTN_CPU_SLOW) $(TBIN)/test_verify_cpu $(TBIN)/test_vattn_plan \
               $(TBIN)/test_vattn_swizzle
TESTS += $(TBIN)/test_verify_cpu $(TBIN)/test_vattn_plan $(TBIN)/test_vattn_swizzle tests/kernels/test_ncu_loop_mix.sh \
         tests/kernels/test_ab_kernels.sh
ASAN_TESTS += $(TBIN)/test_verify_cpu $(TBIN)/test_vattn_plan $(TBIN)/test_vattn_swizzle

# ---- CUDA: library, GPU test, dev harness / bench driver (scripts/build_nvcc.sh) ----
# One translation unit: verify_attn.cu (host side) includes the kernel headers kernels/*.cuh.
VATTN_CUDA_DEPS := kernels/verify_attn.cu $(wildcard kernels/*.cuh) kernels/vattn_plan.h kernels/vattn_check.c kernels/vattn_check.h \
                   kernels/verify_attn.h kernels/verify_attn.map scripts/build_nvcc.sh
VATTN_CUDA_DEV_LIB := $(TBIN)/libverify_attn_dev.so
$(VATTN_CUDA_LIB): $(VATTN_CUDA_DEPS)
	bash scripts/build_nvcc.sh lib $@ $(OBJ)/kernels/cuda kernels/verify_attn.cu kernels/vattn_check.c

# Dev build for the dev harness and the GPU test's forced-variant runs (the production library
# reads no environment); same kernels, only the host plan differs. Built as an order-only
# prerequisite of those two (not in ALL_TARGETS: the top Makefile drops CUDA-only targets by
# name when there is no toolkit, and the two programs are on that list).
$(VATTN_CUDA_DEV_LIB): $(VATTN_CUDA_DEPS)
	VATTN_NVCC_FLAGS="$(VATTN_NVCC_FLAGS) -DVATTN_DEV" bash scripts/build_nvcc.sh lib $@ $(OBJ)/kernels/cuda-dev \
	    kernels/verify_attn.cu kernels/vattn_check.c

# Shadow mode's GPU candidate with a planted bug: the production kernels plus one output
# element shifted (-DVATTN_PERTURB, as the CPU library's perturbed build).
VATTN_CUDA_PERTURBED := $(TBIN)/libverify_attn_perturbed.so
$(VATTN_CUDA_PERTURBED): $(VATTN_CUDA_DEPS)
	VATTN_NVCC_FLAGS="$(VATTN_NVCC_FLAGS) -DVATTN_PERTURB" bash scripts/build_nvcc.sh lib $@ $(OBJ)/kernels/cuda-perturbed \
	    kernels/verify_attn.cu kernels/vattn_check.c
GPU_PREREQS += $(VATTN_CUDA_PERTURBED) # built by test-gpu / bench-gpu only (CI never uses it)

# The GPU test is C: it dlopens both libraries (same symbol names) and links cudart statically.
$(TBIN)/test_verify_gpu: tests/kernels/test_verify_gpu.c tests/kernels/vattn_gpu_common.h tests/kernels/vattn_gpu_extend.h tests/kernels/vattn_extend_util.h tests/kernels/vattn_test_util.h $(KCAP_TESTKIT_HDRS) kernels/verify_attn.h $(VATTN_TEST_CMP_OBJS) | $(VATTN_CUDA_DEV_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/kernels $< $(VATTN_TEST_CMP_OBJS) -o $@ $(LDFLAGS) $(CUDA_HOME)/lib64/libcudart_static.a -ldl -lrt -lm

$(TBIN)/vattn_dev: tests/kernels/vattn_dev.cu tests/kernels/vattn_dev_serving.cuh tests/kernels/vattn_dev_gather.cuh kernels/verify_attn.h scripts/build_nvcc.sh | $(VATTN_CUDA_DEV_LIB)
	bash scripts/build_nvcc.sh prog $@ $(OBJ)/tests/kernels tests/kernels/vattn_dev.cu

ALL_TARGETS += $(VATTN_CUDA_LIB) $(TBIN)/test_verify_gpu $(TBIN)/vattn_dev
GPU_TESTS += $(TBIN)/test_verify_gpu tests/kernels/test_verify_race_gpu.sh
GPU_BENCHES += scripts/bench_gpu.sh
