# tests/module.mk — end-to-end pieces owned by no single module: the bundled demo client,
# the e2e and golden-corpus tests, the torch/ctypes client tests on the GPU.
# (Each module registers its own unit tests in its own module.mk.)
DEMO_CLIENT := $(TBIN)/vattn_demo_client
ALL_TARGETS += $(DEMO_CLIENT)

$(DEMO_CLIENT): $(OBJ)/tests/clients/vattn_demo_client.o $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

TESTS += tests/e2e/test_demo_cpu.sh tests/golden/test_golden_cpu.sh tests/e2e/test_cli_hostile_args.sh
ASAN_TESTS += tests/e2e/test_demo_cpu.sh
GPU_TESTS += tests/e2e/test_torch_client_gpu.sh

export PYTHON
