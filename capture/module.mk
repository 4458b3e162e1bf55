# capture/module.mk — rules of the capture module (owned by its developer).
