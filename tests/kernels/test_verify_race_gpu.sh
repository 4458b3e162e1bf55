#!/usr/bin/env bash
# test_verify_race_gpu.sh — shared-memory hazards and barrier misuse of the fast kernels under
# compute-sanitizer (make test-gpu; exit 77 without a GPU or without compute-sanitizer).
#
# Claims checked, for each fast kernel (v3, v7, v7 with its deep L2 prefetch, v8, forced
# through the dev build's VATTN_VARIANT and VATTN_DEV_DEEP, so every one runs on the same cases):
#   1  racecheck reports 0 hazards (errors and warnings) on a ragged case — nanv-h8-q4-v8:
#      requests of different lengths, so v8's blocks get odd tile counts and its two groups
#      run different numbers of barriers before the key-split merge (184,320 hazards there
#      before the merge's barrier padding, H200, 2026-12-04) — and on the even case
#      even-h8-q4-v8 (every block an even tile count);
#   2  synccheck reports 0 errors on both (no barrier reached by part of a warp, no
#      mismatched barrier counts);
#   3  the cases' own checks pass under the tool (it changes timing, not results).
. "$(dirname "$0")/../lib.sh"
have_gpu || skip "no GPU: skipped"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$SAN" ] && [ -x "$SAN" ] || skip "compute-sanitizer not found: skipped"
GPU_TEST=$ROOT/$B/tests/test_verify_gpu
require "$GPU_TEST" "$ROOT/$B/tests/libverify_attn_dev.so"

fails=0
run_tool() { # tool variant case; variant 7d = v7 with the deep prefetch
    local tool=$1 v=$2 c=$3 log=$T/$1_v$2_$3.txt extra=() deep=0
    [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
    [ "$v" = 7d ] && v=7 && deep=1
    VATTN_DEV_DEEP=$deep VATTN_VARIANT=$v timeout 300 "$SAN" --tool "$tool" "${extra[@]}" --error-exitcode 3 "$GPU_TEST" "$c" >"$log" 2>&1
    local rc=$? summary
    summary=$(grep -E "(RACECHECK|ERROR) SUMMARY" "$log" | head -1 | sed 's/^========= //')
    if [ $rc -ne 0 ] || ! grep -qE "OK: 0 of [1-9][0-9]* checks failed" "$log" ||
        ! grep -qE "RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)|ERROR SUMMARY: 0 errors" "$log"; then
        echo "FAIL $tool v$2 $c (rc $rc): ${summary:-no summary}"
        grep -m 6 -E "hazard detected|Error|Read Thread|Write Thread|checks failed" "$log" | sed 's/^/    /'
        fails=$((fails + 1))
    else
        echo "ok   $tool v$2 $c: $summary"
    fi
}
for v in 3 7 7d 8; do
    for c in nanv-h8-q4-v8 even-h8-q4-v8; do
        run_tool racecheck $v $c
        run_tool synccheck $v $c
    done
done
[ $fails -eq 0 ] || die "$fails sanitizer runs reported hazards or errors (logs above)"
echo "OK: 0 hazards, 0 barrier errors for v3, v7, v7 deep, v8 on the ragged and even cases"
