#!/usr/bin/env bash
# test_capture_arm_misuse.sh — arming must neither lie nor be abusable: `kcap arm` reports
# what really happened (exit 0 only when the target confirmed), never leaves a request
# behind, and a target obeys only its own uid's requests written for its own life:
#   not dormant / capture off / relative KCAP_DIR / shared KCAP_DIR / another user's process /
#   no answer (timeout) -> exit 1 with the reason, no control file left;
#   a FIFO at the control name, a request owned by another user, a request naming another
#   start time (a reused pid) -> refused by the target, nothing armed;
#   --status prints the counters without arming; scripts/kcap-sglang.sh arm arms (in parallel)
#   only processes that loaded the kernel library and says which.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT" "$KCAP"
controls() { ls -A "$1" 2>/dev/null | grep -c '^\.kcap-\(arm\|ack\)' || true; }
# expect_refusal NAME PID PATTERN [ARGS]: kcap arm exits 1 naming PATTERN
expect_refusal() {
    local name=$1 pid=$2 pat=$3; shift 3
    "$KCAP" arm "$pid" --timeout 2 "$@" >"$T/$name.out" 2>&1
    local rc=$?
    [ $rc = 1 ] && grep -q "$pat" "$T/$name.out" && ok "$name: exit 1, $(head -c 110 "$T/$name.out" | tr '\n' ' ')" ||
        { cat "$T/$name.out"; fail "$name (rc $rc)"; }
}
start_client() { # start_client DIR ENV...: a calling client under libkcap, KCAP_DIR=DIR, pid in $cpid
    local d=$1; shift
    env KCAP_DIR="$d" "$@" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 1 --seed 111 --quiet --until "$T/stop" 2>>"$T/clients.err" &
    cpid=$!
    sleep 0.4
}

# not dormant
start_client "$T/active" KCAP_MAX=1
expect_refusal not-dormant $cpid "not started dormant"; p1=$cpid
# capture off (bad value), dormant: the target answers with the reason
start_client "$T/off" KCAP_DORMANT=1 KCAP_EVERY=0
expect_refusal capture-off $cpid "capture is off"; p2=$cpid
[ "$(controls "$T/off")" = 0 ] || fail "capture-off: control files left"
# relative KCAP_DIR
mkdir -p "$T/cwd"
( cd "$T/cwd" && exec env KCAP_DIR=rel KCAP_DORMANT=1 LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 1 --seed 112 --quiet --until "$T/stop" 2>>"$T/clients.err" ) &
p3=$!; sleep 0.4
expect_refusal relative-dir $p3 "relative KCAP_DIR"
# shared directory
mkdir -p "$T/shared" && chmod 1777 "$T/shared"
start_client "$T/shared" KCAP_DORMANT=1; p4=$cpid
expect_refusal shared-dir $p4 "writable by other users"
# no answer: a dormant process that never calls the kernel
env KCAP_DIR="$T/idle" KCAP_DORMANT=1 LD_PRELOAD="$PRELOAD" sleep 30 & p5=$!
sleep 0.2; mkdir -p -m 700 "$T/idle"
expect_refusal no-answer $p5 "did not answer" --timeout 1
[ "$(controls "$T/idle")" = 0 ] && ok "no-answer: request withdrawn" || { ls -A "$T/idle"; fail "no-answer: request left behind"; }
# another user's process (kcap arm run as nobody against ours)
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
    setpriv --reuid=65534 --regid=65534 --clear-groups "$KCAP" arm $p4 >"$T/other.out" 2>&1
    [ $? = 1 ] && ok "another user's process: refused ($(head -c 80 "$T/other.out"))" || { cat "$T/other.out"; fail "another user's process"; }
else
    echo "skip: another user's process (needs root and setpriv)"
fi

# a dormant target in a private directory: what it must refuse, then what it must obey
start_client "$T/d" KCAP_DORMANT=1; pd=$cpid
ctl="$T/d/.kcap-arm-$pd"
start=$(awk '{sub(/.*\) /, ""); print $20}' /proc/$pd/stat)
mkfifo "$ctl" && exec 5<>"$ctl" && exec 5>&-   # a FIFO at the name, "closed after write"
sleep 0.3
[ ! -e "$ctl" ] && ok "FIFO at the control name: removed, the watcher did not block" || fail "FIFO at the control name"
printf 'start %s\nnonce 00000001\ncount 5\n' "$((start + 1))" >"$T/stale" && mv "$T/stale" "$ctl"
sleep 0.3
[ ! -e "$ctl" ] && [ "$(count_h5 "$T/d")" = 0 ] && ok "request naming another start time (reused pid): refused" ||
    fail "stale request armed or left ($(count_h5 "$T/d") snapshots)"
if [ "$(id -u)" = 0 ]; then
    printf 'start %s\nnonce 00000002\ncount 5\n' "$start" >"$T/foreign" && chown 65534 "$T/foreign" && mv "$T/foreign" "$ctl"
    sleep 0.3
    [ ! -e "$ctl" ] && [ "$(count_h5 "$T/d")" = 0 ] && grep -q "belongs to another user" "$T/clients.err" &&
        ok "request owned by another user: refused" || fail "foreign request ($(count_h5 "$T/d") snapshots)"
fi
"$KCAP" arm $pd --status >"$T/status.out" 2>&1 && grep -q "dormant" "$T/status.out" && grep -q "calls=" "$T/status.out" &&
    sleep 0.3 && [ "$(count_h5 "$T/d")" = 0 ] && ok "--status: counters printed, nothing armed" || { cat "$T/status.out"; fail "--status"; }
"$KCAP" arm $pd --count 2 >"$T/arm.out" 2>&1 && grep -q "armed for 2" "$T/arm.out" && grep -q "counters: calls=" "$T/arm.out" &&
    ok "arm: confirmed with counters" || { cat "$T/arm.out"; fail "arm"; }
for _ in $(seq 100); do [ "$(count_h5 "$T/d")" -ge 2 ] && break; sleep 0.05; done
[ "$(count_h5 "$T/d")" = 2 ] && [ "$(controls "$T/d")" = 0 ] && ok "2 snapshots, no control file left" || fail "after arm: $(count_h5 "$T/d") snapshots, $(controls "$T/d") control files"

# kcap-sglang.sh arm: only processes with the kernel library, in parallel, truthful
start_client "$T/g" KCAP_DORMANT=1; g1=$cpid
start_client "$T/g" KCAP_DORMANT=1; g2=$cpid
mkdir -p -m 700 "$T/g"
env KCAP_DIR="$T/g" KCAP_DORMANT=1 LD_PRELOAD="$PRELOAD" sleep 30 & g3=$!
sleep 0.3
KCAP="$KCAP" scripts/kcap-sglang.sh arm --only-dir "$T/g" --count 1 >"$T/sg.out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "armed $g1" "$T/sg.out" && grep -q "armed $g2" "$T/sg.out" && ! grep -q " $g3 " "$T/sg.out" &&
    grep -q "2 armed, 0 not armed" "$T/sg.out" && ok "kcap-sglang.sh arm: the 2 kernel users armed, the helper skipped" ||
    { cat "$T/sg.out"; fail "kcap-sglang.sh arm (rc $rc)"; }

touch "$T/stop"
kill $p5 $g3 2>/dev/null
for p in $p1 $p2 $p3 $p4 $pd $g1 $g2; do wait $p || fail "client $p exit status"; done
finish
