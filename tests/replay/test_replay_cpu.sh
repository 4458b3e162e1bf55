#!/usr/bin/env bash
# test_replay_cpu.sh — `kcap replay` and `kcap diff` end to end on the CPU library (CI).
#
# Snapshots are made without the interposer by kcap_gen_snap (random calls through
# libverify_attn_cpu.so, recorded with kcap_call_record). Then, each step a claim of
# the replay loop that must hold:
#   1  replay with the same CPU library is bitwise equal to the captured output (exit 0)
#   2  the perturbed library is caught (exit 1) at exactly its documented element
#      o[request bs-1, token 0, head H-1, channel 77], vs captured and vs reference
#   3  --pool remap / original give the same bitwise result and say which mode ran
#   4  --json parses and carries the fields machines read
#   5  a truncated and a bit-flipped snapshot, and a missing path, give errors naming the
#      file while the good cases still run and pass
#   6  wrong libraries: not a library, no vattn_verify, ABI version 2, a CUDA library with
#      no GPU — each a clear error naming the library
#   7  --watch picks up a replaced library (and survives a half-written one in between)
#   8  kcap diff finds the planted difference and agrees a snapshot with itself
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
require "$KCAP" "$GEN" "$CPU" "$PERT" "$B/tests/libvattn_stub_nosym.so"
WPID= # the --watch run, stopped at exit if the test ends before it does
at_exit '[ -z "$WPID" ] || kill "$WPID" 2>/dev/null'
expect_rc() { # want got what
    if [ "$2" -eq "$1" ]; then ok "$3 (exit $2)"; else fail "$3: exit $2, want $1"; fi
}

N=12
"$GEN" --lib "$CPU" --out "$T/snaps" --count $N --seed 7 >"$T/gen.log" 2>&1 ||
    { cat "$T/gen.log"; die "generator"; }
n=$(ls "$T/snaps"/*.h5 | wc -l)
[ "$n" -eq $N ] || fail "generator made $n snapshots, want $N"
# the corpus must cover what the generator promises, or the later claims are weaker
for w in int32 int64 tree causal strided no-lse; do
    grep -q " $w" "$T/gen.log" || fail "corpus lacks a '$w' case"
done

# ---- 1: same library -> bitwise --------------------------------------------------------
"$KCAP" replay "$T/snaps" --kernel "$CPU" --json "$T/same.json" >"$T/same.out" 2>&1
rc=$?
expect_rc 0 $rc "replay with the CPU library"
[ $rc -eq 0 ] || cat "$T/same.out"
c=$(grep -c ' bitwise ' "$T/same.out")
[ "$c" -eq $N ] || { fail "$c of $N rows say bitwise"; cat "$T/same.out"; }
grep -q "^$N cases: $N passed, 0 failed" "$T/same.out" || fail "summary line of the same-library run"

# ---- 4: JSON fields --------------------------------------------------------------------
"$PY" - "$T/same.json" $N <<'EOF' || fail "JSON of the same-library run"
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
for k in ("tool", "kernel", "kernel_hash", "backend", "ref", "ref_lib", "pool", "tolerances",
          "cases", "summary", "pass"):
    assert k in d, k
assert d["backend"] == "cpu" and d["ref"] == "cpu" and d["pass"] is True
assert d["summary"] == {**d["summary"], "cases": n, "passed": n, "failed": 0, "errors": 0}
assert len(d["cases"]) == n
for c in d["cases"]:
    for k in ("file", "name", "pass", "status", "shape", "pool_mode", "vs_captured", "vs_ref",
              "wall_ms"):
        assert k in c, k
    assert c["pass"] and c["status"] == "pass"
    assert c["pool_mode"] in ("original", "remap")
    v = c["vs_captured"]
    assert v["verdict"] == "bitwise" and v["bitwise"], v
    o = v["tensors"]["o"]
    for k in ("max_abs", "max_rel", "rel_l2", "cosine", "n_beyond", "nonfinite_mismatch", "worst"):
        assert k in o, k
    assert o["max_abs"] == 0 and o["cosine"] == 1 and o["worst"] is None
    assert c["vs_ref"]["pass"], c["vs_ref"]
    for k in ("bs", "q_len", "num_heads", "kv_total", "visibility", "index_type"):
        assert k in c["shape"], k
print("json ok")
EOF

# ---- 2: perturbed library caught at its documented element ----------------------------
"$KCAP" replay "$T/snaps" --kernel "$PERT" --json "$T/pert.json" >"$T/pert.out" 2>&1
rc=$?
expect_rc 1 $rc "replay with the perturbed library"
"$PY" - "$T/pert.json" $N <<'EOF' || { fail "perturbed location"; cat "$T/pert.out"; }
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
assert d["pass"] is False and d["summary"]["failed"] == n, d["summary"]
for c in d["cases"]:
    s = c["shape"]
    want = (s["bs"] - 1, 0, s["num_heads"] - 1, 77)
    for side in ("vs_captured", "vs_ref"):
        v = c[side]
        assert v["ran"] and not v["pass"], (c["name"], side)
        o = v["tensors"]["o"]
        w = o["worst"]
        got = (w["request"], w["token"], w["head"], w["channel"])
        assert got == want, (c["name"], side, got, want)
        assert o["n_beyond"] == 1 and o["nonfinite_mismatch"] == 0, (c["name"], o)
        assert abs(abs(w["got"] - w["want"]) - 0.5) < 0.02, w
        if "lse" in v["tensors"]:
            assert v["tensors"]["lse"]["bitwise"], "lse must be untouched"
print("perturbed ok")
EOF
grep -q "c77)" "$T/pert.out" || fail "table does not show the worst element (…,c77)"

# ---- 3: pool modes ---------------------------------------------------------------------
for mode in remap original; do
    "$KCAP" replay "$T/snaps" --kernel "$CPU" --pool $mode --json "$T/pool-$mode.json" \
        >"$T/pool-$mode.out" 2>&1
    expect_rc 0 $? "--pool $mode"
    "$PY" - "$T/pool-$mode.json" $mode <<'EOF' || fail "--pool $mode JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert all(c["pool_mode"] == sys.argv[2] and c["vs_captured"]["bitwise"] for c in d["cases"])
EOF
done

# ---- 5: corrupt snapshots and a missing path -------------------------------------------
mkdir -p "$T/bad"
first=$(ls "$T/snaps"/*.h5 | head -n 1)
big=$(ls -S "$T/snaps"/*.h5 | head -n 1)
cp "$first" "$T/bad/a-good.h5"
sz=$(stat -c %s "$big")
head -c $((sz / 2)) "$big" >"$T/bad/b-truncated.h5"
cp "$big" "$T/bad/c-flipped.h5"
"$PY" - "$T/bad/c-flipped.h5" <<'EOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
i = len(b) * 6 // 10; b[i] ^= 0x10
open(p, "wb").write(b)
EOF
"$KCAP" replay "$T/bad" "$T/bad/d-missing.h5" --kernel "$CPU" --json "$T/bad.json" \
    >"$T/bad.out" 2>&1
expect_rc 1 $? "replay of corrupt snapshots"
for f in b-truncated.h5 c-flipped.h5 d-missing.h5; do
    grep -q "problems:" "$T/bad.out" && grep -A1 "$T/bad/$f" "$T/bad.out" | grep -q "error:" ||
        fail "no error naming $f"
done
"$PY" - "$T/bad.json" <<'EOF' || { fail "corrupt-snapshot JSON"; cat "$T/bad.out"; }
import json, sys
d = json.load(open(sys.argv[1]))
by = {c["name"]: c for c in d["cases"]}
assert by["a-good.h5"]["pass"], "the good case must still run and pass"
for n in ("b-truncated.h5", "c-flipped.h5", "d-missing.h5"):
    c = by[n]
    assert c["status"] == "error" and n in c["error"], c
print("corrupt ok:", *(by[n]["error"][:120] for n in ("b-truncated.h5", "c-flipped.h5")), sep="\n  ")
EOF

# ---- 6: wrong libraries ----------------------------------------------------------------
echo "not a library" >"$T/notlib.so"
"$KCAP" replay "$first" --kernel "$T/notlib.so" >"$T/lib1.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "notlib.so cannot be loaded" "$T/lib1.out" ||
    { fail "non-library: exit $rc"; cat "$T/lib1.out"; }
"$KCAP" replay "$first" --kernel "$B/tests/libvattn_stub_nosym.so" >"$T/lib2.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "libvattn_stub_nosym.so does not export vattn_verify" "$T/lib2.out" ||
    { fail "missing symbol: exit $rc"; cat "$T/lib2.out"; }
"$KCAP" replay "$first" --kernel "$B/tests/libvattn_stub_abi2.so" --ref none >"$T/lib3.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "ABI version 1, but .*libvattn_stub_abi2.so implements version 2" \
    "$T/lib3.out" || { fail "ABI mismatch: exit $rc"; cat "$T/lib3.out"; }
MATHLIB=$(ldconfig -p 2>/dev/null | awk '/libm\.so\.6 .*x86-64/ {print $NF; exit}')
if [ -n "$MATHLIB" ]; then
    "$KCAP" replay "$first" --kernel "$MATHLIB" >"$T/lib4.out" 2>&1
    rc=$?
    [ $rc -ne 0 ] && grep -q "does not export vattn_abi_version" "$T/lib4.out" ||
        { fail "foreign library: exit $rc"; cat "$T/lib4.out"; }
fi
"$KCAP" replay "$first" --kernel "$B/tests/libvattn_stub_cuda.so" >"$T/lib5.out" 2>&1
rc=$?
if grep -q "no usable GPU" "$T/lib5.out"; then
    [ $rc -ne 0 ] && grep -q "libvattn_stub_cuda.so is a CUDA library but it cannot run here" \
        "$T/lib5.out" || { fail "CUDA library without GPU: exit $rc"; cat "$T/lib5.out"; }
else
    echo "note: a GPU is present; the no-GPU message was not exercised"
fi
"$KCAP" replay "$first" --kernel "$CPU" --ref cpu --ref-lib "$T/nonexistent.so" >"$T/lib6.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "nonexistent.so" "$T/lib6.out" ||
    { fail "missing reference library: exit $rc"; cat "$T/lib6.out"; }
"$KCAP" replay "$first" >"$T/usage.out" 2>&1
expect_rc 2 $? "no --kernel is a usage error"

# ---- 7: --watch ------------------------------------------------------------------------
mkdir -p "$T/lib" "$T/one"
cp "$CPU" "$T/lib/libk.so"
cp "$first" "$T/one/"
"$KCAP" replay "$T/one" --kernel "$T/lib/libk.so" --watch --watch-runs 3 >"$T/watch.out" 2>&1 &
WPID=$!
wait_for() { # pattern count timeout_s
    local i=0
    while [ $i -lt $(($3 * 10)) ]; do
        [ "$(grep -c -- "$1" "$T/watch.out")" -ge "$2" ] && return 0
        kill -0 "$WPID" 2>/dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    [ "$(grep -c -- "$1" "$T/watch.out")" -ge "$2" ]
}
wait_for "^1 case: 1 passed" 1 60 || fail "watch: first run did not pass"
sleep 0.5
head -c 2000 "$PERT" >"$T/lib/libk.so" # a half-written build
wait_for "cannot be loaded" 1 30 || fail "watch: half-written library not reported"
sleep 0.5
cp "$PERT" "$T/lib/libk.so.tmp" && mv "$T/lib/libk.so.tmp" "$T/lib/libk.so" # the finished build
i=0
while kill -0 "$WPID" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$WPID" 2>/dev/null; then
    fail "watch: still running after 3 runs"
    kill "$WPID"
fi
wait "$WPID"
rc=$?
WPID=
expect_rc 1 $rc "watch exit status (last run: perturbed library)"
grep -q "^1 case: 0 passed, 1 failed" "$T/watch.out" || fail "watch: third run did not catch the perturbed library"
[ "$(grep -c '^change detected' "$T/watch.out")" -eq 2 ] || fail "watch: expected 2 change-detected lines"
[ $FAILS -eq 0 ] || { echo "--- watch output"; cat "$T/watch.out"; }

# ---- 8: kcap diff ----------------------------------------------------------------------
"$GEN" --lib "$PERT" --out "$T/pert-snaps" --count 2 --seed 7 >/dev/null 2>&1 || fail "generator (perturbed)"
a=$(ls "$T/pert-snaps"/*.h5 | head -n 1)
b=$first
"$KCAP" diff "$a" "$b" --json "$T/diff.json" >"$T/diff.out" 2>&1
expect_rc 1 $? "kcap diff of perturbed vs reference capture"
"$PY" - "$T/diff.json" <<'EOF' || { fail "diff JSON"; cat "$T/diff.out"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["same"] is False
t = {(x["name"], x["dir"]): x for x in d["tensors"]}
for k, x in t.items():
    if k[1] == "in":
        assert x["status"] == "bitwise", (k, x["status"])
o = t[("o", "out")]
assert o["status"] == "FAIL" and o["metrics"]["n_beyond"] == 1, o
w = o["metrics"]["worst"]
assert w["channel"] == 77 and w["token"] == 0, w
assert any(m["field"] == "lib_path" for m in d["meta"])
print("diff ok")
EOF
grep -q "snapshots differ" "$T/diff.out" || fail "diff summary line"
"$KCAP" diff "$b" "$b" >"$T/diff2.out" 2>&1
expect_rc 0 $? "kcap diff of a snapshot with itself"
"$KCAP" diff "$b" "$T/bad/b-truncated.h5" >"$T/diff3.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "b-truncated.h5" "$T/diff3.out" || { fail "diff of a corrupt file: exit $rc"; cat "$T/diff3.out"; }

# a failing case's row names its file and says why, and a file name is never printed raw
# (an escape sequence in a name stays inert on the terminal)
mkdir -p "$T/esc"
cp "$T/bad/b-truncated.h5" "$T/esc/evil-$(printf '\033')[31m.h5"
"$KCAP" replay "$T/esc" --kernel "$CPU" >"$T/esc.out" 2>&1
! grep -q "$(printf '\033')" "$T/esc.out" && grep -q 'evil-\\x1b' "$T/esc.out" && grep -q "ERROR: .*truncated\|ERROR: .*b-truncated\|ERROR: .*evil" "$T/esc.out" ||
    { fail "replay row of an escape-named corrupt file"; cat -v "$T/esc.out"; }

# hostile files that pass `kcap check` but declare absurd call geometry (found by the resealing
# fuzzer: num_slots = 2^59 made the pool size wrap and the rebuild write past a 1-byte pool;
# by a review of crafted files: a vattn_extend call whose mask_indptr[0] is 2^63 - 5 overflowed
# int64 in the call description's summary, undefined behaviour that `make asan` aborts on):
# each fails its own case with a message, the process never crashes
"$KCAP" replay tests/replay/hostile --kernel "$CPU" >"$T/hostile.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "num-slots-2e59.h5: rebuild vattn_verify: kv_cache: a pool of 576460752303423488 rows" "$T/hostile.out" &&
    grep -q "mask-indptr-2e63.h5 .*FAIL status" "$T/hostile.out" && grep -q "2 cases: 0 passed, 2 failed" "$T/hostile.out" &&
    ! grep -q "runtime error" "$T/hostile.out" ||
    { fail "replay of tests/replay/hostile: exit $rc (134 = heap corruption; a 'runtime error' line: undefined behaviour, fatal under make asan)"; cat "$T/hostile.out"; }

# the private copy of the library is gone once it is loaded: a replay killed mid-run (or
# crashed by its candidate) leaves nothing in TMPDIR
SLOWLIB=$B/tests/libverify_attn_cpu_slow.so
require "$SLOWLIB"
mkdir -p "$T/tmpd"
TMPDIR="$T/tmpd" "$KCAP" replay "$T/snaps" --kernel "$SLOWLIB" --ref none --bench --iters 50 >/dev/null 2>&1 &
rp=$!
loaded=0 # until the replay has the copy mapped (its cases then take seconds: 20 ms a call)
for _ in $(seq 200); do
    grep -q "$T/tmpd/kcap-replay-.*libverify_attn_cpu_slow" "/proc/$rp/maps" 2>/dev/null && { loaded=1; break; }
    sleep 0.05
done
left=$(ls -A "$T/tmpd" | wc -l)
kill -9 $rp 2>/dev/null; wait $rp 2>/dev/null
[ $loaded = 1 ] && [ "$left" = 0 ] && [ -z "$(ls -A "$T/tmpd")" ] &&
    ok "the library's private copy is removed once loaded: a killed replay leaves nothing" ||
    fail "a running replay (copy mapped: $loaded) keeps its library copy in TMPDIR ($left entries), left behind when it is killed"

finish "all replay CPU checks passed"
