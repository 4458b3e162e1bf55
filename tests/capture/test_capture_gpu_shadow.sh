#!/usr/bin/env bash
# test_capture_gpu_shadow.sh — shadow mode on the GPU (make test-gpu): the torch + ctypes
# client on libverify_attn.so, zero-stall mode, eager calls. The candidate runs into kcap's
# buffers, launched by the calling thread on the call's stream or (KCAP_SHADOW_THREAD=1,
# eager module loading) by kcap's worker thread on a side stream the call's stream waits for,
# and the compare kernel judges it; only divergent calls are staged. Checked: the CUDA build with a
# planted bug (one element, -DVATTN_PERTURB) is caught on every call with that element
# located, by either launching thread, the client's outputs are byte-identical with and
# without shadow mode, the snapshots hold both output sets and replay to the same verdicts
# offline; the production library as candidate gives 0 divergences and nothing staged; a
# candidate returning errors is switched off; `kcap shadow PID` swaps a live client from the
# bad build to the good one and the divergences stop, without restarting it; in CUDA graphs
# the candidate's nodes judge every replay (bug caught at each, same library: 0 divergent).
. "$(dirname "$0")/lib.sh"
PERT=$ROOT/$B/tests/libverify_attn_perturbed.so
ERRLIB=$ROOT/$B/tests/libvattn_stub_abi2.so
need_gpu_client "$PERT" "$ERRLIB"
SHAPE=4,16,4,700 # bs, heads, q_len, prefix

# 1. the planted bug, caught on every call
mkdir -p "$T/ref" "$T/sh" "$T/shw"
$C --mode eager --shape $SHAPE -n 6 --seed 7 --dump "$T/ref" >/dev/null || fail "client without libkcap"
with_kcap KCAP_DIR="$T/p" KCAP_SHADOW="$PERT" -- $C --mode eager --shape $SHAPE -n 6 --seed 7 \
    --dump "$T/sh" >/dev/null 2>"$T/p.err" || { cat "$T/p.err"; fail "client under shadow mode"; }
same_outputs "$T/ref" "$T/sh" && ok "client outputs byte-identical under GPU shadow mode" ||
    fail "shadow mode changed the client's outputs"
[ "$(count_h5 "$T/p")" = 4 ] && grep -q "shadow_not_kept=2" "$T/p.err" && grep -q "shadow_by_worker=0" "$T/p.err" &&
    ok "perturbed CUDA candidate: 6 of 6 calls divergent, 4 staged and kept (KCAP_SHADOW_PER_SHAPE default), 2 capped; launched by the calling thread" ||
    { cat "$T/p.err"; ls -a "$T/p"; fail "divergent snapshots: $(count_h5 "$T/p") of 4"; }
# the same with KCAP_SHADOW_THREAD=1 under eager module loading: the first call in stream,
# the next five launched by kcap's worker thread on a side stream the call's stream waits for
with_kcap KCAP_DIR="$T/pw" KCAP_SHADOW="$PERT" KCAP_SHADOW_THREAD=1 CUDA_MODULE_LOADING=EAGER -- $C --mode eager \
    --shape $SHAPE -n 6 --seed 7 --dump "$T/shw" >/dev/null 2>"$T/pw.err" || { cat "$T/pw.err"; fail "client, eager loading"; }
same_outputs "$T/ref" "$T/shw" && [ "$(count_h5 "$T/pw")" = 4 ] && grep -q "shadow_not_kept=2" "$T/pw.err" &&
    grep -q "shadow_by_worker=5" "$T/pw.err" && shadow_json "$T/pw" 'j["compared"]==6 and j["divergent"]==6 and j["lost"]==0' &&
    ok "KCAP_SHADOW_THREAD=1, CUDA_MODULE_LOADING=EAGER: outputs byte-identical, 6 of 6 divergent, the same 4 kept and 2 capped, 5 candidates launched by the worker" ||
    { cat "$T/pw.err" "$T"/pw/shadow-*.json; fail "eager loading: $(count_h5 "$T/pw") of 4"; }
kcap_check "$T/p" && ok "kcap check of the GPU shadow snapshots" || fail "kcap check"
PYTHONPATH=$ROOT/python "$GPY" - "$T/p" <<'PY' && ok "each: candidate o differs from production o in exactly the planted element (request 3, token 0, head 15, channel 77), lse bitwise" || fail "candidate outputs"
import glob, json, sys
import numpy as np
import kcap
d = sys.argv[1]
for f in sorted(glob.glob(d + "/*.h5")):
    s = kcap.load(f)
    assert set(s.candidate) == set(s.outputs) == {"o", "lse"}, (f, list(s.candidate))
    o, c = s.outputs["o"], s.candidate["o"]
    diff = np.argwhere(c.view(np.uint16) != o.view(np.uint16))
    T = o.shape[0]
    assert diff.tolist() == [[T - 4, 15, 77]], (f, diff.tolist())  # q_len 4: last request's token 0
    assert np.array_equal(s.candidate["lse"].view(np.uint32), s.outputs["lse"].view(np.uint32)), f
j = json.load(open(glob.glob(d + "/shadow-*.json")[0]))
assert j["compared"] == 6 and j["divergent"] == 6 and j["kept"] == 4 and j["capped"] == 2, j
assert j["candidate"]["on"] and j["shapes"][0]["kept"] == 4, j
assert "request 3, token 0, head 15, channel 77" in j["worst_where"], j["worst_where"]
assert abs(j["worst_abs"] - 0.5) < 0.1, j["worst_abs"]
PY
# KCAP_MAX_BYTES: the drainer's snapshots that no longer fit are divergent and lost in the
# summary, not kept (they were counted kept with no file): kept is the number of files
B=$(env KCAP_DIR="$T/pb" KCAP_SHADOW="$PERT" KCAP_LOG=info LD_PRELOAD="$PRELOAD" $C --mode eager --shape $SHAPE -n 6 --seed 7 \
    2>&1 >/dev/null | sed -n 's/.* stats: .* bytes=\([0-9]*\) .*/\1/p' | tail -1)
with_kcap KCAP_DIR="$T/mb" KCAP_SHADOW="$PERT" KCAP_MAX_BYTES=$((${B:-0} / 2)) -- $C --mode eager --shape $SHAPE -n 6 --seed 7 \
    >/dev/null 2>"$T/mb.err"
n=$(count_h5 "$T/mb")
[ "$n" -ge 1 ] && [ "$n" -lt 4 ] &&
    shadow_json "$T/mb" "j['compared']==6 and j['divergent']==6 and j['kept']==$n and j['kept']+j['lost']+j['capped']==6" &&
    ok "KCAP_MAX_BYTES at half the kept divergences' bytes ($B): $n files, the summary says $n kept, the rest lost or capped" ||
    { cat "$T/mb.err" "$T"/mb/shadow-*.json; fail "GPU shadow summary under KCAP_MAX_BYTES: $n files"; }
"$KCAP" replay "$T/p" --kernel "$CUDALIB" >"$T/rp.out" 2>&1 && [ "$(grep -c bitwise "$T/rp.out")" -ge 4 ] &&
    ok "replay on the production library: bitwise against the captured production output" ||
    { cat "$T/rp.out"; fail "replay production"; }
"$KCAP" replay "$T/p" --kernel "$PERT" --ref none >/dev/null 2>&1
[ $? = 1 ] && ok "replay on the candidate: the same verdict offline (fails)" || fail "replay candidate"

# 2. the production library as candidate: judged on the device, nothing staged
with_kcap KCAP_DIR="$T/same" KCAP_SHADOW="$CUDALIB" -- $C --mode eager --shape $SHAPE -n 6 --seed 7 \
    >/dev/null 2>"$T/same.err" || { cat "$T/same.err"; fail "client, same-library candidate"; }
shadow_json "$T/same" 'j["compared"]==6 and j["divergent"]==0' &&
    [ "$(count_h5 "$T/same")" = 0 ] && grep -q "shadow_not_kept=6" "$T/same.err" &&
    ok "the production library as candidate: 6 compared on the GPU, 0 divergent, nothing kept" ||
    { cat "$T/same.err" "$T"/same/shadow-*.json; fail "same-library candidate"; }

# 3. a candidate returning errors: off with one line, the client unaffected
with_kcap KCAP_DIR="$T/err" KCAP_SHADOW="$ERRLIB" -- $C --mode eager --shape $SHAPE -n 4 --seed 7 \
    >/dev/null 2>"$T/err.err"; rc=$?
[ $rc = 0 ] && [ "$(grep -c 'shadow mode off' "$T/err.err")" = 1 ] &&
    shadow_json "$T/err" 'not j["candidate"]["on"] and j["compared"]==0' &&
    ok "a candidate returning errors: switched off with one log line, client exit 0" ||
    { cat "$T/err.err"; fail "failing candidate (client exit $rc)"; }

# 4. live: the bad build caught, `kcap shadow PID` swaps to the good one, divergences stop
# (20 kept of the one shape: the swap's replay gate reads a directory that stops growing; with
# 1000 it grew while the gate ran, as test_capture_shadow_swap.sh's did until CI ran it slowly)
env KCAP_DIR="$T/live" KCAP_SHADOW="$PERT" KCAP_SHADOW_PER_SHAPE=20 LD_PRELOAD="$PRELOAD" \
    $C --mode loop --shape $SHAPE --seed 9 --until "$T/stop" >"$T/loop.out" 2>"$T/loop.err" &
pid=$!
for _ in $(seq 200); do [ "$(count_h5 "$T/live")" -ge 3 ] && break; sleep 0.1; done
[ "$(count_h5 "$T/live")" -ge 3 ] && ok "live: planted bug caught ($(count_h5 "$T/live") divergent calls kept)" ||
    { cat "$T/loop.err"; fail "live: no divergences"; }
"$KCAP" shadow $pid "$CUDALIB" >"$T/swap.out" 2>&1 && grep -q "passes the snapshots" "$T/swap.out" &&
    ok "live swap to the good build: replay gate passed, armed" || { cat "$T/swap.out"; fail "swap"; }
sleep 1.5
"$KCAP" shadow $pid --status >"$T/status.out" 2>&1
grep -q " divergent=0 " "$T/status.out" && grep -q "compared=[1-9]" "$T/status.out" &&
    ok "after the swap: $(grep -o 'compared=[0-9]*' "$T/status.out") calls compared, 0 divergent" ||
    { cat "$T/status.out"; fail "divergences after the swap"; }
touch "$T/stop"
wait $pid
rc=$?
[ $rc = 0 ] && grep -q " 0 failed" "$T/loop.out" && ok "the live client ran through the swap unaffected (exit 0, every call ok)" ||
    { cat "$T/loop.out" "$T/loop.err"; fail "live client exit $rc"; }

# 5. CUDA graphs: the candidate's work captured into the graph, judged at every replay
mkdir -p "$T/gref" "$T/gsh"
$C --mode graph --shape $SHAPE -n 6 --seed 11 --dump "$T/gref" >/dev/null || fail "graph client without libkcap"
with_kcap KCAP_DIR="$T/g" KCAP_SHADOW="$PERT" KCAP_SHADOW_PER_SHAPE=1000 -- $C --mode graph --shape $SHAPE \
    -n 6 --seed 11 --dump "$T/gsh" >/dev/null 2>"$T/g.err" || { cat "$T/g.err"; fail "graph client under shadow mode"; }
same_outputs "$T/gref" "$T/gsh" && ok "graph replays: client outputs byte-identical under shadow mode" ||
    fail "shadow mode changed the graph client's outputs"
PYTHONPATH=$ROOT/python "$GPY" - "$T/g" <<'PY' && ok "graph replays: the planted bug caught at all 6 replays (and the eager warm-up), each kept with both outputs, the element located" || { cat "$T/g.err"; fail "graph shadow snapshots"; }
import glob, json, sys
import numpy as np
import kcap
d = sys.argv[1]
j = json.load(open(glob.glob(d + "/shadow-*.json")[0]))
assert j["compared"] == 7 and j["divergent"] == 7 and j["kept"] == 7 and j.get("lost", 0) == 0, j
fs = sorted(glob.glob(d + "/*.h5"))
graph = 0
for f in fs:
    s = kcap.load(f)
    o, c = s.outputs["o"], s.candidate["o"]
    diff = np.argwhere(c.view(np.uint16) != o.view(np.uint16))
    assert diff.tolist() == [[o.shape[0] - 4, 15, 77]], (f, diff.tolist())
    graph += int(bool(s.meta.get("in_stream_capture", 0)))
assert len(fs) == 7 and graph == 6, (len(fs), graph)
PY
"$KCAP" replay "$T/g" --kernel "$CUDALIB" >"$T/grp.out" 2>&1 && [ "$(grep -c bitwise "$T/grp.out")" -ge 7 ] &&
    ok "graph snapshots replay bitwise on the production library" || { cat "$T/grp.out"; fail "graph replay production"; }
with_kcap KCAP_DIR="$T/gs" KCAP_SHADOW="$CUDALIB" -- $C --mode graph --shape $SHAPE -n 6 --seed 11 \
    >/dev/null 2>"$T/gs.err" || { cat "$T/gs.err"; fail "graph client, same-library candidate"; }
shadow_json "$T/gs" 'j["compared"]==7 and j["divergent"]==0' &&
    [ "$(count_h5 "$T/gs")" = 0 ] && ok "graph replays, the production library as candidate: 7 compared, 0 divergent, nothing kept" ||
    { cat "$T/gs.err" "$T"/gs/shadow-*.json; fail "graph same-library candidate"; }
finish
