# replay/module.mk — rules of the replay module (owned by its developer).
