#!/usr/bin/env bash
# test_capture_faults.sh — capture problems never reach the host. Bad environment values
# (one clear "kcap:" line naming the variable, capture off), an uncreatable KCAP_DIR, a full
# disk (RLIMIT_FSIZE with SIGXFSZ ignored; a 64 KiB tmpfs and a read-only mount where this
# machine lets us mount), calls the library rejects (skipped, counted, status unchanged).
# In every case the client exits 0 and what each call returned hashes identically to a run
# without libkcap.so.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT"
"$CLIENT" --calls 5 --seed 41 --hash >"$T/ref.hash" || fail "reference run"

# bad NAME 'VAR=VALUE ...' PATTERN: host unaffected, exactly one kcap line matching PATTERN
bad() {
    local name=$1 vars=$2 pat=$3
    # shellcheck disable=SC2086
    env -u KCAP_DIR $vars LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 5 --seed 41 --hash \
        >"$T/$name.hash" 2>"$T/$name.err"
    local rc=$?
    cmp -s "$T/ref.hash" "$T/$name.hash" && [ $rc = 0 ] || { fail "$name: host affected (rc $rc)"; return; }
    if [ "$(grep -c '^kcap:' "$T/$name.err")" = 1 ] && grep -q "$pat" "$T/$name.err" &&
        grep -q "capture is off" "$T/$name.err"; then
        ok "$name: one log line: $(cut -c1-90 "$T/$name.err")"
    else
        cat "$T/$name.err"; fail "$name: log contract"
    fi
    [ "$(count_h5 "$T/snaps")" = 0 ] || fail "$name: snapshots written"
}
bad every "KCAP_DIR=$T/snaps KCAP_EVERY=0" KCAP_EVERY
bad calls "KCAP_DIR=$T/snaps KCAP_CALLS=5-1" KCAP_CALLS
bad maxbytes "KCAP_DIR=$T/snaps KCAP_MAX_BYTES=12Q" KCAP_MAX_BYTES
bad dormant "KCAP_DIR=$T/snaps KCAP_DORMANT=maybe" KCAP_DORMANT
bad log "KCAP_DIR=$T/snaps KCAP_LOG=loud" KCAP_LOG
bad runid "KCAP_DIR=$T/snaps KCAP_RUN_ID=a/b" KCAP_RUN_ID
bad nodir "KCAP_MAX=3" "KCAP_DIR is not set"
bad mkdir "KCAP_DIR=/proc/kcap-cannot-exist/x" "cannot create KCAP_DIR"

# disk full: file size limit, SIGXFSZ ignored (writes then fail with EFBIG)
(
    trap '' XFSZ
    ulimit -f 8
    env KCAP_DIR="$T/fsz" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 5 --seed 41 --hash >"$T/fsz.hash" 2>"$T/fsz.err"
) ; rc=$?
cmp -s "$T/ref.hash" "$T/fsz.hash" && [ $rc = 0 ] && ok "file-size limit: host unaffected" || fail "file-size limit: host affected (rc $rc)"
[ "$(grep -c 'failed' "$T/fsz.err")" -ge 1 ] && grep -q "capture paused" "$T/fsz.err" &&
    [ "$(grep -c '^kcap:' "$T/fsz.err")" -le 3 ] && ok "file-size limit: logged once, capture paused (backs off)" ||
    { cat "$T/fsz.err"; fail "file-size limit log"; }
[ "$(count_h5 "$T/fsz")" = 0 ] && ! ls -A "$T/fsz" | grep -q . && ok "no partial files left" || { ls -la "$T/fsz"; fail "partial files"; }

# a real full filesystem and a read-only one, where mounting is allowed
mkdir -p "$T/mnt"
if mount -t tmpfs -o size=64k tmpfs "$T/mnt" 2>/dev/null; then
    env KCAP_DIR="$T/mnt/snaps" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 5 --seed 41 --hash >"$T/tmpfs.hash" 2>"$T/tmpfs.err"
    rc=$?
    cmp -s "$T/ref.hash" "$T/tmpfs.hash" && [ $rc = 0 ] && grep -q "capture stopped\|failed" "$T/tmpfs.err" &&
        ok "64 KiB tmpfs full: host unaffected, logged" || { cat "$T/tmpfs.err"; fail "tmpfs full"; }
    mkdir -p "$T/mnt/ro"
    mount -o remount,ro "$T/mnt" 2>/dev/null
    env KCAP_DIR="$T/mnt/ro" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 5 --seed 41 --hash >"$T/ro.hash" 2>"$T/ro.err"
    rc=$?
    cmp -s "$T/ref.hash" "$T/ro.hash" && [ $rc = 0 ] && grep -q "failed\|cannot" "$T/ro.err" &&
        ok "read-only filesystem: host unaffected, logged" || { cat "$T/ro.err"; fail "read-only fs"; }
    umount "$T/mnt"
else
    echo "skip: tmpfs / read-only mount (not permitted here); RLIMIT_FSIZE covered disk full"
fi

# calls the library rejects: skipped and counted, the status passes through unchanged
"$CLIENT" --calls 6 --seed 42 --invalid --hash >"$T/inv_ref.hash" 2>/dev/null
env KCAP_DIR="$T/inv" LD_PRELOAD="$PRELOAD" "$CLIENT" --calls 6 --seed 42 --invalid --hash >"$T/inv.hash" 2>"$T/inv.err"
cmp -s "$T/inv_ref.hash" "$T/inv.hash" && [ "$(count_h5 "$T/inv")" = 3 ] && grep -q "invalid=3" "$T/inv.err" &&
    ok "rejected calls: status unchanged, 3 skipped, 3 captured" || { cat "$T/inv.err"; fail "invalid calls"; }
finish
