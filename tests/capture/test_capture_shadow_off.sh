#!/usr/bin/env bash
# test_capture_shadow_off.sh — what a process in shadow mode keeps when its candidate is not
# running, and how a candidate's path is taken (CPU path). A process started in shadow mode
# keeps divergences only: once its candidate is off (one that returns errors, one too slow,
# one that never loaded, `kcap shadow PID --off`) it keeps nothing, instead of capturing every
# call in full. More shapes than the summary's table are summarised and capped together. A
# candidate is copied privately under TMPDIR (a noexec /tmp is common), a relative KCAP_SHADOW
# is anchored where libkcap was loaded, a directory is no candidate, and a path with a control
# character is refused by `kcap shadow` (its request is one line); swaps take none of the
# interposer's wrapper slots; the replay gate refuses a target with a relative KCAP_DIR. A
# forked child has its own summary and answers `kcap shadow`; a summary that cannot be
# written is said once; a KCAP_DIR removed and made again is watched again.
# `kcap diff A B` labels the candidate's tensors as such.
. "$(dirname "$0")/lib.sh"
shadow_libs

"$CLIENT" --calls 6 --seed 41 --hash >"$T/bare" || fail "client bare"

# a candidate returning errors, a slow one: off after their first calls, nothing kept after
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/err" KCAP_SHADOW="$ERRLIB" -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/err.out" 2>"$T/err.err"
cmp -s "$T/bare" "$T/err.out" && grep -q "shadow mode off" "$T/err.err" && [ "$(count_h5 "$T/err")" = 0 ] &&
    ok "a candidate returning errors: off, and none of the 5 calls after it captured" ||
    { cat "$T/err.err"; ls "$T/err"; fail "calls captured after the candidate failed"; }
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/slow" KCAP_SHADOW="$SLOW" KCAP_SHADOW_MAX_SLOWDOWN=4 -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/slow.out" 2>"$T/slow.err"
cmp -s "$T/bare" "$T/slow.out" && grep -q "shadow mode off: the candidate" "$T/slow.err" && [ "$(count_h5 "$T/slow")" = 0 ] &&
    ok "a slow candidate: off, and the calls after it not captured" ||
    { cat "$T/slow.err"; ls "$T/slow"; fail "calls captured after the slow candidate"; }

# a directory is no candidate (it is readable, so the configuration accepts the name): named,
# shadow mode off, nothing captured, no private copy left behind under TMPDIR
mkdir -p "$T/adir" "$T/tmpd"
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/dir" KCAP_SHADOW="$T/adir" TMPDIR="$T/tmpd" -- "$CLIENT" --calls 3 --seed 41 --hash >"$T/dir.out" 2>"$T/dir.err"
cmp -s <(head -3 "$T/bare") "$T/dir.out" && grep -q "$T/adir is not a regular file; shadow mode off" "$T/dir.err" &&
    [ "$(count_h5 "$T/dir")" = 0 ] && [ -z "$(ls -A "$T/tmpd")" ] &&
    ok "KCAP_SHADOW=a directory: named, shadow mode off, nothing captured, nothing left in TMPDIR" ||
    { cat "$T/dir.err"; ls "$T/dir" "$T/tmpd"; fail "directory as candidate"; }

# the private copy goes under TMPDIR: one where no directory can be made is named
: >"$T/notadir"
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/tmpf" KCAP_SHADOW="$PERT" TMPDIR="$T/notadir" -- "$CLIENT" --calls 2 --seed 41 --hash >/dev/null 2>"$T/tmpf.err"
grep -q "no private copy can be made under $T/notadir (set TMPDIR" "$T/tmpf.err" && [ "$(count_h5 "$T/tmpf")" = 0 ] &&
    ok "the candidate's private copy is made under TMPDIR (one that cannot hold it is named)" ||
    { cat "$T/tmpf.err"; fail "TMPDIR"; }
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/tmpok" KCAP_SHADOW="$PERT" TMPDIR="$T/tmpd" -- "$CLIENT" --calls 6 --seed 41 --hash >/dev/null 2>"$T/tmpok.err"
[ "$(count_h5 "$T/tmpok")" = 6 ] && [ -z "$(ls -A "$T/tmpd")" ] &&
    ok "a candidate copied under TMPDIR: 6 of 6 divergent calls kept, the copy removed" ||
    { cat "$T/tmpok.err"; ls "$T/tmpd"; fail "candidate under TMPDIR"; }

# a relative KCAP_SHADOW (and kcap record --shadow) is the one beside where libkcap was loaded,
# though the host changes directory before its first call
cp "$PERT" "$T/pert.so"
(cd "$T" && with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/rel" KCAP_SHADOW=pert.so -- "$CLIENT" --calls 3 --seed 41 --hash --chdir / >/dev/null 2>"$T/rel.err")
[ "$(count_h5 "$T/rel")" = 3 ] && ok "a relative KCAP_SHADOW with a host that chdir()s: the candidate still runs (3 divergent calls kept)" ||
    { cat "$T/rel.err"; fail "relative KCAP_SHADOW"; }
(cd "$T" && "$KCAP" record -o "$T/rrel" --shadow pert.so -- "$CLIENT" --calls 3 --seed 41 --hash --chdir / >/dev/null 2>"$T/rrel.err")
[ "$(count_h5 "$T/rrel")" = 3 ] && ok "kcap record --shadow with a relative path and a host that chdir()s" ||
    { cat "$T/rrel.err"; fail "kcap record --shadow relative"; }
"$KCAP" record -o "$T/rdir" --shadow "$T/adir" -- touch "$T/ran" 2>"$T/rdir.err"
[ $? = 2 ] && [ ! -e "$T/ran" ] && grep -q "\-\-shadow '$T/adir' is not a readable kernel library" "$T/rdir.err" &&
    ok "kcap record --shadow DIR: a usage error, the command not started" || { cat "$T/rdir.err"; fail "record --shadow DIR"; }

# more shapes than the summary's table (64): the rest are one class, capped like any other
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/many" KCAP_SHADOW="$PERT" KCAP_SHADOW_PER_SHAPE=1 -- "$CLIENT" --calls 400 --seed 5 >/dev/null 2>"$T/many.err"
shadow_json "$T/many" '(len(j["shapes"]) == 64 and j["other_shapes"]["compared"] > 0 and j["other_shapes"]["kept"] == 1
    and all(s["kept"] <= 1 for s in j["shapes"]) and j["kept"] == sum(s["kept"] for s in j["shapes"]) + 1)' &&
    [ "$(count_h5 "$T/many")" = "$(shadow_json "$T/many" -p 'j["kept"]')" ] &&
    ok "400 calls of more than 64 shapes, KCAP_SHADOW_PER_SHAPE=1: $(count_h5 "$T/many") kept (the shapes past the table together, 1 of them)" ||
    { cat "$T/many.err" "$T"/many/shadow-*.json | tail -20; echo "files: $(count_h5 "$T/many")"; fail "cap past 64 shapes"; }

# kcap diff A B of two shadow snapshots: the candidate's tensors are labelled, not "out"
f=$(ls "$T"/tmpok/*.h5 | head -1) g=$(ls "$T"/tmpok/*.h5 | sed -n 2p)
"$KCAP" diff "$f" "$g" >"$T/d2.out" 2>&1
grep -q "^  o  *cand " "$T/d2.out" && grep -q "^  o  *out " "$T/d2.out" &&
    ok "kcap diff A B of shadow snapshots: the candidate's o is 'cand', production's 'out'" || { cat "$T/d2.out"; fail "diff labels"; }
"$KCAP" diff "$f" >"$T/d1.out" 2>&1
grep -q "the candidate's outputs (a) vs production's (b, reference)" "$T/d1.out" &&
    ok "kcap diff FILE says it compares the candidate's outputs with production's" || { cat "$T/d1.out"; fail "diff header"; }

# a live client: kcap shadow --off, then no call is captured; bad candidate paths refused
env KCAP_DIR="$T/live" KCAP_SHADOW="$CPU" KCAP_EVERY=20 LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 51 --until "$T/stop" --quiet 2>"$T/live.err" &
pid=$!
for _ in $(seq 100); do "$KCAP" shadow $pid --timeout 10 --status >"$T/st.out" 2>&1 && grep -q "compared=[1-9]" "$T/st.out" && break; sleep 0.1; done
# libkcap finds a candidate's entry points with libc's dlsym: swaps take none of the
# interposer's 8 wrapper slots (a library the host loads later is still captured)
for i in $(seq 9); do "$KCAP" shadow $pid --timeout 10 "$CPU" -q >>"$T/swaps.out" 2>&1 || { cat "$T/swaps.out"; fail "swap $i"; }; done
! grep -q "distinct .* functions loaded" "$T/live.err" && ok "9 live swaps: no wrapper slot used up" ||
    { cat "$T/live.err"; fail "wrapper slots used by swaps"; }
"$KCAP" shadow $pid --timeout 10 --off >"$T/off.out" 2>&1 || { cat "$T/off.out"; fail "--off"; }
sleep 2
"$KCAP" shadow $pid --timeout 10 --status >"$T/st2.out" 2>&1
grep -q "shadow off" "$T/st2.out" && [ "$(count_h5 "$T/live")" = 0 ] &&
    ok "kcap shadow PID --off: 2 s of calls afterwards, none captured" ||
    { cat "$T/st2.out"; ls "$T/live" | head; fail "calls captured after --off"; }
"$KCAP" shadow $pid "$T/adir" --force >"$T/sdir.out" 2>&1
[ $? = 1 ] && grep -q "not a readable kernel library" "$T/sdir.out" &&
    ok "kcap shadow PID DIR: refused" || { cat "$T/sdir.out"; fail "kcap shadow DIR"; }
nl="$T/nl"$'\n'"x"
mkdir -p "$nl" && cp "$CPU" "$nl/cand.so"
"$KCAP" shadow $pid "$nl/cand.so" --force >"$T/snl.out" 2>&1
[ $? = 1 ] && grep -q "a control character (0x0a) in the path" "$T/snl.out" &&
    "$KCAP" shadow $pid --timeout 10 --status 2>&1 | grep -q "shadow off" &&
    ok "kcap shadow PID with a newline in the candidate's path: refused, nothing armed" ||
    { cat "$T/snl.out"; fail "control character in the path"; }
# KCAP_DIR removed and made again while the process runs: its watcher watches the new one
rm -rf "$T/live" && mkdir -m 700 "$T/live"
"$KCAP" shadow $pid --timeout 10 --status >"$T/st3.out" 2>&1 && grep -q "shadow off" "$T/st3.out" &&
    ok "KCAP_DIR removed and made again: kcap shadow still reaches the process" ||
    { cat "$T/st3.out"; fail "watcher after KCAP_DIR was recreated"; }
touch "$T/stop"
wait $pid || fail "live client exit"

# a summary that cannot be written (its name taken by a directory) is said once
mkdir -p "$T/sum"
bash -c 'mkdir "$1/shadow-r1-p$$.json" && exec env KCAP_DIR="$1" KCAP_RUN_ID=r1 KCAP_SHADOW="$2" \
    LD_PRELOAD="$3" "$4" --calls 2 --seed 41 --hash' _ "$T/sum" "$CPU" "$PRELOAD" "$CLIENT" >"$T/sum.out" 2>"$T/sum.err"
cmp -s <(head -2 "$T/bare") "$T/sum.out" &&
    [ "$(grep -c "shadow mode: cannot write the summary $T/sum/shadow-r1-p[0-9]*.json (Is a directory)" "$T/sum.err")" = 1 ] &&
    [ -z "$(ls "$T/sum" | grep '\.tmp$')" ] &&
    ok "a summary that cannot be written: one line naming it and why, no temporary file left, host unaffected" ||
    { cat "$T/sum.err"; fail "summary write failure"; }

# a relative KCAP_DIR of the target: refused before any replay (a folder of that name in the
# caller's directory is not the process's)
mkdir -p "$T/start" "$T/elsewhere/rel"
cp "$(ls "$T"/tmpok/*.h5 | head -1)" "$T/elsewhere/rel/" # snapshots the perturbed build fails
(cd "$T/start" && exec env KCAP_DIR=rel KCAP_SHADOW="$CPU" LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 51 --until "$T/rstop" --quiet 2>"$T/rlive.err") &
rpid=$!
for _ in $(seq 100); do [ -d "$T/start/rel" ] && break; sleep 0.1; done
(cd "$T/elsewhere" && "$KCAP" shadow $rpid "$PERT" >"$T/rg.out" 2>&1)
[ $? = 1 ] && grep -q "has a relative KCAP_DIR 'rel'.*pass --dir" "$T/rg.out" && ! grep -q "snapshots in" "$T/rg.out" &&
    ok "kcap shadow PID with a relative KCAP_DIR: refused before replaying anything" ||
    { cat "$T/rg.out"; fail "relative KCAP_DIR and the replay gate"; }
touch "$T/rstop"
wait $rpid || fail "relative-dir client exit"

# a forked child in shadow mode is a process of its own: its summary counts its own calls,
# and `kcap shadow CHILD` reaches it (its watcher restarted by its first call)
with_kcap KCAP_FLUSH_TIMEOUT=60 KCAP_DIR="$T/fc" KCAP_SHADOW="$PERT" -- "$CLIENT" --calls 3 --seed 41 --fork >/dev/null 2>"$T/fc.err"
counts=$("${PY:-python3}" -c 'import glob, json, sys; print(sorted(json.load(open(f))["compared"] for f in glob.glob(sys.argv[1] + "/shadow-*.json")))' "$T/fc")
# (a child forked while the parent's writer was inside libhdf5 never touches it, by design,
# and drops its calls: then it has judged none of its own, and counts none of the parent's)
{ [ "$counts" = "[3, 4]" ] || { [ "$counts" = "[0, 4]" ] && grep -q "calls=3 captured=0 .*dropped(queue=3 " "$T/fc.err"; }; } &&
    ok "--fork: the parent's summary counts its 4 calls, the child's only its own ($counts)" ||
    { cat "$T/fc.err"; echo "compared: $counts"; fail "a forked child's summary"; }
env KCAP_DIR="$T/fk" KCAP_SHADOW="$CPU" LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 41 --quiet --fork --until "$T/fstop" 2>"$T/fk.err" &
fpid=$!
child=
for _ in $(seq 100); do # the client's child: the process whose parent is $fpid
    child=$(awk -v p=$fpid '{ sub(/.*\) /, ""); if ($2 == p) { split(FILENAME, f, "/"); print f[3] } }' \
        /proc/[0-9]*/stat 2>/dev/null | head -1)
    [ -n "$child" ] && break; sleep 0.1
done
for _ in $(seq 5); do "$KCAP" shadow "$child" --status --timeout 2 >"$T/fst.out" 2>&1 && break; sleep 0.2; done
grep -q "shadow on candidate $CPU" "$T/fst.out" && ok "kcap shadow CHILD --status: a forked child answers" ||
    { cat "$T/fst.out" "$T/fk.err"; fail "forked child not reachable"; }
touch "$T/fstop"
wait $fpid || fail "fork client exit"
finish
