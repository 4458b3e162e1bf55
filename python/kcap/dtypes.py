"""dtypes.py — kcap dtype names <-> numpy, and the bfloat16 bit conversions.

numpy has no bfloat16: a bf16 tensor is kept as its raw uint16 bits (exact, what the file
stores) and widened to float32 on request (exact: bf16 is the top half of a float32).
"""
import numpy as np

NUMPY = {
    "bfloat16": np.uint16,  # raw bits
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
}


def numpy_dtype(name):
    """numpy dtype holding a kcap dtype's bytes (bfloat16 -> uint16 bits)."""
    try:
        return np.dtype(NUMPY[name])
    except KeyError:
        raise ValueError("kcap: unknown dtype %r" % name) from None


def bf16_to_float32(bits):
    """uint16 bfloat16 bits -> float32 values (exact)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(values):
    """float32 -> uint16 bfloat16 bits, rounded to nearest even (NaN stays NaN)."""
    x = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounded = (x + 0x7FFF + ((x >> 16) & 1)) >> 16
    nan = (x & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (x >> 16) | 0x40, rounded).astype(np.uint16)


def as_float(array, kcap_dtype):
    """A tensor's values as floats: bf16 bits widened, other dtypes converted to float32/64."""
    if kcap_dtype == "bfloat16":
        return bf16_to_float32(array)
    if kcap_dtype == "float64":
        return np.asarray(array)
    return np.asarray(array).astype(np.float32)
