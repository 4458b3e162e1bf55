#!/usr/bin/env bash
# bench_host_gpu.sh — host-thread time per eager vattn_verify call from a C client
# (bench_host_gpu.c; issue "Shadow mode" item 6), without libkcap, dormant, armed for
# capture, and shadowing with the production library as candidate (every call agrees):
# launched by the calling thread in stream (the default), and by kcap's worker thread
# (KCAP_SHADOW_THREAD=1 under eager module loading) against a bare call in that loading mode.
# Two gaps between calls: slept 30 ms (the CPU and driver cold, as bench_capture_gpu.sh's
# torch client) and spun 200 µs (warm); then steps of 60 calls back to back (the host ahead
# of the GPU, as a service's layers), 500 µs spun between steps. Two rounds, interleaved,
# give the run-to-run spread.
# Then the calling thread's driver calls of the worker path, one at a time (--primitives).
# Each line: host p10/median/p90 and stream median, µs.
. "$(dirname "$0")/lib.sh"
BIN=$ROOT/$B/tests/capture/bench_host_gpu
need "$BIN" "$LIBKCAP" "$CUDALIB"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || skip "no GPU"
SHAPE=${SHAPE:-8,8,16,4096}
line() { # label gap burst env... : one configuration
    local label=$1 gap=$2 burst=$3; shift 3
    local n=$(( burst > 1 ? 10 * burst : gap >= 1000 ? ${NC:-150} : ${NW:-1000} ))
    local out
    out=$(env "$@" "$BIN" --lib "$CUDALIB" --shape "$SHAPE" -n $n --gap-us "$gap" --burst "$burst" 2>"$T/err") ||
        { cat "$T/err"; echo "[$label] failed"; return; }
    printf '[%-26s gap %6s us, burst %3s] %s %s\n' "$label" "$gap" "$burst" \
        "$(echo "$out" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); h=j["host_us"]; print("host %.1f / %.1f / %.1f  stream %.1f" % (h["p10"], h["median"], h["p90"], j["stream_us"]["median"]))')" \
        "$(grep -o 'sites=[0-9]*\|shadow_by_worker=[0-9]*' "$T/err" | tail -2 | tr '\n' ' ')$(judged "$@")"
}
judged() { # env...: compared / not judged, from the shadow summary of the run's KCAP_DIR
    local e d=
    for e in "$@"; do case $e in KCAP_DIR=*) d=${e#KCAP_DIR=} ;; esac; done
    [ -n "$d" ] && ls "$d"/shadow-*.json >/dev/null 2>&1 || return 0
    "$PY" -c 'import glob,json,sys; j=json.load(open(glob.glob(sys.argv[1]+"/shadow-*.json")[0])); print(" compared=%d not_judged=%d" % (j["compared"], j["not_judged"]))' "$d"
}
configs() { # gap burst
    for round in 1 2; do
        line bare "$1" "$2"
        line dormant "$1" "$2" LD_PRELOAD="$PRELOAD" KCAP_DIR="$T/d" KCAP_DORMANT=1
        line armed "$1" "$2" LD_PRELOAD="$PRELOAD" KCAP_DIR="$T/a" KCAP_QUEUE_BYTES=8G KCAP_THREADS=8 KCAP_LOG=info
        line "shadow, in stream" "$1" "$2" LD_PRELOAD="$PRELOAD" KCAP_DIR="$T/s" KCAP_SHADOW="$CUDALIB" KCAP_LOG=info
        line "bare, eager loading" "$1" "$2" CUDA_MODULE_LOADING=EAGER
        line "shadow, eager, in stream" "$1" "$2" LD_PRELOAD="$PRELOAD" KCAP_DIR="$T/s3" KCAP_SHADOW="$CUDALIB" CUDA_MODULE_LOADING=EAGER KCAP_LOG=info
        line "shadow, eager, worker" "$1" "$2" LD_PRELOAD="$PRELOAD" KCAP_DIR="$T/s2" KCAP_SHADOW="$CUDALIB" CUDA_MODULE_LOADING=EAGER KCAP_SHADOW_THREAD=1 KCAP_LOG=info
        rm -rf "$T/a" "$T/d" "$T/s" "$T/s2" "$T/s3"
    done
}
# GAPS: slept / spun gaps between single calls; BURST: calls back to back per step (spun
# 500 µs between steps), empty to skip; PRIM=0: no driver-call primitives
for gap in ${GAPS-30000 200}; do
    configs "$gap" 1
    [ "${PRIM:-1}" = 0 ] ||
        echo "[primitives gap $gap us] $("$BIN" --lib "$CUDALIB" --primitives -n $(( gap >= 1000 ? 100 : 1000 )) --gap-us "$gap")"
done
[ -z "${BURST-60}" ] || configs 500 "${BURST-60}"
