#!/usr/bin/env bash
# test_capture_select.sh — which calls become snapshots: KCAP_CALLS ranges, KCAP_EVERY, their
# combination, KCAP_MAX, KCAP_MAX_BYTES, and the queue byte cap (drop and count, never grow).
# The host's outputs stay byte-identical in every case.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT" "$SNAPCMP"
mkdir -p "$T/ref"
"$CLIENT" --calls 8 --seed 21 --dump "$T/ref" || fail "reference run"

# run NAME EXPECTED_SEQS VAR=VALUE...: capture with the variables; the snapshot sequence
# numbers must be exactly EXPECTED_SEQS (space separated, "" for none)
run() {
    local name=$1 want=$2
    shift 2
    mkdir -p "$T/$name.dump"
    with_kcap KCAP_DIR="$T/$name" "$@" -- "$CLIENT" --calls 8 --seed 21 --dump "$T/$name.dump" \
        2>"$T/$name.err" || fail "$name: client failed"
    same_outputs "$T/ref" "$T/$name.dump" || fail "$name: outputs differ"
    local got
    got=$(ls "$T/$name" 2>/dev/null | sed -n 's/.*-s0*\([0-9][0-9]*\)\.h5$/\1/p;s/.*-s000000\.h5$/0/p' | sort -n | uniq | tr '\n' ' ' | sed 's/ $//')
    if [ "$got" = "$want" ]; then ok "$name: snapshots of calls [$want]"; else fail "$name: got [$got] want [$want]"; cat "$T/$name.err"; fi
    [ -z "$want" ] || "$SNAPCMP" "$T/$name" "$T/$name.dump" >/dev/null || fail "$name: snapcmp"
}
run calls "1 2 5" KCAP_CALLS=1-2,5
run every "0 3 6" KCAP_EVERY=3
run both "3 6" KCAP_CALLS=2-7 KCAP_EVERY=3
run max "0 1 2" KCAP_MAX=3
run maxcalls "4 5" KCAP_CALLS=4-7 KCAP_MAX=2
run maxbytes "" KCAP_MAX_BYTES=1K
grep -q "KCAP_MAX_BYTES=1024 reached" "$T/maxbytes.err" && grep -q "cap=8" "$T/maxbytes.err" &&
    ok "max-bytes drops are logged once and counted" || { cat "$T/maxbytes.err"; fail "max-bytes log"; }
run queue "" KCAP_QUEUE_BYTES=1K
grep -q "queue full\|KCAP_QUEUE_BYTES=1024" "$T/queue.err" && grep -q "queue=8" "$T/queue.err" &&
    ok "queue cap: all dropped and counted" || { cat "$T/queue.err"; fail "queue cap"; }
# KCAP_MAX_BYTES with room for part of the run: the sum of accepted dense bytes stays below the cap
with_kcap KCAP_DIR="$T/partial" KCAP_MAX_BYTES=2M -- "$CLIENT" --calls 8 --seed 21 --quiet 2>"$T/partial.err" || fail "partial"
n=$(count_h5 "$T/partial")
acc=$(sed -n 's/.* bytes=\([0-9]*\) .*/\1/p' "$T/partial.err")
[ "$n" -ge 1 ] && [ "$n" -lt 8 ] && [ "${acc:-0}" -le 2097152 ] && ok "KCAP_MAX_BYTES=2M: $n of 8 kept, $acc bytes" ||
    { cat "$T/partial.err"; fail "partial max-bytes ($n, $acc)"; }
finish
