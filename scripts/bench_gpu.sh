#!/usr/bin/env bash
# bench_gpu.sh — `make bench-gpu` (GPU_BENCHES): the verify-attention kernel benchmark in one run.
# vattn_dev --bench measures the two ceilings (D2D copy kernel, mma.sync bf16 kernel) and times
# the fast and reference kernels per config; bench_gpu_torch.py times the PyTorch gather+bmm
# implementation on the same shapes and prints the table (docs/PERF.md (Kernels) records it).
# Then the serving set (the batch sizes, head counts and prefixes a serving deployment runs):
# vattn_dev --serving (per call in CUDA graphs, L2 warm and cold, and eager, against the same
# floor), its table printed last; KCAP_BENCH_BREAKDOWN=1 adds, per serving row, the time by
# stage (launch, prologue, epilogue, tiles, combine, PDL: timing variants of the dev build, as
# bench_gpu_dev.sh breakdown) and a split-count sweep. Exit 77 (skip) without a GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${KCAP_BUILD:-$here/../build}
out=${BENCH_OUT:-$(mktemp -d)}
# a BENCH_OUT that does not exist yet is made here (it once failed only after the whole run)
mkdir -p "$out" || { echo "bench_gpu.sh: BENCH_OUT=$out: cannot create that directory" >&2; exit 2; }
set +e
"$build/tests/vattn_dev" --bench | tee "$out/vattn_dev_bench.txt"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "vattn_dev --bench failed ($rc)"; exit 1; }
python3 "$here/bench_gpu_torch.py" "$out/vattn_dev_bench.txt" | tee "$out/bench_table.md"
echo
set +e
serving=--serving
[ "${KCAP_BENCH_BREAKDOWN:-0}" = 1 ] && serving=--serving-breakdown
"$build/tests/vattn_dev" $serving >"$out/vattn_dev_serving.txt" 2>&1
rc=$?
set -e
grep -v "^csv" "$out/vattn_dev_serving.txt" | grep -v "^|" || true
[ "$rc" = 0 ] || { tail -5 "$out/vattn_dev_serving.txt"; echo "vattn_dev $serving failed ($rc)"; exit 1; }
echo
echo "serving set, per call, µs:"
grep "^|\|^(floor" "$out/vattn_dev_serving.txt"
