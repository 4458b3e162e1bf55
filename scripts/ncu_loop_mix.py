#!/usr/bin/env python3
"""ncu_loop_mix.py — the instruction mix of a kernel's main loop, per warp per iteration, from
the per-SASS-instruction page that `bench_gpu_dev.sh ncu` exports (ncu --page source --csv
--print-source sass). Why: the twenty-first session's loop probes showed v7's tile costs about
its instruction count times the issue latency two warps per scheduler cannot hide, so the next
kernel steps are judged by instructions per tile, by region (docs/PERF.md, issue 16).

The normaliser is the most common "Instructions Executed" count among HMMA lines (every warp
runs each loop MMA once per iteration: warps x iterations); the loop is every instruction
executed at least --share times that (default 1/8: also the lines only one warp of eight runs
per iteration, such as an index-ring or loader warp's), and its counts are per warp on average.
Regions split the loop at its MMA runs (HMMA lines at most --gap non-HMMA lines apart): before
the first run, each run, between runs, after the last.

Usage: ncu_loop_mix.py SOURCE.csv [--gap N] [--top N]
"""
import argparse
import collections
import csv
import re
import sys

CLASSES = [
    ("HMMA", r"HMMA"), ("LDSM", r"LDSM"), ("LDS/STS", r"(LDS|STS)\b"), ("cp.async", r"(LDGSTS|LDGDEPBAR|DEPBAR)"),
    ("mbarrier", r"SYNCS"), ("barrier", r"(BAR|B2R)\b"), ("MUFU", r"MUFU"), ("SHFL", r"SHFL"),
    ("branch", r"(BRA|BSSY|BSYNC|WARPSYNC|YIELD|EXIT|RET|CALL)\b"), ("float ALU", r"(F[A-Z0-9]*|HADD2|HFMA2)\b"),
]


def opcode(src):
    """The opcode of a SASS line, without its predicate guard and modifiers."""
    s = re.sub(r"^@!?U?P\w+\s+", "", src.strip())
    return s.split()[0].split(".")[0] if s else ""


def klass(op):
    for name, pat in CLASSES:
        if re.fullmatch(pat, op):
            return name
    return "int/addr ALU"


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    hdr_i = next((i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r), None)
    if hdr_i is None:
        sys.exit(f"{path}: no header row with 'Source' and 'Instructions Executed' (an ncu --page source --csv export?)")
    hdr = rows[hdr_i]
    i_src, i_exe = hdr.index("Source"), hdr.index("Instructions Executed")
    i_smp = hdr.index("Warp Stall Sampling (All Samples)") if "Warp Stall Sampling (All Samples)" in hdr else None
    out = []
    for r in rows[hdr_i + 1:]:
        if len(r) <= max(i_src, i_exe):
            continue
        try:
            exe = int(r[i_exe] or 0)
            smp = int(r[i_smp] or 0) if i_smp is not None and len(r) > i_smp else 0
        except ValueError:
            continue
        out.append((r[i_src].strip(), exe, smp))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--gap", type=int, default=12, help="non-HMMA lines allowed inside one MMA run (12)")
    ap.add_argument("--top", type=int, default=10, help="most-sampled loop instructions listed (10)")
    ap.add_argument("--share", type=float, default=0.125,
                    help="least share of the normaliser a loop line is executed (0.125: one warp of 8)")
    a = ap.parse_args(argv)
    ins = load(a.csv)
    counts = collections.Counter(e for s, e, _ in ins if opcode(s) == "HMMA" and e > 0)
    if not counts:
        sys.exit(f"{a.csv}: no executed HMMA instruction: not an MMA kernel's source page")
    norm = counts.most_common(1)[0][0]
    loop = [(k, s, e, smp) for k, (s, e, smp) in enumerate(ins) if e >= a.share * norm]
    mix, smix = collections.Counter(), collections.Counter()
    for _, s, e, smp in loop:
        mix[klass(opcode(s))] += e
        smix[klass(opcode(s))] += smp
    total, tsmp = sum(mix.values()), sum(smix.values()) or 1
    print(f"loop: {len(loop)} SASS lines executed >= {a.share:g} x {norm} times (warps x iterations = {norm}); "
          f"{total / norm:.1f} instructions per warp per iteration")
    for name, v in mix.most_common():
        print(f"  {name:13s} {v / norm:7.1f}  ({100 * v / total:4.1f} % of instructions, {100 * smix[name] / tsmp:4.1f} % of samples)")
    # regions between the MMA runs
    runs, cur = [], None
    for i, (_, s, _, _) in enumerate(loop):
        if opcode(s) == "HMMA":
            if cur and i - cur[1] <= a.gap + 1:
                cur[1] = i
            else:
                cur = [i, i]
                runs.append(cur)
    bounds, prev = [], 0
    for n, (lo, hi) in enumerate(runs):
        bounds.append(("before MMA run 1" if n == 0 else f"between MMA runs {n} and {n + 1}", prev, lo))
        bounds.append((f"MMA run {n + 1}", lo, hi + 1))
        prev = hi + 1
    bounds.append(("after the last MMA run", prev, len(loop)))
    print("regions (instructions per warp per iteration):")
    for name, lo, hi in bounds:
        c = collections.Counter()
        for _, s, e, _ in loop[lo:hi]:
            c[klass(opcode(s))] += e / norm
        tot = sum(c.values())
        if tot:
            top = ", ".join(f"{k} {v:.1f}" for k, v in c.most_common(5))
            print(f"  {name:34s} {tot:6.1f}: {top}")
    print(f"most-sampled loop instructions (of {tsmp} loop samples):")
    for k, s, e, smp in sorted(loop, key=lambda t: -t[3])[: a.top]:
        print(f"  {100 * smp / tsmp:5.1f} %  #{k:<6d} x{e / norm:.2f}  {s[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
