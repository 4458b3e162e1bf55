#!/usr/bin/env bash
# kcap-sglang.sh — run a live SGLang service under kcap, arm it when you want snapshots, and
# collect them, without ever restarting the service.
#
#   scripts/kcap-sglang.sh start -o DIR [--max N] [--every N] [--max-bytes B] -- \
#        python3 -m sglang.launch_server --model-path ... [SGLang args]
#       Starts the service with libkcap.so preloaded and DORMANT: the hooked verify calls cost
#       one flag check until armed. LD_PRELOAD is inherited by SGLang's scheduler/TP worker
#       processes, so every rank is covered; files are named per rank/pid/sequence.
#   scripts/kcap-sglang.sh arm [--count N]
#       Arms every running process that has libkcap.so mapped (all TP ranks) for N calls each.
#   scripts/kcap-sglang.sh ps
#       Lists the processes that carry the interposer.
#
# Then: build/bin/kcap ls DIR; build/bin/kcap check DIR;
#       build/bin/kcap replay DIR --kernel build/lib/libverify_attn.so --ref gpu --watch
# Note: SGLang runs target-verify inside CUDA graphs; calls made during graph capture are
# recorded at graph replay (see capture/README.md), or run the service with
# --disable-cuda-graph to capture eager calls only.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
KCAP=${KCAP:-$here/build/bin/kcap}

kcap_pids() {
    local p
    for p in /proc/[0-9]*; do
        grep -qs 'libkcap\.so' "$p/maps" 2>/dev/null && echo "${p#/proc/}"
    done
    return 0
}

cmd=${1:-}
shift || true
case "$cmd" in
start)
    exec "$KCAP" record --dormant "$@"
    ;;
arm)
    pids=$(kcap_pids)
    [ -n "$pids" ] || { echo "kcap-sglang: no running process has libkcap.so loaded" >&2; exit 1; }
    for pid in $pids; do
        "$KCAP" arm "$pid" "$@" && echo "armed $pid ($(tr '\0' ' ' </proc/$pid/cmdline | cut -c1-80))"
    done
    ;;
ps)
    for pid in $(kcap_pids); do
        echo "$pid $(tr '\0' ' ' </proc/$pid/cmdline | cut -c1-100)"
    done
    ;;
*)
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ] || exit 2
    ;;
esac
