#!/usr/bin/env bash
# test_export_safety.sh — `kcap export` never destroys a file it was not asked to create: an
# existing OUT (the default FILE-with-the-new-suffix included, or a symbolic link to a file)
# is refused with a message naming it, the input snapshot is never written over by its own
# export, a directory is refused, a FIFO and an fd alias (/proc/self/fd/1, and /dev/stdout
# and /dev/null in a private mount namespace with a scratch /dev when root can make one) are
# written in place instead of being replaced by a regular file; and names starting with '-'
# (`-- -x.h5`, `-o -out.npz`) that the C parser accepts reach the Python side intact.
. "$(dirname "$0")/../lib.sh"
require "$KCAP"
"$PY" -c 'import numpy' 2>/dev/null || skip "numpy not installed"
SNAP=$ROOT/tests/golden/snapshots/h8_q1_s0.h5
require "$SNAP"
cd "$T"

# is_npz F: F is a readable npz holding the snapshot's lse output; kept F: F still says "keep"
is_npz() { "$PY" -c 'import numpy as np, sys; np.load(sys.argv[1])["outputs/lse"]' "$1" 2>/dev/null; }
echo keep > keep.ref
kept() { cmp -s keep.ref "$1"; }

# 1. the default OUT exists: refused, kept, named
cp "$SNAP" a.h5
cp keep.ref a.npz
err=$(timeout 60 "$KCAP" export a.h5 --to npz 2>&1 >/dev/null); rc=$?
kept a.npz && ok "default OUT a.npz kept" ||
    fail "the default OUT a.npz was replaced (rc $rc)"
[ $rc -eq 1 ] && grep -q "a.npz: already exists" <<<"$err" && ok "refusal names a.npz: $err" ||
    fail "rc $rc, message '$err' (want 1 and 'a.npz: already exists')"
# the same through -o, for --to pt too (refused before torch is even needed)
for fmt in npz pt; do
    cp keep.ref "o.$fmt"
    err=$(timeout 60 "$KCAP" export a.h5 --to $fmt -o "o.$fmt" 2>&1); rc=$?
    [ $rc -eq 1 ] && kept "o.$fmt" && grep -q "o.$fmt: already exists" <<<"$err" &&
        ok "-o o.$fmt (existing) refused" || fail "-o o.$fmt: rc $rc, '$err'"
done

# 2. a snapshot whose name already ends in .npz: its export would be itself
cp "$SNAP" snap.npz
err=$(timeout 60 "$KCAP" export snap.npz --to npz 2>&1); rc=$?
cmp -s "$SNAP" snap.npz && ok "snap.npz not written over by its own export" ||
    fail "snap.npz (the input) was written over (rc $rc)"
[ $rc -eq 1 ] && grep -q "snap.npz: is the input snapshot" <<<"$err" && ok "says so: $err" ||
    fail "rc $rc, '$err' (want 1 and 'snap.npz: is the input snapshot')"
ln -s snap.npz alias.npz
timeout 60 "$KCAP" export snap.npz --to npz -o alias.npz > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && cmp -s "$SNAP" snap.npz && [ -L alias.npz ] &&
    ok "-o a link to the input refused" || fail "-o alias.npz (-> the input): rc $rc"

# 3. symbolic links: to a file (kept, target kept), dangling (kept)
cp keep.ref tgt
ln -s tgt out.lnk
ln -s nowhere dangling.npz
err=$(timeout 60 "$KCAP" export a.h5 --to npz -o out.lnk 2>&1); rc=$?
[ $rc -eq 1 ] && [ -L out.lnk ] && kept tgt && grep -q "out.lnk: already exists" <<<"$err" &&
    ok "-o out.lnk (-> tgt) refused, link and target kept" ||
    fail "-o out.lnk: rc $rc, link $( [ -L out.lnk ] && echo kept || echo replaced), '$err'"
err=$(timeout 60 "$KCAP" export a.h5 --to npz -o dangling.npz 2>&1); rc=$?
[ $rc -eq 1 ] && [ -L dangling.npz ] && [ ! -e nowhere ] && grep -q "dangling.npz" <<<"$err" &&
    ok "-o a dangling link refused: $err" || fail "-o dangling.npz: rc $rc, '$err'"

# 4. a directory
mkdir d.npz
err=$(timeout 60 "$KCAP" export a.h5 --to npz -o d.npz 2>&1); rc=$?
[ $rc -eq 1 ] && [ -d d.npz ] && [ -z "$(ls -A d.npz)" ] && grep -q "d.npz: is a directory" <<<"$err" &&
    ok "-o DIR refused: $err" || fail "-o d.npz (a directory): rc $rc, '$err'"

# 5. a FIFO is written into, not replaced
mkfifo out.fifo
timeout 60 cat out.fifo > fifo.got &
reader=$!
timeout 60 "$KCAP" export a.h5 --to npz -o out.fifo -q; rc=$?
# a failed or replacing export never opens the FIFO: do not leave the reader waiting on it
{ [ $rc -ne 0 ] || [ ! -p out.fifo ]; } && kill $reader 2>/dev/null
wait $reader
[ $rc -eq 0 ] && [ -p out.fifo ] && is_npz fifo.got && ok "-o FIFO: written through, still a FIFO" ||
    fail "-o out.fifo: rc $rc, $( [ -p out.fifo ] && echo still a FIFO || echo replaced), $(stat -c %s fifo.got 2>/dev/null) bytes read"

# 6. an fd alias of stdout: the bytes go to stdout (a file or a pipe), the note to stderr
timeout 60 "$KCAP" export a.h5 --to npz -o /proc/self/fd/1 > fd.got 2> fd.err; rc=$?
[ $rc -eq 0 ] && is_npz fd.got && grep -q "wrote stdout" fd.err &&
    ok "-o /proc/self/fd/1 (stdout a file) is stdout" || fail "-o /proc/self/fd/1 > file: rc $rc, $(cat fd.err)"
timeout 60 "$KCAP" export a.h5 --to npz -o /proc/self/fd/1 2> pipe.err | cat > pipe.got
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && is_npz pipe.got && ok "-o /proc/self/fd/1 (stdout a pipe) is stdout" ||
    fail "-o /proc/self/fd/1 | cat: rc $rc, $(cat pipe.err)"

# /dev/stdout and /dev/null themselves: as root only where a scratch /dev can be mounted in a
# private namespace (never the real ones); as another user the real ones are safe to name
devcheck='
exp=$1 a=$2 out=$3
$exp a.h5 --to npz -o /dev/stdout > "$out/dev.got" 2> "$out/dev.err"; echo "stdout_rc=$?"
$exp a.h5 --to npz -o /dev/null -q; echo "null_rc=$?"
[ -L /dev/stdout ] && echo stdout_link_kept
[ -c /dev/null ] && echo null_dev_kept
'
if [ "$(id -u)" = 0 ]; then
    if unshare -m true 2>/dev/null; then
        res=$(unshare -m bash -c 'mount -t tmpfs none /dev && ln -s /proc/self/fd/1 /dev/stdout &&
            mknod /dev/null c 1 3 && chmod 666 /dev/null && bash -c "$1" devcheck "$2" "$3" "$4"' \
            ns "$devcheck" "timeout 60 $KCAP export" a.h5 "$T")
    else
        res=""; echo "no private mount namespace here: /dev/stdout and /dev/null not checked as root"
    fi
else
    res=$(bash -c "$devcheck" devcheck "timeout 60 $KCAP export" a.h5 "$T")
fi
if [ -n "$res" ]; then
    grep -q stdout_rc=0 <<<"$res" && grep -q stdout_link_kept <<<"$res" && is_npz dev.got &&
        ok "-o /dev/stdout: the npz reached stdout, /dev/stdout still a link" ||
        fail "-o /dev/stdout: $(tr '\n' ' ' <<<"$res") $(cat dev.err 2>/dev/null), $(stat -c %s dev.got 2>/dev/null) bytes"
    grep -q null_rc=0 <<<"$res" && grep -q null_dev_kept <<<"$res" &&
        ok "-o /dev/null: written, still a device" || fail "-o /dev/null: $(tr '\n' ' ' <<<"$res")"
fi

# 7. a new file still appears whole, with no temp file left beside it
mkdir new
timeout 60 "$KCAP" export a.h5 --to npz -o new/x.npz -q; rc=$?
[ $rc -eq 0 ] && is_npz new/x.npz && [ "$(ls -A new)" = x.npz ] && ok "a new OUT written, nothing else left" ||
    fail "-o new/x.npz: rc $rc, dir holds: $(ls -A new | tr '\n' ' ')"

# 8. names starting with '-', which getopt accepted, reach argparse as names
cp "$SNAP" ./-x.h5
err=$(timeout 60 "$KCAP" export --to npz -- -x.h5 2>&1); rc=$?
[ $rc -eq 0 ] && is_npz ./-x.npz && ok "export -- -x.h5 wrote -x.npz" || fail "export -- -x.h5: rc $rc, '$err'"
err=$(timeout 60 "$KCAP" export a.h5 --to npz -o -out.npz 2>&1); rc=$?
[ $rc -eq 0 ] && is_npz ./-out.npz && ok "-o -out.npz wrote -out.npz" || fail "-o -out.npz: rc $rc, '$err'"
err=$(timeout 60 "$KCAP" export --to npz --raw --output=-raw.npz -- -x.h5 2>&1); rc=$?
[ $rc -eq 0 ] && is_npz ./-raw.npz && ok "--output=-raw.npz --raw -- -x.h5" || fail "--output=-raw.npz: rc $rc, '$err'"

finish "export never replaces what it was not asked to create"
