#!/usr/bin/env bash
# test_golden_cpu.sh — CI's regression check against real GPU captures: every snapshot in
# tests/golden/snapshots (captured on an H200 from libverify_attn.so) is replayed through the
# CPU library, whose outputs must match the GPU's captured outputs within bf16 tolerance.
# Runs through the pytest plugin (kcap.testing: one result per case, the folder's
# kcap-manifest.toml for per-case settings, JUnit XML in $KCAP_JUNIT_DIR when set); where
# pytest is missing it falls back to one `kcap replay` of the folder, so the check never
# silently disappears.
. "$(dirname "$0")/../lib.sh"
# every step must succeed: the first failing command ends the test with its status
set -eo pipefail
dir=tests/golden/snapshots
n=$(ls "$dir"/*.h5 2>/dev/null | wc -l)
[ "$n" -gt 0 ] || die "no golden snapshots in $dir"
"$KCAP" check "$dir"
if ! "$PY" -c 'import pytest' 2>/dev/null; then
    echo "pytest not installed (make deps): replaying the folder with kcap replay instead"
    "$KCAP" replay "$dir" --kernel "$CPU" --ref none
    exit
fi
junit=()
[ -n "${KCAP_JUNIT_DIR:-}" ] && junit=(--junitxml "$KCAP_JUNIT_DIR/golden.xml")
set +e
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} KCAP_BIN="$KCAP" "$PY" -m pytest \
    -p kcap.testing -p no:cacheprovider --kcap-golden "$dir" \
    --kcap-kernel "$CPU" -v -rA "${junit[@]}" | tee "$T/pytest.out"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || exit 1
# one result per snapshot: the plugin must not have collected fewer (or more) cases
got=$(grep -cE '::[^ ]+ (PASSED|SKIPPED|XFAIL)' "$T/pytest.out" || true)
[ "$got" -eq "$n" ] || die "expected $n per-case results, got $got"
