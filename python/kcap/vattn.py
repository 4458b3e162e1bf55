"""vattn.py — the ctypes binding of the verify-attention C ABI (kernels/verify_attn.h).

The one Python mirror of the ABI's two entry points — `vattn_args` / vattn_verify and
`vattn_extend_args` / vattn_extend (SGLang's extend convention) — and the library's other
functions: SGLang-style clients (tests/clients/vattn_torch.py) and the tests build on it
instead of copying the structs. Library(path) loads libverify_attn.so (CUDA) or
libverify_attn_cpu.so (host); a library built before vattn_extend existed still loads, and
only its extend calls raise (Library.has_extend says which). run_snapshot() replays a loaded
kcap.Snapshot through a host (CPU) library with numpy buffers.
"""
import ctypes
import os

import numpy as np

ABI_VERSION = 1  # VATTN_ABI_VERSION this binding mirrors
HEAD_DIM_QK = 576
HEAD_DIM_V = 512
MAX_Q_LEN = 64
MAX_HEADS = 128
DTYPE_BF16, DTYPE_FP16 = 0, 1
INDEX_INT32, INDEX_INT64 = 0, 1

# vattn_status, in enum order (verify_attn.h).
STATUS = ["VATTN_OK", "VATTN_ERR_NULL_ARGS", "VATTN_ERR_STRUCT_SIZE", "VATTN_ERR_NULL_POINTER",
          "VATTN_ERR_DTYPE", "VATTN_ERR_INDEX_TYPE", "VATTN_ERR_BATCH", "VATTN_ERR_Q_LEN",
          "VATTN_ERR_HEADS", "VATTN_ERR_NUM_SLOTS", "VATTN_ERR_STRIDE", "VATTN_ERR_SCALE",
          "VATTN_ERR_WORKSPACE", "VATTN_ERR_INDPTR", "VATTN_ERR_INDEX_RANGE",
          "VATTN_ERR_ALIGNMENT", "VATTN_ERR_CUDA", "VATTN_ERR_NO_DEVICE"]
WORKSPACE_INVALID = ctypes.c_size_t(-1).value


# The leading fields both args structs share, in the header's order: sizes, flags, q.
_HEAD_FIELDS = [
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
]


class _Args(ctypes.Structure):
    """An args struct whose struct_size is set to its own size on construction."""

    def __init__(self, **fields):
        super().__init__(**fields)
        self.struct_size = ctypes.sizeof(type(self))


class VattnArgs(_Args):
    """Mirror of `vattn_args` (field order and types must match verify_attn.h)."""

    _fields_ = _HEAD_FIELDS + [
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


class VattnExtendArgs(_Args):
    """Mirror of `vattn_extend_args` (field order and types must match verify_attn.h): the
    extend convention, draft keys in k_extend, kv_indptr / kv_indices over the prefix only,
    SGLang's flattened custom_mask rows (mask_indptr) or NULL for causal."""

    _fields_ = _HEAD_FIELDS + [
        ("k_extend", ctypes.c_void_p),
        ("k_extend_stride", ctypes.c_int64),
        ("kv_cache", ctypes.c_void_p),
        ("kv_stride", ctypes.c_int64),
        ("qo_indptr", ctypes.c_void_p),
        ("kv_indptr", ctypes.c_void_p),
        ("kv_indices", ctypes.c_void_p),
        ("custom_mask", ctypes.c_void_p),
        ("mask_indptr", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("o_stride_t", ctypes.c_int64),
        ("o_stride_h", ctypes.c_int64),
        ("lse", ctypes.c_void_p),
    ]


# Every function of the header that takes an args struct -> that struct. The *_workspace_size
# ones return size_t (the sizes' workspace); the others are calls (args, workspace,
# workspace_bytes, stream) -> vattn_status.
ARGS_OF = {
    "vattn_workspace_size": VattnArgs,
    "vattn_verify": VattnArgs,
    "vattn_verify_reference": VattnArgs,
    "vattn_extend_workspace_size": VattnExtendArgs,
    "vattn_extend": VattnExtendArgs,
    "vattn_extend_reference": VattnExtendArgs,
}


class VattnError(RuntimeError):
    """A non-zero vattn_status: .status (int), .name (VATTN_ERR_...), message from the library."""

    def __init__(self, func, status, message):
        self.status = status
        self.name = STATUS[status] if 0 <= status < len(STATUS) else "status %d" % status
        super().__init__("%s: %s (%s)" % (func, message, self.name))


class Library:
    """One loaded kernel library: .backend ("cuda"/"cpu"), .abi_version, and the ABI calls."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.lib = ctypes.CDLL(self.path)
        L = self.lib
        self.has_extend = all(hasattr(L, n) for n, st in ARGS_OF.items()
                              if st is VattnExtendArgs)
        for name, st in ARGS_OF.items():
            if st is VattnExtendArgs and not self.has_extend:
                continue
            fn, P = getattr(L, name), ctypes.POINTER(st)
            if name.endswith("_workspace_size"):
                fn.argtypes, fn.restype = [P], ctypes.c_size_t
            else:
                fn.argtypes = [P, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
                fn.restype = ctypes.c_int
        L.vattn_status_string.argtypes = [ctypes.c_int]
        L.vattn_status_string.restype = ctypes.c_char_p
        L.vattn_backend.restype = ctypes.c_char_p
        L.vattn_abi_version.restype = ctypes.c_int
        self.backend = L.vattn_backend().decode()
        self.abi_version = L.vattn_abi_version()

    def status_string(self, status):
        return self.lib.vattn_status_string(int(status)).decode()

    def _need(self, name, args):
        """The library function `name`, after checking `args` is the struct it takes."""
        want = ARGS_OF[name]
        if not isinstance(args, want):
            raise TypeError("kcap.vattn: %s takes a %s, not %s" % (name, want.__name__,
                                                                   type(args).__name__))
        if want is VattnExtendArgs and not self.has_extend:
            raise AttributeError("kcap.vattn: %s has no %s (a library built before the extend "
                                 "entry point)" % (self.path, name))
        return getattr(self.lib, name)

    def _workspace(self, name, args):
        n = self._need(name, args)(ctypes.byref(args))
        if n == WORKSPACE_INVALID:
            raise ValueError("%s rejected the sizes (bs=%d q_len=%d heads=%d)"
                             % (name, args.bs, args.q_len, args.num_heads))
        return n

    def workspace_size(self, args):
        """Bytes of workspace for these sizes; ValueError when the library rejects them."""
        return self._workspace("vattn_workspace_size", args)

    def extend_workspace_size(self, args):
        """vattn_extend_workspace_size of a VattnExtendArgs; ValueError when rejected."""
        return self._workspace("vattn_extend_workspace_size", args)

    def _call(self, name, args, workspace, nbytes, stream, check):
        st = self._need(name, args)(ctypes.byref(args), workspace, nbytes, stream)
        if st and check:
            raise VattnError(name, st, self.status_string(st))
        return st

    def verify(self, args, workspace, workspace_bytes, stream=None, check=True):
        """vattn_verify; raises VattnError on a non-zero status unless check=False."""
        return self._call("vattn_verify", args, workspace, workspace_bytes, stream, check)

    def verify_reference(self, args, workspace, workspace_bytes, stream=None, check=True):
        return self._call("vattn_verify_reference", args, workspace, workspace_bytes, stream,
                          check)

    def extend(self, args, workspace, workspace_bytes, stream=None, check=True):
        """vattn_extend of a VattnExtendArgs; raises VattnError on a non-zero status unless
        check=False, AttributeError when the library has no extend entry point."""
        return self._call("vattn_extend", args, workspace, workspace_bytes, stream, check)

    def extend_reference(self, args, workspace, workspace_bytes, stream=None, check=True):
        return self._call("vattn_extend_reference", args, workspace, workspace_bytes, stream,
                          check)


def _ptr(a):
    return None if a is None else a.ctypes.data


def run_snapshot(library, snap, reference=False):
    """Replay a kcap.Snapshot through a host (CPU) Library -> {"o": array, "lse": array}.

    The stored KV rows are in index order (row i = slot kv_indices[i]), so the rebuilt pool
    is those rows and the indices become 0..n-1: the same keys in the same order. Outputs
    are returned as stored in a snapshot (o as raw bf16/f16 bits or values, lse float32).
    """
    if library.backend != "cpu":
        raise ValueError("kcap.vattn.run_snapshot: %s is a %s library; it needs host memory "
                         "(use `kcap replay` for CUDA)" % (library.path, library.backend))
    sc = snap.scalars
    q, kv = np.ascontiguousarray(snap.raw("q")), np.ascontiguousarray(snap.raw("kv_cache"))
    indptr = np.ascontiguousarray(snap.raw("kv_indptr"), dtype=np.int32)
    nnz = kv.shape[0]
    indices = np.arange(nnz, dtype=np.int64 if sc["index_type"] == INDEX_INT64 else np.int32)
    vis = snap.inputs.get("visibility")
    vis = None if vis is None else np.ascontiguousarray(vis)
    T, H = q.shape[0], q.shape[1]
    o = np.full((T, H, HEAD_DIM_V), 0xFFFF, dtype=np.uint16).view(q.dtype)  # NaN: unwritten shows
    lse = np.full((T, H), np.nan, dtype=np.float32) if "lse" in snap.outputs else None
    a = VattnArgs(dtype=sc["dtype"], index_type=sc["index_type"], bs=sc["bs"],
                  q_len=sc["q_len"], num_heads=sc["num_heads"], num_slots=max(nnz, 1),
                  max_kv_len=sc["max_kv_len"], sm_scale=sc["sm_scale"],
                  q=_ptr(q), q_stride_t=H * HEAD_DIM_QK, q_stride_h=HEAD_DIM_QK,
                  kv_cache=_ptr(kv), kv_stride=HEAD_DIM_QK, kv_indptr=_ptr(indptr),
                  kv_indices=_ptr(indices), visibility=_ptr(vis), o=_ptr(o),
                  o_stride_t=H * HEAD_DIM_V, o_stride_h=HEAD_DIM_V, lse=_ptr(lse))
    ws = np.empty(max(library.workspace_size(a), 16) + 16, dtype=np.uint8)
    off = (-ws.ctypes.data) % 16  # the ABI wants a 16-byte aligned workspace
    fn = library.verify_reference if reference else library.verify
    fn(a, ws.ctypes.data + off, ws.nbytes - off)
    out = {"o": o}
    if lse is not None:
        out["lse"] = lse
    return out
