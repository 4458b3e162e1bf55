#!/usr/bin/env bash
# test_capture_gpu_faults.sh — faults around the GPU path of libkcap on a real GPU (make
# test-gpu): kill -9 while long-context snapshots are staged and written (zero-stall and sync
# modes; no visible corrupt file, temp files cleaned at the next start), a staging ring too
# small for the calls (every call dropped and counted as too_big, the host's outputs
# unchanged), and a host whose CUDA context fails (illegal address): it ends as it does bare,
# within the flush deadline, never by a signal and never hanging.
. "$(dirname "$0")/lib.sh"
need_gpu_client

# 1. kill -9 while staging / writing (8,16,4,32768: ~300 MB a snapshot)
for mode in async sync; do
    D=$T/kill-$mode
    for delay in 3 6; do
        # env, not with_kcap: $! must be the client itself, not a subshell around it
        env KCAP_DIR="$D" KCAP_GPU_MODE=$mode LD_PRELOAD="$PRELOAD" $C --mode long --shape 8,16,4,32768 -n 3 \
            --replays 3 >/dev/null 2>&1 &
        pid=$!
        sleep $delay
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
    done
    n=$(count_h5 "$D")
    if "$KCAP" check "$D" >"$T/check.out" 2>&1 || [ "$n" = 0 ]; then
        ok "kill -9 x2 during capture ($mode): $n visible snapshots, all valid"
    else
        cat "$T/check.out"; fail "kill -9 ($mode): a visible snapshot is corrupt"
    fi
    tmp=$(find "$D" -name '.kcap-tmp.*' | wc -l)
    # the cleaner leaves temp files younger than KCAP_STALE_AGE_S (10 s) alone, as it must
    # (capture/kcap_arm.h): age them as the CPU fault suite does, then start a new host
    find "$D" -name '.kcap-tmp.*' -exec touch -d '-2 min' {} +
    with_kcap KCAP_DIR="$D" -- $C --mode eager -n 1 >/dev/null 2>&1
    left=$(find "$D" -name '.kcap-tmp.*' | wc -l)
    [ "$tmp" -gt 0 ] || echo "      note: no temp file was left by the kills ($mode)"
    [ "$left" = 0 ] && ok "$tmp temp files of killed runs ($mode) cleaned at the next start" ||
        fail "$left of $tmp temp files left after the next start ($mode)"
done

# 2. a ring smaller than one snapshot: every call dropped as too_big, outputs unchanged
mkdir -p "$T/ref" "$T/big"
$C --mode eager --shape 1,16,16,185000 -n 2 --seed 4 --dump "$T/ref" || fail "eager without preload"
with_kcap KCAP_DIR="$T/b" KCAP_RING_BYTES=64M -- $C --mode eager --shape 1,16,16,185000 -n 2 --seed 4 \
    --dump "$T/big" 2>"$T/b.err" || { cat "$T/b.err"; fail "eager under a 64M ring"; }
same_outputs "$T/ref" "$T/big" && grep -q "too_big=2 " "$T/b.err" && grep -q "larger than the GPU staging ring" "$T/b.err" &&
    [ "$(count_h5 "$T/b")" = 0 ] && ok "215 MB calls, 64 MiB ring: 2 dropped as too_big, logged, outputs unchanged" ||
    { cat "$T/b.err"; fail "too_big accounting"; }

# 3. the host's CUDA context fails after captured calls
$C --mode fault -n 2 >/dev/null 2>"$T/f0.err"; bare=$?
t0=$(date +%s)
with_kcap KCAP_DIR="$T/f" KCAP_FLUSH_TIMEOUT=20 -- timeout 120 $C --mode fault -n 2 >/dev/null 2>"$T/f.err"; rc=$?
dt=$(( $(date +%s) - t0 ))
[ $bare = 3 ] && [ $rc = 3 ] && [ $dt -le 60 ] &&
    ok "CUDA context failure: exit $rc under libkcap as bare ($bare), in ${dt}s; $(count_h5 "$T/f") snapshots" ||
    { cat "$T/f.err"; fail "context failure: bare exit $bare, under libkcap exit $rc after ${dt}s"; }
[ "$(count_h5 "$T/f")" = 0 ] || "$KCAP" check "$T/f" >/dev/null 2>&1 || fail "context failure left a corrupt snapshot"
finish
