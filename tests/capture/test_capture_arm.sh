#!/usr/bin/env bash
# test_capture_arm.sh — a dormant process is armed at run time, without a restart: a client
# keeps calling under KCAP_DORMANT=1; nothing is captured until `kcap arm PID --count 2`,
# then exactly 2 snapshots appear and capture goes dormant again; a second arming adds one
# more; `kcap arm` on a process without libkcap.so fails cleanly. The snapshots validate.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT" "$SNAPCMP" "$KCAP"

# env, not with_kcap: $! must be the client's own pid (a function in the background is a subshell)
env KCAP_DIR="$T/snaps" KCAP_DORMANT=1 LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 1 --seed 31 --until "$T/stop" \
    --quiet 2>"$T/err" &
pid=$!
wait_for() { # wait_for N: until N snapshots exist (10 s at most)
    for _ in $(seq 200); do [ "$(count_h5 "$T/snaps")" -ge "$1" ] && return 0; sleep 0.05; done
    return 1
}
sleep 0.5
[ "$(count_h5 "$T/snaps")" = 0 ] && ok "dormant: nothing captured" || fail "dormant process captured"
"$KCAP" arm "$pid" --count 2 >"$T/arm.out" 2>&1 && grep -q "armed for 2" "$T/arm.out" &&
    ok "kcap arm acknowledged" || { cat "$T/arm.out"; fail "kcap arm"; }
wait_for 2 && ok "2 snapshots after arming" || fail "no snapshots after arming"
sleep 0.5
[ "$(count_h5 "$T/snaps")" = 2 ] && ok "dormant again after 2" || fail "captured more than --count ($(count_h5 "$T/snaps"))"
"$KCAP" arm "$pid" >/dev/null 2>&1 || fail "second kcap arm"
wait_for 3 && sleep 0.3 && [ "$(count_h5 "$T/snaps")" = 3 ] && ok "second arming: one more" || fail "second arming ($(count_h5 "$T/snaps"))"
# requests from several commands at once: each one is answered (one request file name; a
# request is linked in only while none is pending, and the watcher claims it before reading)
ws=()
for w in 1 2 3; do
    ( for i in $(seq 25); do "$KCAP" arm "$pid" --status --timeout 10 >/dev/null 2>>"$T/conc.err" || echo x; done ) \
        >"$T/conc.$w" &
    ws+=($!)
done
wait "${ws[@]}"
lost=$(cat "$T"/conc.* | wc -l)
[ "$lost" = 0 ] && ok "75 status requests from 3 commands at once: every one answered" ||
    { head -3 "$T/conc.err"; fail "$lost of 75 concurrent requests unanswered"; }
# a request whose wakeup was lost (linked in by a command killed before it woke the watcher)
# does not block the next command, which wakes the watcher while it waits
printf 'start %s\nnonce 0badc0de\nstatus\n' "$(awk '{print $22}' /proc/$pid/stat)" >"$T/stuck"
ln "$T/stuck" "$T/snaps/.kcap-arm-$pid"
"$KCAP" arm "$pid" --status --timeout 5 >"$T/after_stuck.out" 2>&1 &&
    ok "a request left without its wakeup is taken, then the next command's is answered" ||
    { cat "$T/after_stuck.out"; fail "stuck request blocks the channel"; }
rm -f "$T/snaps/.kcap-ack-$pid.0badc0de"
(umask 0277 && "$KCAP" arm "$pid" --status --timeout 5 >"$T/umask.out" 2>&1) &&
    ok "a umask without owner write: the request still reaches the process" || { cat "$T/umask.out"; fail "umask 0277"; }
mkdir "$T/snaps/.kcap-arm-claimed-$pid"
"$KCAP" arm "$pid" --status --timeout 5 >"$T/claimdir.out" 2>&1 && [ ! -e "$T/snaps/.kcap-arm-claimed-$pid" ] &&
    ok "a directory in the way of the watcher's claim is removed, the request answered" ||
    { cat "$T/claimdir.out"; fail "directory at the claimed name"; }
touch "$T/stop"
wait "$pid" || fail "client exit status"
"$SNAPCMP" --expect 3 "$T/snaps" - >/dev/null && ok "armed snapshots validate" || fail "snapcmp"
kcap_check "$T/snaps" || fail "kcap check"
ls -A "$T/snaps" | grep -q kcap-arm && fail "control file left behind" || ok "control files consumed"

sleep 30 & other=$!
"$KCAP" arm "$other" >"$T/arm2.out" 2>&1
rc=$?
kill "$other" 2>/dev/null
[ $rc = 1 ] && grep -q "no libkcap.so" "$T/arm2.out" && ok "arming a process without libkcap.so fails cleanly" ||
    { cat "$T/arm2.out"; fail "arm without libkcap"; }
"$KCAP" arm notapid >/dev/null 2>&1; [ $? = 2 ] && ok "bad pid is a usage error" || fail "bad pid"
finish
