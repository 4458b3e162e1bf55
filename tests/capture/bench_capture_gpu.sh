#!/usr/bin/env bash
# bench_capture_gpu.sh — issue 8 figures on the GPU (docs/PERF.md, Capture): stream time per
# call (eager and CUDA-graph replay) without libkcap, with libkcap dormant (graph nodes
# present, disarmed), and armed (zero-stall staging); a device-to-device copy of the same
# bytes; back-to-back replays for ~1 s armed (sustained capture rate, drops).
B=${KCAP_BUILD:-build}
GPY=${GPU_PYTHON:-python3}
C="$GPY tests/capture/gpu_client.py --lib $B/lib/libverify_attn.so --mode bench --big -n ${N:-40}"
D=$(mktemp -d)
echo "base:    $($C)"
echo "dormant: $(env KCAP_DIR=$D/d KCAP_DORMANT=1 LD_PRELOAD=$B/lib/libkcap.so $C 2>$D/d.err)"; cat $D/d.err
echo "armed:   $(env KCAP_DIR=$D/a KCAP_QUEUE_BYTES=8G KCAP_THREADS=8 LD_PRELOAD=$B/lib/libkcap.so $C 2>$D/a.err)"; cat $D/a.err
echo "armed snapshots written: $(ls $D/a | wc -l) files, $(du -sh $D/a | cut -f1)"
rm -rf "$D"
