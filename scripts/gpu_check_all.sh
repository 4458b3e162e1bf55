#!/usr/bin/env bash
# gpu_check_all.sh — everything that needs a GPU, in one go (one device-machine session):
# build with the default targets (sm_120 + sm_90 + PTX), `make test-gpu`, regenerate the golden
# corpus into a scratch folder, `make bench-gpu`. Logs go to LOGDIR (default: $OUT or /tmp).
# Usage: bash scripts/gpu_check_all.sh [LOGDIR]
set -uo pipefail
cd "$(dirname "$0")/.."
L=${1:-${OUT:-/tmp/kcap-gpu}}
mkdir -p "$L"
{ nvidia-smi -L; make -j"$(nproc)" all; } >"$L/build.log" 2>&1 || { tail -40 "$L/build.log"; exit 1; }
echo "build ok"
cuobjdump --list-elf build/lib/libverify_attn.so 2>&1 | tee -a "$L/build.log"
make test-gpu 2>&1 | tee "$L/test-gpu.log"
t=$?
bash scripts/make_golden.sh golden-new >"$L/golden.log" 2>&1 && tar czf "$L/golden.tgz" golden-new &&
    echo "golden ok: $(ls golden-new | wc -l) files, $(du -sh golden-new | cut -f1)" || { echo "golden FAILED"; tail -30 "$L/golden.log"; }
BENCH_OUT=$L make bench-gpu >"$L/bench-gpu.log" 2>&1
b=$?
grep -E '^\|' "$L/bench-gpu.log" | head -40
echo "test-gpu exit $t, bench-gpu exit $b"
