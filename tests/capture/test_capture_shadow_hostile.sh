#!/usr/bin/env bash
# test_capture_shadow_hostile.sh — shadow-mode candidates that misbehave, on the CPU path
# (found by a hostile test): the host's results stay byte-identical and it exits 0 when the
# candidate scrambles the args it was given (kcap read its outputs through the scrambled
# sizes: SIGSEGV), asks for SIZE_MAX - 1 bytes of workspace (the rounded size wrapped to 0:
# heap corruption), is a FIFO (the open blocked the host forever), is slow only in its
# workspace function (never timed: never switched off), or fails late after a swap (the old
# candidate's error switched the new one off), or writes its inputs (it got the service's own
# buffers: the service's q changed); and `kcap shadow PID CAND` with no snapshot to
# replay against loads the candidate in a process of its own first (one whose constructor
# aborts was armed unvetted and killed the service), and says so when the target exits
# before answering (it waited out its --timeout and spoke of a withdrawn request); the gate
# ends with the replay, not with its pipe: a candidate that closes its stdout and hangs is
# killed at --gate-timeout (it hung kcap shadow forever), one whose helper process holds the
# pipe is judged at once and the helper killed (it waited for the helper), and one whose helper
# leaves the group with setsid() is killed all the same (it escaped the group kill), also when
# kcap shadow itself is killed mid-gate or was started with SIGCHLD ignored.
. "$(dirname "$0")/lib.sh"
shadow_libs
STUB=$ROOT/$B/tests/libvattn_stub
need "${STUB}_modargs.so" "${STUB}_hugews.so" "${STUB}_slowws.so" "${STUB}_latefail.so" "${STUB}_ctor_abort.so" \
    "${STUB}_closehang.so" "${STUB}_daemon.so" "${STUB}_setsid.so"
"$CLIENT" --calls 6 --seed 41 --hash >"$T/bare" || fail "client bare"
"$CLIENT" --calls 8 --seed 41 --hash >"$T/bare8" || fail "client bare"

with_kcap KCAP_DIR="$T/mod" KCAP_SHADOW="${STUB}_modargs.so" -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/mod.out" 2>"$T/mod.err"
rc=$?
[ $rc = 0 ] && cmp -s "$T/bare" "$T/mod.out" && shadow_json "$T/mod" 'j["compared"]==6' &&
    ok "a candidate that scrambles its args: host unaffected (exit 0, same results), all 6 calls judged from kcap's own copy" ||
    { cat "$T/mod.err"; fail "candidate scrambling its args (exit $rc)"; }

with_kcap KCAP_DIR="$T/huge" KCAP_SHADOW="${STUB}_hugews.so" -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/huge.out" 2>"$T/huge.err"
rc=$?
[ $rc = 0 ] && cmp -s "$T/bare" "$T/huge.out" && shadow_json "$T/huge" 'j["compared"]==0 and j["not_judged"]==6' &&
    ok "a candidate asking for SIZE_MAX - 1 bytes of workspace: not judged (6 counted), host unaffected" ||
    { cat "$T/huge.err" "$T"/huge/shadow-*.json; fail "huge workspace (exit $rc)"; }

# a candidate that uses its inputs as scratch: it gets kcap's copies, the service's q stays
mkdir -p "$T/d0" "$T/d1"
"$CLIENT" --calls 3 --seed 41 --dump "$T/d0" >/dev/null 2>&1 || fail "client bare, --dump"
with_kcap KCAP_DIR="$T/win" KCAP_SHADOW="$ROOT/$B/tests/libvattn_winput.so" -- "$CLIENT" --calls 3 --seed 41 --dump "$T/d1" \
    >/dev/null 2>"$T/win.err"
rc=$?
[ $rc = 0 ] && [ "$(ls "$T/d0" | wc -l)" -gt 0 ] && diff -rq "$T/d0" "$T/d1" >/dev/null && shadow_json "$T/win" 'j["compared"]==3' &&
    ok "a candidate that writes its inputs: the service's q and outputs byte-identical (the candidate read kcap's copies)" ||
    { cat "$T/win.err"; diff -rq "$T/d0" "$T/d1"; fail "candidate writing its inputs (exit $rc)"; }

with_kcap KCAP_DIR="$T/wsw" KCAP_SHADOW="$ROOT/$B/tests/libvattn_wswrite.so" -- "$CLIENT" --calls 6 --seed 41 --hash \
    >"$T/wsw.out" 2>"$T/wsw.err"
rc=$?
[ $rc = 0 ] && cmp -s "$T/bare" "$T/wsw.out" &&
    ok "a candidate whose workspace function writes the output it is shown: the service's outputs unchanged" ||
    { cat "$T/wsw.err"; fail "workspace function writing outputs (exit $rc)"; }

mkfifo "$T/fifo.so"
timeout 20 env KCAP_DIR="$T/fifo" KCAP_SHADOW="$T/fifo.so" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 2 --seed 41 --hash \
    >"$T/fifo.out" 2>"$T/fifo.err"
rc=$?
[ $rc = 0 ] && cmp -s <(head -2 "$T/bare") "$T/fifo.out" && grep -q "is not a regular file" "$T/fifo.err" &&
    ok "KCAP_SHADOW=a FIFO: named as not a regular file, host unaffected (no wait on the FIFO)" ||
    { cat "$T/fifo.err"; fail "FIFO candidate (exit $rc; 124 = hung)"; }

with_kcap KCAP_DIR="$T/slow" KCAP_SHADOW="${STUB}_slowws.so" KCAP_SHADOW_MAX_SLOWDOWN=4 -- "$CLIENT" --calls 8 --seed 41 --hash \
    >"$T/slow.out" 2>"$T/slow.err"
rc=$?
[ $rc = 0 ] && cmp -s "$T/bare8" "$T/slow.out" &&
    [ "$(grep -c 'shadow mode off: the candidate .* took' "$T/slow.err")" = 1 ] &&
    ok "a candidate slow only in its workspace function: timed with the call, switched off with one line" ||
    { cat "$T/slow.err"; fail "slow workspace function (exit $rc)"; }

# a late error of the candidate a swap replaced: the new candidate stays on
env KCAP_DIR="$T/late" KCAP_SHADOW="${STUB}_latefail.so" KCAP_SHADOW_MAX_SLOWDOWN=0 LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 53 --until "$T/stop" --quiet 2>"$T/late.err" &
pid=$!
for _ in $(seq 100); do "$KCAP" shadow $pid --timeout 1 --status >/dev/null 2>&1 && break; sleep 0.1; done
"$KCAP" shadow $pid "$CPU" --timeout 10 >"$T/late.sw" 2>&1
sleep 2 # the old candidate's call returns its error meanwhile
"$KCAP" shadow $pid --status >"$T/late.st" 2>&1
touch "$T/stop"
wait $pid
crc=$?
[ $crc = 0 ] && grep -q "shadow on candidate $CPU" "$T/late.st" && ! grep -q "shadow mode off" "$T/late.err" &&
    ok "the replaced candidate's late error: ignored, the new candidate stays on, client exit 0" ||
    { cat "$T/late.sw" "$T/late.st" "$T/late.err"; fail "late error after a swap (client $crc)"; }

# no snapshots to replay against: the candidate is loaded away from the service first
env KCAP_DIR="$T/empty" KCAP_SHADOW="$CPU" LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 53 --until "$T/stop2" --quiet 2>"$T/empty.err" &
pid=$!
for _ in $(seq 100); do "$KCAP" shadow $pid --timeout 1 --status >/dev/null 2>&1 && break; sleep 0.1; done
mkdir -p "$T/tmpk"
TMPDIR="$T/tmpk" "$KCAP" shadow $pid "${STUB}_ctor_abort.so" >"$T/ab.out" 2>&1
rc=$?
"$KCAP" shadow $pid --status >"$T/ab.st" 2>&1
[ $rc = 1 ] && grep -q "killed that process (signal 6, Aborted): it would kill the service the same way; not armed" "$T/ab.out" &&
    grep -q "shadow on candidate $CPU" "$T/ab.st" && kill -0 $pid 2>/dev/null && [ -z "$(ls -A "$T/tmpk")" ] &&
    ok "no snapshots, a candidate whose constructor aborts: refused after loading it in a process of its own, the service alive, TMPDIR left empty" ||
    { cat "$T/ab.out" "$T/ab.st"; fail "load check of an aborting candidate"; }
"$KCAP" shadow $pid "$PERT" >"$T/ok.out" 2>&1 && grep -q "no snapshots in $T/empty to replay the candidate against first; it loads as a cpu kernel library in a process of its own" "$T/ok.out" &&
    ok "no snapshots, a candidate that loads: said so, armed" || { cat "$T/ok.out"; fail "load check of a good candidate"; }
touch "$T/stop2"
wait $pid || fail "client of the load checks"
# the gate against a live client's snapshots: a replay that closes its stdout and hangs, and
# a candidate whose constructor leaves a helper process holding every fd
env KCAP_DIR="$T/g" KCAP_SHADOW="$PERT" LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 54 --until "$T/stop3" --quiet >/dev/null 2>"$T/g.err" &
pid=$!
for _ in $(seq 100); do [ "$(count_h5 "$T/g")" -ge 2 ] && break; sleep 0.1; done
t0=$(date +%s)
TMPDIR="$T/tmpk" timeout 60 "$KCAP" shadow $pid "${STUB}_closehang.so" --gate-timeout 3 >"$T/ch.out" 2>&1
rc=$?
el=$(($(date +%s) - t0))
[ $rc = 1 ] && [ $el -lt 20 ] && grep -q "had not ended after 3 s" "$T/ch.out" &&
    ! pgrep -f "kcap replay $T/g " >/dev/null && [ -z "$(ls -A "$T/tmpk")" ] &&
    ok "a replay that closes its stdout and hangs: refused at --gate-timeout 3 (${el}s), nothing left running or in TMPDIR" ||
    { cat "$T/ch.out"; fail "gate on a closed-stdout hang (exit $rc after ${el}s)"; }
# kcap shadow itself killed while its gate's replay hangs: the replay goes with it (it ran on
# alone, with nobody left to enforce the time limit)
TMPDIR="$T/tmpk" "$KCAP" shadow $pid "${STUB}_closehang.so" --gate-timeout 50 >/dev/null 2>&1 &
kp=$!
for _ in $(seq 100); do pgrep -f "kcap replay $T/g " >/dev/null && break; sleep 0.1; done
pgrep -f "kcap replay $T/g " >/dev/null || fail "the gate's replay never started"
kill -KILL $kp # (no handler of kcap shadow's runs: its reaper learns it from the kernel)
wait $kp 2>/dev/null
for _ in $(seq 50); do pgrep -f "kcap replay $T/g " >/dev/null || break; sleep 0.1; done
! pgrep -f "kcap replay $T/g " >/dev/null && kill -0 $pid 2>/dev/null &&
    ok "kcap shadow killed during its gate: the hanging replay ended with it, the service alive" ||
    { pkill -KILL -f "kcap replay $T/g "; fail "a gate's replay outlived kcap shadow"; }
# what the killed kcap shadow could not remove: its check directory, named by its pid, swept
# by the next kcap shadow once 10 minutes old, with the dead loaders' directories in it (a
# check killed inside dlopen leaves one); a live pid's directory inside another is kept
left=$(cd "$T/tmpk" && ls -d kcap-shadow-check.$kp.* 2>/dev/null)
[ -n "$left" ] && [ -f "$T/tmpk/$left/candidate.so" ] ||
    { ls -laR "$T/tmpk"; fail "the killed kcap shadow's check directory, named by its pid $kp"; }
dead=$(sh -c 'echo $$')
mkdir -p "$T/tmpk/$left/kcap-replay-$dead.Abc123" "$T/tmpk/kcap-shadow-check.$dead.Keep01/kcap-replay-$$.Live01"
echo c >"$T/tmpk/$left/kcap-replay-$dead.Abc123/candidate.so"
echo l >"$T/tmpk/kcap-shadow-check.$dead.Keep01/kcap-replay-$$.Live01/candidate.so"
touch -d '20 minutes ago' "$T/tmpk/$left" "$T/tmpk/$left/kcap-replay-$dead.Abc123" \
    "$T/tmpk/kcap-shadow-check.$dead.Keep01" "$T/tmpk/kcap-shadow-check.$dead.Keep01/kcap-replay-$$.Live01"
# kcap shadow stopped by SIGTERM during its gate (a supervisor; Ctrl-C's SIGINT and a closed
# terminal's SIGHUP take the same path, but a script's background job ignores SIGINT): the
# replay ends, the check's private copy goes, the exit status says SIGTERM, nothing is armed
TMPDIR="$T/tmpk" "$KCAP" shadow $pid "${STUB}_closehang.so" --gate-timeout 50 >"$T/st.out" 2>&1 &
kp=$!
for _ in $(seq 100); do pgrep -f "kcap replay $T/g " >/dev/null && break; sleep 0.1; done
pgrep -f "kcap replay $T/g " >/dev/null || fail "the gate's replay never started (SIGTERM run)"
ls -d "$T/tmpk"/kcap-shadow-check.$kp.* >/dev/null 2>&1 || fail "no check copy in TMPDIR while the gate runs (SIGTERM run)"
kill -TERM $kp
wait $kp
rc=$?
for _ in $(seq 50); do pgrep -f "kcap replay $T/g " >/dev/null || break; sleep 0.1; done
[ $rc = 143 ] && ! pgrep -f "kcap replay $T/g " >/dev/null && [ "$(ls -A "$T/tmpk")" = kcap-shadow-check.$dead.Keep01 ] &&
    grep -q "during the check of .*nothing armed" "$T/st.out" && kill -0 $pid 2>/dev/null &&
    ok "kcap shadow stopped by SIGTERM during its gate: replay ended, check copy removed, exit 143, service alive" ||
    { cat "$T/st.out"; ls -laR "$T/tmpk"; pkill -KILL -f "kcap replay $T/g "; fail "SIGTERM during the gate (exit $rc)"; }
[ -f "$T/tmpk/kcap-shadow-check.$dead.Keep01/kcap-replay-$$.Live01/candidate.so" ] &&
    ok "the killed kcap shadow's check directory (and a dead loader's in it) swept by the next; a live loader's kept" ||
    fail "the sweep of check directories"
rm -rf "$T/tmpk"/*
# Ctrl-C: SIGINT, with its default disposition given back (a script's background job has it
# ignored, and kcap shadow leaves an ignored signal ignored): the same, exit 130
if env --default-signal=SIGINT true 2>/dev/null; then
    TMPDIR="$T/tmpk" env --default-signal=SIGINT "$KCAP" shadow $pid "${STUB}_closehang.so" --gate-timeout 50 \
        >"$T/si.out" 2>&1 &
    kp=$!
    for _ in $(seq 100); do pgrep -f "kcap replay $T/g " >/dev/null && break; sleep 0.1; done
    pgrep -f "kcap replay $T/g " >/dev/null || fail "the gate's replay never started (SIGINT run)"
    kill -INT $kp
    wait $kp
    rc=$?
    for _ in $(seq 50); do pgrep -f "kcap replay $T/g " >/dev/null || break; sleep 0.1; done
    [ $rc = 130 ] && ! pgrep -f "kcap replay $T/g " >/dev/null && [ -z "$(ls -A "$T/tmpk")" ] &&
        grep -q "Interrupt during the check of .*nothing armed" "$T/si.out" && kill -0 $pid 2>/dev/null &&
        ok "kcap shadow interrupted (SIGINT) during its gate: replay ended, check copy removed, exit 130" ||
        { cat "$T/si.out"; ls -laR "$T/tmpk"; pkill -KILL -f "kcap replay $T/g "; fail "SIGINT during the gate (exit $rc)"; }
fi
t0=$(date +%s)
STUB_HANG_PIDFILE="$T/daemon.pid" timeout 60 "$KCAP" shadow $pid "${STUB}_daemon.so" --gate-timeout 50 >"$T/dm.out" 2>&1
rc=$?
el=$(($(date +%s) - t0))
dpid=$(cat "$T/daemon.pid" 2>/dev/null)
for _ in $(seq 50); do [ -n "$dpid" ] && ! kill -0 "$dpid" 2>/dev/null && break; sleep 0.1; done
[ $rc = 1 ] && [ $el -lt 15 ] && [ -n "$dpid" ] && ! kill -0 "$dpid" 2>/dev/null && ! grep -q "had not ended" "$T/dm.out" &&
    ok "a candidate leaving a helper that holds the pipe: judged when the replay ends (${el}s), the helper killed" ||
    { cat "$T/dm.out"; fail "gate with a helper process (exit $rc after ${el}s, helper ${dpid:-none})"; }
# the same helper gone daemon (setsid: a group and session of its own, out of reach of the
# group kill): kcap shadow adopts what its child leaves (a child subreaper) and kills it too
# (the helper writes its pid file itself, after setsid: a pid there has left the group). And
# kcap shadow run by a process that has children already (exec'd by a shell that started
# the service and a helper in the background): those are never touched
rm -f "$T/daemon.pid" "$T/sib.pid"
STUB_HANG_PIDFILE="$T/daemon.pid" timeout 60 sh -c 'sleep 60 & echo $! >"$1"; exec "$2" shadow "$3" "$4" --gate-timeout 50' \
    sh "$T/sib.pid" "$KCAP" $pid "${STUB}_setsid.so" >"$T/ds.out" 2>&1
rc=$?
dpid=$(cat "$T/daemon.pid" 2>/dev/null) spid=$(cat "$T/sib.pid" 2>/dev/null)
for _ in $(seq 50); do [ -n "$dpid" ] && ! kill -0 "$dpid" 2>/dev/null && break; sleep 0.1; done
[ $rc = 1 ] && [ -n "$dpid" ] && ! kill -0 "$dpid" 2>/dev/null && [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null &&
    kill -0 $pid 2>/dev/null &&
    ok "a candidate whose helper calls setsid(): killed when the replay ends (it outlived kcap shadow); the children kcap shadow inherited untouched" ||
    { cat "$T/ds.out"; fail "gate with a setsid helper (exit $rc, helper ${dpid:-none} $(kill -0 "$dpid" 2>/dev/null && echo alive), inherited child ${spid:-none} $(kill -0 "$spid" 2>/dev/null || echo killed))"; }
[ -n "$dpid" ] && kill "$dpid" 2>/dev/null
[ -n "$spid" ] && kill "$spid" 2>/dev/null
# a correct candidate whose constructor floods and then hides its stdout: judged on the
# replay's document all the same (it came on stdout: refused as "no result")
"$KCAP" shadow $pid "$ROOT/$B/tests/libvattn_cpu_redir.so" >"$T/redir.out" 2>&1 &&
    grep -q "passes the snapshots" "$T/redir.out" && [ "$(wc -c <"$T/redir.out")" -lt 100000 ] &&
    ok "a correct candidate that floods and then hides its stdout: passes the gate, its output not shown" ||
    { head -c 2000 "$T/redir.out"; fail "candidate redirecting stdout"; }
# a caller that ignores SIGCHLD (inherited across exec): the gate still gets its replay's
# status (every candidate was refused, "exit -1")
"$PY" -c 'import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])' \
    "$KCAP" shadow $pid "$CPU" >"$T/ign.out" 2>&1 && grep -q "passes the snapshots" "$T/ign.out" &&
    ok "kcap shadow started with SIGCHLD ignored: a correct candidate passes the gate" ||
    { cat "$T/ign.out"; fail "gate under an ignored SIGCHLD"; }
"$KCAP" shadow $pid "$PERT" --force >/dev/null 2>&1 # back to the perturbed build for the next check
# the file checked is the file loaded: replaced (renamed over) after the checks, before the
# process loads it, the process refuses it (it loaded whatever the path held then)
cp "$CPU" "$T/cand_t.so"
(sleep 0.5; cp "${STUB}_ctor_abort.so" "$T/n.so" && mv "$T/n.so" "$T/cand_t.so") &
swp=$!
KCAP_SHADOW_TEST_DELAY_MS=1500 "$KCAP" shadow $pid "$T/cand_t.so" >"$T/toc.out" 2>&1
rc=$?
wait $swp
"$KCAP" shadow $pid --status >"$T/toc.st" 2>&1
[ $rc = 1 ] && kill -0 $pid 2>/dev/null && grep -q "changed since kcap shadow checked it" "$T/toc.out" &&
    grep -q "candidate $PERT" "$T/toc.st" &&
    ok "a candidate replaced after the gate: the process refuses it (hash of the checked bytes), the service alive" ||
    { cat "$T/toc.out" "$T/toc.st"; fail "candidate replaced after the gate (exit $rc)"; }
touch "$T/stop3"
wait $pid || fail "client of the gate checks"
# a target that exits while kcap waits for its answer (a dormant process never answers)
mkdir -p "$T/gone"
env KCAP_DIR="$T/gone" KCAP_SHADOW="$CPU" KCAP_DORMANT=1 LD_PRELOAD="$PRELOAD" sleep 2 &
gp=$!
sleep 0.3
t0=$(date +%s)
"$KCAP" shadow $gp --status --timeout 20 --dir "$T/gone" >"$T/gone.out" 2>&1
el=$(($(date +%s) - t0))
grep -q "process $gp exited before it answered" "$T/gone.out" && [ $el -lt 10 ] &&
    ok "the target exits while kcap waits: said at once (${el}s), not after --timeout" || { cat "$T/gone.out"; fail "target gone (${el}s)"; }
# ... and one that becomes a zombie (its parent, an exec'd sleep, never reaps it)
bash -c 'env KCAP_DIR="$1" KCAP_SHADOW="$2" KCAP_DORMANT=1 LD_PRELOAD="$3" sleep 2 & echo $! >"$4"; exec sleep 30' \
    _ "$T/gone" "$CPU" "$PRELOAD" "$T/zpid" &
zparent=$!
for _ in $(seq 50); do [ -s "$T/zpid" ] && break; sleep 0.1; done
zp=$(cat "$T/zpid")
sleep 0.3
t0=$(date +%s)
"$KCAP" shadow $zp --status --timeout 20 --dir "$T/gone" >"$T/zombie.out" 2>&1
el=$(($(date +%s) - t0))
kill $zparent 2>/dev/null; wait $zparent 2>/dev/null
grep -q "process $zp exited before it answered" "$T/zombie.out" && [ $el -lt 10 ] &&
    ok "a target that becomes a zombie while kcap waits: said at once (${el}s)" || { cat "$T/zombie.out"; fail "zombie target (${el}s)"; }
finish
