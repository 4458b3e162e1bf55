#!/usr/bin/env bash
# test_capture_shadow_swap.sh — `kcap shadow PID` on a running client, no restart: a
# candidate with a planted bug is caught live, its snapshots replay to the same verdict
# offline, a new candidate that fails them is refused (unless --force), the swap to the fixed
# build is accepted and the divergences stop, --status reports the live summary, --off stops
# shadow mode; the client's results are never affected.
. "$(dirname "$0")/lib.sh"
CPU=$ROOT/$B/lib/libverify_attn_cpu.so
PERT=$ROOT/$B/tests/libverify_attn_cpu_perturbed.so
ABI2=$ROOT/$B/tests/libvattn_stub_abi2.so # another ABI version: no snapshot of ours replays on it
HANG=$ROOT/$B/tests/libvattn_stub_hang.so # never returns (and leaves a helper process running)
need "$LIBKCAP" "$CLIENT" "$KCAP" "$CPU" "$PERT" "$ABI2" "$HANG"

# env execs the client: $! is the client's own pid. Two divergences kept per shape bound the
# directory (the client's ~150 shapes: a few hundred small snapshots): with 1000 per shape the
# planted bug kept ~200 snapshots a second, every gate below replayed a directory that grew
# while it ran, and on a slower CI machine the test ran for many minutes and its live checks
# timed out behind the writer's backlog
env KCAP_DIR="$T/d" KCAP_SHADOW="$PERT" KCAP_SHADOW_PER_SHAPE=2 LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 51 --until "$T/stop" --quiet 2>"$T/client.err" &
pid=$!
for _ in $(seq 100); do [ "$(count_h5 "$T/d")" -ge 3 ] && break; sleep 0.1; done
[ "$(count_h5 "$T/d")" -ge 3 ] && ok "planted bug caught live: $(count_h5 "$T/d") divergent calls kept" || fail "no divergences"
"$KCAP" replay "$T/d" --kernel "$PERT" --ref none >/dev/null 2>&1
[ $? = 1 ] && ok "the divergent snapshots replay to the same verdict offline (the candidate fails them)" || fail "offline verdict"

"$KCAP" shadow $pid "$PERT" >"$T/refuse.out" 2>&1
[ $? = 1 ] && grep -Eq "fails ([0-9]+) of the \1 snapshots in $T/d \(outside tolerance\); not armed" "$T/refuse.out" &&
    ok "a candidate failing the captured cases is refused: $(grep -o 'fails [0-9]* of the [0-9]* snapshots' "$T/refuse.out")" ||
    { cat "$T/refuse.out"; fail "replay gate"; }
"$KCAP" shadow $pid "$ABI2" >"$T/abi2.out" 2>&1
[ $? = 1 ] && grep -Eq "could not be judged on ([0-9]+) of the \1 snapshots in $T/d \(they could not be replayed, none was outside tolerance; the first: .*implements version 2" "$T/abi2.out" &&
    ok "a candidate no snapshot replays on: said with the first reason, not armed" || { cat "$T/abi2.out"; fail "gate on ABI 2"; }
"$KCAP" shadow $pid "$PERT" --force >"$T/force.out" 2>&1 && grep -q "ok shadow candidate\|shadow candidate" "$T/force.out" &&
    grep -q "outside tolerance); armed anyway (--force)" "$T/force.out" &&
    ok "--force arms it anyway, saying so" || { cat "$T/force.out"; fail "--force"; }

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

# a candidate that hangs in the replay: refused at the gate's time limit, the replay and the
# helper process it started killed, the live candidate unchanged
t0=$(date +%s)
STUB_HANG_PIDFILE="$T/hang.pid" "$KCAP" shadow $pid "$HANG" --gate-timeout 2 >"$T/hang.out" 2>&1
rc=$?
el=$(($(date +%s) - t0))
hpid=$(cat "$T/hang.pid" 2>/dev/null)
for _ in $(seq 50); do [ -n "$hpid" ] && ! kill -0 "$hpid" 2>/dev/null && break; sleep 0.1; done
[ $rc = 1 ] && [ $el -lt 30 ] && [ -n "$hpid" ] && ! kill -0 "$hpid" 2>/dev/null &&
    grep -q "had not ended after 2 s (a candidate that hangs?); it was killed (--gate-timeout SEC gives it longer); not armed" "$T/hang.out" &&
    "$KCAP" shadow $pid --status 2>&1 | grep -q "candidate $CPU" &&
    ok "a candidate that hangs: refused after --gate-timeout 2 (${el}s), its helper process gone, the candidate unchanged" ||
    { cat "$T/hang.out"; fail "gate on a hanging candidate (exit $rc after ${el}s, helper ${hpid:-none})"; }
# the summary thread rewrites the file every 3 s while it changes: up to 15 s on a loaded machine
for _ in $(seq 150); do grep -qs "libverify_attn_cpu.so" "$T"/d/shadow-*.json && break; sleep 0.1; done
grep -qs '"path": "'"$CPU"'"' "$T"/d/shadow-*.json && ok "the summary file follows the live process (current candidate in it)" ||
    { cat "$T"/d/shadow-*.json; fail "live summary"; }
"$KCAP" shadow $pid --off >"$T/off.out" 2>&1 && "$KCAP" shadow $pid --status 2>&1 | grep -q "shadow off" &&
    ok "--off stops shadow mode" || { cat "$T/off.out"; fail "--off"; }
touch "$T/stop"
wait $pid
rc=$?
[ $rc = 0 ] && ok "the client ran through the swaps unaffected (exit 0)" || { cat "$T/client.err"; fail "client exit $rc"; }
ls "$T"/d/shadow-*.json >/dev/null 2>&1 && ok "summary written" || fail "no summary"
# the gate tells a candidate outside tolerance from snapshots it could not replay and from a
# library that does not load (a live client, judging with the library itself so it keeps
# nothing, whose directory holds one unreadable snapshot)
mkdir -p "$T/bad" && head -c 4096 /dev/urandom >"$T/bad/broken.h5"
env KCAP_DIR="$T/bad" KCAP_SHADOW="$CPU" LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 53 --until "$T/stop2" --quiet 2>"$T/client2.err" &
pid=$!
for _ in $(seq 100); do "$KCAP" shadow $pid --timeout 1 --status >/dev/null 2>&1 && break; sleep 0.1; done
"$KCAP" shadow $pid "$PERT" >"$T/unread.out" 2>&1
[ $? = 1 ] && grep -q "could not be judged on 1 of the 1 snapshots in $T/bad (they could not be replayed" "$T/unread.out" &&
    ok "snapshots that cannot be replayed: said as such (not as a failing candidate), not armed" ||
    { cat "$T/unread.out"; fail "gate on an unreadable snapshot"; }
LIBM=$(realpath "$(ldconfig -p | awk '/libm\.so\.6 .*x86-64/ {print $NF; exit}')" 2>/dev/null)
if [ -f "$LIBM" ]; then
    "$KCAP" shadow $pid "$LIBM" >"$T/noload.out" 2>&1
    [ $? = 1 ] && grep -q "cannot be loaded as a kernel library: .*; not armed" "$T/noload.out" &&
        ok "a library that is not a kernel library: the load error said, not armed" ||
        { cat "$T/noload.out"; fail "gate on a library without the ABI"; }
fi
"$KCAP" shadow $pid --status 2>&1 | grep -q "candidate $CPU" && ok "the candidate is unchanged after both refusals" ||
    fail "candidate changed by a refused swap"
touch "$T/stop2"
wait $pid || { cat "$T/client2.err"; fail "second client exit"; }
sleep 30 & sp=$!
"$KCAP" shadow $sp --status >"$T/pid1.out" 2>&1
rc=$?; kill $sp 2>/dev/null; wait $sp 2>/dev/null
[ $rc = 1 ] && grep -q "no libkcap.so loaded (start it with kcap record --shadow CAND.so)" "$T/pid1.out" &&
    ok "a process without libkcap is refused, with how to start one in shadow mode" || { cat "$T/pid1.out"; fail "process without libkcap"; }
finish
