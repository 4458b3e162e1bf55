"""export.py — a snapshot to other formats (`kcap export FILE --to npz`).

npz keys: "inputs/NAME", "outputs/NAME" (bf16 widened to float32 unless raw=True, then the
uint16 bits), "scalars/NAME" (0-d arrays), and "meta" (a JSON string of metadata plus each
tensor's kcap dtype), so numpy alone can read it back with np.load.
"""
import json
import os

import numpy as np

from .snapshot import load

FORMATS = ("npz",)


def to_npz(path, out, raw=False):
    """Write snapshot `path` as an .npz at `out`; returns out."""
    s = load(path, bf16="raw" if raw else "float32")
    arrays = {}
    for t in s.tensors:
        group = s.inputs if t.direction == "in" else s.outputs
        arrays["%sputs/%s" % (t.direction, t.name)] = group[t.name]
    for k, v in s.scalars.items():
        arrays["scalars/" + k] = np.array(v)
    doc = {"meta": s.meta, "source": os.path.abspath(path), "bf16": "raw" if raw else "float32",
           "dtypes": {"%sputs/%s" % (t.direction, t.name): t.dtype for t in s.tensors}}
    arrays["meta"] = np.array(json.dumps(doc))
    tmp = out + ".tmp.npz"  # np.savez adds .npz to names without it
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, out)
    return out


def export(path, fmt, out=None, raw=False):
    """Dispatch on the format name; out defaults to the input name with the new suffix."""
    if fmt not in FORMATS:
        raise ValueError("kcap export: format %r is not one of %s" % (fmt, ", ".join(FORMATS)))
    if out is None:
        out = os.path.splitext(path)[0] + "." + fmt
    return to_npz(path, out, raw=raw)
