#!/usr/bin/env bash
# test_capture_py.sh — libkcap.so under a Python ctypes client (dlopen + dlsym binding, the
# SGLang path). Two different real libraries are loaded in one process (the CPU library and
# its perturbed twin, whose outputs differ): each wrapper must forward to its own library,
# which the byte-identical comparison with a run without preload proves; every snapshot
# must equal what the client passed and got, and name the library that served it.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$SNAPCMP" "$CPU"
"$PY" -c 'import numpy' 2>/dev/null || skip "numpy missing for $PY"
LIBS=(--lib "$CPU")
[ -e "$PERT" ] && LIBS+=(--lib "$PERT")

mkdir -p "$T/ref" "$T/cap"
"$PY" tests/capture/capture_client.py "${LIBS[@]}" --calls 6 --seed 5 --dump "$T/ref" || fail "py client without preload"
with_kcap KCAP_DIR="$T/snaps" -- "$PY" tests/capture/capture_client.py "${LIBS[@]}" --calls 6 --seed 5 \
    --dump "$T/cap" 2>"$T/err" || { cat "$T/err"; fail "py client under libkcap"; }
same_outputs "$T/ref" "$T/cap" && ok "ctypes outputs byte-identical with preload" || fail "ctypes outputs differ"
"$SNAPCMP" --all --expect 6 "$T/snaps" "$T/cap" && ok "6 ctypes snapshots match the client" || fail "snapcmp"
kcap_check "$T/snaps" && ok "kcap check" || fail "kcap check"
if [ -e "$PERT" ]; then
    # the snapshots name both libraries (lib_path in the metadata)
    n=$(for f in "$T"/snaps/*.h5; do strings "$f" | grep -o 'libverify_attn_cpu[a-z_]*\.so' | head -1; done | sort -u | wc -l)
    [ "$n" = 2 ] && ok "two real libraries, each captured under its own name" || fail "lib_path of two libraries ($n)"
fi
grep -q "stats: calls=6 captured=6 written=6" "$T/err" && ok "stats line" || { cat "$T/err"; fail "stats"; }
finish
