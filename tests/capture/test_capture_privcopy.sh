#!/usr/bin/env bash
# test_capture_privcopy.sh — the private copies a kernel library is loaded from
# (common/kcap_privcopy.c) do not pile up in TMPDIR. A process that dies inside dlopen (a
# library whose constructor aborts) cannot remove its own private directory; the next loader
# of the same kind sweeps it: the shadow-mode loader in the service (kcap-shadow.PID.XXXXXX)
# and `kcap replay`'s, which loads in its own process (kcap-replay-PID.XXXXXX). Checked: the
# dead process's directory and copy are left (the hazard), a later load removes them; a
# directory of a live pid, one held locked by a live process (another pid namespace), a
# symlink or a file named like a dead pid's directory, another user's (as root), one under 10
# minutes old and an old pid-less name are kept, nothing is followed or recursed into, and the loads themselves are
# unaffected (the hosts' results byte-identical).
. "$(dirname "$0")/lib.sh"
shadow_libs
ABORT=$ROOT/$B/tests/libvattn_stub_ctor_abort.so
GEN=$ROOT/$B/tests/kcap_gen_snap
need "$ABORT" "$GEN"
"$CLIENT" --calls 2 --seed 41 --hash >"$T/bare" || fail "client bare"

# --- shadow mode: a candidate whose constructor aborts kills the host inside dlopen
S=$T/stmp
mkdir -p "$S"
# (in a subshell whose stderr is dropped: the shell's "Aborted" note is expected noise)
(with_kcap TMPDIR="$S" KCAP_DIR="$T/ab" KCAP_SHADOW="$ABORT" -- "$CLIENT" --calls 2 --seed 41 --hash \
    >/dev/null 2>"$T/ab.err"; exit $?) 2>/dev/null
rc=$?
left=$(cd "$S" && ls -d kcap-shadow.* 2>/dev/null)
dead=$(sed -n 's/^kcap-shadow\.\([0-9]*\)\.[A-Za-z0-9]\{6\}$/\1/p' <<<"$left")
[ $rc = 134 ] && [ -n "$dead" ] && [ -f "$S/$left/candidate.so" ] && ! kill -0 "$dead" 2>/dev/null &&
    ok "a candidate whose constructor aborts: the host dies in dlopen (exit 134), its private copy left as $left" ||
    { cat "$T/ab.err"; ls -la "$S"; fail "the dead host's private directory, named by its pid (exit $rc, left: ${left:-none})"; }
dead=${dead:-999999}

# decoys for the sweep, all of them to be kept
mkdir -p "$S/kcap-shadow.$$.live01" "$T/target" "$S/kcap-shadow.$dead.nested/sub" "$S/kcap-shadow.oldnam"
echo live >"$S/kcap-shadow.$$.live01/candidate.so"      # the test shell: a live pid
echo keep >"$T/target/candidate.so"
ln -s "$T/target" "$S/kcap-shadow.$dead.symlk1"           # a symlink named like a dead pid's directory
echo file >"$S/kcap-shadow.$dead.afile1"                  # a file named like one
echo deep >"$S/kcap-shadow.$dead.nested/sub/keep.so"      # never recursed into
echo old >"$S/kcap-shadow.oldnam/candidate.so"            # a pid-less name of before: no owner to ask
LOCKP=
if command -v flock >/dev/null 2>&1; then # a directory held by a live process of another pid namespace
    mkdir -p "$S/kcap-shadow.$dead.lockd1" && echo lk >"$S/kcap-shadow.$dead.lockd1/candidate.so"
    # (flock's child holds the lock; it says so by a file, then becomes sleep)
    flock -s "$S/kcap-shadow.$dead.lockd1" sh -c 'touch "$1"; exec sleep 60' sh "$T/locked" &
    LOCKP=$!
    at_exit "pkill -P $LOCKP 2>/dev/null; kill $LOCKP 2>/dev/null"
    for _ in $(seq 100); do [ -e "$T/locked" ] && break; sleep 0.05; done
fi
OTHER=
if [ "$(id -u)" = 0 ]; then # another user's directory of a dead pid
    OTHER=$S/kcap-shadow.$dead.other1
    mkdir -p "$OTHER" && echo o >"$OTHER/candidate.so" && chown -R 65534:65534 "$OTHER"
fi
# a dead pid's directory younger than 10 minutes: kept (another machine's live load in a
# shared TMPDIR, or a creator of another pid namespace before its lock); the rest made old
mkdir -p "$S/kcap-shadow.$dead.young1" && echo y >"$S/kcap-shadow.$dead.young1/candidate.so"
old() { touch -d '20 minutes ago' "$@"; }
old "$S/$left" "$S/kcap-shadow.$$.live01" "$S/kcap-shadow.$dead.nested" "$S/kcap-shadow.oldnam" \
    "$S/kcap-shadow.$dead.afile1" ${LOCKP:+"$S/kcap-shadow.$dead.lockd1"} ${OTHER:+"$OTHER"}

# a service that loads a good candidate sweeps the dead one's directory
with_kcap TMPDIR="$S" KCAP_DIR="$T/good" KCAP_SHADOW="$CPU" -- "$CLIENT" --calls 2 --seed 41 --hash \
    >"$T/good.out" 2>"$T/good.err"
rc=$?
[ $rc = 0 ] && cmp -s "$T/bare" "$T/good.out" && shadow_json "$T/good" 'j["compared"]==2' &&
    ok "a service loading a good candidate beside it: results byte-identical, both calls judged" ||
    { cat "$T/good.err"; fail "good candidate (exit $rc)"; }
[ -n "$left" ] && [ ! -e "$S/$left" ] &&
    ok "the next shadow-mode load swept the dead host's directory and copy" ||
    { ls -la "$S"; fail "the dead host's private directory ${left:-?} is still in TMPDIR after the next load"; }
[ "$(ls -d "$S"/kcap-shadow.[0-9]* 2>/dev/null | grep -vc -e "\.$$\.live01$" -e "\.$dead\.\(symlk1\|afile1\|nested\|lockd1\|other1\|young1\)$")" = 0 ] &&
    ok "the good candidate's own private directory removed once it loaded" || { ls -la "$S"; fail "a private directory left by a load that succeeded"; }
[ "$(cat "$S/kcap-shadow.$$.live01/candidate.so" 2>/dev/null)" = live ] &&
    ok "a directory of a live pid kept" || fail "the live pid's directory was swept"
[ -L "$S/kcap-shadow.$dead.symlk1" ] && [ "$(cat "$T/target/candidate.so" 2>/dev/null)" = keep ] &&
    ok "a symlink named like a dead pid's directory: not followed, its target's files kept" ||
    fail "the symlink or its target's files were touched"
[ -f "$S/kcap-shadow.$dead.afile1" ] && ok "a file named like a dead pid's directory kept" || fail "the decoy file was removed"
[ "$(cat "$S/kcap-shadow.$dead.nested/sub/keep.so" 2>/dev/null)" = deep ] &&
    ok "a subdirectory inside a dead pid's directory: not recursed into (it and its files kept)" || fail "the sweep recursed"
[ -f "$S/kcap-shadow.oldnam/candidate.so" ] && ok "a pid-less name (the naming of before) kept" || fail "a pid-less directory was swept"
[ -f "$S/kcap-shadow.$dead.young1/candidate.so" ] && ok "a dead pid's directory under 10 minutes old kept" ||
    fail "a young directory was swept"
if [ -n "$LOCKP" ]; then
    [ -f "$S/kcap-shadow.$dead.lockd1/candidate.so" ] &&
        ok "a dead pid's directory held locked by a live process (a pid of another namespace): kept" ||
        fail "a locked directory was swept"
    pkill -P $LOCKP 2>/dev/null; kill $LOCKP 2>/dev/null; wait $LOCKP 2>/dev/null
fi
if [ -n "$OTHER" ]; then
    [ -f "$OTHER/candidate.so" ] && ok "another user's directory of a dead pid kept" || fail "another user's directory was swept"
fi

# two loads at once (both sweep the same leftovers): both fine, nothing left
for i in 1 2 3; do mkdir -p "$S/kcap-shadow.$dead.race0$i" && echo x >"$S/kcap-shadow.$dead.race0$i/candidate.so"; done
old "$S"/kcap-shadow.$dead.race0*
with_kcap TMPDIR="$S" KCAP_DIR="$T/r1" KCAP_SHADOW="$CPU" -- "$CLIENT" --calls 2 --seed 41 --hash >"$T/r1.out" 2>"$T/r1.err" &
p1=$!
with_kcap TMPDIR="$S" KCAP_DIR="$T/r2" KCAP_SHADOW="$CPU" -- "$CLIENT" --calls 2 --seed 41 --hash >"$T/r2.out" 2>"$T/r2.err"
rc2=$?
wait $p1
rc1=$?
[ $rc1 = 0 ] && [ $rc2 = 0 ] && cmp -s "$T/bare" "$T/r1.out" && cmp -s "$T/bare" "$T/r2.out" &&
    [ -z "$(ls -d "$S"/kcap-shadow.$dead.race* 2>/dev/null)" ] && [ -z "$(ls "$T/r1.err" "$T/r2.err" | xargs grep -l 'cannot be loaded')" ] &&
    ok "two services loading at once, both sweeping the same leftovers: both load, nothing left" ||
    { cat "$T/r1.err" "$T/r2.err"; ls -la "$S"; fail "concurrent sweeps (exit $rc1, $rc2)"; }

# --- kcap replay loads the library in its own process: it dies the same way
R=$T/rtmp
mkdir -p "$R" "$T/snaps"
"$GEN" --lib "$CPU" --out "$T/snaps" --count 1 --seed 7 >/dev/null 2>&1 || fail "snapshot generator"
(TMPDIR="$R" "$KCAP" replay "$T/snaps" --kernel "$ABORT" --ref none >"$T/rab.out" 2>&1; exit $?) 2>/dev/null
rc=$?
rleft=$(cd "$R" && ls -d kcap-replay-* 2>/dev/null)
rdead=$(sed -n 's/^kcap-replay-\([0-9]*\)\.[A-Za-z0-9]\{6\}$/\1/p' <<<"$rleft")
[ $rc = 134 ] && [ -n "$rdead" ] && [ -n "$(ls "$R/$rleft" 2>/dev/null)" ] &&
    ok "kcap replay of a library whose constructor aborts: replay itself dies (exit 134, it loads in-process), its copy left as $rleft" ||
    { cat "$T/rab.out"; ls -laR "$R"; fail "the dead replay's private directory, named by its pid (exit $rc, left: ${rleft:-none})"; }
mkdir -p "$R/kcap-replay-$$.live02"
[ -n "$rleft" ] && old "$R/$rleft"
TMPDIR="$R" "$KCAP" replay "$T/snaps" --kernel "$CPU" --ref none >"$T/rok.out" 2>&1 && grep -q "1 passed" "$T/rok.out" ||
    { cat "$T/rok.out"; fail "replay with the good library"; }
[ -n "$rleft" ] && [ ! -e "$R/$rleft" ] && [ -d "$R/kcap-replay-$$.live02" ] &&
    [ "$(ls -A "$R")" = "kcap-replay-$$.live02" ] &&
    ok "the next kcap replay swept the dead replay's directory (a live pid's kept, its own removed)" ||
    { ls -la "$R"; fail "after the next replay, TMPDIR holds: $(ls -A "$R" | tr '\n' ' ')"; }
finish "ok: private copies of dead loaders are swept by the next load, nothing else touched"
