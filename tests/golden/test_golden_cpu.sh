#!/usr/bin/env bash
# test_golden_cpu.sh — CI's regression check against real GPU captures: every snapshot in
# tests/golden/snapshots (captured on an H200 from libverify_attn.so) is replayed through the
# CPU library, whose outputs must match the GPU's captured outputs within bf16 tolerance.
# Runs through the pytest plugin (kcap.testing: one result per case, the folder's
# kcap-manifest.toml for per-case settings, JUnit XML in $KCAP_JUNIT_DIR when set); where
# pytest is missing it falls back to one `kcap replay` of the folder, so the check never
# silently disappears.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${KCAP_BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
dir=tests/golden/snapshots
n=$(ls "$dir"/*.h5 2>/dev/null | wc -l)
[ "$n" -gt 0 ] || { echo "no golden snapshots in $dir"; exit 1; }
"$B/bin/kcap" check "$dir"
if ! "$PY" -c 'import pytest' 2>/dev/null; then
    echo "pytest not installed (make deps): replaying the folder with kcap replay instead"
    exec "$B/bin/kcap" replay "$dir" --kernel "$B/lib/libverify_attn_cpu.so" --ref none
fi
junit=()
[ -n "${KCAP_JUNIT_DIR:-}" ] && junit=(--junitxml "$KCAP_JUNIT_DIR/golden.xml")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} KCAP_BIN="$B/bin/kcap" "$PY" -m pytest \
    -p kcap.testing -p no:cacheprovider --kcap-golden "$dir" \
    --kcap-kernel "$B/lib/libverify_attn_cpu.so" -v -rA "${junit[@]}" | tee "$out"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || exit 1
# one result per snapshot: the plugin must not have collected fewer (or more) cases
got=$(grep -cE '::[^ ]+ (PASSED|SKIPPED|XFAIL)' "$out" || true)
[ "$got" -eq "$n" ] || { echo "expected $n per-case results, got $got"; exit 1; }
