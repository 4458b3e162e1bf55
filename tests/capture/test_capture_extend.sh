#!/usr/bin/env bash
# test_capture_extend.sh — the second entry point, vattn_extend (SGLang's convention), goes
# through the same description-driven paths as vattn_verify: captured under the dynamic
# linker (C client) and through ctypes (dlopen + dlsym), every snapshot valid and holding
# exactly what the client passed (k_extend, the prefix-only kv_indices, SGLang's mask rows
# with their prefix columns), the host's results byte-identical with and without libkcap,
# and `kcap replay` bitwise on the CPU library while the perturbed build is caught.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT" "$KCAP" "$CPU"

mkdir -p "$T/ref" "$T/cap"
"$CLIENT" --extend --calls 6 --seed 31 --dump "$T/ref" || fail "client --extend without preload"
with_kcap KCAP_DIR="$T/snaps" -- "$CLIENT" --extend --calls 6 --seed 31 --dump "$T/cap" 2>"$T/err" ||
    fail "client --extend under libkcap"
same_outputs "$T/ref" "$T/cap" && ok "extend outputs byte-identical with preload" || fail "outputs differ"
[ "$(ls "$T/snaps" | grep -c '^vattn_extend-p[0-9]*-[0-9a-f]*-s00000[0-5]\.h5$')" = 6 ] &&
    ok "6 vattn_extend snapshots" || { ls "$T/snaps"; cat "$T/err"; fail "extend snapshots"; }
kcap_check "$T/snaps" && ok "kcap check" || fail "kcap check"

# every input the snapshot holds is what the client passed (dumps of capture_client.c)
PYTHONPATH=$ROOT/python "$PY" - "$T/snaps" "$T/cap" <<'PY' && ok "snapshots hold the client's k_extend, prefix indices and mask rows" || fail "snapshot contents"
import glob, os, sys
import numpy as np
import kcap
snaps, dumps = sys.argv[1], sys.argv[2]
tags = sorted(glob.glob(os.path.join(dumps, "*.meta")), key=lambda p: int(p.rsplit("-c", 1)[1].split(".")[0]))
files = sorted(glob.glob(os.path.join(snaps, "*.h5")))
assert len(tags) == len(files) == 6, (len(tags), len(files))
masked = 0
for meta, f in zip(tags, files):
    m = dict(l.split(" ", 1) for l in open(meta).read().splitlines())
    base = meta[:-5]
    s = kcap.load(f)
    T = int(m["bs"]) * int(m["q_len"])
    stride = int(m["kv_stride"])
    kext = np.fromfile(base + ".kext", np.uint16).reshape(T, stride)[:, :576]
    assert np.array_equal(s.inputs["k_extend"].view(np.uint16).reshape(T, 576), kext), f
    ip = np.fromfile(base + ".indptr", np.int32)
    full = np.fromfile(base + ".indices", np.int64)
    q = int(m["q_len"])
    prefix = np.concatenate([full[ip[b]:ip[b + 1] - q] for b in range(len(ip) - 1)])
    assert np.array_equal(s.inputs["kv_indices"], prefix), f
    assert np.array_equal(s.inputs["kv_indptr"], np.concatenate([[0], np.cumsum(np.diff(ip) - q)])), f
    if os.path.exists(base + ".mask"):
        masked += 1
        assert np.array_equal(s.inputs["custom_mask"], np.fromfile(base + ".mask", np.uint8)), f
    else:
        assert "custom_mask" not in s.inputs, f
assert masked >= 1, "no masked call among the six (seed)"
PY

"$KCAP" replay "$T/snaps" --kernel "$CPU" >"$T/replay.out" 2>&1 &&
    [ "$(grep -c 'bitwise' "$T/replay.out")" -ge 6 ] && ok "kcap replay: 6 extend snapshots bitwise" ||
    { cat "$T/replay.out"; fail "replay of extend snapshots"; }
if [ -e "$PERT" ]; then
    "$KCAP" replay "$T/snaps" --kernel "$PERT" >"$T/pert.out" 2>&1
    [ $? = 1 ] && ok "the perturbed build is caught on extend snapshots" || { cat "$T/pert.out"; fail "perturbed not caught"; }
fi

# the reference entry point and int32 indices, same paths
mkdir -p "$T/ref2" "$T/cap2"
"$CLIENT" --extend --reference --int32 --calls 2 --seed 32 --dump "$T/ref2" || fail "client --extend --reference"
with_kcap KCAP_DIR="$T/snaps2" -- "$CLIENT" --extend --reference --int32 --calls 2 --seed 32 --dump "$T/cap2" 2>/dev/null
same_outputs "$T/ref2" "$T/cap2" && [ "$(ls "$T/snaps2" | grep -c '^vattn_extend_reference-')" = 2 ] &&
    "$KCAP" replay "$T/snaps2" --kernel "$CPU" >/dev/null 2>&1 && ok "vattn_extend_reference, int32: captured and replayed" ||
    { ls "$T/snaps2"; fail "extend reference"; }

# ctypes (dlopen + dlsym), as SGLang's Python calls it
"$PY" tests/capture/extend_ctypes.py "$CPU" --calls 4 --seed 5 >"$T/py.ref" || fail "extend_ctypes.py bare"
with_kcap KCAP_DIR="$T/snaps3" -- "$PY" tests/capture/extend_ctypes.py "$CPU" --calls 4 --seed 5 >"$T/py.cap" 2>/dev/null
cmp -s "$T/py.ref" "$T/py.cap" && [ "$(count_h5 "$T/snaps3")" = 4 ] &&
    "$KCAP" replay "$T/snaps3" --kernel "$CPU" >/dev/null 2>&1 && ok "ctypes: 4 extend calls captured, results unchanged, replayed" ||
    { cat "$T/py.ref" "$T/py.cap"; ls "$T/snaps3"; fail "ctypes extend"; }
finish
