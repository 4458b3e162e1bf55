# tests/lib.sh — what every shell test shares (sourced, not run), so that no test carries its
# own copy: the build it tests (KCAP_BUILD: build, or build-asan under `make asan`), the repo
# root as working directory, a private temp dir removed at exit, the pass/fail/skip verdicts
# scripts/run_tests.sh reads (exit 0 pass, 1 fail, 77 skip), and running a command under
# libkcap.so. Helpers only one module's tests need live beside them (tests/capture/lib.sh).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
B=${KCAP_BUILD:-build}
# KCAP_TEST_LIBKCAP / KCAP_TEST_KCAP: run the tests against another build (e.g. an older tree's)
LIBKCAP=${KCAP_TEST_LIBKCAP:-$ROOT/$B/lib/libkcap.so}
KCAP=${KCAP_TEST_KCAP:-$ROOT/$B/bin/kcap}
# the kernel libraries tests call and replay through: the CPU one, its twin perturbed at one
# documented element (replay must catch it), and the CUDA one
CPU=$ROOT/$B/lib/libverify_attn_cpu.so
PERT=$ROOT/$B/tests/libverify_attn_cpu_perturbed.so
CUDALIB=$ROOT/$B/lib/libverify_attn.so
# PYTHON (make exports /usr/bin/python3: Debian's, with h5py, numpy, pytest); unset, a box
# without /usr/bin/python3 (some GPU machines) falls back to the PATH's. GPU tests need a
# Python with torch: GPU_PYTHON.
PY=${PYTHON:-/usr/bin/python3}
[ -n "${PYTHON:-}" ] || [ -x "$PY" ] || PY=python3
GPY=${GPU_PYTHON:-python3}
# Under ASan the interposer must come after the runtime in LD_PRELOAD, and the runtime must
# be told not to mind that (ASAN_PRELOAD_OPTIONS, for a preloaded process only: the other
# tests keep ASan's leak check).
PRELOAD=$LIBKCAP
ASAN_PRELOAD_OPTIONS=
if [ "$B" = build-asan ]; then
    PRELOAD="$(${CC:-cc} -print-file-name=libasan.so):$LIBKCAP"
    ASAN_PRELOAD_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0:verify_asan_link_order=0
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/kcap-test.XXXXXX")
_at_exit=()
# at_exit CMD: run CMD (a string, eval'ed) at exit, before the temp dir goes (a background job
# the test started, say)
at_exit() { _at_exit+=("$1"); }
_cleanup() {
    local c
    for c in ${_at_exit[@]+"${_at_exit[@]}"}; do eval "$c" || true; done
    # some tests make read-only directories in it
    chmod -R u+w "$T" 2>/dev/null || true
    rm -rf "$T"
}
trap _cleanup EXIT

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
# die MSG: a failure the rest of the test cannot run past
die() { echo "FAIL: $*"; exit 1; }
# skip MSG: the test cannot run here (a tool or package is missing); the message is the line
# run_tests.sh shows
skip() { echo "$*"; exit 77; }
# need FILE...: skip unless every FILE is built; require FILE...: fail instead (for what
# `make all` always builds, so that its absence is a build bug and not a missing tool)
need() { local f; for f in "$@"; do [ -e "$f" ] || skip "missing $f (build first)"; done; }
require() { local f; for f in "$@"; do [ -e "$f" ] || die "$f not built (make all)"; done; }
# finish [MSG]: the verdict; MSG (default "all passed") when nothing failed
finish() {
    if [ $FAILS -eq 0 ]; then echo "${1:-all passed}"; exit 0; fi
    echo "$FAILS failures"
    exit 1
}

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
# need_torch_gpu: skip unless GPY has torch with a usable CUDA device
need_torch_gpu() {
    "$GPY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
        skip "no torch with CUDA"
}

# with_kcap VAR=VALUE... -- CMD...: run CMD with libkcap.so preloaded and the variables set
with_kcap() {
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env ${ASAN_PRELOAD_OPTIONS:+"ASAN_OPTIONS=$ASAN_PRELOAD_OPTIONS"} ${envs[@]+"${envs[@]}"} \
        LD_PRELOAD="$PRELOAD" "$@"
}

# kcap_check DIR: the CLI's full validation, when the CLI is built
kcap_check() {
    [ -x "$KCAP" ] || return 0
    "$KCAP" check "$1" >/dev/null 2>"$T/check.err" || { cat "$T/check.err"; return 1; }
}

# count_h5 DIR: how many snapshots DIR holds
count_h5() { find "$1" -maxdepth 1 -name '*.h5' 2>/dev/null | wc -l; }

# field KEY OUTPUT: the value of "KEY=value" in OUTPUT
field() { sed -n "s/^$1=\([0-9]*\)$/\1/p" <<<"$2" | tail -1; }

# n_cases JSON: how many cases a `kcap replay --json` document holds (empty if unreadable)
n_cases() {
    "$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$1" 2>/dev/null
}
