# formats/module.mk — rules of the formats module (owned by its developer).
