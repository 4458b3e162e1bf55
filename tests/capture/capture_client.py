#!/usr/bin/env python3
"""capture_client.py — the ctypes binding path (how SGLang-side Python loads the kernel).

Loads one or more verify libraries with ctypes.CDLL (dlopen + dlsym, which a preloaded
library can only catch by interposing dlsym) and makes random verify calls — bf16 non-zero
data as uint16 bits, ragged prefixes, a random slot permutation, int64 indices, strided q
and o, random visibility — alternating between the libraries, then dumps each call's inputs
and what it got back in the layout of capture_client.c (snapcmp reads both).

usage: capture_client.py --lib PATH [--lib PATH2] [--calls N] [--seed S] [--dump DIR]
"""
import argparse
import ctypes as C
import os
import sys

import numpy as np


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from kcap.vattn import VattnArgs  # noqa: E402  (the one binding of the ABI)


def bf16_nonzero(rng, n):
    f = rng.uniform(-2.0, 2.0, n).astype(np.float32)
    f[f == 0] = 1.0
    b = (f.view(np.uint32) >> 16).astype(np.uint16)
    b[(b & 0x7FFF) == 0] = 0x3F80
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", required=True)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dump")
    a = ap.parse_args()
    libs = []
    for p in a.lib:
        lib = C.CDLL(p)
        fn = lib.vattn_verify
        fn.restype = C.c_int
        fn.argtypes = [C.POINTER(VattnArgs), C.c_void_p, C.c_size_t, C.c_void_p]
        ws = lib.vattn_workspace_size
        ws.restype = C.c_size_t
        ws.argtypes = [C.POINTER(VattnArgs)]
        libs.append((fn, ws))
    rng = np.random.default_rng(a.seed)
    bad = 0
    for i in range(a.calls):
        fn, wsf = libs[i % len(libs)]
        bs, q_len, H = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 9))
        T = bs * q_len
        lens = q_len + rng.integers(0, 150, bs)
        indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        nnz = int(indptr[-1])
        num_slots = nnz + 64 + int(rng.integers(0, 256))
        kv_stride = 576 + 8 * int(rng.integers(0, 3))
        indices = rng.permutation(num_slots)[:nnz].astype(np.int64)
        pool = bf16_nonzero(rng, num_slots * kv_stride)
        qsh = 576 + 8 * int(rng.integers(0, 2))
        qst = H * qsh + 8 * int(rng.integers(0, 2))
        osh, ost = 512 + 8 * int(rng.integers(0, 2)), 0
        ost = H * osh
        q = bf16_nonzero(rng, T * qst)
        vis = rng.integers(0, 2, bs * q_len * q_len).astype(np.uint8) if rng.integers(0, 2) else None
        o = np.full(T * ost, 0xA5A5, np.uint16)
        lse = np.full(T * H, np.frombuffer(b"\xa5\xa5\xa5\xa5", np.float32)[0], np.float32)
        args = VattnArgs(struct_size=C.sizeof(VattnArgs), dtype=0, index_type=1, bs=bs,
                         q_len=q_len, num_heads=H, num_slots=num_slots, max_kv_len=0,
                         sm_scale=0.0625, reserved0=0, q=q.ctypes.data, q_stride_t=qst,
                         q_stride_h=qsh, kv_cache=pool.ctypes.data, kv_stride=kv_stride,
                         kv_indptr=indptr.ctypes.data, kv_indices=indices.ctypes.data,
                         visibility=vis.ctypes.data if vis is not None else None,
                         o=o.ctypes.data, o_stride_t=ost, o_stride_h=osh, lse=lse.ctypes.data)
        wsb = wsf(C.byref(args))
        ws = np.zeros(max(int(wsb), 1) + 64, np.uint8)
        wsp = (ws.ctypes.data + 63) // 64 * 64
        st = fn(C.byref(args), C.c_void_p(wsp) if wsb else None, wsb, None)
        if st != 0:
            print(f"capture_client.py: call {i} returned {st}", file=sys.stderr)
            bad += 1
        if a.dump:
            tag = os.path.join(a.dump, f"py{a.seed}-c{i}")
            qd = np.stack([q[t * qst + h * qsh: t * qst + h * qsh + 576]
                           for t in range(T) for h in range(H)])
            od = np.stack([o[t * ost + h * osh: t * ost + h * osh + 512]
                           for t in range(T) for h in range(H)])
            with open(tag + ".meta", "w") as f:
                f.write(f"status {st}\nbs {bs}\nq_len {q_len}\nheads {H}\nnum_slots {num_slots}\n"
                        f"kv_stride {kv_stride}\nindex_size 8\nvis {int(vis is not None)}\n"
                        f"nnz {nnz}\nlib {a.lib[i % len(libs)]}\n")
            qd.tofile(tag + ".q")
            pool.tofile(tag + ".pool")
            indptr.tofile(tag + ".indptr")
            indices.tofile(tag + ".indices")
            if vis is not None:
                vis.tofile(tag + ".vis")
            od.tofile(tag + ".o")
            o.tofile(tag + ".ofull")
            lse.tofile(tag + ".lse")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
