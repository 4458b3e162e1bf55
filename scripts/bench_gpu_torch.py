"""bench_gpu_torch.py — the PyTorch side of `make bench-gpu` and the final table.

Reads the CSV lines of `vattn_dev --bench` (ceilings, then per config the fast / reference
kernel times, unique bytes, FLOPs, roofline floor), times a PyTorch implementation of the same
operation on the same shapes (gather of the KV rows through a random slot permutation, bf16
bmm for S = Q K^T, fp32 softmax with the causal draft mask, bf16 bmm for O = P V), median of
CUDA-event timings with a 256 MB L2 flush before each run, and prints one markdown table.
Usage: python3 bench_gpu_torch.py VATTN_DEV_OUTPUT_FILE
"""
import sys

import torch


def torch_verify(q, pool, idx, bs, ql, H, scale):
    kv = idx.shape[1]
    K = pool[idx]                                           # [bs, kv, 576] gather
    qb = q.view(bs, ql * H, 576)                            # rows = (token, head)
    S = torch.bmm(qb, K.transpose(1, 2)).float() * scale    # [bs, M, kv]
    # causal mask over the last ql keys (draft tokens): row (i, h) sees draft j <= i
    i = torch.arange(ql, device=q.device).repeat_interleave(H)[:, None]
    j = torch.arange(ql, device=q.device)[None, :]
    S[:, :, kv - ql:].masked_fill_(j > i, float("-inf"))
    lse = torch.logsumexp(S, -1)
    P = torch.softmax(S, -1).to(torch.bfloat16)
    O = torch.bmm(P, K[:, :, :512])                         # [bs, M, 512]
    return O, lse


def time_ms(fn, reps=10):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush.zero_()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    rows, bw, peak = [], None, None
    for line in open(sys.argv[1]):
        f = line.strip().split(",")
        if f[0] != "csv":
            continue
        if f[1] == "ceiling":
            bw, peak = float(f[2]), float(f[3])
        elif f[1] == "cfg":
            rows.append([int(x) for x in f[2:6]] + [float(x) for x in f[6:12]])
    torch.manual_seed(0)
    print(f"ceilings (measured this run): D2D copy {bw/1e9:.0f} GB/s, mma.sync bf16 {peak/1e12:.1f} TFLOP/s")
    print("| bs | H | q | prefix | fast ms | GB/s | TFLOP/s | floor ms | fast/floor | ref ms | torch ms | speedup vs torch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst_speed, worst_floor = 1e9, 0.0
    for bs, H, ql, prefix, t_fast, t_ref, by, fl, floor_ms, rel in rows:
        kv = prefix + ql
        total = bs * kv
        slots = total + total // 8 + 1
        pool = (torch.rand(slots, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
        q = (torch.rand(bs * ql, H, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
        idx = torch.randperm(slots, device="cuda")[:total].view(bs, kv)
        try:
            t_torch = time_ms(lambda: torch_verify(q, pool, idx, bs, ql, H, 0.0625))
        except torch.cuda.OutOfMemoryError:
            t_torch = float("nan")
        del pool, q, idx
        torch.cuda.empty_cache()
        sp = t_torch / t_fast
        worst_speed = min(worst_speed, sp)
        if prefix >= 32768:
            worst_floor = max(worst_floor, t_fast / floor_ms)
        print(f"| {bs} | {H} | {ql} | {prefix} | {t_fast:.4f} | {by/t_fast/1e6:.0f} | {fl/t_fast/1e9:.1f} | "
              f"{floor_ms:.4f} | {t_fast/floor_ms:.2f} | {t_ref:.2f} | {t_torch:.3f} | {sp:.1f}x |")
    print(f"targets: min speedup vs torch {worst_speed:.1f}x (goal >= 10x); "
          f"worst fast/floor at prefix >= 32k {worst_floor:.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
