#!/usr/bin/env bash
# demo.sh — `make demo`: the whole kcap loop on an embedded default, no setup.
#
# A bundled client plays the inference server: it dlopens the kernel library (as Python
# ctypes does) and issues DFlash-style verify calls. We run it once bare and once under
# `kcap record`, show that capture did not change a single output byte, list and check the
# snapshots, and replay them through a freshly loaded copy of the library against the CPU
# reference. On a machine with an NVIDIA GPU the CUDA library is used, else the CPU one.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${KCAP_BUILD:-build}
KCAP=$B/bin/kcap
CLIENT=$B/tests/vattn_demo_client
LIB=$B/lib/libverify_attn_cpu.so
ARGS=(--steps 2 --layers 3 --bs 3 --q-len 4 --heads 8 --max-prefix 600)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ -f $B/lib/libverify_attn.so ]; then
    LIB=$B/lib/libverify_attn.so
    ARGS=(--steps 3 --layers 4 --bs 4 --q-len 8 --heads 16 --max-prefix 8192)
fi
OUT=$B/demo
rm -rf "$OUT"
mkdir -p "$OUT"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. the client alone ($(basename "$LIB"))"
"$CLIENT" --lib "$LIB" "${ARGS[@]}" | tee "$OUT/bare.txt"

say "2. the same client under 'kcap record' (LD_PRELOAD=libkcap.so)"
"$KCAP" record -o "$OUT/snapshots" -- "$CLIENT" --lib "$LIB" "${ARGS[@]}" | tee "$OUT/captured.txt"
if cmp -s "$OUT/bare.txt" "$OUT/captured.txt"; then
    echo "outputs identical with and without capture"
else
    echo "demo: capture changed the client's outputs" >&2
    diff "$OUT/bare.txt" "$OUT/captured.txt" >&2 || true
    exit 1
fi

say "3. the snapshots"
"$KCAP" ls "$OUT/snapshots"
"$KCAP" check "$OUT/snapshots"
first=$(ls "$OUT"/snapshots/*.h5 | head -n 1)
"$KCAP" info "$first"

say "4. replay through a fresh copy of $(basename "$LIB"), judged against the captured outputs and the CPU reference"
"$KCAP" replay "$OUT/snapshots" --kernel "$LIB" --ref cpu
echo
echo "demo: done. Snapshots are in $OUT/snapshots; iterate with:"
echo "  $KCAP replay $OUT/snapshots --kernel $LIB --watch"
