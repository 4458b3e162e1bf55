#!/usr/bin/env bash
# test_reseal_fuzz.sh — the resealing fuzzer (fuzz_reseal.c) for a bounded time through the
# library reader paths (read, read_header, check, rebuild), then a directory of mutated,
# resealed files (plus the libhdf5 crashers of the corpus) through the CLI: `kcap check
# DIR`, `kcap ls DIR`, `kcap replay DIR` (CPU library) and `kcap info` of each file must
# finish with a status (never a signal) and name every file. KCAP_RESEAL_SECONDS (default
# 20) bounds the library run.
set -u
B=${KCAP_BUILD:-build}
F=$B/tests/formats/fuzz_reseal
K=$B/bin/kcap
C=tests/formats/corpus
[ -x "$F" ] && [ -x "$K" ] || { echo "FAIL: $F or $K not built"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
mkdir -p "$work/crashes" "$work/dir"
# 1 GiB per file is plenty to reach every reader path, and keeps a mutated file that declares
# gigabytes from taking the machine's memory while other tests run
KCAP_READ_MAX_BYTES=${KCAP_READ_MAX_BYTES:-1073741824} TMPDIR=$work "$F" -t "${KCAP_RESEAL_SECONDS:-20}" -s "${KCAP_RESEAL_SEED:-$RANDOM}" \
    -o "$work/crashes" "$C"/ok-*.h5 || bad "fuzz_reseal exit $?"
for c in "$work"/crashes/crash-*.h5; do
    [ -e "$c" ] && { bad "a reader crashed on $(basename "$c")"; cp "$c" "${KCAP_CRASH_KEEP:-/tmp}/" 2>/dev/null; }
done
# the CLI over a directory of hostile files: every file gets its own verdict
"$F" -e "$work/dir" 150 -s 7 "$C"/ok-*.h5 || bad "emit"
cp "$C"/bad-h5crash-*.h5 "$C"/bad-h5state-*.h5 "$work/dir/"
n=$(ls "$work/dir" | wc -l)
$K check "$work/dir" > "$work/check.out" 2>&1; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || bad "kcap check DIR exit $rc (a signal kills the whole run)"
[ "$(grep -cE '^(OK|BAD) ' "$work/check.out")" -eq "$n" ] || bad "kcap check: want $n verdicts: $(tail -3 "$work/check.out")"
grep -vE '^(OK|BAD) ' "$work/check.out" | grep -q . && bad "kcap check printed more than verdicts (a crashing child's noise?): $(grep -vE '^(OK|BAD) ' "$work/check.out" | head -3)"
for f in "$work"/dir/bad-h5crash-*.h5; do
    grep -q "^BAD  $f: refused: libhdf5 crashed" "$work/check.out" || bad "check: $f not refused as a libhdf5 crash"
done
$K ls "$work/dir" > "$work/ls.out" 2> "$work/ls.err"; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || bad "kcap ls DIR exit $rc"
nls=$(( $(tail -n +2 "$work/ls.out" | wc -l) + $(grep -c '^kcap ls: ' "$work/ls.err") ))
[ "$nls" -eq "$n" ] || bad "kcap ls: $nls of $n files accounted for"
CPU=$B/lib/libverify_attn_cpu.so
if [ -e "$CPU" ]; then
    timeout 300 $K replay "$work/dir" --kernel "$CPU" --json "$work/r.json" > "$work/replay.out" 2>&1; rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || bad "kcap replay DIR exit $rc"
    nr=$("${PYTHON:-/usr/bin/python3}" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$work/r.json" 2>/dev/null)
    [ "$nr" = "$n" ] || bad "kcap replay: ${nr:-no} cases of $n files"
fi
for f in "$work"/dir/*.h5; do
    $K info "$f" >/dev/null 2>&1; rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || { bad "kcap info $f exit $rc"; break; }
done
[ $fail -eq 0 ] && echo "reseal fuzz ok ($n files through the CLI)"
exit $fail
