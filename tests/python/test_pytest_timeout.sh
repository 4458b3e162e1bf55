#!/usr/bin/env bash
# test_pytest_timeout.sh — the pytest plugin's --kcap-timeout (kcap.testing), against what a
# hostile review found (twenty-second session); each failed before its fix (make test):
#   1  --kcap-timeout 0, -5 or nan were taken as they came, and every case then failed with a
#      raw subprocess traceback: now a usage error naming the option (pytest exit 4);
#   2  a kernel that hangs: the case failed with a raw TimeoutExpired traceback and the
#      helper process the hung kernel had started kept running (only kcap was killed): now
#      the case fails saying "timed out after N s" and the replay's whole session is killed.
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
HANG=$ROOT/$B/tests/libvattn_stub_hang.so
require "$KCAP" "$GEN" "$CPU" "$HANG"
"$PY" -c "import pytest" 2>/dev/null || skip "pytest not installed: skipped"
export PYTHONPATH=$ROOT/python
mkdir -p "$T/g"
"$GEN" --lib "$CPU" --out "$T/gen" --count 1 --seed 1 >"$T/gen.log" 2>&1 || { cat "$T/gen.log"; die "generator"; }
cp "$T/gen/snap-0000.h5" "$T/g/"
pt() { (cd "$T" && "$PY" -m pytest -q -p no:cacheprovider -p kcap.testing --kcap-bin "$KCAP" --kcap-golden "$T/g" "$@"); }

for t in 0 -5 nan; do
    pt --kcap-kernel "$CPU" --kcap-timeout "$t" >"$T/u$t" 2>&1
    rc=$?
    [ $rc -eq 4 ] && grep -q -- "--kcap-timeout .*: not a positive finite number of seconds" "$T/u$t" &&
        ok "--kcap-timeout $t: usage error" || fail "--kcap-timeout $t: rc $rc: $(tail -3 "$T/u$t")"
done

STUB_HANG_PIDFILE=$T/hang.pid pt --kcap-kernel "$HANG" --kcap-timeout 2 >"$T/h" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "timed out after 2 s" "$T/h" && ! grep -q "TimeoutExpired" "$T/h" &&
    ok "a hanging kernel: the case fails saying it timed out" || fail "hang: rc $rc: $(tail -5 "$T/h")"
sleep 0.5
if [ -s "$T/hang.pid" ]; then
    h=$(cat "$T/hang.pid")
    st=$(ps -o stat= -p "$h" 2>/dev/null | tr -d ' ')
    [ -z "$st" ] || [ "${st#Z}" != "$st" ] && ok "the hung kernel's helper process was killed" ||
        { fail "helper $h still running (state $st)"; kill "$h" 2>/dev/null; }
else
    fail "the stub wrote no helper pid"
fi
finish
