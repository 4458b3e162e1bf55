#!/usr/bin/env bash
# bench_capture_gpu.sh — capture figures on the GPU (docs/PERF.md, Capture): stream time per
# call (eager and CUDA-graph replay) without libkcap, with libkcap dormant (graph nodes
# present, disarmed), and armed (zero-stall staging); a device-to-device copy of the same
# bytes; host-thread time per call; device memory kcap took; back-to-back replays for ~1 s
# armed (snapshots reaching the disk, drops). The serving-sized shape first, then the
# long-context shapes (one snapshot = hundreds of MB; reps spaced so each one is captured).
B=${KCAP_BUILD:-build}
GPY=${GPU_PYTHON:-python3}
D=$(mktemp -d)
run() { # label shape-args...
    local label=$1; shift
    local C="$GPY tests/capture/gpu_client.py --lib $B/lib/libverify_attn.so --mode bench $*"
    echo "[$label] base:    $($C)"
    echo "[$label] dormant: $(env KCAP_DIR=$D/d KCAP_DORMANT=1 LD_PRELOAD=$B/lib/libkcap.so $C 2>$D/d.err)"; cat $D/d.err
    echo "[$label] armed:   $(env KCAP_DIR=$D/a KCAP_QUEUE_BYTES=8G KCAP_THREADS=8 KCAP_LOG=info LD_PRELOAD=$B/lib/libkcap.so $C 2>$D/a.err)"; cat $D/a.err
    echo "[$label] armed snapshots written: $(ls $D/a | wc -l) files, $(du -sh $D/a | cut -f1)"
    rm -rf "$D/a" "$D/d"
}
run "8,8,16,4096" --big -n ${N:-40}
for shape in ${KCAP_BENCH_LONG:-1,16,16,185000 8,16,4,32768}; do
    run "$shape" --shape "$shape" -n ${NL:-8} --gap 0.5 --burst 0.3
done
rm -rf "$D"
