#!/usr/bin/env bash
# test_ncu_loop_mix.sh — scripts/ncu_loop_mix.py (make test): on a small ncu source-page CSV
# whose loop is known (2 warps x 10 iterations: every loop MMA executed 20 times), the
# instructions per warp per iteration by class and by region between the MMA runs, lines of
# one warp in two counted as half, prologue / epilogue lines left out; a page without MMAs and
# a CSV that is not a source page are refused with the file named.
. "$(dirname "$0")/../lib.sh"
csv=$T/src.csv
{
    echo '"Kernel Name","void k(P)",'
    echo '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"'
    n=0
    row() { n=$((n + 1)); echo "\"0x$n\",\"$1\",\"$2\",\"0\",\"$2\",\"$3\""; }
    row "LDC R1, c[0x0][0x28]" 5 2                                  # prologue: out
    row "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R147+URZ+0x17b20], R144" 30 20
    row "IMAD R2, R3, 0xa0, R4" 10 20
    row "HMMA.16816.F32.BF16 R132, R152, R216, R132" 40 20      # run 1
    row "LDSM.16.M88.4 R152, [R224+0xa00]" 5 20
    row "HMMA.16816.F32.BF16 R136, R152, R216, R136" 40 20
    row "FADD R151, R147, R144" 20 20                               # between the runs
    row "@P1   LOP3.LUT R144, R244, 0x8, R227, 0xf8, !PT" 5 20
    row "MUFU.EX2 R246, R144" 5 20
    row "BAR.SYNC.DEFER_BLOCKING R3, 0x80" 25 20
    row "HMMA.16816.F32.BF16 R140, R148, R224, R140" 40 20      # run 2
    row "LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64], P0" 5 10      # after: one warp of two
    row "EXIT" 0 2                                                   # epilogue: out
} >"$csv"
out=$($PY scripts/ncu_loop_mix.py "$csv" --gap 2) || die "ncu_loop_mix.py failed on $csv"
echo "$out" | sed 's/^/    /'
expect() { echo "$out" | grep -qE -- "$1" && ok "$2" || fail "$2: no line matching '$1'"; }
expect '^loop: 11 SASS lines .*warps x iterations = 20\); 10\.5 instructions per warp per iteration' \
    "11 loop lines (prologue and epilogue out), 10.5 instructions per warp per iteration"
expect '^  HMMA +3\.0 ' "3 MMAs per warp per iteration"
expect '^  cp\.async +0\.5 ' "the one-warp copy counted as half"
expect '^  before MMA run 1 +2\.0: (mbarrier 1\.0, int/addr ALU 1\.0|int/addr ALU 1\.0, mbarrier 1\.0)$' "region before the first MMA run"
expect '^  MMA run 1 +3\.0: HMMA 2\.0, LDSM 1\.0$' "the first MMA run holds its LDSM"
expect '^  between MMA runs 1 and 2 +4\.0: ' "four lines between the runs"
expect '^  MMA run 2 +1\.0: HMMA 1\.0$' "the second run"
expect '^  after the last MMA run +0\.5: cp\.async 0\.5$' "after the last run"
expect '^ +[0-9.]+ %  #[0-9]+ +x1\.00  HMMA' "most-sampled lines listed"
# no MMA in the page / not a source page: refused, naming the file
head -3 "$csv" | sed 's/HMMA/IMAD/' >"$T/nomma.csv"
$PY scripts/ncu_loop_mix.py "$T/nomma.csv" >"$T/e1" 2>&1 && fail "a page without MMAs accepted" ||
    { grep -q "nomma.csv: no executed HMMA" "$T/e1" && ok "page without MMAs refused, file named" || fail "message: $(cat "$T/e1")"; }
printf 'a,b\n1,2\n' >"$T/other.csv"
$PY scripts/ncu_loop_mix.py "$T/other.csv" >"$T/e2" 2>&1 && fail "a non-ncu CSV accepted" ||
    { grep -q "other.csv: no header row" "$T/e2" && ok "non-ncu CSV refused, file named" || fail "message: $(cat "$T/e2")"; }
finish
