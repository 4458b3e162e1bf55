#!/usr/bin/env bash
# test_capture_gpu.sh — libkcap.so under a torch + ctypes client of libverify_attn.so on the
# GPU: eager calls (zero-stall staging, and the synchronous path), calls inside a CUDA graph
# captured at every replay, a graph captured while dormant and armed later, and drops
# counted with a tiny staging ring. Every snapshot validates and its outputs are bitwise what
# the client got; outputs are identical with and without the preload.
. "$(dirname "$0")/lib.sh"
need_gpu_client "$SNAPCMP"

mkdir -p "$T/eref" "$T/ecap" "$T/esync"
$C --mode eager -n 4 --seed 1 --dump "$T/eref" || fail "eager without preload"
with_kcap KCAP_DIR="$T/e" -- $C --mode eager -n 4 --seed 1 --dump "$T/ecap" 2>"$T/e.err" || { cat "$T/e.err"; fail "eager under libkcap"; }
same_outputs "$T/eref" "$T/ecap" && ok "eager: outputs identical with preload" || fail "eager outputs differ"
"$SNAPCMP" --all --expect 4 "$T/e" "$T/ecap" && ok "eager zero-stall: 4 snapshots match" || { cat "$T/e.err"; fail "eager snapcmp"; }
# no rank variable: the device ordinal names the worker (file name and metadata)
[ "$(find "$T/e" -name '*-r0-p*.h5' | wc -l)" = 4 ] && ok "rank from the CUDA device ordinal (-r0-)" ||
    { ls "$T/e"; fail "rank from the device ordinal"; }
with_kcap KCAP_DIR="$T/es" KCAP_GPU_MODE=sync -- $C --mode eager -n 4 --seed 1 --dump "$T/esync" 2>"$T/es.err" || fail "eager sync"
"$SNAPCMP" --all --expect 4 "$T/es" "$T/esync" && ok "eager synchronous path: 4 snapshots match" || { cat "$T/es.err"; fail "sync snapcmp"; }

mkdir -p "$T/gref" "$T/gcap"
$C --mode graph -n 5 --seed 2 --dump "$T/gref" || fail "graph without preload"
with_kcap KCAP_DIR="$T/g" -- $C --mode graph -n 5 --seed 2 --dump "$T/gcap" 2>"$T/g.err" || { cat "$T/g.err"; fail "graph under libkcap"; }
same_outputs "$T/gref" "$T/gcap" && ok "graph: outputs identical with preload" || fail "graph outputs differ"
"$SNAPCMP" --all --expect 6 "$T/g" "$T/gcap" && ok "graph: warm-up + 5 replays captured, outputs bitwise equal" || { cat "$T/g.err"; fail "graph snapcmp"; }
grep -q "graph_captured=5" "$T/g.err" && ok "stats count graph captures" || { cat "$T/g.err"; fail "graph stats"; }

mkdir -p "$T/acap"
with_kcap KCAP_DIR="$T/a" KCAP_DORMANT=1 -- $C --mode arm -n 5 --count 2 --seed 3 --kcap "$KCAP" \
    --dump "$T/acap" 2>"$T/a.err" || { cat "$T/a.err"; fail "arm under libkcap"; }
"$SNAPCMP" --expect 2 "$T/a" "$T/acap" && ok "graph captured dormant, armed later: 2 replays captured" || { cat "$T/a.err"; fail "arm snapcmp"; }

# eager calls and graph replays interleaved after `kcap arm --count 5`: exactly 5 in all
with_kcap KCAP_DIR="$T/m" KCAP_DORMANT=1 -- $C --mode mixed -n 40 --count 5 --seed 5 --kcap "$KCAP" 2>"$T/m.err" ||
    { cat "$T/m.err"; fail "mixed under libkcap"; }
[ "$(count_h5 "$T/m")" = 5 ] && "$SNAPCMP" --expect 5 "$T/m" - >/dev/null &&
    ok "eager + graph interleaved, arm --count 5: exactly 5 snapshots" ||
    { cat "$T/m.err"; fail "mixed budget: $(count_h5 "$T/m") snapshots for --count 5"; }

# a graph that is never replayed must not keep the units from eager calls (arm --count 5)
with_kcap KCAP_DIR="$T/n" KCAP_DORMANT=1 -- $C --mode mixed --no-replay -n 100 --count 5 --seed 6 --kcap "$KCAP" 2>"$T/n.err" ||
    { cat "$T/n.err"; fail "eager-only under libkcap"; }
[ "$(count_h5 "$T/n")" = 5 ] && ok "graph captured but idle, eager calls only, arm --count 5: exactly 5 snapshots" ||
    { cat "$T/n.err"; fail "idle graph budget: $(count_h5 "$T/n") snapshots for --count 5"; }

mkdir -p "$T/bcap"
with_kcap KCAP_DIR="$T/b" KCAP_RING_BYTES=2M -- $C --mode burst -n 200 --seed 4 --dump "$T/bcap" 2>"$T/b.err" ||
    { cat "$T/b.err"; fail "burst under libkcap"; }
ring=$(sed -n 's/.*ring=\([0-9]*\).*/\1/p' "$T/b.err")
n=$(count_h5 "$T/b")
# 200 replays + the eager warm-up call: each is either a snapshot or a counted drop
[ "${ring:-0}" -gt 0 ] && [ $((n + ring)) = 201 ] && ok "tiny ring: $n captured + $ring dropped and counted = 201 calls/replays" ||
    { cat "$T/b.err"; fail "ring drops (captured $n, dropped ${ring:-?})"; }
"$SNAPCMP" --multi --min 1 "$T/b" "$T/bcap" >/dev/null && ok "burst snapshots valid and equal to the graph's output" || fail "burst snapcmp"
for f in e g a m b; do echo "== $f"; cat "$T/$f.err"; done
finish
