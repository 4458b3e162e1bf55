#!/usr/bin/env bash
# test_capture_tags.sh — a backend tags its calls (kcap.tag / kcap_tag: layer, step) and
# capture keeps those tags in each snapshot and selects by them (KCAP_TAGS, kcap record
# --tags); without libkcap the tag calls are no-ops; a malformed KCAP_TAGS is named and
# leaves the host alone.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$KCAP" "$CPU"
X="$PY tests/capture/extend_ctypes.py $CPU --calls 8 --seed 9 --tag"

$X >"$T/bare" && ok "kcap.tag without libkcap: a no-op" || fail "bare run with tags"
with_kcap KCAP_DIR="$T/all" -- $X >"$T/all.out" 2>/dev/null
cmp -s "$T/bare" "$T/all.out" && [ "$(count_h5 "$T/all")" = 8 ] && ok "tagged calls: 8 snapshots, results unchanged" ||
    fail "tagged run under libkcap"
# every snapshot carries the tags its call was made with: call i has layer i%4, step i/4
PYTHONPATH=$ROOT/python "$PY" - "$T/all" <<'PY' && ok "snapshots hold layer/step tags in call order" || fail "stored tags"
import glob, sys
import kcap
fs = sorted(glob.glob(sys.argv[1] + "/*.h5"))
got = [kcap.load(f).meta["tags"] for f in fs]
want = ["layer=%d,step=%d" % (i % 4, i // 4) for i in range(8)]
print(got)
sys.exit(0 if got == want else 1)
PY
"$KCAP" info "$(ls "$T"/all/*.h5 | head -1)" | grep -q "^tags       layer=0,step=0" && ok "kcap info shows the tags" || fail "info tags"

with_kcap KCAP_DIR="$T/sel" KCAP_TAGS="layer=1-2" -- $X >/dev/null 2>&1
PYTHONPATH=$ROOT/python "$PY" -c '
import glob, sys, kcap
tags = sorted(kcap.load(f).meta["tags"] for f in glob.glob(sys.argv[1] + "/*.h5"))
print(tags)
sys.exit(0 if tags == sorted(["layer=%d,step=%d" % (l, s) for l in (1, 2) for s in (0, 1)]) else 1)' "$T/sel" &&
    ok "KCAP_TAGS=layer=1-2: exactly the 4 calls of layers 1 and 2" || fail "KCAP_TAGS selection"
"$KCAP" record -o "$T/rec" --tags "layer=3;step=1" -- $X >/dev/null 2>&1
[ "$(count_h5 "$T/rec")" = 1 ] && ok "kcap record --tags 'layer=3;step=1': the one call" || { ls "$T/rec"; fail "record --tags"; }
"$KCAP" record -o "$T/x" --tags "layer" -- true 2>"$T/bad.err"
[ $? = 2 ] && grep -q -- "--tags 'layer'" "$T/bad.err" && ok "record --tags without ranges refused" || { cat "$T/bad.err"; fail "--tags validation"; }
with_kcap KCAP_DIR="$T/badenv" KCAP_TAGS="layer=x" -- $X >"$T/badenv.out" 2>"$T/badenv.err"
cmp -s "$T/bare" "$T/badenv.out" && grep -q "KCAP_TAGS='layer=x'" "$T/badenv.err" && [ "$(count_h5 "$T/badenv")" = 0 ] &&
    ok "malformed KCAP_TAGS named, capture off, host results unchanged" || { cat "$T/badenv.err"; fail "bad KCAP_TAGS"; }
finish
