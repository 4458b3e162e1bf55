# cli/: build/bin/kcap = the dispatcher + every module's subcommands (KCAP_CLI_OBJS)
# + the formats library. No CUDA library is linked: GPU work goes through common/kcap_cu.
KCAP_BIN := $(BIN)/kcap
ALL_TARGETS += $(KCAP_BIN)

$(KCAP_BIN): $(OBJ)/cli/kcap_main.o $(OBJ)/cli/kcap_python.o $(KCAP_CLI_OBJS) $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS) -lzstd -ldl -lm

# Build-time helper for `make install`: libhdf5's default plugin directory (not installed).
KCAP_H5PLUGINDIR := $(BUILD)/tools/kcap_h5plugindir
$(KCAP_H5PLUGINDIR): $(OBJ)/cli/kcap_h5plugindir.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS)
ALL_TARGETS += $(KCAP_H5PLUGINDIR)
