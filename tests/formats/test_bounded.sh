#!/usr/bin/env bash
# test_bounded.sh — a tiny valid file that declares a huge tensor (2 GiB of zeros in a file
# of about 120 KiB): `kcap check` must verify it through bounded buffers (FORMAT.md "Reader
# limits"), not allocate what it declares; `kcap info` must not read the data at all.
set -u
B=${KCAP_BUILD:-build}
K=${KCAP_BIN:-$B/bin/kcap} # KCAP_BIN: run the checks against another build
PY=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
$B/tests/formats/tool_mksnap zeros "$work/z.h5" 2048 || { echo "FAIL: tool_mksnap zeros"; exit 1; }
size=$(stat -c %s "$work/z.h5")
[ "$size" -lt 1048576 ] || bad "the zeros file should be tiny (is $size bytes)"
maxrss() { # peak resident KiB of a command (the children of this python)
    "$PY" -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r)' "$@"
}
read -r kib rc < <(maxrss "$K" check "$work/z.h5")
echo "kcap check of a $size-byte file declaring 2 GiB: exit $rc, peak RSS $kib KiB"
[ "$rc" -eq 0 ] || bad "kcap check of the valid zeros file: exit $rc"
[ "$kib" -lt 400000 ] || bad "kcap check peak RSS $kib KiB: the declared size was allocated"
read -r kib rc < <(maxrss "$K" info "$work/z.h5")
[ "$rc" -eq 0 ] && [ "$kib" -lt 200000 ] || bad "kcap info: exit $rc, peak RSS $kib KiB"
# a limit below the declared size refuses it, naming the limit
KCAP_READ_MAX_BYTES=1000000000 $K check "$work/z.h5" > "$work/out"; rc=$?
[ $rc -eq 1 ] && grep -q "KCAP_READ_MAX_BYTES" "$work/out" || bad "KCAP_READ_MAX_BYTES not enforced: $(cat "$work/out")"
# the default limit leaves the machine its memory: a file declaring 40% of physical memory is
# refused without the variable (reading and rebuilding it would take about twice that)
phys_mib=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
big=$((phys_mib * 2 / 5))
$B/tests/formats/tool_mksnap zeros "$work/big.h5" "$big" || bad "tool_mksnap zeros $big"
env -u KCAP_READ_MAX_BYTES $K check "$work/big.h5" > "$work/big.out"; rc=$?
[ $rc -eq 1 ] && grep -q "KCAP_READ_MAX_BYTES" "$work/big.out" &&
    echo "a file declaring $big MiB (40% of memory) refused by default" ||
    bad "a file declaring 40% of physical memory was not refused by default (exit $rc): $(head -3 "$work/big.out")"
[ $fail -eq 0 ] && echo "bounded ok"
exit $fail
