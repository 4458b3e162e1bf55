"""export.py — a snapshot to other formats (`kcap export FILE --to npz|pt`).

npz (numpy alone reads it back with np.load): keys "inputs/NAME", "outputs/NAME" (bf16
widened to float32 unless raw=True, then the uint16 bits), "scalars/NAME" (0-d arrays), and
"meta" (a JSON string of metadata plus each tensor's kcap dtype).

pt (torch.load): one dict {"inputs": {NAME: tensor}, "outputs": {...}, "scalars": {NAME:
int|float}, "meta": {...}, "dtypes": {"inputs/NAME": kcap dtype}, "source": path} written by
torch.save; bf16 tensors are torch.bfloat16, bit exact (what FlashInfer's and SGLang's dumps
hand torch users). torch is optional for the package: only this format needs it.

OUT "-" writes the file's bytes to stdout; any other OUT is written beside itself and renamed
over, so a reader never sees half a file.
"""
import io
import json
import os
import sys

import numpy as np

from .snapshot import load

FORMATS = ("npz", "pt")


def _doc(s, path, bf16):
    return {"meta": s.meta, "source": os.path.abspath(path), "bf16": bf16,
            "dtypes": {"%sputs/%s" % (t.direction, t.name): t.dtype for t in s.tensors}}


def _write(out, suffix, save):
    """save(fileobj) into out ("-" = stdout), atomically for a path."""
    if out == "-":
        buf = io.BytesIO()
        save(buf)
        sys.stdout.buffer.write(buf.getvalue())
        sys.stdout.buffer.flush()
        return out
    tmp = out + ".tmp" + suffix
    try:
        with open(tmp, "wb") as f:
            save(f)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def to_npz(path, out, raw=False):
    """Write snapshot `path` as an .npz at `out`; returns out."""
    s = load(path, bf16="raw" if raw else "float32")
    arrays = {}
    for t in s.tensors:
        group = s.inputs if t.direction == "in" else s.outputs
        arrays["%sputs/%s" % (t.direction, t.name)] = group[t.name]
    for k, v in s.scalars.items():
        arrays["scalars/" + k] = np.array(v)
    arrays["meta"] = np.array(json.dumps(_doc(s, path, "raw" if raw else "float32")))
    return _write(out, ".npz", lambda f: np.savez_compressed(f, **arrays))


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ValueError("--to pt needs torch, which %s cannot import (%s); use --to npz, or "
                         "run with a python that has torch (KCAP_PYTHON=/path/to/python3)"
                         % (sys.executable, e)) from None
    return torch


def to_pt(path, out):
    """Write snapshot `path` as a torch.save file at `out` (bf16 as torch.bfloat16)."""
    torch = _torch()
    s = load(path)
    doc = _doc(s, path, "bfloat16")
    doc["inputs"] = s.to_torch("in")
    doc["outputs"] = s.to_torch("out")
    doc["scalars"] = dict(s.scalars)
    return _write(out, ".pt", lambda f: torch.save(doc, f))


def export(path, fmt, out=None, raw=False):
    """Dispatch on the format name; out defaults to the input name with the new suffix."""
    if fmt not in FORMATS:
        raise ValueError("--to: format %r is not one of %s" % (fmt, ", ".join(FORMATS)))
    if raw and fmt != "npz":
        raise ValueError("--raw applies to --to npz only (pt keeps bf16 as torch.bfloat16)")
    if out is None:
        out = os.path.splitext(path)[0] + "." + fmt
    if fmt == "pt":
        return to_pt(path, out)
    return to_npz(path, out, raw=raw)
