#!/usr/bin/env bash
# test_capture_gpu_cmp.sh — shadow mode's compare kernel against a double-precision host judge
# on the GPU (bench_shadow_kernels --check): at serving, golden and long-context output
# shapes, random non-zero data that agrees within tolerance, then planted divergences (one
# element far off, a NaN, an Inf, an lse off) and a fully poisoned candidate; every count, the
# first non-finite position, the worst element and the largest error must match.
. "$(dirname "$0")/lib.sh"
X=$ROOT/$B/tests/capture/bench_shadow_kernels
need "$X"
have_gpu || skip "no GPU"
"$X" --check && ok "compare kernel agrees with the double judge at every shape" || fail "the compare kernel disagrees with the host judge"
finish
