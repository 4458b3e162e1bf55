#!/usr/bin/env bash
# test_report_names.sh — snapshot file names are bytes, not text: a name holding a byte that
# is not UTF-8 (\xff) or control bytes (ESC, newline) must not break the machine-readable
# documents nor reach a terminal raw (CI).
#
# Two valid snapshots from kcap_gen_snap, copied under hostile names beside one with a
# well-formed UTF-8 name. Each step a claim:
#   1  `kcap replay --json` parses as UTF-8 JSON: the bad byte reads as the text \xff, control
#      characters come back exactly (JSON escapes them), UTF-8 names unchanged
#   2  `kcap replay --junit` is well-formed XML with the same names (control bytes as \xNN)
#   3  `kcap diff DIR DIR --json/--junit` (pairs) and `kcap diff DIR OTHER --json/--junit`
#      (the ESC name paired by call+seq, the other two only_in_a) parse the same way
#   4  the terminal output of replay, diff (header, rows, "only in" lines; two files' header)
#      and dump carries no
#      raw ESC, newline inside a name or \xff byte: the names show as \x1b, \x0a, \xff, as
#      check, ls and replay print them (kcap_printable)
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
require "$KCAP" "$GEN" "$CPU"

"$GEN" --lib "$CPU" --out "$T/gen" --count 2 --seed 1 >"$T/gen.log" 2>&1 ||
    { cat "$T/gen.log"; die "generator"; }
D=$T/names
mkdir "$D"
BAD=$(printf 'a\xff.h5')         # not UTF-8
ESC=$(printf 'e\033[2J\nx.h5')   # clears a terminal; a newline inside the name
UTF=$(printf 'caf\xc3\xa9.h5')   # well-formed UTF-8: kept as is in the documents
cp "$T/gen/snap-0000.h5" "$D/$BAD" && cp "$T/gen/snap-0001.h5" "$D/$ESC" &&
    cp "$T/gen/snap-0000.h5" "$D/$UTF" || die "copying the snapshots"

# no_raw FILE WHAT: FILE holds no ESC and no \xff byte, and shows the names escaped
no_raw() {
    "$PY" - "$1" <<'EOF' && ok "$2: names escaped" || fail "$2: a name printed raw"
import sys
b = open(sys.argv[1], "rb").read()
assert b"\x1b" not in b and b"\xff" not in b, "raw ESC or \\xff byte"
assert b"\nx.h5" not in b, "raw newline inside a name"
EOF
}

# ---- 1, 2: replay --json / --junit -----------------------------------------------------
"$KCAP" replay "$D" --kernel "$CPU" --json "$T/r.json" --junit "$T/r.xml" >"$T/r.out" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "replay of the renamed snapshots (exit 0)" || { fail "replay: exit $rc"; cat -v "$T/r.out"; }
"$PY" - "$T/r.json" "$D" <<'EOF' && ok "replay --json parses, names as documented" || fail "replay --json"
import json, sys
d = json.load(open(sys.argv[1], "rb"))   # bytes: json decodes them as UTF-8, strictly
names = sorted(c["name"] for c in d["cases"])
want = sorted(["a\\xff.h5", "e\x1b[2J\nx.h5", "caf\u00e9.h5"])
assert names == want, names
assert all(c["file"] == sys.argv[2] + "/" + c["name"] for c in d["cases"])
assert d["pass"] is True
EOF
"$PY" - "$T/r.xml" <<'EOF' && ok "replay --junit is well-formed XML, names escaped" || fail "replay --junit"
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
names = sorted(t.get("name") for t in r.iter("testcase"))
assert names == sorted(["a\\xff.h5", "e\\x1b[2J\nx.h5", "caf\u00e9.h5"]), names
EOF
no_raw "$T/r.out" "replay table"

# ---- 3: diff --json / --junit ----------------------------------------------------------
# diff_case TAG OTHER WANT_RC LABEL CODE: `kcap diff $D OTHER --json --junit` into $T/TAG.*,
# its exit status, both documents parsed by the Python CODE (argv: json, xml), its table escaped
diff_case() {
    local tag=$1 other=$2 want=$3 label=$4 code=$5 rc
    "$KCAP" diff "$D" "$other" --json "$T/$tag.json" --junit "$T/$tag.xml" >"$T/$tag.out" 2>&1
    rc=$?
    [ $rc -eq "$want" ] && ok "diff, $label (exit $want)" || { fail "diff, $label: exit $rc, want $want"; cat -v "$T/$tag.out"; }
    "$PY" -c "$code" "$T/$tag.json" "$T/$tag.xml" && ok "diff --json / --junit parse ($label)" ||
        fail "diff --json / --junit ($label)"
    no_raw "$T/$tag.out" "diff table ($label)"
}
diff_case d "$D" 0 "pairs" '
import json, sys, xml.etree.ElementTree as E
d = json.load(open(sys.argv[1], "rb"))
assert d["same"] is True and len(d["pairs"]) == 3, d["summary"]
a = sorted(p["diff"]["a"].rsplit("/", 1)[1] for p in d["pairs"])
assert a == sorted(["a\\xff.h5", "e\x1b[2J\nx.h5", "caf\u00e9.h5"]), a
assert len(list(E.parse(sys.argv[2]).getroot().iter("testcase"))) == 3
'
diff_case o "$T/gen" 1 "only in" '
import json, sys, xml.etree.ElementTree as E
d = json.load(open(sys.argv[1], "rb"))
a = sorted(p.rsplit("/", 1)[1] for p in d["only_in_a"])
assert a == sorted(["a\\xff.h5", "caf\u00e9.h5"]), a
assert [p["diff"]["a"].rsplit("/", 1)[1] for p in d["pairs"]] == ["e\x1b[2J\nx.h5"], d["pairs"]
assert len(list(E.parse(sys.argv[2]).getroot().iter("testcase"))) == 4
'
grep -qF '  e\x1b[2J\x0ax.h5 ' "$T/o.out" && grep -qF 'only in a: '"$D"'/a\xff.h5' "$T/o.out" ||
    { fail "diff does not show the names as \\xNN"; cat -v "$T/o.out"; }
# the header names the folders escaped
mkdir "$T/$ESC"
cp "$T/gen/snap-0000.h5" "$T/$ESC/"
"$KCAP" diff "$T/$ESC" "$T/gen" >"$T/h.out" 2>&1
no_raw "$T/h.out" "diff header"

# the single-file diff's header names both files escaped
"$KCAP" diff "$D/$ESC" "$D/$BAD" >"$T/f.out" 2>&1
no_raw "$T/f.out" "diff of two files (header)"

# ---- 4: dump ---------------------------------------------------------------------------
"$KCAP" dump "$D/$ESC" >"$T/dump.out" 2>&1 || fail "dump: exit $?"
no_raw "$T/dump.out" "dump"
head -1 "$T/dump.out" | grep -qF "$D"'/e\x1b[2J\x0ax.h5: ' || { fail "dump's first line"; head -2 "$T/dump.out" | cat -v; }
"$KCAP" dump "$D/$BAD" --tensor nosuch >"$T/dump2.out" 2>&1
no_raw "$T/dump2.out" "dump's error"

finish
