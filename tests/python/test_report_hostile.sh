#!/usr/bin/env bash
# test_report_hostile.sh — `python3 -m kcap report DIR` (the page of `kcap replay --report`)
# against what a hostile review found (twenty-second session); each failed before its fix
# (make test):
#   1  a case name in DIR/replay.json such as ../outside/PWNED put its heatmaps outside DIR:
#      the pictures are named by the case's position, inside DIR;
#   2  a failing snapshot whose file name is not UTF-8 (the JSON shows the byte as \xNN) got
#      "no saved outputs (it did not run to the end)" and no heatmap: the report finds the
#      saved file;
#   3  a replay.json with missing keys or wrong types ended in a raw traceback: exit 1 and
#      one line naming the file.
# Parts 1 and 2 draw pictures, so they need matplotlib (skipped, and said, without it).
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
require "$KCAP" "$GEN" "$CPU" "$PERT"
export PYTHONPATH=$ROOT/python
"$GEN" --lib "$CPU" --out "$T/gen" --count 1 --seed 1 >"$T/gen.log" 2>&1 || { cat "$T/gen.log"; die "generator"; }
if "$PY" -c "import matplotlib" 2>/dev/null; then
    # 1: a name that climbs out of DIR
    "$KCAP" replay "$T/gen" --kernel "$PERT" --ref none --save-outputs "$T/saved" -q >/dev/null 2>&1
    mkdir -p "$T/rep" "$T/outside"
    printf '{"kernel":"k","cases":[{"file":"%s","saved":"%s","name":"../outside/PWNED","pass":false,"status":"fail","error":null}]}\n' \
        "$T/gen/snap-0000.h5" "$T/saved/snap-0000.h5" >"$T/rep/replay.json"
    "$PY" -m kcap report "$T/rep" >"$T/r1" 2>&1
    rc=$?
    [ $rc -eq 0 ] && [ -z "$(ls -A "$T/outside")" ] && ls "$T/rep"/*.png >/dev/null 2>&1 &&
        ok "a case name with ../: heatmaps inside DIR, none outside" ||
        fail "traversal: rc $rc, outside: $(ls "$T/outside"), $(head -3 "$T/r1")"
    # 2: a failing snapshot named with a byte that is not UTF-8
    mkdir -p "$T/bn"
    cp "$T/gen/snap-0000.h5" "$T/bn/$(printf 'a\377.h5')"
    "$KCAP" replay "$T/bn" --kernel "$PERT" --ref none --report "$T/bnrep" -q >/dev/null 2>&1
    "$PY" -m kcap report "$T/bnrep" >/dev/null 2>&1 # this package's page (kcap ran its own copy's)
    ! grep -q "no saved outputs" "$T/bnrep/index.html" && grep -q "<img" "$T/bnrep/index.html" &&
        ok "a name that is not UTF-8: its saved outputs found, heatmaps drawn" ||
        fail "byte name: $(grep -o '<p>no saved[^<]*' "$T/bnrep/index.html")"
else
    echo "matplotlib not installed: parts 1 and 2 (pictures) skipped"
fi
# 3: documents that are not a replay run's
bad() { # label json
    mkdir -p "$T/h/$1"
    printf '%s\n' "$2" >"$T/h/$1/replay.json"
    "$PY" -m kcap report "$T/h/$1" >"$T/h/$1.out" 2>&1
    local rc=$?
    [ $rc -eq 1 ] && grep -q "$1/replay.json: not a kcap replay document" "$T/h/$1.out" &&
        ! grep -q Traceback "$T/h/$1.out" && ok "replay.json with $1: one line naming the file, exit 1" ||
        fail "replay.json with $1: rc $rc: $(head -3 "$T/h/$1.out")"
}
bad cases-null '{"kernel":"k","cases":null}'
bad name-missing '{"kernel":"k","cases":[{"pass":true,"status":"pass"}]}'
bad max-abs-string '{"kernel":"k","cases":[{"name":"a","pass":true,"status":"pass","vs_captured":{"tensors":{"o":{"max_abs":"x"}}},"vs_ref":{"tensors":{"o":{"max_abs":1}}}}]}'
bad kernel-null '{"kernel":null,"cases":[]}'
finish
