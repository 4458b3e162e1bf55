#!/usr/bin/env bash
# bench_shadow_kernels.sh — shadow mode's device work per call, node by node (issue "Shadow
# mode" item 6: the compare ≤ 5 µs at the golden shapes): bench_shadow_kernels.cu checks the
# compare against a double-precision judge, then times the compare, the poison fill, the gate
# and an idle staging kernel, each as 32 dependent nodes of a CUDA graph behind a spin kernel.
. "$(dirname "$0")/lib.sh"
X=$ROOT/$B/tests/capture/bench_shadow_kernels
need "$X"
have_gpu || skip "no GPU"
"$X"
