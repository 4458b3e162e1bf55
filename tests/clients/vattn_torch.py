"""vattn_torch.py — the torch + ctypes binding of the verify-attention C ABI.

This is how an SGLang attention backend calls the kernel: ctypes.CDLL on the library through
kcap.vattn, the one binding of the ABI (the dlopen + dlsym path that libkcap.so must catch), torch tensors turned into pointers and element
strides, the stream from torch.cuda.current_stream(), and the workspace from a torch
allocation sized once by vattn_workspace_size() so nothing is allocated during CUDA graph
capture. Works with the CUDA library on GPU tensors and with the CPU library on CPU tensors.
"""
import os
import sys

import torch

try:
    import kcap.vattn as _vattn
except ImportError:  # in-tree: the package lives in python/ at the repository root
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import kcap.vattn as _vattn

# The ABI's one Python binding is kcap.vattn; these names stay importable from here.
VattnArgs = _vattn.VattnArgs
HEAD_DIM_QK, HEAD_DIM_V = _vattn.HEAD_DIM_QK, _vattn.HEAD_DIM_V
DTYPE_BF16, DTYPE_FP16 = _vattn.DTYPE_BF16, _vattn.DTYPE_FP16
INDEX_INT32, INDEX_INT64 = _vattn.INDEX_INT32, _vattn.INDEX_INT64


class VerifyAttention:
    """Callable wrapper around one kernel library (libverify_attn.so or the CPU one)."""

    def __init__(self, lib_path):
        self.library = _vattn.Library(lib_path)
        self.lib = self.library.lib
        self.backend = self.library.backend
        self.workspace = None

    def make_args(self, q, kv_cache, kv_indptr, kv_indices, visibility, sm_scale, o, lse,
                  max_kv_len):
        T, H, D = q.shape
        bs = kv_indptr.numel() - 1
        assert D == HEAD_DIM_QK and q.stride(2) == 1 and o.stride(2) == 1
        assert kv_cache.dim() == 2 and kv_cache.shape[1] == HEAD_DIM_QK and kv_cache.stride(1) == 1
        assert T % bs == 0, "q_len must be uniform across the batch"
        a = VattnArgs()
        a.dtype = DTYPE_BF16 if q.dtype == torch.bfloat16 else DTYPE_FP16
        a.index_type = INDEX_INT64 if kv_indices.dtype == torch.int64 else INDEX_INT32
        a.bs, a.q_len, a.num_heads = bs, T // bs, H
        a.num_slots = kv_cache.shape[0]
        a.max_kv_len = int(max_kv_len) if max_kv_len else 0
        a.sm_scale = float(sm_scale)
        a.q, a.q_stride_t, a.q_stride_h = q.data_ptr(), q.stride(0), q.stride(1)
        a.kv_cache, a.kv_stride = kv_cache.data_ptr(), kv_cache.stride(0)
        a.kv_indptr = kv_indptr.data_ptr()
        a.kv_indices = kv_indices.data_ptr()
        a.visibility = visibility.data_ptr() if visibility is not None else None
        a.o, a.o_stride_t, a.o_stride_h = o.data_ptr(), o.stride(0), o.stride(1)
        a.lse = lse.data_ptr() if lse is not None else None
        return a

    def reserve(self, args):
        """Grow the workspace outside graph capture; inside capture it must already fit."""
        need = self.library.workspace_size(args)
        if self.workspace is None or self.workspace.numel() < need:
            if torch.cuda.is_available() and self.backend == "cuda" and \
                    torch.cuda.is_current_stream_capturing():
                raise RuntimeError("workspace too small inside CUDA graph capture; reserve first")
            dev = "cuda" if self.backend == "cuda" else "cpu"
            self.workspace = torch.empty(max(need, 1), dtype=torch.uint8, device=dev)
        return need

    def __call__(self, q, kv_cache, kv_indptr, kv_indices, visibility, sm_scale, o=None,
                 lse=None, max_kv_len=0):
        if o is None:
            o = torch.empty(q.shape[0], q.shape[1], HEAD_DIM_V, dtype=q.dtype, device=q.device)
        a = self.make_args(q, kv_cache, kv_indptr, kv_indices, visibility, sm_scale, o, lse,
                           max_kv_len)
        need = self.reserve(a)
        stream = torch.cuda.current_stream().cuda_stream if self.backend == "cuda" else None
        self.library.verify(a, self.workspace.data_ptr(), need, stream)  # VattnError if != 0
        return o


def reference(q, kv_cache, kv_indptr, kv_indices, visibility, sm_scale):
    """float64 torch reference of the same operation (gather + matmuls), on q's device."""
    T, H, _ = q.shape
    bs = kv_indptr.numel() - 1
    q_len = T // bs
    out = torch.zeros(T, H, HEAD_DIM_V, dtype=torch.float64, device=q.device)
    lse = torch.full((T, H), float("-inf"), dtype=torch.float64, device=q.device)
    indptr = kv_indptr.tolist()
    for b in range(bs):
        rows = kv_cache[kv_indices[indptr[b]:indptr[b + 1]].long()].double()
        kv_len = rows.shape[0]
        prefix = kv_len - q_len
        qb = q[b * q_len:(b + 1) * q_len].double()                    # [q_len, H, 576]
        s = torch.einsum("thd,kd->thk", qb, rows) * sm_scale          # [q_len, H, kv]
        mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device)
        if visibility is None:
            vis = torch.tril(torch.ones(q_len, q_len, dtype=torch.bool, device=q.device))
        else:
            vis = visibility[b].bool()
        mask[:, prefix:] = vis
        s = s.masked_fill(~mask[:, None, :], float("-inf"))
        lse_b = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse_b[..., None]).nan_to_num(0.0)
        out[b * q_len:(b + 1) * q_len] = torch.einsum("thk,kd->thd", p, rows[:, :HEAD_DIM_V])
        lse[b * q_len:(b + 1) * q_len] = lse_b
    return out, lse
