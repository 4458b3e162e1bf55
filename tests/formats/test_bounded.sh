#!/usr/bin/env bash
# test_bounded.sh — a tiny valid file that declares a huge tensor (2 GiB of zeros in a file
# of about 120 KiB): `kcap check` must verify it through bounded buffers (FORMAT.md "Reader
# limits"), not allocate what it declares; `kcap info` must not read the data at all.
# (KCAP_TEST_KCAP, as for every test: run the checks against another build's kcap.)
. "$(dirname "$0")/../lib.sh"
MKSNAP=$B/tests/formats/tool_mksnap
$MKSNAP zeros "$T/z.h5" 2048 || die "tool_mksnap zeros"
size=$(stat -c %s "$T/z.h5")
[ "$size" -lt 1048576 ] || fail "the zeros file should be tiny (is $size bytes)"
maxrss() { # peak resident KiB of a command (the children of this python)
    "$PY" -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r)' "$@"
}
read -r kib rc < <(maxrss "$KCAP" check "$T/z.h5")
echo "kcap check of a $size-byte file declaring 2 GiB: exit $rc, peak RSS $kib KiB"
[ "$rc" -eq 0 ] || fail "kcap check of the valid zeros file: exit $rc"
[ "$kib" -lt 400000 ] || fail "kcap check peak RSS $kib KiB: the declared size was allocated"
read -r kib rc < <(maxrss "$KCAP" info "$T/z.h5")
[ "$rc" -eq 0 ] && [ "$kib" -lt 200000 ] || fail "kcap info: exit $rc, peak RSS $kib KiB"
# a limit below the declared size refuses it, naming the limit
KCAP_READ_MAX_BYTES=1000000000 "$KCAP" check "$T/z.h5" > "$T/out"; rc=$?
[ $rc -eq 1 ] && grep -q "KCAP_READ_MAX_BYTES" "$T/out" || fail "KCAP_READ_MAX_BYTES not enforced: $(cat "$T/out")"
# the default limit leaves the machine its memory: a file declaring 40% of physical memory is
# refused without the variable (reading and rebuilding it would take about twice that)
phys_mib=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
big=$((phys_mib * 2 / 5))
$MKSNAP zeros "$T/big.h5" "$big" || fail "tool_mksnap zeros $big"
env -u KCAP_READ_MAX_BYTES "$KCAP" check "$T/big.h5" > "$T/big.out"; rc=$?
[ $rc -eq 1 ] && grep -q "KCAP_READ_MAX_BYTES" "$T/big.out" &&
    echo "a file declaring $big MiB (40% of memory) refused by default" ||
    fail "a file declaring 40% of physical memory was not refused by default (exit $rc): $(head -3 "$T/big.out")"
finish "bounded ok"
