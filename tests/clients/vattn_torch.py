"""vattn_torch.py — the torch + ctypes binding of the verify-attention C ABI.

This is how an SGLang attention backend calls the kernel: ctypes.CDLL on the library (the
dlopen + dlsym path that libkcap.so must catch), torch tensors turned into pointers and element
strides, the stream from torch.cuda.current_stream(), and the workspace from a torch
allocation sized once by vattn_workspace_size() so nothing is allocated during CUDA graph
capture. Works with the CUDA library on GPU tensors and with the CPU library on CPU tensors.
"""
import ctypes
import os

import torch

HEAD_DIM_QK = 576
HEAD_DIM_V = 512
DTYPE_BF16, DTYPE_FP16 = 0, 1
INDEX_INT32, INDEX_INT64 = 0, 1


class VattnArgs(ctypes.Structure):
    """Mirror of `vattn_args` in kernels/verify_attn.h (field order and types must match)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
        ("index_type", ctypes.c_int32),
        ("bs", ctypes.c_int32),
        ("q_len", ctypes.c_int32),
        ("num_heads", ctypes.c_int32),
        ("num_slots", ctypes.c_int64),
        ("max_kv_len", ctypes.c_int64),
        ("sm_scale", ctypes.c_float),
        ("reserved0", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("q_stride_t", ctypes.c_int64),
        ("q_stride_h", ctypes.c_int64),
        ("kv_cache", ctypes.c_void_p),
        ("kv_stride", ctypes.c_int64),
        ("kv_indptr", ctypes.c_void_p),
        ("kv_indices", ctypes.c_void_p),
        ("visibility", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("o_stride_t", ctypes.c_int64),
        ("o_stride_h", ctypes.c_int64),
        ("lse", ctypes.c_void_p),
    ]


class VerifyAttention:
    """Callable wrapper around one kernel library (libverify_attn.so or the CPU one)."""

    def __init__(self, lib_path):
        self.lib = ctypes.CDLL(os.path.abspath(lib_path))
        self.lib.vattn_verify.argtypes = [ctypes.POINTER(VattnArgs), ctypes.c_void_p,
                                          ctypes.c_size_t, ctypes.c_void_p]
        self.lib.vattn_verify.restype = ctypes.c_int
        self.lib.vattn_workspace_size.argtypes = [ctypes.POINTER(VattnArgs)]
        self.lib.vattn_workspace_size.restype = ctypes.c_size_t
        self.lib.vattn_status_string.argtypes = [ctypes.c_int]
        self.lib.vattn_status_string.restype = ctypes.c_char_p
        self.lib.vattn_backend.restype = ctypes.c_char_p
        self.backend = self.lib.vattn_backend().decode()
        self.workspace = None

    def make_args(self, q, kv_cache, kv_indptr, kv_indices, visibility, sm_scale, o, lse,
                  max_kv_len):
        T, H, D = q.shape
        bs = kv_indptr.numel() - 1
        assert D == HEAD_DIM_QK and q.stride(2) == 1 and o.stride(2) == 1
        assert kv_cache.dim() == 2 and kv_cache.shape[1] == HEAD_DIM_QK and kv_cache.stride(1) == 1
        assert T % bs == 0, "q_len must be uniform across the batch"
        a = VattnArgs()
        a.struct_size = ctypes.sizeof(VattnArgs)
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
        need = self.lib.vattn_workspace_size(ctypes.byref(args))
        if need == ctypes.c_size_t(-1).value:
            raise ValueError("vattn_workspace_size rejected the sizes")
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
        st = self.lib.vattn_verify(ctypes.byref(a), self.workspace.data_ptr(), need, stream)
        if st != 0:
            raise RuntimeError("vattn_verify: " + self.lib.vattn_status_string(st).decode())
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
