#!/usr/bin/env bash
# test_demo_cpu.sh — end to end on the CPU library: record the bundled client under libkcap.so,
# check that capture changed no output byte, that every snapshot validates, that replay with
# the same library is bitwise equal (exit 0), and that the perturbed library is caught.
. "$(dirname "$0")/../lib.sh"
# every step must succeed: the first failing command ends the test with its status
set -eo pipefail
CLIENT=$B/tests/vattn_demo_client
ARGS=(--steps 2 --layers 2 --bs 3 --q-len 4 --heads 4 --max-prefix 300 --seed 7)

"$CLIENT" --lib "$CPU" "${ARGS[@]}" >"$T/bare.txt"
"$KCAP" record -o "$T/snaps" -- "$CLIENT" --lib "$CPU" "${ARGS[@]}" >"$T/cap.txt"
cmp "$T/bare.txt" "$T/cap.txt"
n=$(ls "$T"/snaps/*.h5 | wc -l)
[ "$n" -eq 4 ] || die "expected 4 snapshots, got $n"
"$KCAP" check "$T/snaps"
"$KCAP" replay "$T/snaps" --kernel "$CPU" --ref cpu --json "$T/r.json"
"$PY" - "$T/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cases = r["cases"]
assert r["pass"] and len(cases) == 4, "replay did not pass all 4 cases"
for c in cases:
    assert c["vs_captured"]["bitwise"], c["name"] + ": replay not bitwise equal to the capture"
    assert c["vs_ref"]["bitwise"], c["name"] + ": CPU library not bitwise equal to the reference"
PY
if "$KCAP" replay "$T/snaps" --kernel "$PERT" --ref none >"$T/bad.txt" 2>&1; then
    echo "perturbed library was not caught"; cat "$T/bad.txt"; exit 1
fi
echo "e2e cpu: $n snapshots captured, identical host outputs, replay bitwise, perturbed lib caught"
