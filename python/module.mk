# python/module.mk — the `kcap` Python package (python/kcap) and its native half,
# build/lib/libkcapfmt.so: formats/kcap_export.c over the snapshot reader, loaded by
# python/kcap/_native.py through ctypes, so Python reads snapshots with the same reader and
# the same checks as `kcap check` (no second reader in Python).
#
# The package itself is pure Python and runs in-tree with PYTHONPATH=python; `make install`
# copies it (top-level Makefile). Tests live in tests/python/.

KCAP_FMT_SO := $(LIB)/libkcapfmt.so
PY_PKG_FILES := $(wildcard python/kcap/*.py)

# Only libkcap_error from common/ (kcap_cu needs no place in a file reader).
$(KCAP_FMT_SO): $(OBJ)/formats/kcap_export.o $(FORMATS_LIB) $(OBJ)/common/kcap_error.o
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libkcapfmt.so -Wl,--no-undefined $(LDFLAGS) -o $@ \
	  $(OBJ)/formats/kcap_export.o $(FORMATS_LIB) $(OBJ)/common/kcap_error.o $(FORMATS_LIBS)

ALL_TARGETS += $(KCAP_FMT_SO)
# the package and the CLI features it uses; export never replacing a file it was not asked
# to create; staged make install/uninstall; the CUDA-less build's stub header against the
# real one; the --report page in headless Chromium
TESTS += tests/python/test_python_pkg.sh tests/python/test_export_safety.sh tests/python/test_report_hostile.sh tests/python/test_pytest_timeout.sh \
	tests/e2e/test_install.sh tests/e2e/test_nocuda_header.sh tests/e2e/test_report_browser.sh
