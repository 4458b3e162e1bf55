#!/usr/bin/env bash
# kcap-sglang.sh — run a live SGLang service under kcap, arm it when you want snapshots, and
# collect them, without ever restarting the service.
#
#   scripts/kcap-sglang.sh start -o DIR [--max N] [--every N] [--max-bytes B] -- \
#        python3 -m sglang.launch_server --model-path ... [SGLang args]
#       Starts the service with libkcap.so preloaded and DORMANT: the hooked verify calls cost
#       one flag check until armed. LD_PRELOAD is inherited by SGLang's scheduler/TP worker
#       processes, so every rank is covered; files are named per rank/pid/run/sequence.
#   scripts/kcap-sglang.sh arm [--count N] [--only-dir DIR] [--timeout SEC]
#       Arms, in parallel, every running process that has libkcap.so AND a verify kernel
#       library (libverify_attn*.so) mapped (the TP ranks; not the launcher or helpers), each
#       for N calls; --only-dir keeps those whose KCAP_DIR is DIR. Prints each process's answer
#       and exits 0 only if every one confirmed.
#   scripts/kcap-sglang.sh ps
#       Lists the processes that carry the interposer (and whether they loaded the kernel).
#
# Then: build/bin/kcap ls DIR; build/bin/kcap check DIR;
#       build/bin/kcap replay DIR --kernel build/lib/libverify_attn.so --ref gpu --watch
# Note: SGLang runs target-verify inside CUDA graphs; calls made during graph capture are
# recorded at graph replay (see capture/README.md), or run the service with
# --disable-cuda-graph to capture eager calls only.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
KCAP=${KCAP:-$here/build/bin/kcap}

# PIDs with libkcap.so mapped; with "kernel", only those that also mapped the kernel library
kcap_pids() {
    local p
    for p in /proc/[0-9]*; do
        grep -qs 'libkcap\.so' "$p/maps" 2>/dev/null || continue
        [ "${1:-}" != kernel ] || grep -qs 'libverify_attn[a-z_]*\.so' "$p/maps" 2>/dev/null || continue
        echo "${p#/proc/}"
    done
    return 0
}

cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | cut -c1-80; }

cmd=${1:-}
shift || true
case "$cmd" in
start)
    exec "$KCAP" record --dormant "$@"
    ;;
arm)
    only="" args=()
    while [ $# -gt 0 ]; do
        case "$1" in
        --only-dir) only=${2:?--only-dir needs a directory}; shift 2 ;;
        *) args+=("$1"); shift ;;
        esac
    done
    pids=()
    for pid in $(kcap_pids kernel); do
        if [ -n "$only" ]; then
            d=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^KCAP_DIR=//p')
            [ "$d" = "$only" ] || continue
        fi
        pids+=("$pid")
    done
    [ ${#pids[@]} -gt 0 ] || { echo "kcap-sglang: no running process has libkcap.so and a verify kernel library loaded" >&2; exit 1; }
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    for pid in "${pids[@]}"; do
        ( "$KCAP" arm "$pid" ${args[@]+"${args[@]}"} >"$out/$pid" 2>&1; echo $? >"$out/$pid.rc" ) &
    done
    wait
    armed=0 failed=0
    for pid in "${pids[@]}"; do
        if [ "$(cat "$out/$pid.rc")" = 0 ]; then
            armed=$((armed + 1)); echo "armed $pid ($(cmdline "$pid")):"
        else
            failed=$((failed + 1)); echo "NOT armed $pid ($(cmdline "$pid")):"
        fi
        sed 's/^/  /' "$out/$pid"
    done
    echo "kcap-sglang: $armed armed, $failed not armed"
    [ $failed = 0 ]
    ;;
ps)
    for pid in $(kcap_pids); do
        k=no; grep -qs 'libverify_attn[a-z_]*\.so' "/proc/$pid/maps" && k=yes
        echo "$pid kernel=$k $(cmdline "$pid")"
    done
    ;;
*)
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ] || exit 2
    ;;
esac
