#!/usr/bin/env bash
# test_install.sh — `make install DESTDIR=… PREFIX=/usr/local` then `make uninstall`, staged in
# a temporary directory (the real system is never touched): every file lands, the filter
# plugin goes to libhdf5's own default plugin directory, and from the staged tree alone
# h5dump decodes values, `import kcap` finds its reader, pytest finds the plugin with no -p,
# kcap replay finds its reference library, and pkg-config + the C API build a reader;
# uninstall leaves no file behind.
. "$(dirname "$0")/../lib.sh"
# every step must succeed: the first failing command ends the test with its status
set -eo pipefail
[ "$B" = build ] || skip "install is tested on the default build only"
D=$T/stage # DESTDIR
mkdir "$D"
P=/usr/local
H5=$("$B/tools/kcap_h5plugindir")
S=$P/lib/python$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
G=$ROOT/tests/golden/snapshots/h8_q1_s0.h5
unset HDF5_PLUGIN_PATH KCAP_LIBFMT KCAP_BIN PYTHONPATH
make -s --no-print-directory install DESTDIR="$D" PREFIX=$P
for f in bin/kcap lib/libkcapfmt.so lib/libverify_attn_cpu.so lib/libkcap.so \
         lib/pkgconfig/kcap.pc include/verify_attn.h include/kcap/kcap_export.h \
         share/man/man1/kcap.1 lib/kcap/plugins/libh5zstd.so; do
    [ -f "$D$P/$f" ] || die "missing after install: $P/$f"
done
[ -f "$D$H5/libh5zstd.so" ] || die "filter plugin not in libhdf5's default dir $H5"
[ -f "$D$S/kcap/__init__.py" ] && [ -f "$D$S"/kcap-*.dist-info/entry_points.txt ] ||
    die "python package not in $S"
# the plugin decodes: h5dump prints numbers for a compressed dataset
vals=$(HDF5_PLUGIN_PATH="$D$H5" h5dump -d /inputs/q -s 0,0,0 -c 1,1,4 "$G" | sed -n '/DATA {/,/}/p')
echo "$vals" | grep -qE '\(0,0,0\): [0-9]+' || die "h5dump shows no values: $vals"
# the staged tree alone: no in-tree paths on any search path
cd /
"$D$P/bin/kcap" -V | grep -q '^kcap '
PYTHONPATH="$D$S" "$PY" -c "
import kcap, kcap._native as n
s = kcap.load('$G')
assert s.inputs['q'].shape == (8, 8, 576) and str(s.inputs['q'].dtype) == 'uint16', s
assert n.lib()._name.startswith('$D$P/lib/'), n.lib()._name
print('python ok', s)"
PYTHONPATH="$D$S" "$PY" -m pytest -p no:cacheprovider -q --kcap-golden "$(dirname "$G")" \
    --kcap-kernel "$D$P/lib/libverify_attn_cpu.so" --kcap-bin "$D$P/bin/kcap" | tail -1 |
    grep -qE '^9 passed' || die "pytest did not load the installed plugin"
# default reference (cpu) comes from the installed lib/
"$D$P/bin/kcap" replay "$G" --kernel "$D$P/lib/libverify_attn_cpu.so" --quiet --json - |
    "$PY" -c "import json,sys; d=json.load(sys.stdin); assert d['pass'] and d['ref_lib'].startswith('$D$P/lib/'), d['ref_lib']"
# pkg-config + the C API
cat > "$D/r.c" <<'C'
#include <stdio.h>
#include "kcap_export.h"
int main(int c, char **v) { kcap_snapshot *s; char m[1024];
  if (c < 2 || kcap_export_open(v[1], &s, m, sizeof m)) { fprintf(stderr, "%s\n", m); return 1; }
  printf("%d tensors\n", kcap_export_ntensors(s)); kcap_export_close(s); return 0; }
C
flags=$(PKG_CONFIG_PATH="$D$P/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D" pkg-config --cflags --libs kcap)
${CC:-cc} "$D/r.c" -o "$D/r" $flags -Wl,-rpath,"$D$P/lib"
[ "$("$D/r" "$G")" = "7 tensors" ]
cd - >/dev/null
make -s --no-print-directory uninstall DESTDIR="$D" PREFIX=$P
rm -f "$D/r" "$D/r.c"
left=$(find "$D" -type f)
[ -z "$left" ] || die "left after uninstall: $left"
echo "install + uninstall ok"
