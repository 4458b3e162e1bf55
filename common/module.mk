# common/: error table and the run-time CUDA driver loader, linked into every host artifact.
COMMON_OBJS := $(OBJ)/common/kcap_error.o $(OBJ)/common/kcap_cu.o
