#!/usr/bin/env python3
"""extend_ctypes.py — vattn_extend through ctypes (dlopen + dlsym, SGLang's path), via the
one binding kcap.vattn: N calls of SGLang's target-verify shape on random bf16 data (prefix
slots in a shuffled pool, draft rows in k_extend, a custom mask on odd calls), printing one
hash line per call of what came back (status, o, lse) so a run under libkcap can be compared
with a bare one.

usage: extend_ctypes.py LIB [--calls N] [--seed S] [--tag] [--shape BS,H,Q,PREFIX]
  --shape  every call of this one geometry (every request at the full prefix), new data each
  --tag  before call i: kcap.tag("layer", i % 4) and kcap.tag("step", i // 4), as a serving
         backend tags its calls (a no-op without libkcap.so).
"""
import argparse
import ctypes as C
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../python"))
import kcap  # noqa: E402
from kcap.vattn import Library, VattnExtendArgs  # noqa: E402


def bf16(rng, n):
    f = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    f[f == 0] = 1.0
    return (f.view(np.uint32) >> 16).astype(np.uint16)


def one_call(lib, rng, masked, shape=None):
    if shape:
        bs, H, q, p = shape
        prefix = np.full(bs, p)
    else:
        bs, q, H = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 9))
        prefix = rng.integers(0, 120, bs)
    T = bs * q
    kvp = np.zeros(bs + 1, np.int32)
    kvp[1:] = np.cumsum(prefix)
    slots = int(kvp[-1]) + 64
    pool = bf16(rng, slots * 576).reshape(slots, 576)
    idx = rng.permutation(slots)[: int(kvp[-1])].astype(np.int64)
    qt = bf16(rng, T * H * 576).reshape(T, H, 576)
    kext = bf16(rng, T * 576).reshape(T, 576)
    qo = (np.arange(bs + 1) * q).astype(np.int32)
    o = np.full((T, H, 512), 0xA5A5, np.uint16)
    lse = np.full((T, H), np.nan, np.float32)
    mask = mptr = None
    if masked:
        rows = [q * (int(p) + q) for p in prefix]
        mptr = np.zeros(bs + 1, np.int64)
        mptr[1:] = np.cumsum(rows)
        mask = rng.integers(0, 2, int(mptr[-1])).astype(np.uint8)
    a = VattnExtendArgs(struct_size=C.sizeof(VattnExtendArgs), dtype=0, index_type=1, bs=bs,
                        q_len=q, num_heads=H, num_slots=slots, sm_scale=0.0625,
                        q=qt.ctypes.data, q_stride_t=H * 576, q_stride_h=576,
                        k_extend=kext.ctypes.data, k_extend_stride=576,
                        kv_cache=pool.ctypes.data, kv_stride=576, qo_indptr=qo.ctypes.data,
                        kv_indptr=kvp.ctypes.data, kv_indices=idx.ctypes.data,
                        custom_mask=None if mask is None else mask.ctypes.data,
                        mask_indptr=None if mptr is None else mptr.ctypes.data,
                        o=o.ctypes.data, o_stride_t=H * 512, o_stride_h=512,
                        lse=lse.ctypes.data)
    wsb = lib.extend_workspace_size(a)
    ws = np.zeros(max(wsb, 16), np.uint8)
    st = lib.extend(a, ws.ctypes.data if wsb else None, wsb, check=False)
    h = hashlib.sha256(bytes([st]) + o.tobytes() + lse.tobytes()).hexdigest()[:16]
    return st, h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tag", action="store_true")
    ap.add_argument("--shape", default=None)
    args = ap.parse_args()
    lib = Library(args.lib)
    rng = np.random.default_rng(args.seed)
    bad = 0
    for i in range(args.calls):
        if args.tag:
            kcap.tag("layer", i % 4)
            kcap.tag("step", i // 4)
        shape = tuple(int(x) for x in args.shape.split(",")) if args.shape else None
        st, h = one_call(lib, rng, masked=i % 2 == 1, shape=shape)
        print("call %d status %d %s" % (i, st, h))
        bad |= st != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
