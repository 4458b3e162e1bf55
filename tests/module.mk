# tests/module.mk — rules of the tests module (owned by its developer).
