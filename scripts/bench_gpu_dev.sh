#!/usr/bin/env bash
# bench_gpu_dev.sh — one device-tool call for kernel work (not a make target): builds the CUDA
# library, GPU test and dev harness for one arch, runs the GPU correctness table, the kernel
# bench (vattn_dev --bench: every kernel variant checked and timed), optionally an ncu profile
# of one shape, and a SASS summary (HMMA / HGMMA / local-memory instruction counts per kernel),
# or the serving-set bench (vattn_dev --serving: per call in CUDA graphs, L2 warm / cold,
# eager). Logs go to $OUT (or build/dev-out). The VATTN_VARIANT runs use the dev build
# build/tests/libverify_attn_dev.so.
# Usage: bench_gpu_dev.sh [test] [testv3|testv7|testv8] [testsplit] [bench] [serving|breakdown] [racecheck] [race8] [ncu] [sass] [torch]
#                     or: bench_gpu_dev.sh final   (default build, make test-gpu, make bench-gpu, SASS)
set -uo pipefail
out=${OUT:-build/dev-out}
mkdir -p "$out"
arch=${NVCC_ARCH:-sm_90}
t0=$(date +%s)
if [ "${1:-}" = final ]; then
    # the closing run: default build (sm_90 + sm_120 + PTX), `make test-gpu` and `make bench-gpu`
    # (falling back to the kernels' own targets when another module's build fails there)
    rm -f build/lib/libverify_attn.so build/tests/libverify_attn_dev.so build/tests/vattn_dev
    if make -j16 all >"$out/make_all.log" 2>&1; then
        V=1 make test-gpu 2>&1 | tee "$out/test_gpu.txt" | grep -E "^(PASS|FAIL|SKIP) |passed|checks failed"
        BENCH_OUT=$out make bench-gpu 2>&1 | tee "$out/bench_gpu.txt" | grep -v "^csv"
    else
        echo "make all failed here (tail of make_all.log below): kernels' targets only"
        tail -5 "$out/make_all.log"
        make -j16 build/lib/libverify_attn.so build/lib/libverify_attn_cpu.so build/tests/libverify_attn_dev.so \
            build/tests/test_verify_gpu build/tests/vattn_dev >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
        V=1 bash scripts/run_tests.sh build/tests/test_verify_gpu tests/kernels/test_verify_race_gpu.sh 2>&1 | tee "$out/test_gpu.txt" |
            grep -E "^(PASS|FAIL|SKIP) |passed|checks failed"
        BENCH_OUT=$out bash scripts/bench_gpu.sh 2>&1 | tee "$out/bench_gpu.txt" | grep -v "^csv"
    fi
    VATTN_VARIANT=7 timeout 300 build/tests/test_verify_gpu >"$out/test_gpu_v7.txt" 2>&1
    echo "test_verify_gpu with v7 forced on every case: $(tail -1 "$out/test_gpu_v7.txt")"
    # racecheck / synccheck of every fast kernel: tests/kernels/test_verify_race_gpu.sh, run above
    cuobjdump --list-elf build/lib/libverify_attn.so
    cuobjdump --dump-sass build/lib/libverify_attn.so >"$out/sass.txt" 2>&1
    awk '/code for sm_/{a=$3} /Function :/{f=a" "$3} /HMMA/{h[f]++} /HGMMA/{g[f]++} /LDL|STL/{l[f]++}
         END{for (k in h) printf "%s HMMA %d HGMMA %d LDL/STL %d\n", k, h[k], g[k]+0, l[k]+0}' "$out/sass.txt"
    echo "total $(( $(date +%s) - t0 )) s"
    exit 0
fi
rm -f build/lib/libverify_attn.so build/tests/libverify_attn_dev.so build/tests/vattn_dev
if ! make -j16 build/lib/libverify_attn.so build/lib/libverify_attn_cpu.so build/tests/libverify_attn_dev.so \
        build/tests/test_verify_gpu build/tests/vattn_dev NVCC_ARCH="$arch" >"$out/build.log" 2>&1; then
    tail -40 "$out/build.log"; exit 1
fi
echo "build ok ($(( $(date +%s) - t0 )) s)"
for what in "$@"; do
    case $what in
    test)
        timeout 300 build/tests/test_verify_gpu >"$out/test_gpu.log" 2>&1
        echo "test_verify_gpu rc=$? ($(( $(date +%s) - t0 )) s)"
        grep -E "^FAIL|checks failed" "$out/test_gpu.log" | head -20
        grep -E "^\| .*(ext|graph)" "$out/test_gpu.log" | awk -F'|' '{n[$3]++; if ($8 ~ /PASS/) p[$3]++} END {for (k in n) printf "  rows%s: %d/%d PASS\n", k, p[k], n[k]}' ;;
    testv[378])
        v=${what#testv}
        VATTN_VARIANT=$v timeout 300 build/tests/test_verify_gpu >"$out/test_gpu_v$v.log" 2>&1
        echo "test_verify_gpu (VATTN_VARIANT=$v) rc=$?"
        grep -E "^FAIL|checks failed" "$out/test_gpu_v$v.log" | head -20 ;;
    testsplit)
        # forced split counts (the dev build; the plans of the calls printed and counted)
        for ns in 2 7 16 40; do
            VATTN_FORCE_NSPLIT=$ns VATTN_DEV_PLAN=1 timeout 300 build/tests/test_verify_gpu >"$out/test_gpu_ns$ns.log" \
                2>"$out/plan_ns$ns.log"
            echo "test_verify_gpu (VATTN_FORCE_NSPLIT=$ns) rc=$?: $(tail -1 "$out/test_gpu_ns$ns.log")"
            grep -E "^FAIL|checks failed" "$out/test_gpu_ns$ns.log" | head -10
            sed -E 's/.* (v[378]) grid [0-9]+ x ([0-9]+) x .*/\1 splits \2/' "$out/plan_ns$ns.log" | sort | uniq -c |
                sort -rn | head -8 | tr '\n' ';'
            echo
        done ;;
    bench)
        timeout 400 build/tests/vattn_dev --bench >"$out/bench.log" 2>&1
        echo "vattn_dev --bench rc=$? ($(( $(date +%s) - t0 )) s)"
        grep -v "^csv" "$out/bench.log" ;;
    serving|breakdown)
        # breakdown: the serving table plus, per serving row, time by stage and a split sweep
        flag=--serving; [ "$what" = breakdown ] && flag=--serving-breakdown
        timeout 300 build/tests/vattn_dev $flag >"$out/serving.log" 2>&1
        echo "vattn_dev $flag rc=$? ($(( $(date +%s) - t0 )) s)"
        grep -v "^csv" "$out/serving.log" ;;
    racecheck)
        # shared-memory hazards of both fast kernels (verify and extend calls) on one short case
        san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
        for v in 7 8 3; do
            VATTN_VARIANT=$v timeout 150 "$san" --tool racecheck --racecheck-report hazard \
                build/tests/test_verify_gpu ${RACE_CASE:-nanv-h8-q4} >"$out/racecheck_v$v.txt" 2>&1
            echo "racecheck v$v rc=$?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck_v$v.txt" | head -2 | tr '\n' ' ')$(grep -E 'checks failed' "$out/racecheck_v$v.txt")"
        done ;;
    race8)
        # racecheck + synccheck of v3, v7, v8 on the ragged and even v8 cases (the make test-gpu test)
        bash tests/kernels/test_verify_race_gpu.sh 2>&1 | tee "$out/race.txt" ;;
    torch)
        timeout 300 python3 scripts/bench_gpu_torch.py "$out/bench.log" >"$out/bench_table.md" 2>&1
        cat "$out/bench_table.md" ;;
    ncu)
        # one launch of the fast kernel (NCU_VARIANT, NCU_KERNEL regex, NCU_SHAPE): speed of
        # light, stall reasons, instruction mix; the report is kept and its per-SASS-instruction
        # page exported as CSV (stall samples per instruction) for offline reading
        ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        VATTN_VARIANT=${NCU_VARIANT:-7} timeout 200 "$ncu" --clock-control none -k regex:${NCU_KERNEL:-vattn_fast7} \
            --launch-skip 0 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
            --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
            --section LaunchStats --section Occupancy --section InstructionStats --section SourceCounters \
            --metrics 'regex:smsp__average_warps?_.*issue_stalled_.*' -o "$out/ncu" -f \
            build/tests/vattn_dev ${NCU_SHAPE:-4 64 16 32768} >"$out/ncu_run.log" 2>&1
        echo "ncu rc=$?"
        "$ncu" --import "$out/ncu.ncu-rep" >"$out/ncu.log" 2>&1
        "$ncu" --import "$out/ncu.ncu-rep" --page source --csv --print-source sass >"$out/ncu_source.csv" 2>&1
        echo "source page rc=$? ($(wc -l <"$out/ncu_source.csv") lines)"
        # instructions per warp per tile by class and by region between the MMA runs
        python3 scripts/ncu_loop_mix.py "$out/ncu_source.csv" | tee "$out/ncu_loop_mix.txt" | head -24
        grep -E "Duration|Throughput|Issued|Eligible|Pipe|Bank|Executed Instructions  " "$out/ncu.log" | head -30
        grep -E "issue_stalled" "$out/ncu.log" | sort -k3 -g -r | head -14 ;;
    sass)
        cuobjdump --dump-sass build/lib/libverify_attn.so >"$out/sass.txt" 2>&1
        awk '/Function :/{f=$3} /HMMA/{h[f]++} /HGMMA/{g[f]++} /LDL|STL/{l[f]++} /BAR.SYNC/{b[f]++}
             END{for (k in h) printf "%s HMMA %d HGMMA %d LDL/STL %d BAR %d\n", k, h[k], g[k]+0, l[k]+0, b[k]+0}' \
            "$out/sass.txt" ;;
    esac
done
echo "total $(( $(date +%s) - t0 )) s"
