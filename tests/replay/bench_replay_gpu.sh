#!/usr/bin/env bash
# bench_replay_gpu.sh — wall time of `kcap replay` over a 20-snapshot corpus on the GPU
# (make bench-gpu). Target: <= 5 s on an H200, kernel build excluded.
#
# Method (docs/PERF.md, Replay): kcap_gen_snap makes 20 "large" snapshots through
# libverify_attn.so (bs 1-8, q_len 4/8, 16-64 heads, prefixes 500-6000, slot ids scattered
# over a pool twice the rows used; not timed). Then the whole command is timed from the
# shell, cold process each time: load + decompress + validate every file, rebuild (upload,
# pool at the captured slot ids), run the reference kernel and the kernel, fetch, compare.
#   run A: default reference (--ref gpu), as a developer runs it     <- the figure
#   run B: same again (page cache warm for the files, as in --watch)
#   run C: --ref none (kernel only)
# Then one --bench run for per-kernel figures. Figures go to stdout, logs to $BENCH_LOG if set.
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
have_gpu || { echo "no GPU: skipped"; exit 0; }
LOG=${BENCH_LOG:-$T}
# BENCH_CORPUS=DIR keeps the corpus there (for further runs by hand); default: a temp dir
C=${BENCH_CORPUS:-$T/corpus}
"$GEN" --lib "$CUDALIB" --out "$C" --count 20 --seed 2026 --size large >"$LOG/corpus.txt" 2>&1 ||
    { cat "$LOG/corpus.txt"; echo "corpus generation failed"; exit 1; }
echo "corpus: $(ls "$C" | wc -l) files, $(du -sh "$C" | cut -f1) on disk"
awk '{print "  " $0}' "$LOG/corpus.txt"
sync
run() { # label args...
    local label=$1
    shift
    local t0 t1 rc
    t0=$(date +%s.%N)
    "$KCAP" replay "$C" --kernel "$CUDALIB" "$@" --json "$LOG/replay-$label.json" >"$LOG/replay-$label.txt" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf '%-28s %7.3f s  exit %d  (%s)\n' "$label" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" \
        $rc "$(tail -n 1 "$LOG/replay-$label.txt")"
}
echo "wall time of kcap replay over the corpus (whole process):"
run A-ref-gpu
run B-ref-gpu-again
run C-ref-none --ref none
echo "where run A's time went (sum over cases, from its JSON phases_ms):"
"$PY" - "$LOG/replay-A-ref-gpu.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
tot = {}
for c in d["cases"]:
    for k, v in c["phases_ms"].items():
        tot[k] = tot.get(k, 0) + v
cases = sum(c["wall_ms"] for c in d["cases"])
print("  cases %.1f ms of a %.1f ms run (the rest: process start, library load, CUDA init)"
      % (cases, d["summary"]["wall_ms"]))
for k, v in tot.items():
    print("  %-14s %8.1f ms" % (k, v))
PYEOF
"$KCAP" replay "$C" --kernel "$CUDALIB" --ref none --bench --iters 20 >"$LOG/replay-bench.txt" 2>&1
echo "per-kernel figures (--bench, CUDA events, L2 flushed, median of 20):"
cat "$LOG/replay-bench.txt"
cat "$LOG/replay-A-ref-gpu.txt"
