#!/usr/bin/env bash
# ab_kernels.sh — the serving bench of this tree's kernels against earlier commits' kernels, on
# one machine instance in one device call (run to run, a fresh instance moves the serving rows
# by ±1 µs: a before / after pair measured on two instances says little). Not a make target.
#
#   here:        bash scripts/ab_kernels.sh prep REV...   kernels/ of each REV into build/ab/REV/
#   the device:  bash scripts/ab_kernels.sh run REV...    (device tool, carry ["build/ab"])
#   anywhere:    bash scripts/ab_kernels.sh table DIR NAME...   the table again from DIR/serving_NAME.log
#
# run builds this checkout (NVCC_ARCH, default sm_90) and, for each REV, a copy of it with
# kernels/ replaced by that commit's (the harness, tests/kernels/, stays this tree's), runs
# `vattn_dev --serving` on each, then this tree again (the spread), into $OUT (or build/ab-out),
# and prints graph-cold µs per row side by side. Written after the eleventh session's device
# runs, which took these steps by hand (docs/PERF.md, issue 16 eleventh session). `prep` and
# `table` are tested by tests/kernels/test_ab_kernels.sh (make test); `run` ran on the device
# for the A/B tables of docs/PERF.md (issue 16, twenty-first and twenty-second sessions).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
# The table: graph-cold µs per row (the serving table's 8th column) of OUT/serving_NAME.log,
# one column per NAME, rows as in the first.
table() {
    local out=$1 rows_re='^\| (serving|long|waves) '
    shift
    printf "| bs,H,q,prefix |"; for n in "$@"; do printf " %s |" "$n"; done; echo
    printf "|---|"; for _ in "$@"; do printf -- "---|"; done; echo
    grep -E "$rows_re" "$out/serving_$1.log" | awk -F'|' '{k=$3","$4","$5","$6; gsub(/ /, "", k); print k}' |
        while read -r row; do
            printf "| %s |" "$row"
            for n in "$@"; do
                v=$(grep -E "$rows_re" "$out/serving_$n.log" 2>/dev/null |
                    awk -F'|' -v r="$row" '{k=$3","$4","$5","$6; gsub(/ /, "", k); if (k == r) {gsub(/ /, "", $9); print $9}}')
                printf " %s |" "${v:--}"
            done
            echo
        done
}

case $mode in
table) # OUT NAME...: the table again from logs already there
    [ $# -gt 1 ] || { echo "usage: $0 table OUT NAME..." >&2; exit 2; }
    table "$@" ;;
prep)
    [ $# -gt 0 ] || { echo "usage: $0 prep REV..." >&2; exit 2; }
    for rev in "$@"; do
        git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "$0: $rev: not a commit" >&2; exit 1; }
        rm -rf "build/ab/$rev" && mkdir -p "build/ab/$rev"
        git archive "$rev" kernels | tar -x -C "build/ab/$rev" || exit 1
        echo "build/ab/$rev/kernels ($(git log -1 --format='%h %s' "$rev" | cut -c1-70))"
    done ;;
run)
    [ $# -gt 0 ] || { echo "usage: $0 run REV..." >&2; exit 2; }
    out=${OUT:-build/ab-out}
    mkdir -p "$out" && out=$(cd "$out" && pwd) # the copies write here too
    export NVCC_ARCH=${NVCC_ARCH:-sm_90}
    t0=$(date +%s)
    build() { make -j"$(nproc)" build/lib/libverify_attn.so build/tests/vattn_dev >"$out/build_$1.log" 2>&1 ||
              { echo "build of $1 failed:"; tail -20 "$out/build_$1.log"; return 1; }; }
    bench() { timeout 300 build/tests/vattn_dev --serving >"$out/serving_$1.log" 2>&1 ||
              { echo "vattn_dev --serving of $1 failed:"; tail -5 "$out/serving_$1.log"; return 1; }; }
    build tree && bench tree || exit 1
    names=(tree)
    for rev in "$@"; do
        [ -d "build/ab/$rev/kernels" ] || { echo "build/ab/$rev/kernels missing: $0 prep $rev first (carry build/ab)"; exit 1; }
        d=/tmp/ab_$rev
        rm -rf "$d" && mkdir -p "$d"
        tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$d"
        rm -rf "$d/kernels" && cp -r "build/ab/$rev/kernels" "$d/kernels"
            (cd "$d" && build "$rev" && bench "$rev")
        names+=("$rev")
        echo "$rev done ($(( $(date +%s) - t0 )) s)"
    done
    bench tree2 && names+=(tree2)
    table "$out" "${names[@]}"
    echo "total $(( $(date +%s) - t0 )) s" ;;
*)
    echo "usage: $0 prep REV... | run REV... | table DIR NAME..." >&2
    exit 2 ;;
esac
