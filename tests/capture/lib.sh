# tests/capture/lib.sh — helpers shared by capture's test scripts (sourced, not run).
# Paths follow KCAP_BUILD (build or build-asan); every test works in its own temp dir.
set -u
B=${KCAP_BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# KCAP_TEST_LIBKCAP / KCAP_TEST_KCAP: run a test against another build (e.g. an older tree's)
LIBKCAP=${KCAP_TEST_LIBKCAP:-$ROOT/$B/lib/libkcap.so}
CLIENT=$ROOT/$B/tests/capture/capture_client
SNAPCMP=$ROOT/$B/tests/capture/snapcmp
KCAP=${KCAP_TEST_KCAP:-$ROOT/$B/bin/kcap}
NULLLIB=$ROOT/$B/tests/capture/libvattn_null.so
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/kcap-capture-test.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
FAILS=0
# Under ASan the interposer must come after the runtime in LD_PRELOAD.
PRELOAD=$LIBKCAP
if [ "$B" = build-asan ]; then
    asan=$(${CC:-cc} -print-file-name=libasan.so)
    PRELOAD="$asan:$LIBKCAP"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0:verify_asan_link_order=0
fi

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
need() { for f in "$@"; do [ -e "$f" ] || { echo "missing $f (build first)"; exit 77; }; done; }
finish() { if [ $FAILS -eq 0 ]; then echo "all passed"; exit 0; else echo "$FAILS failures"; exit 1; fi; }

# with_kcap VAR=VALUE... -- CMD...: run CMD with libkcap.so preloaded and the variables set
with_kcap() {
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" LD_PRELOAD="$PRELOAD" "$@"
}

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

# field KEY OUTPUT: the value of "KEY=value" in OUTPUT
field() { sed -n "s/^$1=\([0-9]*\)$/\1/p" <<<"$2" | tail -1; }

count_h5() { find "$1" -maxdepth 1 -name '*.h5' 2>/dev/null | wc -l; }

# kcap_check DIR: the CLI's full validation, when the CLI is built
kcap_check() {
    if [ -x "$KCAP" ]; then "$KCAP" check "$1" >/dev/null 2>"$T/check.err" || { cat "$T/check.err"; return 1; }; fi
    return 0
}

# need_gpu_client: the torch + ctypes GPU client and the CUDA library, or skip (exit 77);
# sets GPY (python with torch), CUDALIB and C (the client command line)
need_gpu_client() {
    GPY=${GPU_PYTHON:-python3}
    CUDALIB=$ROOT/$B/lib/libverify_attn.so
    need "$LIBKCAP" "$CUDALIB" "$KCAP" "$@"
    "$GPY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
        { echo "no torch with CUDA"; exit 77; }
    C="$GPY tests/capture/gpu_client.py --lib $CUDALIB"
}
