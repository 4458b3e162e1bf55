#!/usr/bin/env bash
# run_tests.sh — runs each test program given as an argument, shows its output only when it
# fails (or always with V=1), and ends with the line "N passed, N failed" that CI reads.
# A test is any executable; exit 0 = pass, 77 = skipped (e.g. a GPU test on a CPU machine).
set -u
pass=0 fail=0 skip=0 failed=()
for t in "$@"; do
    log=$(mktemp)
    start=$(date +%s.%N)
    "$t" >"$log" 2>&1
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); printf 'PASS  %-50s %6ss\n' "$t" "$secs"
        [ "${V:-0}" = 1 ] && sed 's/^/      /' "$log"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); printf 'SKIP  %-50s %s\n' "$t" "$(tail -n 1 "$log")"
    else
        fail=$((fail + 1)); failed+=("$t"); printf 'FAIL  %-50s (exit %d)\n' "$t" $rc
        sed 's/^/      /' "$log" | tail -n 60
    fi
    rm -f "$log"
done
[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[*]}"
if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail -eq 0 ]
