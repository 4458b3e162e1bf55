#!/usr/bin/env bash
# bench_capture_gpu.sh — capture figures on the GPU (docs/PERF.md, Capture): stream time per
# call (eager and CUDA-graph replay) without libkcap, with libkcap dormant (graph nodes
# present, disarmed), and armed (zero-stall staging); a device-to-device copy of the same
# bytes; host-thread time per call; device memory kcap took; back-to-back replays for ~1 s
# armed (snapshots reaching the disk, drops). The serving-sized shape first, then the
# long-context shapes (one snapshot = hundreds of MB; reps spaced so each one is captured;
# base, dormant, armed and shadow only: the loading-mode and worker rows are the serving shape's).
. "$(dirname "$0")/lib.sh"
run() { # label shape-args...
    local label=$1; shift
    local C="$GPY tests/capture/gpu_client.py --lib $CUDALIB --mode bench $*"
    echo "[$label] base:    $($C)"
    echo "[$label] dormant: $(with_kcap KCAP_DIR=$T/d KCAP_DORMANT=1 -- $C 2>$T/d.err)"; cat $T/d.err
    echo "[$label] armed:   $(with_kcap KCAP_DIR=$T/a KCAP_QUEUE_BYTES=8G KCAP_THREADS=8 KCAP_LOG=info -- $C 2>$T/a.err)"; cat $T/a.err
    echo "[$label] armed snapshots written: $(ls $T/a | wc -l) files, $(du -sh $T/a | cut -f1)"
    # shadow mode with the production library as candidate (every call agrees: nothing staged):
    # added stream time = candidate + compare + the gate and staging kernels exiting at once
    # shadow: the candidate launched by the calling thread, in stream (the default); then under
    # eager module loading by kcap's worker thread (KCAP_SHADOW_THREAD=1) and by the calling
    # thread: what the worker takes off the service's thread, and what it adds to the stream
    [ -n "${KCAP_BENCH_SHADOW:-1}" ] &&
        echo "[$label] shadow:  $(with_kcap KCAP_DIR=$T/s KCAP_SHADOW=$CUDALIB KCAP_LOG=info -- $C 2>$T/s.err)" && cat $T/s.err &&
        [ "$label" = "$SERVING" -o -n "${KCAP_BENCH_ALL_ROWS:-}" ] && # the loading modes at the serving shape only
        echo "[$label] shadow, eager loading, worker: $(with_kcap KCAP_DIR=$T/s2 KCAP_SHADOW=$CUDALIB CUDA_MODULE_LOADING=EAGER KCAP_SHADOW_THREAD=1 KCAP_LOG=info -- $C 2>$T/s2.err)" && cat $T/s2.err &&
        echo "[$label] shadow, eager loading, in stream: $(with_kcap KCAP_DIR=$T/s3 KCAP_SHADOW=$CUDALIB CUDA_MODULE_LOADING=EAGER KCAP_LOG=info -- $C 2>$T/s3.err)" && cat $T/s3.err &&
        echo "[$label] base, eager loading: $(CUDA_MODULE_LOADING=EAGER $C)"
    rm -rf "$T/s" "$T/s2" "$T/s3"
    rm -rf "$T/a" "$T/d"
}
SERVING=8,8,16,4096 # the worker and eager-loading rows run here only (KCAP_BENCH_ALL_ROWS=1: every shape),
                    # so that `make bench-gpu` fits one 10-minute device call
run "$SERVING" --big -n ${N:-40}
for shape in ${KCAP_BENCH_LONG:-1,16,16,185000 8,16,4,32768}; do
    run "$shape" --shape "$shape" -n ${NL:-8} --gap 0.5 --burst 0.3
done
