#!/usr/bin/env bash
# bench_dormant.sh — dormant overhead of libkcap.so per call, both bindings (dynamic linker
# and dlopen+dlsym), against no preload, over libvattn_null.so (returns at once). Prints
# ns/call and the difference; docs/PERF.md, Capture records the figures. Target <= 20 ns.
. "$(dirname "$0")/lib.sh"
BENCH=$ROOT/$B/tests/capture/bench_dormant
need "$BENCH" "$NULLLIB" "$LIBKCAP"
N=${N:-20000000}
base=$("$BENCH" "$N" "$NULLLIB") || exit 1
dorm=$(with_kcap KCAP_DIR="$T/d" KCAP_DORMANT=1 -- "$BENCH" "$N" "$NULLLIB") || exit 1
off=$(env -u KCAP_DIR KCAP_LOG=quiet LD_PRELOAD="$PRELOAD" "$BENCH" "$N" "$NULLLIB") || exit 1
echo "no preload:        $base"
echo "libkcap dormant:   $dorm"
echo "libkcap no config: $off"
awk -v a="$base" -v b="$dorm" 'BEGIN{split(a,x," ");split(b,y," ");
  printf "dormant overhead: direct %+.2f ns/call, dlsym %+.2f ns/call\n", y[4]-x[4], y[6]-x[6]}'
