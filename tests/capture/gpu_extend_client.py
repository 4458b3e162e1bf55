#!/usr/bin/env python3
"""gpu_extend_client.py — vattn_extend of libverify_attn.so (CUDA) from torch through ctypes,
as an SGLang Triton backend would call it in place of extend_attention_fwd: q [T,H,576],
k_extend [T,576] (the draft tokens' rows), prefix-only kv_indices into a shuffled pool, SGLang's
custom mask rows (random bytes in the prefix columns), on a side stream.

  eager  N calls, each on new random tensors.
  graph  one call captured in a CUDA graph on static tensors, replayed N times with new
         random inputs copied in before each replay.
Prints one line per call / replay: "call I <sha of o and lse>", so a run under libkcap can
be compared with a bare one; exit 1 on a non-zero status.

usage: gpu_extend_client.py LIB {eager,graph} [--calls N] [--seed S] [--shape BS,H,Q,PREFIX]
"""
import argparse
import ctypes as C
import hashlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from kcap.vattn import Library, VattnExtendArgs  # noqa: E402


def rand_bf16(g, n):
    x = torch.rand(n, generator=g, device="cuda") * 4 - 2
    x[x == 0] = 1.0
    return x.to(torch.bfloat16)


class Extend:
    """One call's device tensors and its args struct (fixed sizes: graph-capturable)."""

    def __init__(self, g, bs, H, q, prefix):
        T = bs * q
        self.g, self.bs, self.H, self.q, self.T = g, bs, H, q, T
        lens = torch.randint(prefix // 2, prefix + 1, (bs,), generator=g, device="cuda")
        self.kvp = torch.zeros(bs + 1, dtype=torch.int32, device="cuda")
        self.kvp[1:] = torch.cumsum(lens, 0).to(torch.int32)
        nnz = int(self.kvp[-1])
        self.slots = nnz + 257
        self.pool = rand_bf16(g, self.slots * 576)
        self.idx = torch.randperm(self.slots, generator=g, device="cuda")[:nnz].to(torch.int64)
        self.qo = (torch.arange(bs + 1, device="cuda") * q).to(torch.int32)
        self.qt = rand_bf16(g, T * H * 576)
        self.kst = 576 + 64  # k_extend rows strided, as a view into a wider buffer
        self.kext = rand_bf16(g, T * self.kst)
        rows = q * (lens + q)
        self.mptr = torch.zeros(bs + 1, dtype=torch.int64, device="cuda")
        self.mptr[1:] = torch.cumsum(rows, 0)
        self.mask = torch.randint(0, 2, (int(self.mptr[-1]),), generator=g, device="cuda",
                                  dtype=torch.uint8)
        self.o = torch.full((T * H * 512,), float("nan"), dtype=torch.bfloat16, device="cuda")
        self.lse = torch.full((T * H,), float("nan"), dtype=torch.float32, device="cuda")
        self.args = VattnExtendArgs(
            struct_size=C.sizeof(VattnExtendArgs), dtype=0, index_type=1, bs=bs, q_len=q,
            num_heads=H, num_slots=self.slots, max_kv_len=prefix + q, sm_scale=0.0625,
            q=self.qt.data_ptr(), q_stride_t=H * 576, q_stride_h=576,
            k_extend=self.kext.data_ptr(), k_extend_stride=self.kst,
            kv_cache=self.pool.data_ptr(), kv_stride=576, qo_indptr=self.qo.data_ptr(),
            kv_indptr=self.kvp.data_ptr(), kv_indices=self.idx.data_ptr(),
            custom_mask=self.mask.data_ptr(), mask_indptr=self.mptr.data_ptr(),
            o=self.o.data_ptr(), o_stride_t=H * 512, o_stride_h=512, lse=self.lse.data_ptr())

    def refill(self):
        """New values in the same tensors (sizes and index structure kept)."""
        self.qt.copy_(rand_bf16(self.g, self.qt.numel()))
        self.kext.copy_(rand_bf16(self.g, self.kext.numel()))
        self.pool.copy_(rand_bf16(self.g, self.pool.numel()))
        self.mask.copy_(torch.randint(0, 2, self.mask.shape, generator=self.g, device="cuda",
                                      dtype=torch.uint8))

    def digest(self):
        return hashlib.sha256(self.o.view(torch.int16).cpu().numpy().tobytes() +
                              self.lse.cpu().numpy().tobytes()).hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("mode", choices=["eager", "graph"])
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", default="2,16,4,1000")
    a = ap.parse_args()
    bs, H, q, prefix = (int(x) for x in a.shape.split(","))
    lib = Library(a.lib)
    g = torch.Generator(device="cuda")
    g.manual_seed(a.seed)
    s = torch.cuda.Stream()
    bad = 0
    if a.mode == "eager":
        for i in range(a.calls):
            c = Extend(g, bs, H, q, prefix)
            wsb = lib.extend_workspace_size(c.args)
            ws = torch.empty(max(wsb, 16), dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            with torch.cuda.stream(s):
                st = lib.extend(c.args, ws.data_ptr(), wsb, s.cuda_stream, check=False)
            s.synchronize()
            bad |= st != 0
            print("call %d status %d %s" % (i, st, c.digest()), flush=True)
    else:
        c = Extend(g, bs, H, q, prefix)
        wsb = lib.extend_workspace_size(c.args)
        ws = torch.empty(max(wsb, 16), dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            st = lib.extend(c.args, ws.data_ptr(), wsb, torch.cuda.current_stream().cuda_stream,
                            check=False)
        bad |= st != 0
        for i in range(a.calls):
            c.refill()
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            print("call %d status %d %s" % (i, st, c.digest()), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
