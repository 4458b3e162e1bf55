#!/usr/bin/env bash
# test_golden_cpu.sh — CI's regression check against real GPU captures: every snapshot in
# tests/golden/snapshots (captured on an H200 from libverify_attn.so) is replayed through the
# CPU library, whose outputs must match the GPU's captured outputs within bf16 tolerance.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${KCAP_BUILD:-build}
dir=tests/golden/snapshots
n=$(ls "$dir"/*.h5 2>/dev/null | wc -l)
[ "$n" -gt 0 ] || { echo "no golden snapshots in $dir"; exit 1; }
"$B/bin/kcap" check "$dir"
"$B/bin/kcap" replay "$dir" --kernel "$B/lib/libverify_attn_cpu.so" --ref none
