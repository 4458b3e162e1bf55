# kernels/module.mk — rules of the kernels module (owned by its developer).
