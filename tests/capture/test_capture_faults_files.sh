#!/usr/bin/env bash
# test_capture_faults_files.sh — no snapshot is ever silently lost:
#  - PID reuse: two runs as PID 1 of a fresh PID namespace (a container restart) keep both
#    runs' files (the run id in the name); before the fix: the second run overwrote the first. With
#    the same KCAP_RUN_ID twice, the second run takes the next suffix instead of replacing.
#  - kill -9 / SIGTERM while big snapshots are written: no visible corrupt file ever
#    (`kcap check` on all of them), and the temp files of the dead processes are removed
#    at the next start in that directory (a live process's temp file is left alone).
#  - a tiny filesystem filled up: capture pauses (host unaffected), and once space is freed
#    it resumes by itself (before the fix: three failures switched capture off for good).
#  - a KCAP_DIR others can write (1777): refused with one line, nothing captured.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT" "$KCAP"

# ---- PID reuse ----
if unshare --pid --fork true 2>/dev/null; then
    for run in 1 2; do
        unshare --pid --fork env KCAP_DIR="$T/pid1" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 2 --seed 7$run --quiet 2>"$T/pid1.$run.err" ||
            { cat "$T/pid1.$run.err"; fail "run $run as PID 1"; }
    done
    n=$(ls "$T/pid1" | grep -c -- '-p1-')
    [ "$n" = 4 ] && kcap_check "$T/pid1" && ok "PID 1 twice (PID namespace): 4 files, none overwritten" ||
        { ls "$T/pid1"; fail "PID reuse: $n files as pid 1 (want 4)"; }
    # the same run id twice (KCAP_RUN_ID): an existing name is never replaced, the next suffix is taken
    for run in 1 2; do
        unshare --pid --fork env KCAP_DIR="$T/rid" KCAP_RUN_ID=job7 LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 2 --seed 7$run --quiet 2>/dev/null
    done
    got=$(ls "$T/rid" | tr '\n' ' ')
    [ "$got" = "vattn_verify-p1-job7-s000000-1.h5 vattn_verify-p1-job7-s000000.h5 vattn_verify-p1-job7-s000001-1.h5 vattn_verify-p1-job7-s000001.h5 " ] &&
        kcap_check "$T/rid" && ok "same pid and run id twice: the second run's files take suffix -1" ||
        fail "name collision: $got"
    # ... and ten times (a crash-looping container with a job id): each run's names get the next free
    # suffix, none counts as a failed write, capture never pauses
    for run in 3 4 5 6 7 8 9 10; do
        unshare --pid --fork env KCAP_DIR="$T/rid" KCAP_RUN_ID=job7 LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 2 --seed 7$run --quiet 2>"$T/rid.$run.err"
    done
    n=$(ls "$T/rid" | wc -l)
    [ "$n" = 20 ] && ! grep -q "paused\|write=[1-9]" "$T"/rid.*.err && kcap_check "$T/rid" &&
        ok "same pid and run id ten times: 20 files, no write failure, capture never paused" ||
        { cat "$T/rid.10.err"; fail "ten runs with one run id: $n files"; }
else
    echo "skip: PID reuse (unshare --pid not permitted here)"
fi

# ---- kill -9 / SIGTERM loops ----
# Odd rounds kill at a random time of the run; even rounds while this process's first snapshot
# is being written (its temp file .kcap-tmp.<pid>.* exists), so kills land inside writes on a
# fast machine and a slow build (-O0, coverage) alike.
mkdir -p "$T/kill"
kills=12
for i in $(seq $kills); do
    sig=KILL; [ $((i % 4)) = 0 ] && sig=TERM
    env KCAP_DIR="$T/kill" KCAP_LOG=quiet LD_PRELOAD="$PRELOAD" "$CLIENT" --big 30000 --calls 3 --seed $((80 + i)) --quiet &
    pid=$!
    if [ $((i % 2)) = 1 ]; then
        sleep 0.$((2 + RANDOM % 5))
    else
        for _ in $(seq 1000); do
            ls -A "$T/kill" | grep -q "^\.kcap-tmp\.$pid\." && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.01
        done
        sleep 0.0$((RANDOM % 5))
    fi
    kill -$sig $pid 2>/dev/null
    wait $pid 2>/dev/null
done
h5=$(count_h5 "$T/kill")
tmps=$(ls -A "$T/kill" | grep -c '^\.kcap-tmp\.' || true)
if [ "$h5" = 0 ]; then # nothing to check would pass for the wrong reason
    env KCAP_DIR="$T/kill" KCAP_LOG=quiet LD_PRELOAD="$PRELOAD" "$CLIENT" --big 30000 --calls 1 --seed 99 --quiet
    h5=$(count_h5 "$T/kill")
fi
"$KCAP" check "$T/kill" >"$T/kill.check" 2>&1 && ok "$kills kills during writes: $h5 snapshots, all valid (kcap check), $tmps temp files left" ||
    { tail -5 "$T/kill.check"; fail "kill loop: a visible file is corrupt, or none was written ($h5 snapshots)"; }
# a live process's temp file (our shell) and a fresh one of a dead pid must survive cleanup
touch "$T/kill/.kcap-tmp.$$.0.1" "$T/kill/.kcap-tmp.999999999.0.2"
touch -d '-2 min' "$T/kill"/.kcap-tmp.* 2>/dev/null
touch "$T/kill/.kcap-tmp.999999999.0.2"
env KCAP_DIR="$T/kill" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 1 --seed 90 --quiet 2>/dev/null
left=$(ls -A "$T/kill" | grep '^\.kcap-tmp\.' | sort | tr '\n' ' ')
[ "$left" = ".kcap-tmp.$$.0.1 .kcap-tmp.999999999.0.2 " ] &&
    ok "next start removed the $tmps temp files of dead processes (kept a live one's and a fresh one)" ||
    fail "temp cleanup: left '$left'"

# ---- a tiny filesystem fills up, then space comes back ----
mkdir -p "$T/mnt"
if mount -t tmpfs -o size=3m tmpfs "$T/mnt" 2>/dev/null; then
    mkdir -m 700 "$T/mnt/s"
    env KCAP_DIR="$T/mnt/s" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 1 --seed 91 --quiet --until "$T/stop" 2>"$T/full.err" &
    pid=$!
    for _ in $(seq 100); do grep -q "capture paused" "$T/full.err" && break; sleep 0.1; done
    grep -q "capture paused" "$T/full.err" && ok "tiny tmpfs full: capture paused" || fail "tmpfs full: no pause"
    kcap_check "$T/mnt/s" || fail "tmpfs full: a visible file is corrupt"
    rm -f "$T/mnt/s"/*.h5
    for _ in $(seq 150); do grep -q "capture resumed" "$T/full.err" && break; sleep 0.1; done
    touch "$T/stop"
    wait $pid; rc=$?
    [ $rc = 0 ] && grep -q "capture resumed" "$T/full.err" && [ "$(count_h5 "$T/mnt/s")" -ge 1 ] &&
        ok "space freed: capture resumed by itself, host exit 0" || { tail -4 "$T/full.err"; fail "no resume after ENOSPC (rc $rc)"; }
    umount "$T/mnt"
else
    echo "skip: tiny tmpfs (mount not permitted here); test_capture_faults.sh covers RLIMIT_FSIZE"
fi

# ---- a directory other users can write ----
mkdir -p "$T/shared" && chmod 1777 "$T/shared"
"$CLIENT" --calls 2 --seed 92 --hash >"$T/sh.ref"
env KCAP_DIR="$T/shared" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 2 --seed 92 --hash >"$T/sh.out" 2>"$T/sh.err"
cmp -s "$T/sh.ref" "$T/sh.out" && [ "$(grep -c '^kcap:' "$T/sh.err")" = 1 ] && grep -q "writable by other users" "$T/sh.err" &&
    [ "$(count_h5 "$T/shared")" = 0 ] && ok "KCAP_DIR mode 1777: refused in one line, host unaffected" ||
    { cat "$T/sh.err"; fail "shared KCAP_DIR"; }
finish
