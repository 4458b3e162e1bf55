#!/usr/bin/env bash
# test_capture_shadow.sh — shadow mode on the CPU path: KCAP_SHADOW=CAND.so runs a candidate
# kernel beside every selected production call and keeps only the calls where they disagree,
# as snapshots holding inputs, production outputs and the candidate's (/candidate). Checked:
# the perturbed build is caught on every call with exactly its one wrong element located, the
# host's results are byte-identical with and without shadow mode, the snapshots validate and
# replay judges against the production output, the same library as candidate gives 0
# divergences, a candidate that returns errors is switched off, a bad KCAP_SHADOW is named;
# the tolerances (replay's by default): KCAP_SHADOW_ATOL / kcap record --atol wide enough
# accept the perturbed build, bad values are named, and `kcap shadow PID CAND --atol A`
# replays and swaps live with the same tolerances (the process's own for those not given);
# under KCAP_MAX_BYTES the summary's kept is the number of files, the rest lost or not judged.
. "$(dirname "$0")/lib.sh"
shadow_libs

"$CLIENT" --calls 6 --seed 41 --hash >"$T/bare" || fail "client bare"
with_kcap KCAP_DIR="$T/p" KCAP_SHADOW="$PERT" -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/p.out" 2>"$T/p.err"
cmp -s "$T/bare" "$T/p.out" && ok "host results byte-identical under shadow mode" || fail "shadow changed the host's results"
[ "$(count_h5 "$T/p")" = 6 ] && ok "perturbed candidate: 6 of 6 calls divergent and kept" || { cat "$T/p.err"; ls "$T/p"; fail "divergent snapshots"; }
kcap_check "$T/p" && ok "kcap check of shadow snapshots" || fail "kcap check"
PYTHONPATH=$ROOT/python "$PY" - "$T/p" <<'PY' && ok "each snapshot: candidate o differs from production o in exactly one element, lse equal" || fail "candidate outputs"
import glob, json, sys
import numpy as np
import kcap
d = sys.argv[1]
for f in sorted(glob.glob(d + "/*.h5")):
    s = kcap.load(f)
    assert set(s.candidate) == set(s.outputs) == {"o", "lse"}, (f, list(s.candidate))
    diff = np.flatnonzero(s.candidate["o"].reshape(-1) != s.outputs["o"].reshape(-1))
    assert diff.size == 1, (f, diff.size)
    assert np.array_equal(s.candidate["lse"].view(np.uint32), s.outputs["lse"].view(np.uint32)), f
j = json.load(open(glob.glob(d + "/shadow-*.json")[0]))
assert j["compared"] == 6 and j["divergent"] == 6 and j["kept"] == 6 and j["candidate"]["on"], j
assert "element" in j["worst_where"] and "head" in j["worst_where"], j["worst_where"]
assert j["candidate"]["hash"].startswith("xxh64:") and j["production_hash"].startswith("xxh64:"), j
assert abs(j["worst_abs"] - 0.5) < 0.05, j["worst_abs"]
assert j["tolerances"] == {"half": {"atol": 0.01, "rtol": 0.02}, "f32": {"atol": 0.001, "rtol": 0.001}}, j["tolerances"]
PY
# KCAP_MAX_BYTES in shadow mode: the summary counts what the files hold. Half the bytes of
# the six divergences: those that no longer fit are divergent and lost, not kept (they were
# counted kept with no file); below one call's tensors: nothing recorded, every call not
# judged (they were in no count at all)
B=$(env KCAP_DIR="$T/pb" KCAP_SHADOW="$PERT" KCAP_LOG=info LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 6 --seed 41 --hash 2>&1 >/dev/null |
    sed -n 's/.* stats: .* bytes=\([0-9]*\) .*/\1/p')
with_kcap KCAP_DIR="$T/mb" KCAP_SHADOW="$PERT" KCAP_MAX_BYTES=$((${B:-0} / 2)) -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/mb.out" 2>"$T/mb.err"
n=$(count_h5 "$T/mb")
cmp -s "$T/bare" "$T/mb.out" && [ "$n" -ge 1 ] && [ "$n" -lt 6 ] &&
    shadow_json "$T/mb" "j['compared']==6 and j['divergent']==6 and j['kept']==$n and j['lost']==6-$n and j['capped']==0 and sum(s['kept'] for s in j['shapes'])==$n" &&
    ok "KCAP_MAX_BYTES at half the divergences' bytes ($B): $n files, the summary says $n kept and $((6 - n)) lost" ||
    { cat "$T/mb.err" "$T"/mb/shadow-*.json; fail "shadow summary under KCAP_MAX_BYTES=$((${B:-0} / 2)): $n files"; }
with_kcap KCAP_DIR="$T/mb1" KCAP_SHADOW="$PERT" KCAP_MAX_BYTES=1000 -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/mb1.out" 2>"$T/mb1.err"
cmp -s "$T/bare" "$T/mb1.out" && [ "$(count_h5 "$T/mb1")" = 0 ] &&
    shadow_json "$T/mb1" "j['compared']==0 and j['not_judged']==6" &&
    ok "KCAP_MAX_BYTES below one call's tensors: no file, the 6 calls counted not judged" ||
    { cat "$T/mb1.err" "$T"/mb1/shadow-*.json; fail "shadow summary under KCAP_MAX_BYTES=1000"; }
"$KCAP" replay "$T/p" --kernel "$CPU" >"$T/rp.out" 2>&1 && [ "$(grep -c bitwise "$T/rp.out")" -ge 6 ] &&
    ok "replay of shadow snapshots on the production library: bitwise against the production output" ||
    { cat "$T/rp.out"; fail "replay production"; }
f=$(ls "$T"/p/*.h5 | head -1)
"$KCAP" diff "$f" >"$T/diff.out" 2>&1
[ $? = 1 ] && grep -q "^  o .*FAIL" "$T/diff.out" && grep -q "^  lse .*bitwise" "$T/diff.out" &&
    ok "kcap diff FILE: candidate against production outputs, o differs, lse bitwise" || { cat "$T/diff.out"; fail "kcap diff of a shadow snapshot"; }
"$KCAP" replay "$T/p" --kernel "$PERT" --ref none >/dev/null 2>&1
[ $? = 1 ] && ok "replay of the same snapshots on the candidate: the same verdict offline (fails)" || fail "replay candidate"

with_kcap KCAP_DIR="$T/same" KCAP_SHADOW="$CPU" -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/same.out" 2>"$T/same.err"
shadow_json "$T/same" 'j["compared"]==6 and j["divergent"]==0' &&
    [ "$(count_h5 "$T/same")" = 0 ] && cmp -s "$T/bare" "$T/same.out" &&
    grep -q "shadow_not_kept=6" "$T/same.err" &&
    ok "the production library as candidate: 6 compared, 0 divergent, nothing kept (shadow_not_kept=6 in the stats)" || { ls "$T/same"; fail "same-library candidate"; }
# a candidate whose path holds a quote and a backslash: the summary still parses, path intact
odd="$T/we\"ird\\dir"
mkdir -p "$odd" && cp "$CPU" "$odd/cand.so"
with_kcap KCAP_DIR="$T/odd" KCAP_SHADOW="$odd/cand.so" -- "$CLIENT" --calls 2 --seed 41 >/dev/null 2>"$T/odd.err"
shadow_json "$T/odd" 'j["candidate"]["path"].endswith("we\"ird\\dir/cand.so") and j["compared"]==2' &&
    ok "a candidate path with a quote and a backslash: the summary is valid JSON and names it exactly" ||
    { cat "$T/odd.err" "$T"/odd/shadow-*.json; fail "summary with an odd candidate path"; }

with_kcap KCAP_DIR="$T/err" KCAP_SHADOW="$ERRLIB" -- "$CLIENT" --calls 4 --seed 41 --hash >"$T/err.out" 2>"$T/err.err"
cmp -s <(head -4 "$T/bare") "$T/err.out" && [ "$(grep -c 'shadow mode off' "$T/err.err")" = 1 ] &&
    shadow_json "$T/err" 'not j["candidate"]["on"] and j["compared"]==0' &&
    ok "a candidate returning errors: switched off with one log line, host unaffected" || { cat "$T/err.err"; fail "failing candidate"; }

# one systematic bug must not fill the disk: 8 divergent calls of one shape, 2 kept
with_kcap KCAP_DIR="$T/cap" KCAP_SHADOW="$PERT" KCAP_SHADOW_PER_SHAPE=2 -- \
    "$PY" tests/capture/extend_ctypes.py "$CPU" --calls 8 --seed 3 --shape 2,4,3,40 >/dev/null 2>&1
shadow_json "$T/cap" 'j["divergent"]==8 and j["kept"]==2 and j["capped"]==6 and len(j["shapes"])==1 and j["shapes"][0]["call"]=="vattn_extend"' &&
    [ "$(count_h5 "$T/cap")" = 2 ] && ok "KCAP_SHADOW_PER_SHAPE=2: 8 divergent vattn_extend calls of one shape, 2 kept, 6 counted as capped" ||
    { cat "$T"/cap/shadow-*.json; fail "per-shape cap"; }

# a candidate far slower than production (20 ms a call): off after 3 slow calls in a row
with_kcap KCAP_DIR="$T/slow" KCAP_SHADOW="$SLOW" KCAP_SHADOW_MAX_SLOWDOWN=4 -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/slow.out" 2>"$T/slow.err"
cmp -s "$T/bare" "$T/slow.out" && [ "$(grep -c 'shadow mode off: the candidate .* took .* the 3-th call in a row over KCAP_SHADOW_MAX_SLOWDOWN=4' "$T/slow.err")" = 1 ] &&
    shadow_json "$T/slow" 'not j["candidate"]["on"] and j["compared"]==3 and j["divergent"]==0' &&
    ok "a candidate 4x slower than production on 3 calls in a row: switched off with one line, 3 compared, host unaffected" ||
    { cat "$T/slow.err" "$T"/slow/shadow-*.json; fail "slow candidate"; }
with_kcap KCAP_DIR="$T/slow0" KCAP_SHADOW="$SLOW" KCAP_SHADOW_MAX_SLOWDOWN=0 -- "$CLIENT" --calls 4 --seed 41 --hash >/dev/null 2>"$T/slow0.err"
! grep -q "shadow mode off" "$T/slow0.err" && ok "KCAP_SHADOW_MAX_SLOWDOWN=0: a slow candidate stays on" || fail "MAX_SLOWDOWN=0"

# tolerances: the perturbed element is 0.5 off; atol 1 accepts it (env and kcap record)
tol_json() { shadow_json "$1" -p '" ".join(str(x) for x in (j["compared"], j["divergent"], j["tolerances"]["half"]["atol"], j["tolerances"]["half"]["rtol"], j["tolerances"]["f32"]["atol"], j["tolerances"]["f32"]["rtol"]))'; }
with_kcap KCAP_DIR="$T/atol" KCAP_SHADOW="$PERT" KCAP_SHADOW_ATOL=1.0 -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/atol.out" 2>"$T/atol.err"
[ "$(tol_json "$T/atol")" = "6 0 1 0.02 0.001 0.001" ] && [ "$(count_h5 "$T/atol")" = 0 ] && cmp -s "$T/bare" "$T/atol.out" &&
    ok "KCAP_SHADOW_ATOL=1.0: the perturbed candidate's 0.5 error is within tolerance, 6 compared, 0 divergent, the summary says atol 1" ||
    { cat "$T/atol.err"; tol_json "$T/atol"; fail "KCAP_SHADOW_ATOL"; }
"$KCAP" record -q -o "$T/ratol" --shadow "$PERT" --atol 1 --lse-rtol=0.005 -- "$CLIENT" --calls 6 --seed 41 --hash >"$T/ratol.out" 2>"$T/ratol.err"
[ "$(tol_json "$T/ratol")" = "6 0 1 0.02 0.001 0.005" ] && [ "$(count_h5 "$T/ratol")" = 0 ] && cmp -s "$T/bare" "$T/ratol.out" &&
    ok "kcap record --shadow --atol 1 --lse-rtol=0.005: 0 divergent, the tolerances in the summary" ||
    { cat "$T/ratol.err"; tol_json "$T/ratol"; fail "kcap record --atol"; }
for bad in KCAP_SHADOW_ATOL=-1 KCAP_SHADOW_RTOL=nan KCAP_SHADOW_LSE_ATOL=1e KCAP_SHADOW_LSE_RTOL=inf; do
    with_kcap KCAP_DIR="$T/badtol" KCAP_SHADOW="$PERT" "$bad" -- "$CLIENT" --calls 2 --seed 41 --hash >"$T/badtol.out" 2>"$T/badtol.err"
    cmp -s <(head -2 "$T/bare") "$T/badtol.out" && [ "$(count_h5 "$T/badtol")" = 0 ] &&
        grep -q "kcap: .*${bad%%=*}='${bad#*=}' is not a non-negative finite number.*capture is off" "$T/badtol.err" ||
        { cat "$T/badtol.err"; fail "bad $bad"; }
done
ok "a bad KCAP_SHADOW_[LSE_]ATOL/RTOL (-1, nan, 1e, inf): one line naming it, capture off, host unaffected"
"$KCAP" record -o "$T/rbad" --shadow "$PERT" --atol nan -- touch "$T/ran" 2>"$T/rbad.err"
[ $? = 2 ] && [ ! -e "$T/ran" ] && grep -q "\-\-atol 'nan' is not a non-negative finite number" "$T/rbad.err" &&
    ok "kcap record --atol nan: a usage error (exit 2), the command not started" || { cat "$T/rbad.err"; fail "kcap record --atol nan"; }

# kcap shadow PID CAND --atol: the replay gate and the live swap judge with the same
# tolerances; one not given is the process's own (KCAP_SHADOW_RTOL=0.05 here)
env KCAP_DIR="$T/live" KCAP_SHADOW="$PERT" KCAP_SHADOW_RTOL=0.05 KCAP_EVERY=40 LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 51 --until "$T/stop" --quiet 2>"$T/live.err" &
pid=$!
for _ in $(seq 100); do [ "$(count_h5 "$T/live")" -ge 2 ] && break; sleep 0.1; done
"$KCAP" shadow $pid "$PERT" >"$T/sw0.out" 2>&1
[ $? = 1 ] && grep -Eq "fails [0-9]+ of the [0-9]+ snapshots in $T/live \(outside tolerance\); not armed" "$T/sw0.out" && ok "kcap shadow PID PERT (tolerances of the process): refused by the replay gate" ||
    { cat "$T/sw0.out"; fail "gate at default tolerances"; }
"$KCAP" shadow $pid "$PERT" --atol 1 >"$T/sw1.out" 2>&1 &&
    grep -q "passes the snapshots in .* with --atol 1 --rtol 0.05$" "$T/sw1.out" &&
    grep -q "shadow candidate $PERT (.*) atol=1 rtol=0.05 lse_atol=0.001 lse_rtol=0.001" "$T/sw1.out" &&
    ok "kcap shadow PID PERT --atol 1: the replay passes with --atol 1 --rtol 0.05, the process takes atol=1 rtol=0.05" ||
    { cat "$T/sw1.out"; fail "swap with --atol"; }
for _ in $(seq 50); do "$KCAP" shadow $pid --status >"$T/st1.out" 2>&1; grep -q "compared=[1-9]" "$T/st1.out" && break; sleep 0.1; done
grep -q " divergent=0 .* atol=1 rtol=0.05 " "$T/st1.out" && grep -q "compared=[1-9]" "$T/st1.out" &&
    ok "live after the swap: $(grep -o 'compared=[0-9]*' "$T/st1.out") calls, 0 divergent, --status shows atol=1" ||
    { cat "$T/st1.out"; fail "live tolerances"; }
"$KCAP" shadow $pid "$PERT" --rtol=-0.1 >"$T/sw2.out" 2>&1
[ $? = 2 ] && grep -q "\-\-rtol '-0.1' is not a non-negative finite number" "$T/sw2.out" &&
    ok "kcap shadow --rtol=-0.1: a usage error" || { cat "$T/sw2.out"; fail "kcap shadow bad tolerance"; }
"$KCAP" shadow $pid "$CPU" >"$T/sw3.out" 2>&1 && "$KCAP" shadow $pid --status >"$T/st3.out" 2>&1 &&
    grep -q " atol=0.01 rtol=0.05 lse_atol=0.001 lse_rtol=0.001 " "$T/st3.out" &&
    ok "a swap without tolerances (the request older clients send): the process's configured ones again" ||
    { cat "$T/sw3.out" "$T/st3.out"; fail "swap without tolerances"; }
touch "$T/stop"
wait $pid || fail "live client exit"

# a half-written candidate build (a third of the file: its segments lie past the end) at
# start and in a live swap: refused with the reason, the host unaffected (dlopen of it
# killed the host with SIGBUS before the check)
head -c $(($(stat -c %s "$PERT") / 3)) "$PERT" >"$T/half.so"
with_kcap KCAP_DIR="$T/half" KCAP_SHADOW="$T/half.so" -- "$CLIENT" --calls 2 --seed 41 --hash >"$T/half.out" 2>"$T/half.err"
rc=$?
[ $rc = 0 ] && cmp -s <(head -2 "$T/bare") "$T/half.out" && [ "$(count_h5 "$T/half")" = 0 ] &&
    grep -q "KCAP_SHADOW: $T/half.so cannot be loaded (a half-written or broken build?): .* (truncated?)" "$T/half.err" &&
    ok "KCAP_SHADOW=a half-written build: named with the reason, shadow mode off, host unaffected" ||
    { cat "$T/half.err"; fail "half-written candidate at start (exit $rc)"; }
env KCAP_DIR="$T/half2" KCAP_SHADOW="$CPU" LD_PRELOAD="$PRELOAD" \
    "$CLIENT" --calls 1 --seed 52 --until "$T/stop3" --quiet 2>"$T/half2.err" &
pid=$!
for _ in $(seq 100); do "$KCAP" shadow $pid --timeout 1 --status >/dev/null 2>&1 && break; sleep 0.1; done
"$KCAP" shadow $pid "$T/half.so" --force >"$T/half2.out" 2>&1
rc=$?
"$KCAP" shadow $pid --status >"$T/half2.st" 2>&1
touch "$T/stop3"
wait $pid
crc=$?
[ $rc = 1 ] && [ $crc = 0 ] && grep -q "cannot be loaded (a half-written or broken build?)" "$T/half2.out" &&
    grep -q "candidate $CPU" "$T/half2.st" &&
    ok "kcap shadow PID half.so --force: the live process refuses it with the reason, keeps its candidate, exits 0" ||
    { cat "$T/half2.out" "$T/half2.st" "$T/half2.err"; fail "half-written candidate, live (kcap shadow $rc, client $crc)"; }

with_kcap KCAP_DIR="$T/bad" KCAP_SHADOW="$T/nope.so" -- "$CLIENT" --calls 2 --seed 41 --hash >"$T/bad.out" 2>"$T/bad.err"
cmp -s <(head -2 "$T/bare") "$T/bad.out" && grep -q "KCAP_SHADOW=$T/nope.so is not a readable" "$T/bad.err" &&
    ok "a missing KCAP_SHADOW library is named, capture off, host unaffected" || { cat "$T/bad.err"; fail "bad KCAP_SHADOW"; }
finish
