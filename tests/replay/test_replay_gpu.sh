#!/usr/bin/env bash
# test_replay_gpu.sh — `kcap replay` on the CUDA library (make test-gpu; exit 77 without a GPU).
#
# Claims checked:
#   1  snapshots of GPU runs (kcap_gen_snap through libverify_attn.so, recorded from device
#      memory as capture does) replay BITWISE equal with the same CUDA build: the harness
#      (rebuild, upload, pool placement, fetch) adds no distortion; in both pool modes (the
#      kernel's partition does not depend on where the rows sit or on num_slots);
#   2  against the independent references: the CUDA library's plain reference kernel
#      (--ref gpu) and the CPU library (--ref cpu) agree within the bf16 tolerances;
#   3  CPU-made snapshots replayed on the CUDA library pass vs captured and vs reference;
#   4  --bench produces CUDA-event timings, GB/s, TFLOP/s and % of peak bandwidth.
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
have_gpu || skip "no GPU: skipped"
require "$KCAP" "$GEN" "$CUDALIB" "$CPU"
N=14

"$GEN" --lib "$CUDALIB" --out "$T/gpu" --count $N --seed 11 >"$T/gen-gpu.log" 2>&1 ||
    { cat "$T/gen-gpu.log"; die "generator on the GPU"; }
# a few production-sized ones too (thousands of scattered pool rows per request): the upload
# path batches row copies, and only sizes like these exercise its flushes
"$GEN" --lib "$CUDALIB" --out "$T/gpu-large" --count 4 --seed 5 --size large >"$T/gen-gpu-large.log" 2>&1 ||
    { cat "$T/gen-gpu-large.log"; die "generator on the GPU (large)"; }
"$GEN" --lib "$CPU" --out "$T/cpu" --count $N --seed 12 >"$T/gen-cpu.log" 2>&1 ||
    { cat "$T/gen-cpu.log"; die "generator on the CPU"; }

check_json() { # file mode(bitwise|pass) ref-must-pass
    "$PY" - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); mode = sys.argv[2]
assert d["cases"], "no cases"
bad = []
for c in d["cases"]:
    v = c["vs_captured"]
    if not (v["ran"] and v["pass"]) or (mode == "bitwise" and not v["bitwise"]):
        bad.append((c["name"], "captured", v["verdict"], c.get("error")))
    r = c["vs_ref"]
    if r is None or not r["pass"]:
        bad.append((c["name"], "ref", r and r["verdict"], r and r["error"]))
assert not bad, bad
print("%d cases %s vs captured, reference passes" % (len(d["cases"]), mode))
EOF
}

# --pool remap rewrites num_slots to the compact pool's size and moves every row: the CUDA
# library's split-K partition depends only on each request's own length and the max_kv_len
# hint (never on num_slots or slot values), so remap must be bitwise too.
for pool in auto remap; do
    "$KCAP" replay "$T/gpu" "$T/gpu-large" --kernel "$CUDALIB" --ref gpu --pool $pool --json "$T/gpu-$pool.json" \
        >"$T/gpu-$pool.out" 2>&1
    rc=$?
    cat "$T/gpu-$pool.out"
    [ $rc -eq 0 ] && check_json "$T/gpu-$pool.json" bitwise ||
        fail "GPU snapshots on the same CUDA build, --pool $pool (exit $rc)"
done
"$KCAP" replay "$T/gpu" --kernel "$CUDALIB" --ref cpu --json "$T/gpu-refcpu.json" >"$T/o" 2>&1
rc=$?
cat "$T/o"
[ $rc -eq 0 ] && check_json "$T/gpu-refcpu.json" bitwise || fail "GPU snapshots vs the CPU reference (exit $rc)"
"$KCAP" replay "$T/cpu" --kernel "$CUDALIB" --ref gpu --json "$T/cpu-on-gpu.json" >"$T/o" 2>&1
rc=$?
cat "$T/o"
[ $rc -eq 0 ] && check_json "$T/cpu-on-gpu.json" pass || fail "CPU snapshots on the CUDA library (exit $rc)"

"$KCAP" replay "$T/gpu" --kernel "$CUDALIB" --bench --iters 10 --json "$T/bench.json" >"$T/o" 2>&1
rc=$?
cat "$T/o"
[ $rc -eq 0 ] || fail "--bench (exit $rc)"
"$PY" - "$T/bench.json" <<'EOF' || fail "--bench JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] and d["device"]["peak_bw_gbs"] > 0, d["device"]
for c in d["cases"]:
    b = c["bench"]
    assert b and b["timer"] == "cuda_events_l2_flushed" and b["iters"] == 10, c["name"]
    assert 0 < b["min_ms"] <= b["median_ms"] and b["gbs"] > 0 and b["tflops"] > 0, b
    assert 0 < b["pct_peak_bw"] < 150, b
print("bench ok")
EOF

finish "all replay GPU checks passed"
