"""kcap — captured GPU kernel calls (HDF5 snapshots) in numpy, torch and pytest.

    import kcap
    s = kcap.load("tests/golden/snapshots/h8_q1_s0.h5")       # validated like `kcap check`
    s.meta["call"], s.scalars["bs"], s.inputs["q"].shape, s.outputs["o"].dtype
    s.values("o")          # bf16 widened to float32;  kcap.load(p, bf16="float32") for all
    s.to_torch()["q"]      # torch.bfloat16 (torch optional)

Submodules: kcap.vattn (ctypes binding of kernels/verify_attn.h), kcap.testing (pytest
plugin: one test per snapshot of a folder), kcap.export (npz, torch .pt), `python3 -m kcap`.
"""
from .dtypes import bf16_to_float32, float32_to_bf16
from .snapshot import Snapshot, SnapshotError, TensorInfo, check, load

__version__ = "0.1.0"  # KCAP_VERSION of common/kcap_version.h

_kcap_tag = None


def tag(key, value):
    """Tag this thread's next kernel calls (e.g. tag("layer", 3), tag("step", 17)).

    The tags go into every snapshot libkcap takes of the thread's calls (the file's `tags`
    attribute) and KCAP_TAGS / `kcap record --tags layer=0-3` selects by them. Without
    libkcap.so in the process this is a no-op: a backend can call it unconditionally.
    """
    global _kcap_tag
    if _kcap_tag is None:
        import ctypes
        try:
            f = ctypes.CDLL(None).kcap_tag
            f.argtypes, f.restype = [ctypes.c_char_p, ctypes.c_long], None
        except (AttributeError, OSError):
            f = False
        _kcap_tag = f
    if _kcap_tag:
        _kcap_tag(str(key).encode(), int(value))


__all__ = ["load", "check", "tag", "Snapshot", "SnapshotError", "TensorInfo",
           "bf16_to_float32", "float32_to_bf16", "__version__"]
