"""dflash_client.py — mimics the verify steps of a DFlash-style speculative-decoding server.

Per decode step, a batch of requests with ragged prefixes (0 included) verifies q_len draft
tokens: their KV rows were already written into a page_size = 1 pool at scattered slots,
kv_indices are int64 (as SGLang passes them), visibility is causal or a random draft tree,
and the verify attention runs once per layer. `--mode eager` calls the kernel directly;
`--mode graph` captures one step's layers into a torch CUDA graph once and replays it with
new contents copied into its static buffers, the way SGLang runs target-verify.

Checks: every call against a float64 torch reference (--check), graph replays against an
eager call on the same inputs (bitwise), and `--dump DIR` writes each call's outputs
(o then lse, raw bytes) so a test can compare them with the snapshots kcap took.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vattn_torch import HEAD_DIM_QK, HEAD_DIM_V, VerifyAttention, reference  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", required=True)
    p.add_argument("--mode", choices=["eager", "graph"], default="eager")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--bs", type=int, default=4)
    p.add_argument("--q-len", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--max-prefix", type=int, default=4096)
    p.add_argument("--num-slots", type=int, default=0, help="pool rows (default: 2x needed)")
    p.add_argument("--sm-scale", type=float, default=0.0625)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", action="store_true", help="compare with a float64 reference")
    p.add_argument("--dump", help="directory for each call's raw outputs")
    p.add_argument("--json", help="write a summary here")
    return p.parse_args()


def make_visibility(q_len, tree, gen):
    parents = [-1] * q_len
    vis = torch.zeros(q_len, q_len, dtype=torch.uint8)
    for i in range(q_len):
        parents[i] = (int(torch.randint(0, i, (1,), generator=gen)) if i > 0 else -1) \
            if tree else i - 1
        j = i
        while j >= 0:
            vis[i, j] = 1
            j = parents[j]
    return vis


class Step:
    """One decode step's verify inputs (host-generated, then moved to the device)."""

    def __init__(self, a, gen, pool_rows, step, device, dtype):
        self.prefix = [0 if (step == 0 and b == 0) else
                       int(torch.randint(0, a.max_prefix + 1, (1,), generator=gen))
                       for b in range(a.bs)]
        kv_lens = [p + a.q_len for p in self.prefix]
        indptr = [0]
        for n in kv_lens:
            indptr.append(indptr[-1] + n)
        self.max_kv = max(kv_lens)
        perm = torch.randperm(pool_rows, generator=gen)[:indptr[-1]]
        self.kv_indptr = torch.tensor(indptr, dtype=torch.int32, device=device)
        self.kv_indices = perm.to(torch.int64).to(device)
        tree = step % 2 == 1
        self.visibility = torch.stack([make_visibility(a.q_len, tree, gen)
                                       for _ in range(a.bs)]).to(device)
        T = a.bs * a.q_len
        # q as SGLang hands it: a strided view (here, of a wider buffer)
        self.q_layers = []
        for _ in range(a.layers):
            wide = torch.empty(T, a.heads, HEAD_DIM_QK + 64, dtype=dtype)
            wide.uniform_(-1, 1, generator=gen)
            self.q_layers.append(wide.to(device)[:, :, :HEAD_DIM_QK])


def main():
    a = parse()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(a.seed)
    dtype = torch.bfloat16
    attn = VerifyAttention(a.lib)
    if attn.backend == "cuda" and dev != "cuda":
        sys.exit("dflash_client: CUDA library but torch sees no GPU")
    if attn.backend == "cpu":
        dev = "cpu"
        if a.mode == "graph":
            sys.exit("dflash_client: graph mode needs the CUDA library")
    need = a.bs * (a.max_prefix + a.q_len)
    pool_rows = a.num_slots or 2 * need + 64
    pool = torch.empty(pool_rows, 1, HEAD_DIM_QK, dtype=dtype)
    pool.uniform_(-1, 1, generator=gen)
    kv_cache = pool.to(dev)[:, 0, :]            # [num_slots, 576] view of the pool
    T = a.bs * a.q_len
    if a.dump:
        os.makedirs(a.dump, exist_ok=True)

    worst, calls, graph_mismatch = 0.0, 0, 0
    records = []

    def dump(call, o, lse):
        if a.dump:
            with open(os.path.join(a.dump, f"call{call:05d}.bin"), "wb") as f:
                f.write(o.contiguous().view(torch.uint8).cpu().numpy().tobytes())
                f.write(lse.contiguous().view(torch.uint8).cpu().numpy().tobytes())

    def check(st, q, o, lse):
        nonlocal worst
        ref_o, ref_lse = reference(q, kv_cache, st.kv_indptr, st.kv_indices, st.visibility,
                                   a.sm_scale)
        err = ((o.double() - ref_o).norm() / ref_o.norm()).item()
        lerr = (lse.double() - ref_lse).abs().max().item()
        worst = max(worst, err)
        if not (err <= 1e-2 and lerr <= 1e-2):
            sys.exit(f"dflash_client: call {calls}: rel err {err:.3e}, lse err {lerr:.3e}")

    if a.mode == "eager":
        for step in range(a.steps):
            st = Step(a, gen, pool_rows, step, dev, dtype)
            for layer in range(a.layers):
                q = st.q_layers[layer]
                o = torch.empty(T, a.heads, HEAD_DIM_V, dtype=dtype, device=dev)
                lse = torch.empty(T, a.heads, dtype=torch.float32, device=dev)
                attn(q, kv_cache, st.kv_indptr, st.kv_indices, st.visibility, a.sm_scale, o,
                     lse, max_kv_len=st.max_kv)
                if a.check:
                    check(st, q, o, lse)
                dump(calls, o, lse)
                records.append({"call": calls, "step": step, "layer": layer,
                                "prefix": st.prefix})
                calls += 1
        if dev == "cuda":
            torch.cuda.synchronize()
    else:
        # Static buffers sized for the largest step; the graph is captured once.
        max_kv = a.max_prefix + a.q_len
        s_indptr = torch.zeros(a.bs + 1, dtype=torch.int32, device=dev)
        s_indices = torch.zeros(a.bs * max_kv, dtype=torch.int64, device=dev)
        s_vis = torch.zeros(a.bs, a.q_len, a.q_len, dtype=torch.uint8, device=dev)
        s_q = [torch.zeros(T, a.heads, HEAD_DIM_QK, dtype=dtype, device=dev)
               for _ in range(a.layers)]
        s_o = [torch.empty(T, a.heads, HEAD_DIM_V, dtype=dtype, device=dev)
               for _ in range(a.layers)]
        s_lse = [torch.empty(T, a.heads, dtype=torch.float32, device=dev)
                 for _ in range(a.layers)]

        def fill(st):
            s_indptr.copy_(st.kv_indptr)
            s_indices[:st.kv_indices.numel()].copy_(st.kv_indices)
            s_vis.copy_(st.visibility)
            for layer in range(a.layers):
                s_q[layer].copy_(st.q_layers[layer])

        def body():
            for layer in range(a.layers):
                attn(s_q[layer], kv_cache, s_indptr, s_indices, s_vis, a.sm_scale,
                     s_o[layer], s_lse[layer], max_kv_len=max_kv)

        first = Step(a, gen, pool_rows, 0, dev, dtype)
        fill(first)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):      # warm-up outside capture, as torch recommends
            body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        for step in range(a.steps):
            st = first if step == 0 else Step(a, gen, pool_rows, step, dev, dtype)
            fill(st)
            graph.replay()
            torch.cuda.synchronize()
            for layer in range(a.layers):
                o, lse = s_o[layer].clone(), s_lse[layer].clone()
                # the same call made eagerly must give the same bits
                eo = torch.empty_like(o)
                el = torch.empty_like(lse)
                attn(s_q[layer], kv_cache, s_indptr, s_indices, s_vis, a.sm_scale, eo, el,
                     max_kv_len=max_kv)
                torch.cuda.synchronize()
                if not (torch.equal(eo.view(torch.int16), o.view(torch.int16)) and
                        torch.equal(el.view(torch.int32), lse.view(torch.int32))):
                    graph_mismatch += 1
                if a.check:
                    check(st, s_q[layer], o, lse)
                dump(calls, o, lse)
                records.append({"call": calls, "step": step, "layer": layer,
                                "prefix": st.prefix, "graph_replay": step})
                calls += 1
    summary = {"mode": a.mode, "backend": attn.backend, "calls": calls,
               "worst_rel_err": worst if a.check else None,
               "graph_vs_eager_mismatches": graph_mismatch, "records": records}
    print(f"dflash_client: mode={a.mode} backend={attn.backend} calls={calls} "
          f"worst_rel_err={worst:.3e} graph_vs_eager_mismatches={graph_mismatch}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 1 if graph_mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
