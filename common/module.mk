# common/: error table, the run-time CUDA driver loader, the version string, the build tree
# of the running program and the whole-library check before a dlopen, linked into every host
# artifact.
COMMON_OBJS := $(OBJ)/common/kcap_error.o $(OBJ)/common/kcap_cu.o $(OBJ)/common/kcap_builddir.o $(OBJ)/common/kcap_elf.o
