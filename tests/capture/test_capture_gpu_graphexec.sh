#!/usr/bin/env bash
# test_capture_gpu_graphexec.sh — clean graph twins (capture/kcap_graphexec.c) under the torch +
# ctypes client: a dormant process captures a call into a CUDA graph and replays it; the
# replays run the twin without kcap's nodes (stats and log say so, nothing is written) and
# the client's outputs are bitwise those of a run without libkcap. Then `kcap arm --count 2`
# after the capture: the 2 snapshots still come from the graph captured earlier (the
# instrumented exec runs once armed), the replays after the count is used run the twin
# again, and the outputs are again those of a bare run (twins are on by default).
# KCAP_GRAPH_TWINS=0 makes no twin.
. "$(dirname "$0")/lib.sh"
need_gpu_client "$SNAPCMP"

stat_of() { sed -n "s/.*stats:.* $1=\([0-9]*\).*/\1/p" "$2" | tail -1; }

mkdir -p "$T/ref" "$T/dcap"
$C --mode graph -n 5 --seed 11 --dump "$T/ref" || fail "graph without preload"
with_kcap KCAP_DIR="$T/d" KCAP_DORMANT=1 KCAP_LOG=info -- $C --mode graph -n 5 --seed 11 --dump "$T/dcap" \
    2>"$T/d.err" || { cat "$T/d.err"; fail "dormant graph under libkcap"; }
same_outputs "$T/ref" "$T/dcap" && ok "dormant: outputs bitwise those of a bare run" || fail "dormant outputs differ"
[ "$(count_h5 "$T/d")" = 0 ] && ok "dormant: nothing captured" || fail "dormant: $(count_h5 "$T/d") snapshots"
tw=$(stat_of graph_twins "$T/d.err") cl=$(stat_of graph_clean_launches "$T/d.err")
[ "${tw:-0}" = 1 ] && [ "${cl:-0}" -ge 5 ] && grep -q "a clean twin without them runs its replays" "$T/d.err" &&
    ok "dormant: 1 twin made, its $cl replays ran it" || { cat "$T/d.err"; fail "dormant twin (twins=${tw:-?} clean launches=${cl:-?})"; }

# KCAP_GRAPH_TWINS=0: no twin, the replays run the staging nodes, the outputs are the same
mkdir -p "$T/ncap"
with_kcap KCAP_DIR="$T/n" KCAP_DORMANT=1 KCAP_GRAPH_TWINS=0 KCAP_LOG=info -- $C --mode graph -n 5 --seed 11 \
    --dump "$T/ncap" 2>"$T/n.err" || { cat "$T/n.err"; fail "KCAP_GRAPH_TWINS=0 under libkcap"; }
same_outputs "$T/ref" "$T/ncap" && [ "$(stat_of graph_twins "$T/n.err")" = "" ] &&
    ! grep -q "clean twin" "$T/n.err" && ok "KCAP_GRAPH_TWINS=0: no twin, outputs bitwise those of a bare run" ||
    { cat "$T/n.err"; fail "KCAP_GRAPH_TWINS=0"; }

mkdir -p "$T/aref" "$T/acap"
# the bare run's `kcap arm` is refused (no libkcap): the same replays, for the outputs
$C --mode arm -n 6 --count 2 --seed 12 --kcap "$KCAP" --dump "$T/aref" 2>/dev/null || fail "arm mode without preload"
with_kcap KCAP_DIR="$T/a" KCAP_DORMANT=1 KCAP_GRAPH_TWINS=1 KCAP_LOG=info -- $C --mode arm -n 6 --count 2 --seed 12 --kcap "$KCAP" \
    --dump "$T/acap" 2>"$T/a.err" || { cat "$T/a.err"; fail "arm under libkcap"; }
same_outputs "$T/aref" "$T/acap" && ok "armed after capture: outputs bitwise those of a bare run" || fail "armed outputs differ"
"$SNAPCMP" --expect 2 "$T/a" "$T/acap" && [ "$(stat_of graph_captured "$T/a.err")" = 2 ] &&
    ok "armed after capture: 2 snapshots from the graph captured while dormant" || { cat "$T/a.err"; fail "arm snapshots"; }
tw=$(stat_of graph_twins "$T/a.err") cl=$(stat_of graph_clean_launches "$T/a.err")
[ "${tw:-0}" = 1 ] && [ "${cl:-0}" -ge 1 ] && [ "${cl:-0}" -le 4 ] &&
    ok "armed after capture: the twin again once --count 2 was used ($cl of 6 replays)" ||
    { cat "$T/a.err"; fail "twin around arming (twins=${tw:-?} clean launches=${cl:-?})"; }
for f in d n a; do echo "== $f"; grep "kcap:" "$T/$f.err"; done
finish
