#!/usr/bin/env bash
# bench_shadow_host.sh — shadow mode's own host work per eager device call (issue "Shadow
# mode" item 6: host-thread time per call), measured on the fake driver of
# test_capture_shadow_dev, whose calls cost nothing: what remains of the armed host time is
# the driver's (its launches and event records, counted in the line). docs/PERF.md records
# the figures. No GPU needed.
. "$(dirname "$0")/lib.sh"
BIN=$ROOT/$B/tests/capture/test_capture_shadow_dev
need "$BIN"
"$BIN" --bench "${N:-200000}"
