#!/usr/bin/env bash
# test_capture_faults_host.sh — libkcap never kills its host: whatever the host
# does, capture must not crash it, break it or write into it.
#  - 64 calls the library rejects or faults on (NULL / small / misaligned workspace x unmapped
#    or short kv_indptr, unmapped kv_indices, ...), linker and dlopen+dlsym (ctypes) paths:
#    every outcome (status or signal) under capture equals the bare one. Before the fix: 9 SIGSEGV
#    under capture on each path.
#  - a calling thread with a 32 KiB / 16 KiB stack: works and is captured; capture's own use
#    of the caller's stack (measured on a painted stack, null kernel, LD_BIND_NOW=1 so the
#    dynamic linker's lazy binding is not counted) is <= 4 KiB. Before the fix: SIGSEGV.
#  - stderr a pipe nobody reads: the exit stats line must not raise SIGPIPE (old: exit 141).
#  - the host closes fd 2 and opens a data file there: no kcap line in its data; the lines go
#    to the original stderr (old: in the data file).
#  - relative KCAP_DIR and a chdir() before the first call: snapshots land where KCAP_DIR
#    pointed at start (old: under the new working directory).
#  - a garbage rank variable is named in one log line; bad `kcap record` options are named.
. "$(dirname "$0")/lib.sh"
BAD=$ROOT/$B/tests/capture/badargs_client
need "$LIBKCAP" "$CLIENT" "$BAD" "$NULLLIB"

# ---- 64 rejected / faulting calls, through the linker and through dlopen + dlsym (ctypes) ----
for path in linker dlsym; do
    args=(); [ $path = dlsym ] && args=(--dlopen "$CPU")
    "$BAD" "${args[@]}" >"$T/bad.$path.ref" 2>/dev/null
    with_kcap KCAP_DIR="$T/bad" KCAP_LOG=quiet -- "$BAD" "${args[@]}" >"$T/bad.$path.cap" 2>/dev/null
    n=$(wc -l <"$T/bad.$path.ref")
    extra=$(diff "$T/bad.$path.ref" "$T/bad.$path.cap" | grep -c '^>.*signal' || true)
    if [ "$n" = 64 ] && cmp -s "$T/bad.$path.ref" "$T/bad.$path.cap"; then
        ok "64 bad-argument calls ($path): every status/signal unchanged under capture ($(grep -c signal "$T/bad.$path.ref") fault bare too)"
    else
        diff "$T/bad.$path.ref" "$T/bad.$path.cap" | head; fail "bad-argument calls ($path): $extra crash(es) only under capture"
    fi
done

# ---- small stacks ----
"$CLIENT" --calls 3 --seed 61 --hash >"$T/stk.ref" 2>/dev/null
# (under ASan its allocator's stack unwinding alone needs more than 16 KiB)
stacks="32 16"; [ "$B" = build-asan ] && stacks=32
for kb in $stacks; do
    with_kcap KCAP_DIR="$T/stk$kb" -- "$CLIENT" --stack $kb --calls 3 --seed 61 --hash >"$T/stk$kb.out" 2>"$T/stk$kb.err"
    rc=$?
    [ $rc = 0 ] && cmp -s <(grep -v stack_used "$T/stk$kb.out") "$T/stk.ref" &&
        [ "$(count_h5 "$T/stk$kb")" = 3 ] && ok "$kb KiB caller stack: host unaffected, 3 snapshots" ||
        { cat "$T/stk$kb.err"; fail "$kb KiB caller stack (rc $rc)"; }
done
if [ "$B" = build-asan ]; then
    echo "skip: caller stack use (sanitizer builds use more stack by design)"
else
bare=$(field stack_used "$(LD_BIND_NOW=1 LD_PRELOAD="$NULLLIB" "$CLIENT" --stack 16 --calls 3 --seed 62 --quiet 2>/dev/null)")
cap=$(field stack_used "$(LD_BIND_NOW=1 with_kcap KCAP_DIR="$T/stkn" KCAP_LOG=quiet -- env LD_PRELOAD="$PRELOAD:$NULLLIB" "$CLIENT" --stack 16 --calls 3 --seed 62 --quiet 2>/dev/null)")
if [ -n "$bare" ] && [ -n "$cap" ] && [ $((cap - bare)) -le 4096 ] && [ "$(count_h5 "$T/stkn")" = 3 ]; then
    ok "capture uses $((cap - bare)) bytes of the caller's stack (<= 4096; bare call $bare, captured $cap)"
else
    fail "caller stack use: bare ${bare:-?} captured ${cap:-?} ($(count_h5 "$T/stkn") snapshots)"
fi
fi

# ---- stderr: a pipe whose reader is gone ----
( with_kcap KCAP_DIR="$T/pipe" -- "$CLIENT" --calls 2 --seed 63 --quiet 2>&1 >/dev/null; echo $? >"$T/pipe.rc" ) | true
rc=$(cat "$T/pipe.rc")
[ "$rc" = 0 ] && [ "$(count_h5 "$T/pipe")" = 2 ] && ok "stderr a broken pipe: exit 0, 2 snapshots (no SIGPIPE)" ||
    fail "stderr a broken pipe: exit $rc"

# ---- fd 2 reused for the host's data ----
with_kcap KCAP_DIR="$T/fd2" KCAP_LOG=info -- "$CLIENT" --calls 2 --seed 64 --quiet --reopen-stderr "$T/data.txt" 2>"$T/fd2.err"
rc=$?
[ $rc = 0 ] && ! grep -q 'kcap:' "$T/data.txt" && grep -q 'kcap:.*stats:' "$T/fd2.err" &&
    ok "fd 2 reused by the host: no kcap line in its data, stats on the original stderr" ||
    { head -3 "$T/data.txt"; fail "fd 2 reused (rc $rc)"; }

# ---- relative KCAP_DIR, chdir before the first call ----
mkdir -p "$T/cwd" "$T/elsewhere"
( cd "$T/cwd" && with_kcap KCAP_DIR=rel -- "$CLIENT" --calls 2 --seed 65 --quiet --chdir "$T/elsewhere" 2>"$T/rel.err" )
[ "$(count_h5 "$T/cwd/rel")" = 2 ] && [ ! -e "$T/elsewhere/rel" ] &&
    ok "relative KCAP_DIR resolved at start: 2 snapshots in the start directory's rel/" ||
    { cat "$T/rel.err"; fail "relative KCAP_DIR after chdir"; }

# ---- messages ----
with_kcap KCAP_DIR="$T/rank" KCAP_RANK=abc -- "$CLIENT" --calls 1 --seed 66 --quiet 2>"$T/rank.err"
[ "$(grep -c "KCAP_RANK='abc'" "$T/rank.err")" = 1 ] && ls "$T/rank" | grep -qv -- '-r' &&
    ok "garbage KCAP_RANK named in one line, ignored" || { cat "$T/rank.err"; fail "garbage KCAP_RANK"; }
"$KCAP" record -o "$T/qb" --queue-bytes 0 -- true 2>"$T/qb.err"
[ $? = 2 ] && grep -q -- "--queue-bytes 0" "$T/qb.err" && ok "record --queue-bytes 0 refused" || { cat "$T/qb.err"; fail "--queue-bytes 0"; }
"$KCAP" record --bogus 2>"$T/bogus.err"
[ $? = 2 ] && grep -q "unknown option '--bogus'" "$T/bogus.err" && ok "record --bogus: unknown option" || { cat "$T/bogus.err"; fail "--bogus"; }
finish
