# tests/capture/lib.sh — what capture's test scripts share beyond tests/lib.sh (sourced, not
# run): the capture test programs and the comparison of what a client received.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CLIENT=$ROOT/$B/tests/capture/capture_client
SNAPCMP=$ROOT/$B/tests/capture/snapcmp
NULLLIB=$ROOT/$B/tests/capture/libvattn_null.so
# these tests also preload with plain env, and their clients are not leak-checked under ASan
[ -z "$ASAN_PRELOAD_OPTIONS" ] || export ASAN_OPTIONS=$ASAN_PRELOAD_OPTIONS

# same_outputs REFDIR DIR: what the client received (status, o with its gaps, lse) is
# byte-identical between two runs
same_outputs() {
    local n=0 bad=0 f
    for f in "$1"/*.meta "$1"/*.ofull "$1"/*.lse; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        if [ "${f##*.}" = meta ]; then
            grep -q "^status" "$f" && diff <(grep ^status "$f") <(grep ^status "$2/$(basename "$f")") >/dev/null || bad=$((bad + 1))
        else
            cmp -s "$f" "$2/$(basename "$f")" || bad=$((bad + 1))
        fi
    done
    [ $n -gt 0 ] && [ $bad -eq 0 ]
}

# need_gpu_client [FILE...]: the torch + ctypes GPU client, the CUDA library (and FILE...), or
# skip (exit 77); sets C (the client command line)
need_gpu_client() {
    need "$LIBKCAP" "$CUDALIB" "$KCAP" "$@"
    need_torch_gpu
    C="$GPY tests/capture/gpu_client.py --lib $CUDALIB"
}

# shadow_json DIR EXPR: the Python expression EXPR, over `j` = DIR's shadow-mode summary
# (shadow-*.json), is true; shadow_json DIR -p EXPR prints its value instead
# The builds the shadow-mode tests run as production and as candidates: CPU (production, also
# the agreeing candidate), PERT (a planted bug), ERRLIB (returns errors), SLOW (far slower).
shadow_libs() {
    CPU=$ROOT/$B/lib/libverify_attn_cpu.so
    PERT=$ROOT/$B/tests/libverify_attn_cpu_perturbed.so
    ERRLIB=$ROOT/$B/tests/libvattn_stub_abi2.so
    SLOW=$ROOT/$B/tests/libverify_attn_cpu_slow.so
    need "$LIBKCAP" "$CLIENT" "$KCAP" "$CPU" "$PERT" "$ERRLIB" "$SLOW"
}
shadow_json() {
    "${PY:-python3}" - "$@" <<'PY'
import glob, json, sys
fs = glob.glob(sys.argv[1] + "/shadow-*.json")
if not fs:
    sys.exit("no shadow-*.json in " + sys.argv[1])
j = json.load(open(fs[0]))
if sys.argv[2] == "-p":
    print(eval(sys.argv[3]))
else:
    sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
