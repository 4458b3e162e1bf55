# common/: error table, the run-time CUDA driver loader, the version string, the build tree
# of the running program, the whole-library check before a dlopen and the private copy
# directories a library is loaded from (with the sweep of dead processes' ones), linked into
# every host artifact.
COMMON_OBJS := $(OBJ)/common/kcap_error.o $(OBJ)/common/kcap_cu.o $(OBJ)/common/kcap_builddir.o $(OBJ)/common/kcap_elf.o \
               $(OBJ)/common/kcap_privcopy.o
