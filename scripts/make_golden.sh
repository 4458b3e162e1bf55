#!/usr/bin/env bash
# make_golden.sh — regenerate tests/golden/ on a machine with an NVIDIA GPU.
#
# Captures real verify calls of the CUDA library through the torch + ctypes client (the way
# SGLang calls it) under `kcap record`, one small snapshot per distinct shape: head counts,
# draft lengths, ragged prefixes (0 included), causal and tree masks, int64 indices, strided q.
# The corpus stays small (<= 20 MB) so CI can replay it on the CPU library. Run it after a
# format major-version bump, or when the golden shapes should change:
#   make all && bash scripts/make_golden.sh [OUTDIR]    (default tests/golden/snapshots)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${KCAP_BUILD:-build}
OUT=${1:-tests/golden/snapshots}
PY=${GPU_PYTHON:-python3}
rm -rf "$OUT"
mkdir -p "$OUT"
# name            bs heads q_len max_prefix steps layers  (step 1 = tree mask, step 0 = causal)
cases=(
  "h16_q8         4  16  8    800  2 1"
  "h128_q4        2 128  4    400  1 1"
  "h8_q1          8   8  1   1000  1 1"
  "h32_q16        2  32 16    500  2 1"
  "h64_q7         2  64  7    300  2 1"
  "h16_q64        1  16 64    200  1 1"
)
for c in "${cases[@]}"; do
    read -r name bs heads qlen prefix steps layers <<<"$c"
    tmp=$(mktemp -d)
    "$B/bin/kcap" record -o "$tmp" -- "$PY" tests/clients/dflash_client.py \
        --lib "$B/lib/libverify_attn.so" --mode eager --bs "$bs" --heads "$heads" \
        --q-len "$qlen" --max-prefix "$prefix" --steps "$steps" --layers "$layers" \
        --seed 11 --check
    i=0
    for f in "$tmp"/*.h5; do
        cp "$f" "$OUT/${name}_s${i}.h5"
        i=$((i + 1))
    done
    rm -rf "$tmp"
done
"$B/bin/kcap" check "$OUT"
"$B/bin/kcap" ls "$OUT"
du -sh "$OUT"
