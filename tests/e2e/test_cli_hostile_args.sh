#!/usr/bin/env bash
# test_cli_hostile_args.sh — arguments and paths a hostile review of the CLI found mishandled
# (twenty-second session); each check failed on the tree before its fix (make test):
#   1  `kcap replay --kernel FIFO` / `--ref-lib FIFO` hung in open(): now refused at once,
#      naming the path ("not a regular file");
#   2  `kcap record --lib FIFO` hung the command; `--lib` naming a directory, or libkcap.so
#      at a path with a space (LD_PRELOAD splits on it), ran CMD uncaptured and exited 0:
#      now refused, naming the path;
#   3  `--atol 1e400` (strtod overflow to inf) made every output pass: now a usage error
#      (exit 2) naming the option, in replay and diff;
#   4  a bad file nested more than 64 directories deep, or at a path over 4095 bytes, was
#      skipped by the directory walk (check said OK): now an error naming the directory;
#   5  kcap.check("good.h5\0/nonexistent") checked good.h5 (ctypes cut the path at the NUL)
#      and returned None; a name from os.listdir with undecodable bytes, or a bytes path,
#      raised UnicodeEncodeError / AttributeError: now ValueError for the NUL, and the
#      other two read the file;
#   6  `kcap replay --watch --save-outputs DIR`: every run after the first failed each case
#      ("exists", the saver never replaces a file): now run N saves into DIR/run-N;
#   7  `kcap dump FILE extra` printed the whole usage without naming `extra`.
. "$(dirname "$0")/../lib.sh"
GEN=$B/tests/kcap_gen_snap
require "$KCAP" "$GEN" "$CPU" "$LIBKCAP"
"$GEN" --lib "$CPU" --out "$T/s" --count 1 --seed 3 >"$T/gen.log" 2>&1 || { cat "$T/gen.log"; die "generator"; }
good=$T/s/snap-0000.h5
[ -f "$good" ] || die "no snapshot made in $T/s"
mkfifo "$T/lib.fifo"

# 1: a FIFO as the kernel or the reference library
timeout 20 "$KCAP" replay "$good" --kernel "$T/lib.fifo" >"$T/r1" 2>&1
rc=$?
[ $rc -ne 124 ] && grep -q "lib.fifo: not a regular file" "$T/r1" && ok "replay --kernel FIFO refused (rc $rc)" ||
    fail "replay --kernel FIFO: rc $rc (124 = hung): $(head -3 "$T/r1")"
timeout 20 "$KCAP" replay "$good" --kernel "$CPU" --ref-lib "$T/lib.fifo" >"$T/r2" 2>&1
rc=$?
[ $rc -ne 124 ] && grep -q "lib.fifo: not a regular file" "$T/r2" && ok "replay --ref-lib FIFO refused (rc $rc)" ||
    fail "replay --ref-lib FIFO: rc $rc (124 = hung): $(head -3 "$T/r2")"

# 2: record's --lib: a FIFO, a directory, a path LD_PRELOAD cannot carry
timeout 20 "$KCAP" record -q -o "$T/rec1" --lib "$T/lib.fifo" -- true >"$T/c1" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "lib.fifo is not a regular file" "$T/c1" && ok "record --lib FIFO refused" ||
    fail "record --lib FIFO: rc $rc (124 = hung): $(head -3 "$T/c1")"
timeout 20 "$KCAP" record -q -o "$T/rec2" --lib "$T" -- true >"$T/c2" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "is not a regular file" "$T/c2" && ok "record --lib DIR refused" ||
    fail "record --lib DIR: rc $rc: $(head -3 "$T/c2")"
mkdir -p "$T/with space"
cp "$LIBKCAP" "$T/with space/libkcap.so"
timeout 20 "$KCAP" record -q -o "$T/rec3" --lib "$T/with space/libkcap.so" -- true >"$T/c3" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "with space/libkcap.so: LD_PRELOAD cannot carry a path with a space" "$T/c3" &&
    ok "record --lib at a path with a space refused" || fail "record --lib with a space: rc $rc: $(head -3 "$T/c3")"

# 3: tolerances that overflow to infinity
"$KCAP" replay "$good" --kernel "$CPU" --atol 1e400 >"$T/t1" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--atol: '1e400' is not a finite non-negative number" "$T/t1" &&
    ok "replay --atol 1e400: usage error" || fail "replay --atol 1e400: rc $rc: $(head -3 "$T/t1")"
"$KCAP" diff "$good" "$good" --rtol inf >"$T/t2" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--rtol: 'inf' is not a finite non-negative number" "$T/t2" &&
    ok "diff --rtol inf: usage error" || fail "diff --rtol inf: rc $rc: $(head -3 "$T/t2")"

# 4: the directory walk covers everything or says what it did not
d=$T/deep
mkdir -p "$d"
cp "$good" "$d/good.h5"
p=$d
for _ in $(seq 1 70); do p=$p/d; done
mkdir -p "$p"
echo "not a snapshot" >"$p/bad.h5"
timeout 60 "$KCAP" check "$d" >"$T/w1" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "nested more than 64 directories deep: not searched" "$T/w1" &&
    ok "a directory 65 deep is reported, not skipped" || fail "deep tree: check rc $rc: $(tail -3 "$T/w1")"
l=$T/long
mkdir -p "$l"
cp "$good" "$l/good.h5"
n=$(printf 'x%.0s' $(seq 1 250))
# directories of 251 bytes each while the path stays under 4095, then (relative to it, as
# no absolute path that long can be opened) a bad file whose full path would not fit
levels=$(((4095 - ${#l} - 1) / 251))
(cd "$l" && for _ in $(seq 1 "$levels"); do mkdir "$n" && cd "$n" || exit 1; done &&
    echo "not a snapshot" >"$n.h5") || die "building the long path"
timeout 60 "$KCAP" check "$l" >"$T/w2" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "cannot read directory: a path longer than 4095 bytes, not searched" "$T/w2" &&
    ok "an entry whose path would exceed 4095 bytes is reported" || fail "long path: check rc $rc: $(tail -3 "$T/w2")"

# 5: the Python reader's paths
mkdir -p "$T/py"
cp "$good" "$T/py/$(printf 'a\377.h5')"
PYTHONPATH=$ROOT/python "$PY" - "$T/py" "$good" >"$T/p" 2>&1 <<'EOF'
import os, sys
import kcap
d, good = sys.argv[1], sys.argv[2]
(name,) = os.listdir(d)  # str with a surrogate escape for the \xff byte
kcap.check(os.path.join(d, name))
print("listdir name: check ok, load", kcap.load(os.path.join(d, name)).meta["call"])
print("bytes path: load", kcap.load(os.fsencode(good)).meta["call"])
try:
    kcap.check(good + "\0/nonexistent")
    print("NUL: accepted")
except ValueError as e:
    print("NUL: ValueError:", e)
EOF
rc=$?
grep -q "listdir name: check ok, load vattn_verify" "$T/p" && ok "kcap.check / load of an os.listdir name with an undecodable byte" ||
    fail "undecodable name (rc $rc): $(cat "$T/p")"
grep -q "bytes path: load vattn_verify" "$T/p" && ok "kcap.load of a bytes path" || fail "bytes path: $(cat "$T/p")"
grep -q "NUL: ValueError: kcap: path .* contains a NUL byte" "$T/p" && ok "a path with a NUL byte refused" ||
    fail "NUL in a path: $(cat "$T/p")"

# 6: --watch with --save-outputs: a directory per run
cp "$CPU" "$T/k.so"
(sleep 3 && touch "$T/k.so") &
at_exit "kill $! 2>/dev/null"
timeout 60 "$KCAP" replay "$good" --kernel "$T/k.so" --watch --watch-runs 2 --save-outputs "$T/wsave" -q >"$T/wa" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '1 case: 1 passed' "$T/wa")" -eq 2 ] && [ -f "$T/wsave/run-1/snap-0000.h5" ] &&
    [ -f "$T/wsave/run-2/snap-0000.h5" ] && ok "--watch --save-outputs: run 1 and run 2 saved apart, both pass" ||
    fail "--watch --save-outputs: rc $rc: $(cat "$T/wa")"

# 7: dump names what is wrong with its arguments
"$KCAP" dump "$good" extra-arg >"$T/dd" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "unexpected argument 'extra-arg'" "$T/dd" && ok "dump FILE extra: the extra argument named" ||
    fail "dump FILE extra: rc $rc: $(head -2 "$T/dd")"
finish
