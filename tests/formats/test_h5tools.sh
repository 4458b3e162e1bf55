#!/usr/bin/env bash
# test_h5tools.sh — stock tools read a snapshot through the plugin and get bit-identical
# tensors: h5dump (binary dump of every dataset) and Debian's python3-h5py (every dataset,
# dtype attributes, root metadata) with HDF5_PLUGIN_PATH=build/plugins. Also shows the
# plugin is what decodes: without it h5dump cannot read a compressed dataset.
. "$(dirname "$0")/../lib.sh"
command -v h5dump >/dev/null || skip "h5dump (hdf5-tools) not installed"
"$PY" -c 'import h5py, numpy' 2>/dev/null || skip "python3-h5py not installed"
mkdir "$T/dump"
"$B/tests/formats/tool_mksnap" snap "$T/s.h5" "$T/dump" || die "tool_mksnap"
export HDF5_PLUGIN_PATH=$B/plugins
for f in "$T"/dump/*.bin; do
    b=$(basename "$f" .bin); ds="/${b%%_*}/${b#*_}"
    if ! h5dump -d "$ds" -b LE -o "$T/h5dump.bin" "$T/s.h5" >/dev/null 2>"$T/err" ||
       ! cmp -s "$f" "$T/h5dump.bin"; then
        fail "h5dump $ds differs from what was written"; cat "$T/err"
    else
        ok "h5dump $ds ($(stat -c %s "$f") bytes bit-identical)"
    fi
done
if HDF5_PLUGIN_PATH=/nonexistent h5dump -d /inputs/kv_cache -b LE -o "$T/np.bin" "$T/s.h5" \
       >/dev/null 2>&1 && cmp -s "$T/np.bin" "$T/dump/inputs_kv_cache.bin"; then
    fail "kv_cache decoded without the plugin: it is not compressed?"
fi
h5dump -A "$T/s.h5" | grep -q 'dtype.*' || fail "h5dump -A"
"$PY" - "$T/s.h5" "$T/dump" <<'PYEOF' || fail "h5py read the snapshot differently"
import glob, os, sys
import h5py, numpy as np
path, dump = sys.argv[1], sys.argv[2]
bad = 0
with h5py.File(path, "r") as f:
    assert int(f.attrs["kcap_format_major"]) == 1, "format major"
    assert f.attrs["call"] == b"vattn_verify", f.attrs["call"]
    for b in sorted(glob.glob(os.path.join(dump, "*.bin"))):
        name = os.path.basename(b)[:-4]
        grp, ds = name.split("_", 1)
        d = f[grp][ds]
        want = open(b, "rb").read()
        got = np.ascontiguousarray(d[()]).tobytes()
        dt = d.attrs["dtype"].decode()
        ok = got == want
        if dt == "bfloat16":
            ok = ok and d.dtype == np.uint16
        print(("ok" if ok else "FAIL") + ": h5py /%s/%s %s %s %s filters=%s" %
              (grp, ds, d.shape, dt, len(want), d.id.get_create_plist().get_nfilters()))
        bad += not ok
    assert "kv_cache" in f["inputs"] and f["inputs"]["kv_cache"].id.get_create_plist().get_nfilters() == 2
sys.exit(1 if bad else 0)
PYEOF
finish "h5tools ok"
