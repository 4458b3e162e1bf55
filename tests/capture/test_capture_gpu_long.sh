#!/usr/bin/env bash
# test_capture_gpu_long.sh — the calls that matter: long-context verify calls captured in the
# default zero-stall mode and in sync mode, eager (back to back, never synchronised, so the
# staging ring holds them at once) and at CUDA-graph replays. Per shape and mode: every call
# becomes a snapshot (N of N, nothing dropped), each snapshot is bitwise what the client
# passed and got (snapcmp), and `kcap replay` on the same CUDA build reproduces its output
# bitwise. Then >= 4,000 graph call sites in 28 graphs captured largest first while dormant,
# armed later: exactly --count snapshots of the last-captured, smallest graph's replays.
. "$(dirname "$0")/lib.sh"
need_gpu_client "$SNAPCMP"
SHAPES=${KCAP_LONG_SHAPES:-"1,16,16,185000 8,16,4,32768 4,16,16,8192 2,16,8,12000"}
TABLE=$T/table
printf '%-18s %-6s %-10s %-9s %-8s %s\n' "(bs,H,q_len,prefix)" mode snapshots bitwise replay "snapshot MB" >"$TABLE"

replay_bitwise() { # DIR N: DIR holds N snapshots, each replays bitwise against its captured output
    "$KCAP" replay "$1" --kernel "$CUDALIB" --json "$T/r.json" >"$T/r.out" 2>&1 || { cat "$T/r.out"; return 1; }
    "$PY" - "$T/r.json" "$2" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
n = len(d["cases"])
bad = [c["name"] for c in d["cases"] if not (c["vs_captured"]["ran"] and c["vs_captured"]["bitwise"])]
assert n == int(sys.argv[2]) and not bad, (n, bad)
PYEOF
}

for shape in $SHAPES; do
    for mode in async sync; do
        D=$T/$mode-${shape//,/_}
        mkdir -p "$D.dump"
        with_kcap KCAP_DIR="$D" KCAP_GPU_MODE=$mode KCAP_FLUSH_TIMEOUT=300 KCAP_LOG=info -- \
            $C --mode long --shape "$shape" -n 3 --replays 3 --seed 7 --dump "$D.dump" 2>"$D.err" ||
            { cat "$D.err"; fail "$shape $mode: client under libkcap"; continue; }
        n=$(count_h5 "$D")
        mb=$(du -sm "$D" | cut -f1)
        cmpok=no; repok=no
        "$SNAPCMP" --all --expect 6 "$D" "$D.dump" >"$D.cmp" 2>&1 && cmpok=yes
        replay_bitwise "$D" 6 && repok=yes
        printf '%-18s %-6s %-10s %-9s %-8s %s\n' "($shape)" $mode "$n of 6" $cmpok $repok "$((mb / 6))" >>"$TABLE"
        if [ "$n" = 6 ] && [ $cmpok = yes ] && [ $repok = yes ] && grep -q "captured=6 " "$D.err"; then
            ok "$shape $mode: 6 of 6 captured (3 eager + 3 graph replays), bitwise, replayed bitwise"
        else
            cat "$D.err" "$D.cmp"; fail "$shape $mode: $n of 6 captured, snapcmp $cmpok, replay $repok"
        fi
        grep "stats:" "$D.err" | sed "s/^/  [$shape $mode] /"
        rm -rf "$D" "$D.dump"
    done
done

# >= 4,000 graph sites: 28 graphs x 150 calls, largest batch first, dormant; then armed
D=$T/sites
mkdir -p "$D.dump"
with_kcap KCAP_DIR="$D" KCAP_DORMANT=1 KCAP_LOG=info -- $C --mode sites --graphs 28 --layers 150 \
    -n 2 --count 3 --seed 9 --kcap "$KCAP" --dump "$D.dump" 2>"$D.err" ||
    { cat "$D.err"; fail "sites client under libkcap"; }
n=$(count_h5 "$D")
"$SNAPCMP" --multi --expect 3 "$D" "$D.dump" >"$D.cmp" 2>&1 && grep -q "graph_captured=3" "$D.err" &&
    ! grep -q "sites=[1-9]" "$D.err" &&
    ok "4200 graph call sites in 28 graphs: the smallest graph's replays captured, exactly 3 (arm --count 3)" ||
    { cat "$D.err" "$D.cmp"; fail "sites: $n snapshots"; }
printf '%-18s %-6s %-10s\n' "4200 graph sites" dormant "$n of 3" >>"$TABLE"
grep "stats:\|sites:" "$D.err"
echo "== long-context capture"
cat "$TABLE"
finish
