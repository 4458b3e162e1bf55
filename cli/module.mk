# cli/: build/bin/kcap = the dispatcher + every module's subcommands (KCAP_CLI_OBJS)
# + the formats library. No CUDA library is linked: GPU work goes through common/kcap_cu.
KCAP_BIN := $(BIN)/kcap
ALL_TARGETS += $(KCAP_BIN)

$(KCAP_BIN): $(OBJ)/cli/kcap_main.o $(OBJ)/cli/kcap_cmd_export.o $(KCAP_CLI_OBJS) $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS) -lzstd -ldl -lm
