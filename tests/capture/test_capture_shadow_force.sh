#!/usr/bin/env bash
# test_capture_shadow_force.sh — `kcap shadow PID CAND --force` overrides a verdict on results,
# never a candidate that crashes when loaded (make test). A hostile review (twenty-second
# session) armed a candidate whose constructor aborts with --force: the check had said
# "it would kill the service the same way", and the host died (status 134). Claims:
#   1  with --force the crashing candidate is refused (exit 1, the reason and that --force
#      does not arm it), the host keeps running and exits 0;
#   2  without --force the refusal is the same (as before).
. "$(dirname "$0")/../lib.sh"
CLIENT=$ROOT/$B/tests/capture/capture_client
ABORT=$ROOT/$B/tests/libvattn_stub_ctor_abort.so
require "$CLIENT" "$LIBKCAP" "$CPU" "$ABORT" "$KCAP"
D=$T/d
env KCAP_DIR="$D" KCAP_SHADOW="$CPU" LD_PRELOAD="$PRELOAD" ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" \
    "$CLIENT" --calls 1 --seed 51 --until "$T/stop" --quiet 2>"$T/client.err" &
pid=$!
at_exit "touch '$T/stop'; kill $pid 2>/dev/null"
for _ in $(seq 1 100); do [ -e "$D" ] && break; sleep 0.1; done
sleep 0.5
timeout 120 "$KCAP" shadow "$pid" "$ABORT" >"$T/s1" 2>&1
rc1=$?
timeout 120 "$KCAP" shadow "$pid" "$ABORT" --force >"$T/s2" 2>&1
rc2=$?
sleep 0.5
kill -0 "$pid" 2>/dev/null && alive=1 || alive=0
touch "$T/stop"
wait "$pid"
st=$?
[ $rc1 -eq 1 ] && grep -q "killed that process (signal 6" "$T/s1" && ok "without --force: refused" ||
    fail "without --force: rc $rc1: $(head -3 "$T/s1")"
[ $rc2 -eq 1 ] && grep -q "not armed (--force does not arm a candidate that crashes or hangs)" "$T/s2" &&
    ok "with --force: still refused, saying why" || fail "with --force: rc $rc2: $(head -3 "$T/s2")"
[ $alive -eq 1 ] && [ $st -eq 0 ] && ok "the host kept running and exited 0" ||
    fail "host: alive $alive, exit status $st: $(tail -3 "$T/client.err")"
finish
