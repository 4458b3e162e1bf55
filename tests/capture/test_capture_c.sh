#!/usr/bin/env bash
# test_capture_c.sh — libkcap.so under a C program linked against libverify_attn_cpu.so
# (dynamic-linker binding): snapshots appear, validate, equal what the client passed and got,
# and the client's outputs are byte-identical with and without the preload. Also int32
# indices + vattn_verify_reference, the stderr contract (one stats line, nothing else), and
# `kcap record` (environment, LD_PRELOAD, exit status passed through).
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT" "$SNAPCMP"

mkdir -p "$T/ref" "$T/cap"
"$CLIENT" --calls 4 --seed 11 --dump "$T/ref" || fail "client without preload"
with_kcap KCAP_DIR="$T/snaps" -- "$CLIENT" --calls 4 --seed 11 --dump "$T/cap" 2>"$T/err" ||
    fail "client under libkcap"
same_outputs "$T/ref" "$T/cap" && ok "outputs byte-identical with preload" || fail "outputs differ with preload"
"$SNAPCMP" --all --expect 4 "$T/snaps" "$T/cap" && ok "4 snapshots match the client" || fail "snapcmp"
kcap_check "$T/snaps" && ok "kcap check" || fail "kcap check"
[ "$(grep -c '^kcap:' "$T/err")" = 1 ] && grep -q 'stats: calls=4 captured=4 written=4' "$T/err" &&
    ok "stderr: one stats line" || { cat "$T/err"; fail "stderr contract"; }
ls "$T/snaps" | grep -Eq '^vattn_verify-p[0-9]+-[0-9a-f]{8}-s000003\.h5$' && ok "file names carry rank/pid/seq" ||
    { ls "$T/snaps"; fail "file names"; }
[ "$(stat -c %a "$T/snaps")" = 700 ] && ok "KCAP_DIR created 0700" || fail "KCAP_DIR mode"

# int32 indices through vattn_verify_reference, with a rank from the environment
mkdir -p "$T/ref32" "$T/cap32"
"$CLIENT" --calls 2 --seed 12 --int32 --reference --dump "$T/ref32" || fail "client int32"
with_kcap KCAP_DIR="$T/snaps32" RANK=3 -- "$CLIENT" --calls 2 --seed 12 --int32 --reference \
    --dump "$T/cap32" 2>"$T/err32" || fail "client int32 under libkcap"
same_outputs "$T/ref32" "$T/cap32" && ok "int32/reference outputs identical" || fail "int32 outputs differ"
"$SNAPCMP" --all --expect 2 "$T/snaps32" "$T/cap32" && ok "int32/reference snapshots match" || fail "snapcmp int32"
ls "$T/snaps32" | grep -Eq '^vattn_verify_reference-r3-p[0-9]+-[0-9a-f]{8}-s000001\.h5$' && ok "reference call + rank 3 in names" ||
    { ls "$T/snaps32"; fail "reference names"; }

# kcap record: sets everything up, execs the command, passes its exit status through
if [ -x "$KCAP" ]; then
    mkdir -p "$T/rec"
    "$KCAP" record -o "$T/recsnaps" --max 2 -- "$CLIENT" --calls 3 --seed 13 --dump "$T/rec" 2>/dev/null ||
        fail "kcap record"
    "$SNAPCMP" --expect 2 "$T/recsnaps" "$T/rec" && ok "kcap record --max 2" || fail "kcap record snapshots"
    "$KCAP" record -o "$T/recsnaps2" -- "$CLIENT" --bogus 2>/dev/null
    [ $? = 2 ] && ok "kcap record passes the exit status through" || fail "exit status"
    "$KCAP" record -o "$T/x" --every 0 -- true 2>/dev/null
    [ $? = 2 ] && ok "kcap record rejects --every 0" || fail "record option validation"
else
    echo "skip: kcap record ($KCAP not built)"
fi
finish
