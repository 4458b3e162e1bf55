"""_native.py — finds and binds build/lib/libkcapfmt.so (formats/kcap_export.h).

The snapshot reader is C (formats/): this module only loads it through ctypes and declares
the prototypes of kcap_export.h, so Python gets exactly the validation `kcap check` does.
Search order: $KCAP_LIBFMT; the in-tree build (python/../build/lib, or $KCAP_BUILD);
the installed layout (PREFIX/lib/pythonX.Y/dist-packages/kcap -> PREFIX/lib); the system
loader path.
"""
import ctypes
import os

EXPORT_ABI = 1  # KCAP_EXPORT_ABI this module was written for
MAX_DIMS = 4    # KCAP_MAX_DIMS

_HERE = os.path.dirname(os.path.abspath(__file__))


class ExportTensor(ctypes.Structure):
    """Mirror of kcap_export_tensor (formats/kcap_export.h)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dir", ctypes.c_int),
        ("dtype", ctypes.c_char_p),
        ("ndim", ctypes.c_int),
        ("has_strides", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
    ]


def candidates():
    """Paths tried, in order, for libkcapfmt.so."""
    out = []
    if os.environ.get("KCAP_LIBFMT"):
        out.append(os.environ["KCAP_LIBFMT"])
    root = os.path.dirname(os.path.dirname(_HERE))  # python/kcap -> repository root
    build = os.environ.get("KCAP_BUILD", "build")
    out.append(os.path.join(root, build, "lib", "libkcapfmt.so"))
    prefix_lib = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    out.append(os.path.join(prefix_lib, "libkcapfmt.so"))
    out.append("libkcapfmt.so")  # ld.so search path (ldconfig, LD_LIBRARY_PATH)
    return out


def _declare(lib):
    c = ctypes
    snap = c.c_void_p
    protos = {
        "kcap_export_abi": (c.c_int, []),
        "kcap_export_open": (c.c_int, [c.c_char_p, c.POINTER(snap), c.c_char_p, c.c_size_t]),
        "kcap_export_check": (c.c_int, [c.c_char_p, c.c_char_p, c.c_size_t]),
        "kcap_export_close": (None, [snap]),
        "kcap_export_err_string": (c.c_char_p, [c.c_int]),
        "kcap_export_meta_count": (c.c_int, []),
        "kcap_export_meta_name": (c.c_char_p, [c.c_int, c.POINTER(c.c_int)]),
        "kcap_export_meta_str": (c.c_char_p, [snap, c.c_int]),
        "kcap_export_meta_int": (c.c_int64, [snap, c.c_int]),
        "kcap_export_nscalars": (c.c_int, [snap]),
        "kcap_export_scalar": (c.c_int, [snap, c.c_int, c.POINTER(c.c_char_p),
                                         c.POINTER(c.c_int), c.POINTER(c.c_int64),
                                         c.POINTER(c.c_double)]),
        "kcap_export_ntensors": (c.c_int, [snap]),
        "kcap_export_tensor_at": (c.c_int, [snap, c.c_int, c.POINTER(ExportTensor)]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


_lib = None


def lib():
    """The loaded libkcapfmt.so (loaded once). ImportError naming every path tried."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        handle = _declare(handle)
        abi = handle.kcap_export_abi()
        if abi != EXPORT_ABI:
            tried.append("%s (export ABI %d, this package needs %d)" % (path, abi, EXPORT_ABI))
            continue
        _lib = handle
        return _lib
    raise ImportError("kcap: cannot load libkcapfmt.so (build it with `make`, or set "
                      "KCAP_LIBFMT); tried: " + "; ".join(tried))
