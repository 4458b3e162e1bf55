#!/usr/bin/env bash
# test_capture_shadow_swap.sh — `kcap shadow PID` on a running client, no restart: a
# candidate with a planted bug is caught live, its snapshots replay to the same verdict
# offline, a new candidate that fails them is refused (unless --force), the swap to the fixed
# build is accepted and the divergences stop, --status reports the live summary, --off stops
# shadow mode; the client's results are never affected.
. "$(dirname "$0")/lib.sh"
CPU=$ROOT/$B/lib/libverify_attn_cpu.so
PERT=$ROOT/$B/tests/libverify_attn_cpu_perturbed.so
need "$LIBKCAP" "$CLIENT" "$KCAP" "$CPU" "$PERT"

# env execs the client: $! is the client's own pid
env KCAP_DIR="$T/d" KCAP_SHADOW="$PERT" KCAP_SHADOW_PER_SHAPE=1000 LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 51 --until "$T/stop" --quiet 2>"$T/client.err" &
pid=$!
for _ in $(seq 100); do [ "$(count_h5 "$T/d")" -ge 3 ] && break; sleep 0.1; done
[ "$(count_h5 "$T/d")" -ge 3 ] && ok "planted bug caught live: $(count_h5 "$T/d") divergent calls kept" || fail "no divergences"
"$KCAP" replay "$T/d" --kernel "$PERT" --ref none >/dev/null 2>&1
[ $? = 1 ] && ok "the divergent snapshots replay to the same verdict offline (the candidate fails them)" || fail "offline verdict"

"$KCAP" shadow $pid "$PERT" >"$T/refuse.out" 2>&1
[ $? = 1 ] && grep -q "fails (or cannot replay) the snapshots" "$T/refuse.out" && ok "a candidate failing the captured cases is refused" ||
    { cat "$T/refuse.out"; fail "replay gate"; }
"$KCAP" shadow $pid "$PERT" --force >"$T/force.out" 2>&1 && grep -q "ok shadow candidate\|shadow candidate" "$T/force.out" &&
    ok "--force arms it anyway" || { cat "$T/force.out"; fail "--force"; }

"$KCAP" shadow $pid "$CPU" >"$T/swap.out" 2>&1 && grep -q "passes the snapshots" "$T/swap.out" &&
    ok "swap to the fixed build: replayed first, then armed" || { cat "$T/swap.out"; fail "swap"; }
sleep 1
# the summary starts over with each candidate: calls compared since the swap, none divergent
# (files still appearing now are the writer's backlog of the earlier candidates' divergences)
"$KCAP" shadow $pid --status >"$T/status.out" 2>&1
grep -q "shadow on candidate $CPU" "$T/status.out" && grep -q " divergent=0 " "$T/status.out" &&
    grep -q "compared=[1-9]" "$T/status.out" &&
    ok "after the swap: $(grep -o 'compared=[0-9]*' "$T/status.out") calls, 0 divergent" ||
    { cat "$T/status.out"; fail "divergences after the swap"; }

for _ in $(seq 50); do grep -qs "libverify_attn_cpu.so" "$T"/d/shadow-*.json && break; sleep 0.1; done
grep -qs '"path": "'"$CPU"'"' "$T"/d/shadow-*.json && ok "the summary file follows the live process (current candidate in it)" ||
    { cat "$T"/d/shadow-*.json; fail "live summary"; }
"$KCAP" shadow $pid --off >"$T/off.out" 2>&1 && "$KCAP" shadow $pid --status 2>&1 | grep -q "shadow off" &&
    ok "--off stops shadow mode" || { cat "$T/off.out"; fail "--off"; }
touch "$T/stop"
wait $pid
rc=$?
[ $rc = 0 ] && ok "the client ran through the swaps unaffected (exit 0)" || { cat "$T/client.err"; fail "client exit $rc"; }
ls "$T"/d/shadow-*.json >/dev/null 2>&1 && ok "summary written" || fail "no summary"
sleep 30 & sp=$!
"$KCAP" shadow $sp --status >"$T/pid1.out" 2>&1
rc=$?; kill $sp 2>/dev/null; wait $sp 2>/dev/null
[ $rc = 1 ] && grep -q "no libkcap.so loaded (start it with kcap record --shadow CAND.so)" "$T/pid1.out" &&
    ok "a process without libkcap is refused, with how to start one in shadow mode" || { cat "$T/pid1.out"; fail "process without libkcap"; }
finish
