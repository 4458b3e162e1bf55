"""export.py — a snapshot to other formats (`kcap export FILE --to npz|pt`).

npz (numpy alone reads it back with np.load): keys "inputs/NAME", "outputs/NAME" (bf16
widened to float32 unless raw=True, then the uint16 bits), "scalars/NAME" (0-d arrays), and
"meta" (a JSON string of metadata plus each tensor's kcap dtype).

pt (torch.load): one dict {"inputs": {NAME: tensor}, "outputs": {...}, "scalars": {NAME:
int|float}, "meta": {...}, "dtypes": {"inputs/NAME": kcap dtype}, "source": path} written by
torch.save; bf16 tensors are torch.bfloat16, bit exact (what FlashInfer's and SGLang's dumps
hand torch users). torch is optional for the package: only this format needs it.

OUT "-" writes the file's bytes to stdout. A new OUT is written beside itself and then linked
into place, so a reader never sees half a file; an existing OUT is never replaced: a regular
file (or a symbolic link to one), the input snapshot itself (the default OUT of a FILE that
already ends in the new suffix) and a directory are refused, naming the file, while a pipe or
device (a FIFO, /dev/null, /dev/stdout) is written in place, the way the C commands' --json
outputs are (replay/kcap_json.c kcap_doc_open). An OUT that is this process's stdout through
a link (/dev/stdout, /dev/fd/1) is written as "-" is, and export() then returns "-".
"""
import errno
import io
import json
import os
import stat
import sys

import numpy as np

from .snapshot import load

FORMATS = ("npz", "pt")


def _doc(s, path, bf16):
    return {"meta": s.meta, "source": os.path.abspath(path), "bf16": bf16,
            "dtypes": {"%sputs/%s" % (t.direction, t.name): t.dtype for t in s.tensors}}


def _same(a, b):
    return a.st_dev == b.st_dev and a.st_ino == b.st_ino


def _plan(path, out):
    """How out is written: "stdout", "direct" (a pipe or device, opened in place) or "new" (a
    temp file linked into place); raises ValueError for an OUT that must not be replaced."""
    if out == "-":
        return "stdout"
    try:
        lst = os.lstat(out)
    except FileNotFoundError:
        return "new"
    except OSError as e:
        raise ValueError("%s: cannot inspect the output: %s" % (out, e.strerror)) from None
    try:
        st = os.stat(out)
    except OSError as e:
        raise ValueError("%s: is a symbolic link to %s, which cannot be written (%s); refusing "
                         "to replace it (pick another name with -o)"
                         % (out, os.readlink(out), e.strerror)) from None
    try:
        if _same(st, os.stat(path)):
            raise ValueError("%s: is the input snapshot%s; never written over (pick another "
                             "name with -o)" % (out, "" if out == path else " " + path))
    except OSError:
        pass  # an unreadable input: load() says so
    if stat.S_ISDIR(st.st_mode):
        raise ValueError("%s: is a directory (-o names the file to write)" % out)
    try:
        to_stdout = _same(st, os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):
        to_stdout = False
    if to_stdout and (stat.S_ISLNK(lst.st_mode) or not stat.S_ISREG(st.st_mode)):
        return "stdout"  # /dev/stdout, /dev/fd/1: whatever the caller made stdout
    if stat.S_ISREG(st.st_mode):
        link = " (a symbolic link to %s)" % os.readlink(out) if stat.S_ISLNK(lst.st_mode) else ""
        raise ValueError("%s: already exists%s; never replaced (pick another name with -o, or "
                         "remove it first)" % (out, link))
    return "direct"


def _write(path, out, suffix, save):
    """save(fileobj) into out ("-" = stdout), atomically for a new path; returns out, or "-"
    when out was stdout under another name. _plan() decides, before and after the save."""
    if _plan(path, out) != "new":
        buf = io.BytesIO()  # torch.save wants a seekable file; a pipe is not one
        save(buf)
        if _plan(path, out) == "stdout":
            sys.stdout.buffer.write(buf.getvalue())
            sys.stdout.buffer.flush()
            return "-"
        try:  # no O_CREAT: should the node go meanwhile, fail rather than leave a stray file
            with os.fdopen(os.open(out, os.O_WRONLY | os.O_CLOEXEC), "wb") as f:
                f.write(buf.getvalue())
        except OSError as e:
            raise ValueError("%s: cannot write: %s" % (out, e.strerror)) from None
        return out
    d, base = os.path.split(out)
    for _ in range(100):
        tmp = os.path.join(d, "%s.tmp.%d.%s%s" % (base, os.getpid(), os.urandom(4).hex(), suffix))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            break
        except FileExistsError:
            continue
        except OSError as e:
            raise ValueError("%s: cannot create a file in %s: %s"
                             % (out, d or ".", e.strerror)) from None
    else:
        raise ValueError("%s: cannot create a temporary file in %s" % (out, d or "."))
    try:
        with os.fdopen(fd, "wb") as f:
            save(f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, out)  # fails with EEXIST instead of replacing: no window
        except FileExistsError:
            raise ValueError("%s: appeared while it was being written; never replaced (pick "
                             "another name with -o)" % out) from None
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS,
                               errno.EMLINK, errno.EXDEV):
                raise
            if os.path.lexists(out):  # a file system without hard links: check, then rename
                raise ValueError("%s: appeared while it was being written; never replaced "
                                 "(pick another name with -o)" % out) from None
            os.rename(tmp, out)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return out


def to_npz(path, out, raw=False):
    """Write snapshot `path` as an .npz at `out`; returns out ("-": it went to stdout)."""
    _plan(path, out)  # refuse before reading the snapshot
    s = load(path, bf16="raw" if raw else "float32")
    arrays = {}
    for t in s.tensors:
        group = s.inputs if t.direction == "in" else s.outputs
        arrays["%sputs/%s" % (t.direction, t.name)] = group[t.name]
    for k, v in s.scalars.items():
        arrays["scalars/" + k] = np.array(v)
    arrays["meta"] = np.array(json.dumps(_doc(s, path, "raw" if raw else "float32")))
    return _write(path, out, ".npz", lambda f: np.savez_compressed(f, **arrays))


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
    _plan(path, out)
    torch = _torch()
    s = load(path)
    doc = _doc(s, path, "bfloat16")
    doc["inputs"] = s.to_torch("in")
    doc["outputs"] = s.to_torch("out")
    doc["scalars"] = dict(s.scalars)
    return _write(path, out, ".pt", lambda f: torch.save(doc, f))


def export(path, fmt, out=None, raw=False):
    """Dispatch on the format name; out defaults to the input name with the new suffix.
    Returns where the file went: out, or "-" for stdout."""
    if fmt not in FORMATS:
        raise ValueError("--to: format %r is not one of %s" % (fmt, ", ".join(FORMATS)))
    if raw and fmt != "npz":
        raise ValueError("--raw applies to --to npz only (pt keeps bf16 as torch.bfloat16)")
    if out is None:
        out = os.path.splitext(path)[0] + "." + fmt
    if fmt == "pt":
        return to_pt(path, out)
    return to_npz(path, out, raw=raw)
