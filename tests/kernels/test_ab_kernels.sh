#!/usr/bin/env bash
# test_ab_kernels.sh — scripts/ab_kernels.sh's GPU-free verbs (make test), in a scratch git
# repository holding a copy of the script: `prep REV...` puts each commit's kernels/ (and only
# that) under build/ab/REV, a name that is not a commit is refused with the name and exit 1,
# no REV is a usage error; `table OUT NAME...` prints each row's graph-cold column (the serving
# table's 8th) side by side, "-" where a log lacks the row, rows in the first log's order.
# `run` needs nvcc and a GPU (the device tool): not tested here.
. "$(dirname "$0")/../lib.sh"
command -v git >/dev/null || skip "no git: skipped"
r=$T/repo
mkdir -p "$r/scripts" "$r/kernels" "$r/docs"
cp scripts/ab_kernels.sh "$r/scripts/"
g() { git -C "$r" -c user.name=t -c user.email=t@t -c commit.gpgsign=false "$@"; }
g init -q
echo "one" >"$r/kernels/k.cu"
echo "doc one" >"$r/docs/d.md"
g add -A && g commit -qm one
rev1=$(g rev-parse --short HEAD)
echo "two" >"$r/kernels/k.cu"
g commit -qam two
rev2=$(g rev-parse --short HEAD)

ab() { (cd "$r" && bash scripts/ab_kernels.sh "$@"); }
out=$(ab prep "$rev1" "$rev2" 2>&1) || fail "prep of two commits failed: $out"
[ "$(cat "$r/build/ab/$rev1/kernels/k.cu" 2>/dev/null)" = one ] && ok "prep: $rev1's kernels/" ||
    fail "prep: build/ab/$rev1/kernels/k.cu is not rev1's"
[ "$(cat "$r/build/ab/$rev2/kernels/k.cu" 2>/dev/null)" = two ] && ok "prep: $rev2's kernels/" ||
    fail "prep: build/ab/$rev2/kernels/k.cu is not rev2's"
[ ! -e "$r/build/ab/$rev1/docs" ] && ok "prep copies kernels/ only" || fail "prep copied more than kernels/"
ab prep nosuchrev >"$T/e1" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "nosuchrev: not a commit" "$T/e1" && ok "a name that is not a commit: exit 1, named" ||
    fail "non-commit: rc $rc, $(cat "$T/e1")"
ab prep >"$T/e2" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "usage" "$T/e2" && ok "prep without REV: usage, exit 2" || fail "prep without REV: rc $rc"

o=$T/out
mkdir -p "$o"
{
    echo "serving bench on some GPU"
    echo "| serving | 1 | 8 | 2 | 512 | 10.1 | 8.7 | 7.5 | 0.2 | x |"
    echo "| long | 4 | 64 | 16 | 32768 | 1006.5 | 993.6 | 1010.8 | 449.5 | x |"
    echo "| waves | 4 | 16 | 2 | 1024 | 12.7 | 12.2 | 11.7 | 1.7 | x |"
} >"$o/serving_A.log"
{
    echo "| long | 4 | 64 | 16 | 32768 | 1300.0 | 1290.0 | 1267.0 | 449.5 | x |"
    echo "| serving | 1 | 8 | 2 | 512 | 9.9 | 8.5 | 7.2 | 0.2 | x |"
} >"$o/serving_B.log"
t=$(ab table "$o" A B 2>&1) || fail "table failed: $t"
echo "$t" | sed 's/^/    /'
expect() { echo "$t" | grep -qxF -- "$1" && ok "$2" || fail "$2: no line '$1'"; }
expect "| bs,H,q,prefix | A | B |" "header names the logs"
expect "| 1,8,2,512 | 7.5 | 7.2 |" "graph-cold column side by side"
expect "| 4,64,16,32768 | 1010.8 | 1267.0 |" "rows matched by shape, not by position"
expect "| 4,16,2,1024 | 11.7 | - |" "a row one log lacks: -"
[ "$(echo "$t" | grep -c '^| [0-9]')" -eq 3 ] && ok "one line per row of the first log" || fail "row count"
ab table "$o" >"$T/e3" 2>&1
rc=$?
[ $rc -eq 2 ] && ok "table without NAME: usage, exit 2" || fail "table without NAME: rc $rc"
finish
