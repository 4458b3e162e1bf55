#!/usr/bin/env bash
# test_capture_log_pipe.sh — a log line never stalls the host: stderr is a pipe whose reader
# never reads (a supervisor, `Popen(stderr=PIPE)` left unread). With KCAP_LOG=info every
# snapshot logs a line, far more than the 64 KiB a pipe holds; the host must finish its calls
# and exit, as it does without the preload (lines past a full pipe are dropped, never waited
# for; a host stalled on its log would hit the 60 s timeout). Also a socket as stderr. The
# flush deadline is generous (30 s) so that every snapshot gets written however slow the
# machine's disk: the count then says that no call was lost to the full pipe.
. "$(dirname "$0")/lib.sh"
need "$LIBKCAP" "$CLIENT"
mkfifo "$T/fifo"
exec 7<>"$T/fifo" # we hold the read end and never read it
t0=$(date +%s)
with_kcap KCAP_DIR="$T/s" KCAP_LOG=info KCAP_FLUSH_TIMEOUT=30 -- timeout 60 "$CLIENT" --calls 900 --quiet \
    2>"$T/fifo" >/dev/null
rc=$?
dt=$(( $(date +%s) - t0 ))
exec 7<&-
n=$(count_h5 "$T/s")
[ $rc = 0 ] && [ "$n" = 900 ] && ok "stderr an undrained pipe: 900 calls captured, exit 0 in ${dt}s" ||
    fail "stderr an undrained pipe: exit $rc after ${dt}s (124 = hung), $n snapshots"

# a socket nobody reads as stderr (python socketpair; the peer never reads)
if "$PY" -c 'import socket' 2>/dev/null; then
    "$PY" - "$LIBKCAP" "$CLIENT" "$T/k" <<'PYEOF'
import os, socket, subprocess, sys, time
a, b = socket.socketpair()
env = dict(os.environ, LD_PRELOAD=sys.argv[1], KCAP_DIR=sys.argv[3], KCAP_LOG="info", KCAP_FLUSH_TIMEOUT="30")
t0 = time.time()
p = subprocess.run(["timeout", "60", sys.argv[2], "--calls", "900", "--quiet"], stderr=a,
                   stdout=subprocess.DEVNULL, env=env)
print("socket rc", p.returncode, "in %.1fs" % (time.time() - t0))
sys.exit(0 if p.returncode == 0 else 1)
PYEOF
    [ $? = 0 ] && ok "stderr an unread socket: exit 0" || fail "stderr an unread socket"
fi
finish
