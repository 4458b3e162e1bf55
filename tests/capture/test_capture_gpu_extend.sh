#!/usr/bin/env bash
# test_capture_gpu_extend.sh — vattn_extend (SGLang's convention) captured on the GPU by the
# same description-driven paths as vattn_verify: eager calls through the zero-stall staging
# ring and through the synchronous path, a call inside a CUDA graph captured at every
# replay, and a long-context call whose snapshot is over 32 MiB. The client's results are
# identical with and without libkcap; every snapshot validates and `kcap replay` on the CUDA
# library reproduces its outputs bitwise.
. "$(dirname "$0")/lib.sh"
need_gpu_client
X="$GPY tests/capture/gpu_extend_client.py $CUDALIB"

# run_case NAME MODE N SHAPE [VAR=VALUE...]: bare vs under libkcap, then N snapshots that
# check and replay bitwise
run_case() {
    local name=$1 mode=$2 n=$3 shape=$4
    shift 4
    $X "$mode" --calls "$n" --seed 7 --shape "$shape" >"$T/$name.ref" || { fail "$name: bare run"; return; }
    with_kcap KCAP_DIR="$T/$name" "$@" -- $X "$mode" --calls "$n" --seed 7 --shape "$shape" \
        >"$T/$name.cap" 2>"$T/$name.err" || { cat "$T/$name.err"; fail "$name: under libkcap"; return; }
    cmp -s "$T/$name.ref" "$T/$name.cap" && ok "$name: results identical with preload" ||
        { diff "$T/$name.ref" "$T/$name.cap"; fail "$name: results differ"; }
    local got
    got=$(find "$T/$name" -maxdepth 1 -name 'vattn_extend-*.h5' | wc -l)
    [ "$got" = "$n" ] && ok "$name: $n vattn_extend snapshots" || { cat "$T/$name.err"; fail "$name: $got snapshots, want $n"; }
    kcap_check "$T/$name" && ok "$name: kcap check" || fail "$name: kcap check"
    "$KCAP" replay "$T/$name" --kernel "$CUDALIB" --ref none >"$T/$name.rep" 2>&1 &&
        [ "$(grep -c bitwise "$T/$name.rep")" -ge "$n" ] && ok "$name: replayed bitwise" ||
        { cat "$T/$name.rep"; fail "$name: replay"; }
}

run_case eager eager 4 2,16,4,1000
run_case eager_sync eager 4 2,16,4,1000 KCAP_GPU_MODE=sync
run_case graph graph 5 4,16,8,2048
grep -q "graph_captured=5" "$T/graph.err" && ok "graph: stats count 5 graph captures" || { cat "$T/graph.err"; fail "graph stats"; }
run_case graph_sync graph 3 2,8,4,512 KCAP_GPU_MODE=sync
# long context: 1 x 16 heads x 16 drafts over a 32k..64k-key prefix, snapshots over 32 MiB
run_case long eager 2 1,16,16,65536
PYTHONPATH=$ROOT/python "$GPY" - "$T/long" <<'PY' && ok "long: both snapshots hold over 32 MiB of inputs" || fail "long snapshot sizes"
import glob, sys
import kcap
sizes = [sum(t.nbytes for t in kcap.load(f).inputs.values()) for f in sorted(glob.glob(sys.argv[1] + "/*.h5"))]
print("input bytes:", sizes)
sys.exit(0 if len(sizes) == 2 and min(sizes) > 32 << 20 else 1)
PY
finish
