#!/usr/bin/env bash
# bench_graph_cost.sh — what libkcap costs a service whose verify calls run inside CUDA graphs
# (issue 15 item 7: target ≤ 1 µs per hooked call while disarmed), GPU time only: one graph of
# LAYERS calls replayed behind a spin kernel that hides the host's submission
# (graph_cost.py), bare, with libkcap dormant (the default: the clean twin of the graph is
# launched), dormant without twins (KCAP_GRAPH_TWINS=0: kcap's disarmed nodes run), shadowing with the production library as candidate
# (every call agrees, nothing staged), and shadowing switched off by `kcap shadow PID --off`
# after the graph was captured (capture stays armed: the instrumented exec runs, candidate
# nodes included). Each line: per-call µs, the difference to bare, and how many launches ran
# the clean twin (libkcap's stats line).
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CUDALIB" "$KCAP"
need_torch_gpu
L=${LAYERS:-32}
G="$GPY tests/capture/graph_cost.py --lib $CUDALIB --layers $L"
per_call() { sed -n 's/.*"per_call_us": \([0-9.]*\).*/\1/p'; }
for shape in ${GRAPH_COST_SHAPES:-1,8,2,512 4,16,4,1024 8,8,16,4096}; do
    base=$($G --shape "$shape" | per_call)
    printf '[%s] %-10s %8.3f us/call\n' "$shape" bare "$base"
    row() { # label env... : one configuration, its difference to bare
        local label=$1; shift
        local v; v=$(with_kcap KCAP_DIR="$T/$label" "$@" -- $G --shape "$shape" 2>"$T/err" | per_call)
        [ -n "$v" ] || { cat "$T/err"; v=nan; }
        printf '[%s] %-10s %8.3f us/call  %+7.3f us/call vs bare  (%s)\n' "$shape" "$label" "$v" \
            "$(awk -v a="$v" -v b="$base" 'BEGIN { print a - b }')" \
            "$(grep -o 'graph_clean_launches=[0-9]*' "$T/err" | tail -1)"
    }
    row dormant KCAP_DORMANT=1
    row no-twins KCAP_DORMANT=1 KCAP_GRAPH_TWINS=0
    row shadow KCAP_SHADOW="$CUDALIB"
    # shadow on while the graph is captured, then switched off from outside
    rm -f "$T/go" "$T/ready"
    with_kcap KCAP_DIR="$T/off" KCAP_SHADOW="$CUDALIB" -- $G --shape "$shape" --wait-for "$T/go" --ready "$T/ready" \
        >"$T/off.json" 2>"$T/err" &
    pid=$!
    for _ in $(seq 300); do [ -e "$T/ready" ] && break; sleep 0.1; done
    pid=$(cat "$T/ready" 2>/dev/null || echo "$pid") # the python process itself
    "$KCAP" shadow "$pid" --off >"$T/offcmd" 2>&1 || { echo "kcap shadow --off failed:"; cat "$T/offcmd"; }
    touch "$T/go"
    wait
    v=$(per_call <"$T/off.json"); [ -n "$v" ] || { cat "$T/err"; v=nan; }
    printf '[%s] %-10s %8.3f us/call  %+7.3f us/call vs bare\n' "$shape" shadow-off "$v" \
        "$(awk -v a="$v" -v b="$base" 'BEGIN { print a - b }')"
    rm -rf "$T"/dormant "$T"/no-twins "$T"/shadow "$T"/off
done
