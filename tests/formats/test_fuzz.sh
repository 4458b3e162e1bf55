#!/usr/bin/env bash
# test_fuzz.sh — the reader under ASan/UBSan via the libFuzzer target: first every file of
# the seed corpus (valid and corrupt) once, then a short fuzzing session (KCAP_FUZZ_SECONDS,
# default 25) on a scratch copy of the corpus. Skips (77) where clang/libFuzzer is missing.
. "$(dirname "$0")/../lib.sh"
F=$B/tests/formats/fuzz_reader
C=tests/formats/corpus
[ -x "$F" ] || skip "clang with libFuzzer not available: fuzz target not built"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:allocator_may_return_null=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}:halt_on_error=1
# crash artifacts go to KCAP_FUZZ_ARTIFACTS (default: the scratch dir), never the tree
art=${KCAP_FUZZ_ARTIFACTS:-$T/art}/; mkdir -p "$art"
"$F" -rss_limit_mb=4096 -artifact_prefix="$art" "$C"/* || die "corpus run"
mkdir -p "$T/corpus"; cp "$C"/* "$T/corpus"/
"$F" -max_total_time="${KCAP_FUZZ_SECONDS:-25}" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="$art" -print_final_stats=1 "$T/corpus" 2>&1 | tail -n 25
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || die "fuzzing found a problem (exit $rc)"
echo "fuzz ok"
