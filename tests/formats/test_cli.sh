#!/usr/bin/env bash
# test_cli.sh — `kcap info` (text and --json), `kcap check` (files and directories, OK/BAD
# lines, exit status) and `kcap ls` (one line per snapshot, sorted by time then seq), and
# --help / usage errors of each; then the option parsing every command shares (getopt_long:
# --opt=value, unknown options, missing values, -q / -v) across all nine commands.
set -u
B=${KCAP_BUILD:-build}
K=$B/bin/kcap
PY=${PYTHON:-/usr/bin/python3}
[ -x "$K" ] || { echo "FAIL: $K not built"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
T=$B/tests/formats/tool_mksnap
mkdir -p "$work/snaps/sub"
$T snap "$work/snaps/c.h5" - 5 2026-03-01T10:00:00.000Z || bad "mksnap"
$T snap "$work/snaps/a.h5" - 9 2026-03-01T09:00:00.000Z || bad "mksnap"
$T snap "$work/snaps/b.h5" - 2 2026-03-01T10:00:00.000Z || bad "mksnap"
$T snap "$work/snaps/sub/d.h5" - 1 2026-03-02T00:00:00.000Z || bad "mksnap"

for c in info check ls; do
    $K $c --help | grep -q "usage: kcap $c" || bad "kcap $c --help"
    $K $c >/dev/null 2>&1; [ $? -eq 2 ] || bad "kcap $c without arguments should exit 2"
done

out=$($K info "$work/snaps/a.h5") || bad "kcap info exit"
for w in "vattn_verify" "seq 9" "2026-03-01T09:00:00.000Z" "kv_cache" "bfloat16" "[22,576]" "ratio" "total" "rank 3"; do
    grep -qF -- "$w" <<<"$out" || bad "kcap info lacks '$w'"
done
$K info --json "$work/snaps/a.h5" > "$work/a.json" || bad "info --json exit"
$PY - "$work/a.json" <<'PYEOF' || bad "info --json content"
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
assert t["kv_cache"]["shape"] == [22, 576] and t["kv_cache"]["dtype"] == "bfloat16"
assert t["q"]["strides"] == [8 * 600 + 40, 600, 1], t["q"]
assert j["raw_bytes"] == sum(x["raw_bytes"] for x in j["tensors"]) and j["ratio"] > 1
assert j["scalars"]["sm_scale"] == 0.0625
PYEOF
$K info --desc "$work/snaps/a.h5" | grep -q "| kv_cache | input |" || bad "info --desc"
$K info "$work/nope.h5" 2>"$work/err"; [ $? -eq 1 ] && grep -q "nope.h5" "$work/err" || bad "info of a missing file"

$K check "$work/snaps" > "$work/check" || bad "check of a good directory"
[ "$(grep -c '^OK ' "$work/check")" -eq 4 ] || bad "check should list 4 OK files: $(cat "$work/check")"
$K check tests/formats/corpus > "$work/check2"; rc=$?
[ $rc -eq 1 ] || bad "check of the corrupt corpus should exit 1 (got $rc)"
nbad=$(ls tests/formats/corpus | grep -c '^bad-'); nok=$(ls tests/formats/corpus | grep -c '^ok-')
[ "$(grep -c '^BAD ' "$work/check2")" -eq "$nbad" ] || bad "check: want $nbad BAD lines"
[ "$(grep -c '^OK ' "$work/check2")" -eq "$nok" ] || bad "check: want $nok OK lines"
grep -q "^BAD  tests/formats/corpus/bad-truncated.h5: truncated" "$work/check2" || bad "check names the reason"
cat "$work/check2"

out=$($K ls "$work/snaps") || bad "ls exit"
echo "$out"
order=$(echo "$out" | tail -n +2 | awk '{print $2}' | tr '\n' ' ')
[ "$order" = "9 2 5 " ] || bad "ls order by time then seq: got '$order'"
echo "$out" | grep -q "bs=3 q_len=4 H=8 kv_rows=22" || bad "ls shape summary"
[ "$($K ls -r "$work/snaps" | tail -n +2 | wc -l)" -eq 4 ] || bad "ls -r"
$K ls tests/formats/corpus >/dev/null 2>&1; [ $? -eq 1 ] || bad "ls with bad files exits 1"

# ---- hostile directories: every reader command, none may hang or crash ----
CPU=$B/lib/libverify_attn_cpu.so
h=$work/hostile; mkdir -p "$h"
cp "$work/snaps/a.h5" "$h/good.h5"
mkfifo "$h/fifo.h5"
for c in "info $h/fifo.h5" "check $h" "ls $h" "replay $h --kernel $CPU" "diff $h/fifo.h5 $h/good.h5"; do
    timeout 20 $K $c > "$work/out" 2>&1; rc=$?
    [ $rc -eq 124 ] && bad "kcap $c hangs on a FIFO"
    [ $rc -ge 1 ] && [ $rc -le 3 ] || bad "kcap $c with a FIFO: exit $rc (want a failure status)"
    grep -q "fifo.h5: not a regular file (FIFO)" "$work/out" || bad "kcap $c: no clear FIFO message: $(head -c 300 "$work/out")"
done
grep -q "^OK   $h/good.h5" <(timeout 20 $K check "$h") || bad "check: the good file beside the FIFO"
rm -f "$h/fifo.h5"
# empty directory: a message and exit 3, not a silent success
mkdir -p "$work/empty"
for c in check ls; do
    $K $c "$work/empty" > "$work/out" 2>&1; rc=$?
    [ $rc -eq 3 ] && grep -q "no snapshot files" "$work/out" || bad "kcap $c of an empty dir: exit $rc, '$(cat "$work/out")'"
done
# writer temp files are reported with their writer's state, not hidden
sleep 1000 & live=$!
touch "$h/.kcap-tmp.$live.0.1234" "$h/.kcap-tmp.999999999.3.77"
$K check "$h" > "$work/out" 2>&1
grep -q "^TMP  $h/.kcap-tmp.$live.0.1234: .*pid $live (that process is running" "$work/out" || bad "check: live temp file: $(cat "$work/out")"
grep -q "^TMP  $h/.kcap-tmp.999999999.3.77: .*(that process is gone: stale" "$work/out" || bad "check: stale temp file"
$K ls "$h" 2> "$work/err" > /dev/null
grep -q "^kcap ls: TMP $h/.kcap-tmp.999999999.3.77: .*stale" "$work/err" || bad "ls: stale temp file: $(cat "$work/err")"
kill $live; rm -f "$h"/.kcap-tmp.*
# check and replay see the same files (one walker): non-.h5 names are not snapshots
echo notes > "$h/README.txt"; mkdir -p "$h/sub"; cp "$work/snaps/b.h5" "$h/sub/"
ln -s "$h" "$h/sub/loop"
nc=$($K check "$h" | grep -cE '^(OK|BAD) ')
$K replay "$h" --kernel "$CPU" --json "$work/r.json" > /dev/null 2>&1
nr=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$work/r.json" 2>/dev/null)
[ "$nc" -eq 2 ] && [ "$nr" = 2 ] || bad "check ($nc) and replay (${nr:-?}) should both see 2 snapshots"
# terminal escapes stored in metadata are printed escaped
$T snap "$h/esc.h5" - 4 $'2026\e]0;pwned\a\e[2J' || bad "mksnap esc"
for c in info ls; do
    $K $c "$h/esc.h5" > "$work/out" 2>&1
    grep -q $'\e' "$work/out" && bad "kcap $c prints a raw escape sequence from the file"
    grep -qF '2026\x1b]0;pwned\x07\x1b[2J' "$work/out" || bad "kcap $c: the escaped time string: $(cat "$work/out" | head -3)"
done
# ---- options of every command (cli/kcap_cli_opts.c) ----
G=tests/golden/snapshots/h8_q1_s0.h5
for c in record arm info check ls replay diff dump export; do
    $K $c --help > "$work/help" || bad "kcap $c --help exit"
    grep -q -- "-q, --quiet" "$work/help" && grep -q -- "-v, --verbose" "$work/help" ||
        grep -q -- "-q/-v\|\[-q|-v\]" "$work/help" || bad "kcap $c --help does not document -q/-v"
    $K $c --bogus x y > "$work/out" 2> "$work/err"; rc=$?
    [ $rc -eq 2 ] && grep -qx "kcap $c: unknown option '--bogus'" "$work/err" &&
        grep -q "kcap $c --help" "$work/err" || bad "kcap $c --bogus: exit $rc, '$(cat "$work/err")'"
    [ -s "$work/out" ] && bad "kcap $c --bogus wrote to stdout"
    $K $c --bogus=1 x 2>&1 | grep -qx "kcap $c: unknown option '--bogus'" || bad "kcap $c --bogus=1"
    $K $c -Z x 2>&1 | grep -qx "kcap $c: unknown option '-Z'" || bad "kcap $c -Z"
    $K $c -qZ x 2>&1 | grep -qx "kcap $c: unknown option '-Z'" || bad "kcap $c -qZ (in a cluster)"
    $K $c --help=1 2>&1 | grep -qx "kcap $c: option '--help' takes no value" || bad "kcap $c --help=1"
done
# a missing value names the option; the value may follow as --opt=value or --opt value
needs() { # CMD OPT [ARGS...]: OPT given last, without its value
    local c=$1 o=$2; shift 2
    $K $c "$@" "$o" > /dev/null 2> "$work/err"; rc=$?
    [ $rc -eq 2 ] && grep -qx "kcap $c: option '$o' needs a value" "$work/err" ||
        bad "kcap $c $* $o: exit $rc, '$(cat "$work/err")'"
}
needs record --calls -o "$work/r"; needs record -o; needs arm --count 1; needs arm --dir 1
needs replay --kernel "$G" --bench; needs replay --json "$G" --kernel "$CPU"; needs diff --atol "$G" "$G"
needs dump --tensor "$G"; needs export --to "$G"; needs export -o "$G" --to npz
$K replay --re x 2>&1 | grep -qx "kcap replay: option '--re' is ambiguous (give more of its name)" ||
    bad "replay: an ambiguous abbreviation"
# both spellings of a value, and abbreviations, give the same result
$K replay "$G" --kernel="$CPU" --ref=none --json="$work/eq.json" > /dev/null || bad "replay --opt=value"
$K replay "$G" --kern "$CPU" --ref none --json "$work/sp.json" > /dev/null || bad "replay --opt value"
"$PY" -c 'import json,sys; a,b=(json.load(open(p))["cases"][0]["vs_captured"] for p in sys.argv[1:]); assert a==b' \
    "$work/eq.json" "$work/sp.json" || bad "replay: --opt=value and --opt value differ"
$K dump "$G" --tensor=lse --limit=3 | grep -q "61 more" && $K dump "$G" -t lse -l 3 | grep -q "61 more" ||
    bad "dump --tensor=lse --limit=3 / -t lse -l 3"
$K diff --atol=0.5 --rtol 0 "$G" "$G" > /dev/null || bad "diff --atol=0.5"
# -q: only errors and the verdict; -v: per-item detail
[ "$($K check -q "$work/snaps")" = "0 of 4 snapshot files bad" ] || bad "check -q: $($K check -q "$work/snaps")"
$K check -q tests/formats/corpus > "$work/out"; rc=$?
[ $rc -eq 1 ] && ! grep -q '^OK ' "$work/out" && [ "$(grep -c '^BAD ' "$work/out")" -eq "$nbad" ] &&
    tail -1 "$work/out" | grep -qx "$nbad of $((nbad + nok)) snapshot files bad" || bad "check -q of the corpus: $(tail -2 "$work/out")"
[ "$($K check -v "$work/snaps" | grep -c 'vattn_verify bs=3 q_len=4 H=8 kv_rows=22')" -eq 4 ] || bad "check -v detail"
$K ls -q "$work/snaps" | grep -qx "3 snapshots, [0-9.]* KiB" || bad "ls -q: $($K ls -q "$work/snaps")"
[ "$($K ls -v "$work/snaps" | grep -c ' host .* pid .* device .* lib ')" -eq 3 ] || bad "ls -v detail"
[ -z "$($K info -q "$work/snaps/a.h5")" ] || bad "info -q prints"
$K info -q "$work/nope.h5" 2>/dev/null; [ $? -eq 1 ] || bad "info -q of a missing file: exit 1"
$K info -v "$work/snaps/a.h5" | grep -q "| kv_cache | input |" || bad "info -v includes the description"
[ -z "$($K dump -q "$G")" ] || bad "dump -q prints"
$K dump -q "$G" -t nope 2>/dev/null; [ $? -eq 1 ] || bad "dump -q of a missing tensor: exit 1"
[ "$($K dump -v "$G" -t lse | grep -c 'more (--limit 0')" -eq 0 ] && $K dump -v "$G" -t lse | grep -q "stats:" ||
    bad "dump -v: all values and the stats"
[ "$($K diff -q "$G" "$G")" = "snapshots agree (within tolerance)" ] || bad "diff -q: $($K diff -q "$G" "$G")"
$K diff -q "$G" tests/golden/snapshots/h16_q8_s1.h5 > "$work/out"; rc=$?
[ $rc -eq 1 ] && [ "$(cat "$work/out")" = "snapshots differ" ] || bad "diff -q of differing files: $rc $(cat "$work/out")"
$K replay -q "$G" --kernel "$CPU" --ref none > "$work/out" || bad "replay -q exit"
[ "$(wc -l < "$work/out")" -eq 1 ] && grep -q "^1 case: 1 passed" "$work/out" || bad "replay -q: $(cat "$work/out")"
[ "$($K replay -v "$G" --kernel "$CPU" --ref none | grep -c '^      vs captured  \(o\|lse\) ')" -eq 2 ] ||
    bad "replay -v: a line per output"
$K record -v -o "$work/rec" --max=1 -- true 2> "$work/err" || bad "record -v exit"
grep -qx "kcap record: KCAP_MAX=1" "$work/err" && grep -q "^kcap record: LD_PRELOAD=.*libkcap.so" "$work/err" &&
    grep -qx "kcap record: KCAP_LOG=info" "$work/err" || bad "record -v: $(cat "$work/err")"
$K record -q -o "$work/rec" -- sh -c 'echo "$KCAP_LOG"' | grep -qx quiet || bad "record -q sets KCAP_LOG=quiet"
$K record -q --log=warn -o "$work/rec" -- sh -c 'echo "$KCAP_LOG"' | grep -qx warn || bad "record: --log wins over -q"
$K record -o "$work/rec" -- sh -c 'echo "$1"' sh --bogus | grep -qx -- --bogus || bad "record: CMD's own options are CMD's"
$K record -o "$work/rec" sh -c 'exit 3'; [ $? -eq 3 ] || bad "record: CMD without --"
# ("-" as a written file: replay/diff --json/--junit and export -o are in tests/python, which
#  a sanitizer build does not run: Python cannot load its instrumented libkcapfmt.so)
[ $fail -eq 0 ] && echo "cli ok"
exit $fail
