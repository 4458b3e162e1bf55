# cli/: build/bin/kcap = the dispatcher + every module's subcommands (KCAP_CLI_OBJS)
# + the formats library. No CUDA library is linked: GPU work goes through common/kcap_cu.
KCAP_BIN := $(BIN)/kcap
ALL_TARGETS += $(KCAP_BIN)

$(KCAP_BIN): $(OBJ)/cli/kcap_main.o $(OBJ)/cli/kcap_python.o $(OBJ)/cli/kcap_cli_opts.o \
		$(KCAP_CLI_OBJS) $(FORMATS_LIB) $(COMMON_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS) -lzstd -ldl -lm

# Build-time helper for `make install`: libhdf5's default plugin directory (not installed).
KCAP_H5PLUGINDIR := $(BUILD)/tools/kcap_h5plugindir
$(KCAP_H5PLUGINDIR): $(OBJ)/cli/kcap_h5plugindir.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(HDF5_LIBS)
ALL_TARGETS += $(KCAP_H5PLUGINDIR)

# The manual page is generated from the help text the commands print (cli/kcap_man.sh), so it
# is rebuilt with the binary; the committed cli/kcap.1 is what `make install` copies and what
# tests/e2e/test_man.sh checks. Not from a sanitizer build (its runtime may add output).
KCAP_MAN := cli/kcap.1
ifeq ($(SAN),)
$(KCAP_MAN): $(KCAP_BIN) cli/kcap_man.sh
	bash cli/kcap_man.sh $(KCAP_BIN) > $@.tmp && mv $@.tmp $@
ALL_TARGETS += $(KCAP_MAN)
endif
TESTS += tests/e2e/test_man.sh
