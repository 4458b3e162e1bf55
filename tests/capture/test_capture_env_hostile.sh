#!/usr/bin/env bash
# test_capture_env_hostile.sh — environment a hostile review of libkcap found mishandled
# (twenty-second session); each check failed on the tree before its fix (make test):
#   1  KCAP_SANDBOX_CHILD / KCAP_SANDBOX_PATH, the reader's exec-mode probe arguments, took
#      over any host libkcap.so was preloaded into (its constructor ran the probe, wrote a
#      binary record to fd 1 and exited 0 before main): the host's results and exit status
#      must be those of a run without libkcap;
#   2  a relative KCAP_SHADOW absent from the working directory at load was resolved later,
#      against the directory the host had chdir()ed to, and a library found there ran in the
#      host: it stays the load directory's path (refused there, naming it);
#   3  a relative KCAP_DIR whose load-time working directory could not be read (deleted)
#      sent snapshots to the host's later directory: capture is off, with a warning naming
#      KCAP_DIR, and nothing is written there;
#   4  KCAP_LOG=quiet did not silence the warning about a RANK that is not a number (it was
#      given before KCAP_LOG was read);
#   5  KCAP_CALLS with more ranges than kcap keeps was called "not a list of call numbers":
#      the warning now gives the limit.
. "$(dirname "$0")/../lib.sh"
CLIENT=$ROOT/$B/tests/capture/capture_client
require "$CLIENT" "$LIBKCAP" "$PERT"

# 1: the probe's variables set by someone else
env KCAP_SANDBOX_CHILD=0,1,5,0 KCAP_SANDBOX_PATH=/nonexistent \
    timeout 30 "$CLIENT" --calls 3 --seed 3 --hash >"$T/bare" 2>/dev/null
rb=$?
env KCAP_SANDBOX_CHILD=0,1,5,0 KCAP_SANDBOX_PATH=/nonexistent KCAP_LOG=quiet LD_PRELOAD="$PRELOAD" \
    ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" timeout 30 "$CLIENT" --calls 3 --seed 3 --hash >"$T/pre" 2>/dev/null
rp=$?
[ $rb -eq 0 ] && [ $rp -eq $rb ] && [ -s "$T/bare" ] && cmp -s "$T/bare" "$T/pre" &&
    ok "KCAP_SANDBOX_* in a host's environment: results and exit status unchanged" ||
    fail "KCAP_SANDBOX_*: rc $rp (bare $rb), output $(od -c "$T/pre" | head -2)"

# 2: a relative candidate that is not there at load but is where the host goes
W=$T/rel
mkdir -p "$W/loadcwd" "$W/hostcwd" "$W/out"
chmod 700 "$W" "$W/out"
cp "$PERT" "$W/hostcwd/cand.so"
(cd "$W/loadcwd" && env KCAP_SHADOW=cand.so KCAP_DIR="$W/out" KCAP_LOG=info LD_PRELOAD="$PRELOAD" \
    ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" timeout 30 "$CLIENT" --calls 2 --seed 3 --hash --chdir "$W/hostcwd" \
    >"$T/s.out" 2>"$T/s.err")
grep -q "KCAP_SHADOW=$W/loadcwd/cand.so is not a readable kernel library" "$T/s.err" &&
    ! grep -q "shadow mode: candidate" "$T/s.err" &&
    ok "relative KCAP_SHADOW stays the load directory's (refused there, not loaded from the host's)" ||
    fail "relative KCAP_SHADOW: $(head -5 "$T/s.err")"

# 3: a relative KCAP_DIR whose load directory is gone
mkdir "$W/gone"
(cd "$W/gone" && rmdir "$W/gone" && env KCAP_DIR=snaps LD_PRELOAD="$PRELOAD" ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" \
    timeout 30 "$CLIENT" --calls 2 --seed 3 --hash --chdir "$W/hostcwd" >"$T/d.out" 2>"$T/d.err")
grep -q "KCAP_DIR=snaps is relative and the working directory at load could not be read" "$T/d.err" &&
    [ -z "$(find "$W/hostcwd" -name '*.h5')" ] &&
    ok "relative KCAP_DIR with the load directory gone: capture off, nothing written elsewhere" ||
    fail "relative KCAP_DIR: $(head -3 "$T/d.err"); files: $(find "$W/hostcwd" -name '*.h5' | head -3)"

# 4: quiet is quiet
env RANK=worker-0 KCAP_DIR="$W/out" KCAP_LOG=quiet LD_PRELOAD="$PRELOAD" ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" \
    timeout 30 "$CLIENT" --calls 1 --seed 3 --hash >"$T/q.out" 2>"$T/q.err"
! grep -q "is not a rank" "$T/q.err" && ok "KCAP_LOG=quiet: no rank warning" || fail "quiet: $(head -3 "$T/q.err")"
env RANK=worker-0 KCAP_DIR="$W/out" LD_PRELOAD="$PRELOAD" ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" \
    timeout 30 "$CLIENT" --calls 1 --seed 3 --hash >"$T/q2.out" 2>"$T/q2.err"
grep -q "RANK='worker-0' is not a rank" "$T/q2.err" && ok "without quiet the rank warning is given" ||
    fail "rank warning missing: $(head -3 "$T/q2.err")"

# 5: too many call ranges: the warning says how many are allowed
calls=$(seq -s, 0 2 200) # 101 numbers
env KCAP_CALLS="$calls" KCAP_DIR="$W/out" LD_PRELOAD="$PRELOAD" ASAN_OPTIONS="$ASAN_PRELOAD_OPTIONS" \
    timeout 30 "$CLIENT" --calls 1 --seed 3 --hash >"$T/k.out" 2>"$T/k.err"
grep -q "is not a list of at most [0-9]* call numbers or ranges" "$T/k.err" &&
    ok "KCAP_CALLS over the limit: the warning gives the limit" || fail "KCAP_CALLS: $(head -2 "$T/k.err")"
finish
