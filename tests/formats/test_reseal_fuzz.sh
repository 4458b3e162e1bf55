#!/usr/bin/env bash
# test_reseal_fuzz.sh — the resealing fuzzer (fuzz_reseal.c) for a bounded time through the
# library reader paths (read, read_header, check, rebuild), then a directory of mutated,
# resealed files (plus the libhdf5 crashers of the corpus) through the CLI: `kcap check
# DIR`, `kcap ls DIR`, `kcap replay DIR` (CPU library) and `kcap info` of each file must
# finish with a status (never a signal) and name every file. KCAP_RESEAL_SECONDS (default
# 20) bounds the library run.
. "$(dirname "$0")/../lib.sh"
F=$B/tests/formats/fuzz_reseal
C=tests/formats/corpus
require "$F" "$KCAP"
mkdir -p "$T/crashes" "$T/dir"
# 1 GiB per file is plenty to reach every reader path, and keeps a mutated file that declares
# gigabytes from taking the machine's memory while other tests run
KCAP_READ_MAX_BYTES=${KCAP_READ_MAX_BYTES:-1073741824} TMPDIR=$T "$F" -t "${KCAP_RESEAL_SECONDS:-20}" -s "${KCAP_RESEAL_SEED:-$RANDOM}" \
    -o "$T/crashes" "$C"/ok-*.h5 || fail "fuzz_reseal exit $?"
for c in "$T"/crashes/crash-*.h5; do
    [ -e "$c" ] && { fail "a reader crashed on $(basename "$c")"; cp "$c" "${KCAP_CRASH_KEEP:-/tmp}/" 2>/dev/null; }
done
# files whose chunk layout made libhdf5 1.10 copy past a buffer: refused before libhdf5
# decodes them, so even in-process (sandbox off) the reader answers instead of crashing
for f in "$C"/bad-chunk-beyond-*.h5 "$C"/bad-short-frames.h5; do
    KCAP_READ_SANDBOX=0 "$KCAP" check "$f" > "$T/inproc.out" 2>&1; rc=$?
    [ $rc = 1 ] && grep -q "^BAD  $f: /outputs/o: " "$T/inproc.out" ||
        fail "in-process check of $f: exit $rc: $(head -c 300 "$T/inproc.out")"
done
# the CLI over a directory of hostile files: every file gets its own verdict
"$F" -e "$T/dir" 150 -s 7 "$C"/ok-*.h5 || fail "emit"
cp "$C"/bad-h5crash-*.h5 "$C"/bad-h5state-*.h5 "$T/dir/"
n=$(ls "$T/dir" | wc -l)
"$KCAP" check "$T/dir" > "$T/check.out" 2>&1; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "kcap check DIR exit $rc (a signal kills the whole run)"
[ "$(grep -cE '^(OK|BAD) ' "$T/check.out")" -eq "$n" ] || fail "kcap check: want $n verdicts: $(tail -3 "$T/check.out")"
grep -vE '^(OK|BAD) ' "$T/check.out" | grep -q . && fail "kcap check printed more than verdicts (a crashing child's noise?): $(grep -vE '^(OK|BAD) ' "$T/check.out" | head -3)"
for f in "$T"/dir/bad-h5crash-*.h5; do
    grep -q "^BAD  $f: refused: libhdf5 crashed" "$T/check.out" || fail "check: $f not refused as a libhdf5 crash"
done
"$KCAP" ls "$T/dir" > "$T/ls.out" 2> "$T/ls.err"; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "kcap ls DIR exit $rc"
nls=$(( $(tail -n +2 "$T/ls.out" | wc -l) + $(grep -c '^kcap ls: ' "$T/ls.err") ))
[ "$nls" -eq "$n" ] || fail "kcap ls: $nls of $n files accounted for"
if [ -e "$CPU" ]; then
    timeout 300 "$KCAP" replay "$T/dir" --kernel "$CPU" --json "$T/r.json" > "$T/replay.out" 2>&1; rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "kcap replay DIR exit $rc"
    nr=$(n_cases "$T/r.json")
    [ "$nr" = "$n" ] || fail "kcap replay: ${nr:-no} cases of $n files"
fi
for f in "$T"/dir/*.h5; do
    "$KCAP" info "$f" >/dev/null 2>&1; rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || { fail "kcap info $f exit $rc"; break; }
done
finish "reseal fuzz ok ($n files through the CLI)"
