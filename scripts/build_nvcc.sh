#!/usr/bin/env bash
# build_nvcc.sh — builds the CUDA kernel library (build/lib/libverify_attn.so) or a CUDA
# program, for sm_120 and sm_90 machine code plus compute_120 PTX (so a newer GPU can JIT it).
#
#   build_nvcc.sh lib  OUT.so  OBJDIR  CU_SOURCE C_SOURCE...   shared library, only vattn_* exported
#                                                              (soname = basename of OUT.so)
#   build_nvcc.sh prog OUT     OBJDIR  CU_SOURCE               executable (tests, dev harness)
#
# NVCC_ARCH=sm_90 (or sm_120, ...) builds that one architecture only: a quick build for
# iterating on the device machine. The ptxas resource report (registers, smem, spills) of
# every kernel is kept next to the objects as <name>.ptxas.txt (docs/PERF.md (Kernels) cites it).
# Static cudart: the library needs only the driver (libcuda.so.1) at run time.
set -euo pipefail
mode=$1 out=$2 objdir=$3 cu=$4
shift 4
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
CC=${CC:-cc}
if [ -n "${NVCC_ARCH:-}" ]; then
    n=${NVCC_ARCH#sm_}
    gencode=(-gencode "arch=compute_$n,code=sm_$n")
else
    gencode=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120
             -gencode arch=compute_120,code=compute_120)
fi
mkdir -p "$objdir" "$(dirname "$out")"
name=$(basename "${cu%.cu}")
# VATTN_NVCC_FLAGS: extra flags for dev builds (-DVATTN_DEV: the VATTN_VARIANT / VATTN_FORCE_NSPLIT
# knobs, build/tests/libverify_attn_dev.so; -DVATTN_DEV_MODES: kernel timing knobs)
flags=(-std=c++17 -O3 -lineinfo -Ikernels -Icommon "${gencode[@]}" -Xptxas -v ${VATTN_NVCC_FLAGS:-}
       -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra
       -Werror=all-warnings)
# ptxas -v writes to stderr; keep it as the resource report and show only real diagnostics
if ! "$NVCC" "${flags[@]}" -c "$cu" -o "$objdir/$name.o" 2>"$objdir/$name.ptxas.txt"; then
    cat "$objdir/$name.ptxas.txt" >&2
    exit 1
fi
grep -v -E '^ptxas info|^    [0-9]+ bytes stack frame' "$objdir/$name.ptxas.txt" >&2 || true
if [ "$mode" = lib ]; then
    objs=("$objdir/$name.o")
    for c in "$@"; do
        o="$objdir/$(basename "${c%.c}").cuda.o"
        "$CC" -std=gnu11 -O2 -Wall -Wextra -fPIC -fvisibility=hidden -Ikernels -c "$c" -o "$o"
        objs+=("$o")
    done
    "$NVCC" -shared "${gencode[@]}" -cudart static -o "$out" "${objs[@]}" \
        -Xlinker --version-script=kernels/verify_attn.map -Xlinker --no-undefined \
        -Xlinker -soname="$(basename "$out")"
else
    "$NVCC" "${gencode[@]}" -cudart static -o "$out" "$objdir/$name.o" -ldl
fi
