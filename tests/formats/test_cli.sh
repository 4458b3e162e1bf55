#!/usr/bin/env bash
# test_cli.sh — `kcap info` (text and --json), `kcap check` (files and directories, OK/BAD
# lines, exit status) and `kcap ls` (one line per snapshot, sorted by time then seq), and
# --help / usage errors of each; then the option parsing every command shares (getopt_long:
# --opt=value, unknown options, missing values, -q / -v) across all nine commands.
. "$(dirname "$0")/../lib.sh"
MKSNAP=$B/tests/formats/tool_mksnap
require "$KCAP" "$MKSNAP"
mkdir -p "$T/snaps/sub"
$MKSNAP snap "$T/snaps/c.h5" - 5 2026-03-01T10:00:00.000Z || fail "mksnap"
$MKSNAP snap "$T/snaps/a.h5" - 9 2026-03-01T09:00:00.000Z || fail "mksnap"
$MKSNAP snap "$T/snaps/b.h5" - 2 2026-03-01T10:00:00.000Z || fail "mksnap"
$MKSNAP snap "$T/snaps/sub/d.h5" - 1 2026-03-02T00:00:00.000Z || fail "mksnap"

for c in info check ls; do
    "$KCAP" $c --help | grep -q "usage: kcap $c" || fail "kcap $c --help"
    "$KCAP" $c >/dev/null 2>&1; [ $? -eq 2 ] || fail "kcap $c without arguments should exit 2"
done

out=$("$KCAP" info "$T/snaps/a.h5") || fail "kcap info exit"
for w in "vattn_verify" "seq 9" "2026-03-01T09:00:00.000Z" "kv_cache" "bfloat16" "[23,576]" "ratio" "total" "rank 3"; do
    grep -qF -- "$w" <<<"$out" || fail "kcap info lacks '$w'"
done
"$KCAP" info --json "$T/snaps/a.h5" > "$T/a.json" || fail "info --json exit"
$PY - "$T/a.json" <<'PYEOF' || fail "info --json content"
import json, sys
def no_dup(pairs):  # a key twice in one object: JSON readers would keep only the last
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys: %s" % keys
    return dict(pairs)
j = json.load(open(sys.argv[1]), object_pairs_hook=no_dup)
assert j["schema_version"] == 1 and j["kcap_version"], j  # like replay's and diff's documents
assert j["written_by_kcap_version"] and j["tags"] == "", j
assert j["call"] == "vattn_verify" and j["seq"] == 9 and j["rank"] == 3, j
t = {x["name"]: x for x in j["tensors"]}
assert t["kv_cache"]["shape"] == [23, 576] and t["kv_cache"]["dtype"] == "bfloat16"
assert t["q"]["strides"] == [8 * 600 + 40, 600, 1], t["q"]
assert j["raw_bytes"] == sum(x["raw_bytes"] for x in j["tensors"]) and j["ratio"] > 1
assert j["scalars"]["sm_scale"] == 0.0625
PYEOF
"$KCAP" info --desc "$T/snaps/a.h5" | grep -q "| kv_cache | input |" || fail "info --desc"
"$KCAP" info "$T/nope.h5" 2>"$T/err"; [ $? -eq 1 ] && grep -q "nope.h5" "$T/err" || fail "info of a missing file"

"$KCAP" check "$T/snaps" > "$T/check" || fail "check of a good directory"
[ "$(grep -c '^OK ' "$T/check")" -eq 4 ] || fail "check should list 4 OK files: $(cat "$T/check")"
"$KCAP" check tests/formats/corpus > "$T/check2"; rc=$?
[ $rc -eq 1 ] || fail "check of the corrupt corpus should exit 1 (got $rc)"
nbad=$(ls tests/formats/corpus | grep -c '^bad-'); nok=$(ls tests/formats/corpus | grep -c '^ok-')
[ "$(grep -c '^BAD ' "$T/check2")" -eq "$nbad" ] || fail "check: want $nbad BAD lines"
[ "$(grep -c '^OK ' "$T/check2")" -eq "$nok" ] || fail "check: want $nok OK lines"
grep -q "^BAD  tests/formats/corpus/bad-truncated.h5: truncated" "$T/check2" || fail "check names the reason"
cat "$T/check2"

out=$("$KCAP" ls "$T/snaps") || fail "ls exit"
echo "$out"
order=$(echo "$out" | tail -n +2 | awk '{print $2}' | tr '\n' ' ')
[ "$order" = "9 2 5 " ] || fail "ls order by time then seq: got '$order'"
echo "$out" | grep -q "bs=3 q_len=4 H=8 kv_rows=23" || fail "ls shape summary"
[ "$("$KCAP" ls -r "$T/snaps" | tail -n +2 | wc -l)" -eq 4 ] || fail "ls -r"
"$KCAP" ls tests/formats/corpus >/dev/null 2>&1; [ $? -eq 1 ] || fail "ls with bad files exits 1"

# ---- hostile directories: every reader command, none may hang or crash ----
h=$T/hostile; mkdir -p "$h"
cp "$T/snaps/a.h5" "$h/good.h5"
mkfifo "$h/fifo.h5"
for c in "info $h/fifo.h5" "check $h" "ls $h" "replay $h --kernel $CPU" "diff $h/fifo.h5 $h/good.h5"; do
    timeout 20 "$KCAP" $c > "$T/out" 2>&1; rc=$?
    [ $rc -eq 124 ] && fail "kcap $c hangs on a FIFO"
    [ $rc -ge 1 ] && [ $rc -le 3 ] || fail "kcap $c with a FIFO: exit $rc (want a failure status)"
    grep -q "fifo.h5: not a regular file (FIFO)" "$T/out" || fail "kcap $c: no clear FIFO message: $(head -c 300 "$T/out")"
done
grep -q "^OK   $h/good.h5" <(timeout 20 "$KCAP" check "$h") || fail "check: the good file beside the FIFO"
rm -f "$h/fifo.h5"
# empty directory: a message and exit 3, not a silent success
mkdir -p "$T/empty"
for c in check ls; do
    "$KCAP" $c "$T/empty" > "$T/out" 2>&1; rc=$?
    [ $rc -eq 3 ] && grep -q "no snapshot files" "$T/out" || fail "kcap $c of an empty dir: exit $rc, '$(cat "$T/out")'"
done
# writer temp files are reported with their writer's state, not hidden
sleep 1000 & live=$!
touch "$h/.kcap-tmp.$live.0.1234" "$h/.kcap-tmp.999999999.3.77"
"$KCAP" check "$h" > "$T/out" 2>&1
grep -q "^TMP  $h/.kcap-tmp.$live.0.1234: .*pid $live (that process is running" "$T/out" || fail "check: live temp file: $(cat "$T/out")"
grep -q "^TMP  $h/.kcap-tmp.999999999.3.77: .*(that process is gone: stale" "$T/out" || fail "check: stale temp file"
"$KCAP" ls "$h" 2> "$T/err" > /dev/null
grep -q "^kcap ls: TMP $h/.kcap-tmp.999999999.3.77: .*stale" "$T/err" || fail "ls: stale temp file: $(cat "$T/err")"
kill $live; rm -f "$h"/.kcap-tmp.*
# check and replay see the same files (one walker): non-.h5 names are not snapshots
echo notes > "$h/README.txt"; mkdir -p "$h/sub"; cp "$T/snaps/b.h5" "$h/sub/"
ln -s "$h" "$h/sub/loop"
nc=$("$KCAP" check "$h" | grep -cE '^(OK|BAD) ')
"$KCAP" replay "$h" --kernel "$CPU" --json "$T/r.json" > /dev/null 2>&1
nr=$(n_cases "$T/r.json")
[ "$nc" -eq 2 ] && [ "$nr" = 2 ] || fail "check ($nc) and replay (${nr:-?}) should both see 2 snapshots"
# terminal escapes stored in metadata are printed escaped
$MKSNAP snap "$h/esc.h5" - 4 $'2026\e]0;pwned\a\e[2J' || fail "mksnap esc"
for c in info ls; do
    "$KCAP" $c "$h/esc.h5" > "$T/out" 2>&1
    grep -q $'\e' "$T/out" && fail "kcap $c prints a raw escape sequence from the file"
    grep -qF '2026\x1b]0;pwned\x07\x1b[2J' "$T/out" || fail "kcap $c: the escaped time string: $(cat "$T/out" | head -3)"
done
# ---- options of every command (cli/kcap_cli_opts.c) ----
G=tests/golden/snapshots/h8_q1_s0.h5
for c in record arm info check ls replay diff dump export; do
    "$KCAP" $c --help > "$T/help" || fail "kcap $c --help exit"
    grep -q -- "-q, --quiet" "$T/help" && grep -q -- "-v, --verbose" "$T/help" ||
        grep -q -- "-q/-v\|\[-q|-v\]" "$T/help" || fail "kcap $c --help does not document -q/-v"
    "$KCAP" $c --bogus x y > "$T/out" 2> "$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -qx "kcap $c: unknown option '--bogus'" "$T/err" &&
        grep -q "kcap $c --help" "$T/err" || fail "kcap $c --bogus: exit $rc, '$(cat "$T/err")'"
    [ -s "$T/out" ] && fail "kcap $c --bogus wrote to stdout"
    "$KCAP" $c --bogus=1 x 2>&1 | grep -qx "kcap $c: unknown option '--bogus'" || fail "kcap $c --bogus=1"
    "$KCAP" $c -Z x 2>&1 | grep -qx "kcap $c: unknown option '-Z'" || fail "kcap $c -Z"
    "$KCAP" $c -qZ x 2>&1 | grep -qx "kcap $c: unknown option '-Z'" || fail "kcap $c -qZ (in a cluster)"
    "$KCAP" $c --help=1 2>&1 | grep -qx "kcap $c: option '--help' takes no value" || fail "kcap $c --help=1"
done
# a missing value names the option; the value may follow as --opt=value or --opt value
needs() { # CMD OPT [ARGS...]: OPT given last, without its value
    local c=$1 o=$2; shift 2
    "$KCAP" $c "$@" "$o" > /dev/null 2> "$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -qx "kcap $c: option '$o' needs a value" "$T/err" ||
        fail "kcap $c $* $o: exit $rc, '$(cat "$T/err")'"
}
needs record --calls -o "$T/r"; needs record -o; needs arm --count 1; needs arm --dir 1
needs replay --kernel "$G" --bench; needs replay --json "$G" --kernel "$CPU"; needs diff --atol "$G" "$G"
needs dump --tensor "$G"; needs export --to "$G"; needs export -o "$G" --to npz
"$KCAP" replay --re x 2>&1 | grep -qx "kcap replay: option '--re' is ambiguous (give more of its name)" ||
    fail "replay: an ambiguous abbreviation"
# both spellings of a value, and abbreviations, give the same result
"$KCAP" replay "$G" --kernel="$CPU" --ref=none --json="$T/eq.json" > /dev/null || fail "replay --opt=value"
"$KCAP" replay "$G" --kern "$CPU" --ref none --json "$T/sp.json" > /dev/null || fail "replay --opt value"
"$PY" -c 'import json,sys; a,b=(json.load(open(p))["cases"][0]["vs_captured"] for p in sys.argv[1:]); assert a==b' \
    "$T/eq.json" "$T/sp.json" || fail "replay: --opt=value and --opt value differ"
"$KCAP" dump "$G" --tensor=lse --limit=3 | grep -q "61 more" && "$KCAP" dump "$G" -t lse -l 3 | grep -q "61 more" ||
    fail "dump --tensor=lse --limit=3 / -t lse -l 3"
"$KCAP" diff --atol=0.5 --rtol 0 "$G" "$G" > /dev/null || fail "diff --atol=0.5"
# -q: only errors and the verdict; -v: per-item detail
[ "$("$KCAP" check -q "$T/snaps")" = "0 of 4 snapshot files bad" ] || fail "check -q: $("$KCAP" check -q "$T/snaps")"
"$KCAP" check -q tests/formats/corpus > "$T/out"; rc=$?
[ $rc -eq 1 ] && ! grep -q '^OK ' "$T/out" && [ "$(grep -c '^BAD ' "$T/out")" -eq "$nbad" ] &&
    tail -1 "$T/out" | grep -qx "$nbad of $((nbad + nok)) snapshot files bad" || fail "check -q of the corpus: $(tail -2 "$T/out")"
[ "$("$KCAP" check -v "$T/snaps" | grep -c 'vattn_verify bs=3 q_len=4 H=8 kv_rows=23')" -eq 4 ] || fail "check -v detail"
"$KCAP" ls -q "$T/snaps" | grep -qx "3 snapshots, [0-9.]* KiB" || fail "ls -q: $("$KCAP" ls -q "$T/snaps")"
[ "$("$KCAP" ls -v "$T/snaps" | grep -c ' host .* pid .* device .* lib ')" -eq 3 ] || fail "ls -v detail"
[ -z "$("$KCAP" info -q "$T/snaps/a.h5")" ] || fail "info -q prints"
"$KCAP" info -q "$T/nope.h5" 2>/dev/null; [ $? -eq 1 ] || fail "info -q of a missing file: exit 1"
"$KCAP" info -v "$T/snaps/a.h5" | grep -q "| kv_cache | input |" || fail "info -v includes the description"
[ -z "$("$KCAP" dump -q "$G")" ] || fail "dump -q prints"
"$KCAP" dump -q "$G" -t nope 2>/dev/null; [ $? -eq 1 ] || fail "dump -q of a missing tensor: exit 1"
[ "$("$KCAP" dump -v "$G" -t lse | grep -c 'more (--limit 0')" -eq 0 ] && "$KCAP" dump -v "$G" -t lse | grep -q "stats:" ||
    fail "dump -v: all values and the stats"
[ "$("$KCAP" diff -q "$G" "$G")" = "snapshots agree (within tolerance)" ] || fail "diff -q: $("$KCAP" diff -q "$G" "$G")"
"$KCAP" diff -q "$G" tests/golden/snapshots/h16_q8_s1.h5 > "$T/out"; rc=$?
[ $rc -eq 1 ] && [ "$(cat "$T/out")" = "snapshots differ" ] || fail "diff -q of differing files: $rc $(cat "$T/out")"
"$KCAP" replay -q "$G" --kernel "$CPU" --ref none > "$T/out" || fail "replay -q exit"
[ "$(wc -l < "$T/out")" -eq 1 ] && grep -q "^1 case: 1 passed" "$T/out" || fail "replay -q: $(cat "$T/out")"
[ "$("$KCAP" replay -v "$G" --kernel "$CPU" --ref none | grep -c '^      vs captured  \(o\|lse\) ')" -eq 2 ] ||
    fail "replay -v: a line per output"
"$KCAP" record -v -o "$T/rec" --max=1 -- true 2> "$T/err" || fail "record -v exit"
grep -qx "kcap record: KCAP_MAX=1" "$T/err" && grep -q "^kcap record: LD_PRELOAD=.*libkcap.so" "$T/err" &&
    grep -qx "kcap record: KCAP_LOG=info" "$T/err" || fail "record -v: $(cat "$T/err")"
"$KCAP" record -q -o "$T/rec" -- sh -c 'echo "$KCAP_LOG"' | grep -qx quiet || fail "record -q sets KCAP_LOG=quiet"
"$KCAP" record -q --log=warn -o "$T/rec" -- sh -c 'echo "$KCAP_LOG"' | grep -qx warn || fail "record: --log wins over -q"
"$KCAP" record -o "$T/rec" -- sh -c 'echo "$1"' sh --bogus | grep -qx -- --bogus || fail "record: CMD's own options are CMD's"
"$KCAP" record -o "$T/rec" sh -c 'exit 3'; [ $? -eq 3 ] || fail "record: CMD without --"
# ("-" as a written file: replay/diff --json/--junit and export -o are in tests/python, which
#  a sanitizer build does not run: Python cannot load its instrumented libkcapfmt.so)
finish "cli ok"
