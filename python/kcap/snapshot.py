"""snapshot.py — kcap.load(): one snapshot file as numpy arrays.

The file is read and fully validated by the C reader (libkcapfmt.so, the code behind
`kcap check`); this module copies what it returns into numpy arrays and releases the C side
at once, so a Snapshot is plain Python data with no open handle.
"""
import ctypes
import os

import numpy as np

from . import _native
from .dtypes import as_float, numpy_dtype

DIR_IN, DIR_OUT, DIR_CAND = 1, 2, 3


class SnapshotError(Exception):
    """A snapshot could not be read or failed validation.

    Attributes: path (the file), code (kcap_err number), kind (its generic text), reason
    (the reader's sentence, which names the dataset and the problem).
    """

    def __init__(self, path, code, kind, reason):
        self.path, self.code, self.kind, self.reason = path, code, kind, reason
        text = reason if path in reason else "%s: %s" % (path, reason)
        super().__init__(text)


class TensorInfo:
    """Header of one stored tensor: name, direction, kcap dtype name, shape, captured strides."""

    def __init__(self, name, direction, dtype, shape, strides):
        self.name, self.direction, self.dtype = name, direction, dtype
        self.shape, self.strides = shape, strides

    def __repr__(self):
        return "TensorInfo(%s %s %s%s)" % (self.direction, self.name, self.dtype,
                                            list(self.shape))


class Snapshot:
    """One captured call: .meta, .scalars, .inputs, .outputs (dicts), .tensors (headers).

    bf16 tensors in .inputs/.outputs are raw uint16 bits unless loaded with
    bf16="float32"; .raw(name) always gives the stored bits, .to_torch() torch tensors with
    bfloat16 restored.
    """

    def __init__(self, path, meta, scalars, tensors, raw, bf16):
        self.path, self.meta, self.scalars, self.tensors = path, meta, scalars, tensors
        self._raw = raw  # (direction, name) -> ndarray of stored bytes' dtype
        self.bf16 = bf16
        self.inputs = {t.name: self._view(t) for t in tensors if t.direction == "in"}
        self.outputs = {t.name: self._view(t) for t in tensors if t.direction == "out"}
        # shadow mode: what the candidate kernel returned on the same inputs (format 1.2)
        self.candidate = {t.name: self._view(t) for t in tensors if t.direction == "candidate"}

    def _view(self, t):
        a = self._raw[(t.direction, t.name)]
        return as_float(a, t.dtype) if (t.dtype == "bfloat16" and self.bf16 == "float32") else a

    @property
    def call(self):
        return self.meta["call"]

    def info(self, name, direction=None):
        """TensorInfo of a tensor (direction 'in'/'out' when a name exists in both)."""
        for t in self.tensors:
            if t.name == name and direction in (None, t.direction):
                return t
        raise KeyError("%s: no tensor %r%s" % (self.path, name,
                                                 " (%s)" % direction if direction else ""))

    def raw(self, name, direction=None):
        """The stored array of a tensor (bf16 as uint16 bits)."""
        t = self.info(name, direction)
        return self._raw[(t.direction, t.name)]

    def values(self, name, direction=None):
        """A tensor's values as floats (bf16 widened to float32)."""
        t = self.info(name, direction)
        return as_float(self._raw[(t.direction, t.name)], t.dtype)

    def __getitem__(self, name):
        if name in self.inputs:
            return self.inputs[name]
        if name in self.outputs:
            return self.outputs[name]
        raise KeyError("%s: no tensor %r" % (self.path, name))

    def to_torch(self, direction=None):
        """{name: torch.Tensor}; bfloat16 tensors come back as torch.bfloat16 (bit exact)."""
        try:
            import torch
        except ImportError:
            raise ImportError("kcap: Snapshot.to_torch() needs torch") from None
        out = {}
        for t in self.tensors:
            if direction not in (None, t.direction):
                continue
            a = self._raw[(t.direction, t.name)]
            if t.dtype == "bfloat16":
                out[t.name] = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
            else:
                out[t.name] = torch.from_numpy(a.copy())
        return out

    def __repr__(self):
        shapes = ", ".join("%s%s:%s" % (t.name, list(t.shape), t.dtype) for t in self.tensors)
        return "<kcap.Snapshot %s call=%s %s>" % (os.path.basename(self.path),
                                                   self.meta.get("call"), shapes)


def _error(lib, path, rc, msg):
    return SnapshotError(path, rc, lib.kcap_export_err_string(rc).decode(),
                         msg.value.decode(errors="replace"))


def _c_path(path):
    """The path as the C reader takes it: bytes by os.fsencode (so a str from os.listdir
    holding undecodable bytes, or a bytes path, names the same file), refusing an embedded
    NUL (ctypes would cut the path there and check another file)."""
    b = os.fsencode(path)
    if b"\0" in b:
        raise ValueError("kcap: path %r contains a NUL byte" % (path,))
    return b


def check(path):
    """Fully validate a file (what `kcap check` does); raises SnapshotError, else None."""
    lib = _native.lib()
    path = os.fspath(path)
    msg = ctypes.create_string_buffer(1024)
    rc = lib.kcap_export_check(_c_path(path), msg, len(msg))
    if rc:
        raise _error(lib, path, rc, msg)


def _read_meta(lib, h):
    meta = {}
    kind = ctypes.c_int()
    for i in range(lib.kcap_export_meta_count()):
        name = lib.kcap_export_meta_name(i, ctypes.byref(kind)).decode()
        if kind.value == 0:
            meta[name] = lib.kcap_export_meta_str(h, i).decode(errors="replace")
        else:
            meta[name] = int(lib.kcap_export_meta_int(h, i))
    return meta


def _read_scalars(lib, h):
    scalars = {}
    name, typ = ctypes.c_char_p(), ctypes.c_int()
    iv, fv = ctypes.c_int64(), ctypes.c_double()
    for i in range(lib.kcap_export_nscalars(h)):
        lib.kcap_export_scalar(h, i, ctypes.byref(name), ctypes.byref(typ), ctypes.byref(iv),
                               ctypes.byref(fv))
        scalars[name.value.decode()] = int(iv.value) if typ.value == 1 else float(fv.value)
    return scalars


def _read_tensors(lib, h):
    infos, raw = [], {}
    et = _native.ExportTensor()
    for i in range(lib.kcap_export_ntensors(h)):
        lib.kcap_export_tensor_at(h, i, ctypes.byref(et))
        shape = tuple(int(et.shape[d]) for d in range(et.ndim))
        strides = tuple(int(et.strides[d]) for d in range(et.ndim)) if et.has_strides else None
        direction = {DIR_IN: "in", DIR_OUT: "out", DIR_CAND: "candidate"}.get(et.dir, "out")
        t = TensorInfo(et.name.decode(), direction, et.dtype.decode(), shape, strides)
        dt = numpy_dtype(t.dtype)
        if et.nbytes:
            buf = (ctypes.c_uint8 * et.nbytes).from_address(et.data)
            a = np.frombuffer(buf, dtype=dt).reshape(shape).copy()
        else:
            a = np.zeros(shape, dtype=dt)
        infos.append(t)
        raw[(direction, t.name)] = a
    return infos, raw


def load(path, bf16="raw"):
    """Read and validate a snapshot file -> Snapshot.

    bf16="raw" keeps bfloat16 tensors as uint16 bits, bf16="float32" widens them.
    Raises FileNotFoundError for a missing file, SnapshotError for anything the reader
    refuses (not a snapshot, version, shape, checksum ...), naming the file and the problem.
    """
    if bf16 not in ("raw", "float32"):
        raise ValueError("kcap.load: bf16 must be 'raw' or 'float32', not %r" % (bf16,))
    path = os.fspath(path)
    cpath = _c_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "kcap: no such snapshot file", path)
    lib = _native.lib()
    h = ctypes.c_void_p()
    msg = ctypes.create_string_buffer(1024)
    rc = lib.kcap_export_open(cpath, ctypes.byref(h), msg, len(msg))
    if rc:
        raise _error(lib, path, rc, msg)
    try:
        meta = _read_meta(lib, h)
        scalars = _read_scalars(lib, h)
        infos, raw = _read_tensors(lib, h)
    finally:
        lib.kcap_export_close(h)
    return Snapshot(path, meta, scalars, infos, raw, bf16)
