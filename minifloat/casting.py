"""Casts with the control ``astype`` cannot express: saturation, rounding
toward zero and stochastic rounding (``minifloat.cast``; ``minifloat.convert``
is its earlier name, the same function), and sub-byte packing
(``minifloat.pack`` / ``minifloat.unpack``).

Not to be confused with checkpoint conversion (``minifloat convert`` on the
command line, :func:`minifloat.io.checkpoint.convert_file`), which uses
:func:`cast` on every floating-point tensor of a file."""
import os

import numpy as np

from . import _core
from ._neighbours import as_dtype

_FORMATS = {f["name"]: f for f in _core.formats()}
_FLOAT_NAMES = [n for n, f in _FORMATS.items() if f["kind"] == "float"]
_ROUNDINGS = {"nearest": 0, "toward_zero": 1, "stochastic": 2}

__all__ = ["cast", "convert", "pack", "unpack"]


def _format_of(dtype):
    try:
        dt = as_dtype(dtype)
    except TypeError:
        return None
    if type(dt).__module__ != "minifloat.dtypes":
        return None
    return _FORMATS[str(dt)]


def cast(x, dtype, *, saturate=False, rounding="nearest", seed=None, out=None):
    """Cast `x` to the minifloat float format `dtype`, rounding once.

    saturate:  values beyond the largest finite value, and infinities, become
               the largest finite value (with their sign) instead of inf or NaN
               (torch's float8_e4m3fn behaviour: +-448).  NaN stays NaN where
               the format has one.
    rounding:  "nearest" (to even; what casts do), "toward_zero", or
               "stochastic": round up with probability equal to the discarded
               fraction, so the mean of many casts equals the input.
    seed:      for "stochastic": the same seed gives the same result (per
               element position); None draws a fresh seed.
    out:       an existing array of `dtype` to write into (no allocation); `x`
               is broadcast to its shape.
    """
    if rounding not in _ROUNDINGS:
        raise ValueError(f"rounding must be one of {', '.join(map(repr, _ROUNDINGS))}; "
                         f"got {rounding!r}")
    fmt = _format_of(dtype)
    if fmt is None or fmt["kind"] != "float":
        raise ValueError(f"cast's dtype must be a minifloat float format "
                         f"({', '.join(_FLOAT_NAMES)}); got {dtype!r}")
    if seed is not None and rounding != "stochastic":
        raise ValueError("seed is only used with rounding='stochastic'; "
                         f"got seed={seed!r} with rounding={rounding!r}")
    target = fmt["dtype"]
    scalar_in = np.ndim(x) == 0 and not isinstance(x, np.ndarray)
    out_given = out is not None
    x = np.asanyarray(x)
    if out is None:
        out = np.empty(x.shape, dtype=target)
    else:
        if not isinstance(out, np.ndarray) or out.dtype != target:
            raise ValueError(f"out must be an ndarray of dtype {fmt['name']}; got "
                             f"{getattr(out, 'dtype', type(out).__name__)}")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
    src = np.broadcast_to(x, out.shape)
    if rounding == "nearest" and not saturate:
        np.copyto(out, src, casting="unsafe")        # the cast, SIMD kernels
    else:
        if rounding == "stochastic" and seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        _core._convert(src, out, _ROUNDINGS[rounding], bool(saturate),
                       int(seed or 0) & 0xFFFFFFFFFFFFFFFF)
    return out[()] if scalar_in and not out_given else out


#: the earlier name of :func:`cast` (the same function, kept so that code
#: written for it runs unchanged)
convert = cast


# ---------------------------------------------------------------- packing

def _sub_byte_format(dtype, what):
    fmt = _format_of(dtype)
    if fmt is None or fmt["bits"] >= 8:
        names = [n for n, f in _FORMATS.items() if f["bits"] < 8]
        raise ValueError(f"{what} takes a sub-byte format ({', '.join(names)}); got {dtype!r}")
    return fmt


def _packed_size(n, bits):
    return (n * bits + 7) // 8


def pack(a):
    """Pack an array of a sub-byte format (float4_e2m1fn, float6_*, int4,
    uint4, int2, uint2, int1, uint1) into bytes, as DLPack packs them: the
    values in C order, each taking `bits` bits, little bit-endian (for 4-bit
    formats: two values per byte, the first in the low nibble; for 6-bit
    formats: four values in three bytes).  Returns a 1-D uint8 array."""
    a = np.asanyarray(a)
    fmt = _sub_byte_format(a.dtype, "pack")
    bits = fmt["bits"]
    codes = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    n = codes.size
    if bits == 6:
        m = -n % 4
        c = np.concatenate([codes, np.zeros(m, np.uint8)]).reshape(-1, 4).astype(np.uint32) & 0x3F
        word = c[:, 0] | (c[:, 1] << 6) | (c[:, 2] << 12) | (c[:, 3] << 18)
        out = np.empty((word.size, 3), np.uint8)
        out[:, 0] = word & 0xFF
        out[:, 1] = (word >> 8) & 0xFF
        out[:, 2] = (word >> 16) & 0xFF
        return out.reshape(-1)[:_packed_size(n, bits)]
    per = 8 // bits
    m = -n % per
    c = np.concatenate([codes, np.zeros(m, np.uint8)]).reshape(-1, per) & ((1 << bits) - 1)
    out = np.zeros(c.shape[0], np.uint8)
    for j in range(per):
        out |= c[:, j] << (j * bits)
    return out


def unpack(b, dtype, shape):
    """Inverse of :func:`pack`: bytes -> an array of `dtype` and `shape`.
    `b` must hold exactly the bytes `pack` makes for that many values."""
    fmt = _sub_byte_format(dtype, "unpack")
    bits = fmt["bits"]
    b = np.asarray(b)
    if b.dtype != np.uint8:
        if b.dtype.itemsize != 1:
            raise ValueError(f"unpack expects bytes (uint8); got dtype {b.dtype}")
        b = b.view(np.uint8)
    b = b.reshape(-1)
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    need = _packed_size(n, bits)
    if b.size != need:
        raise ValueError(f"{n} values of {fmt['name']} ({bits} bits each) pack into {need} bytes; "
                         f"got {b.size} bytes")
    if bits == 6:
        m = -b.size % 3
        w = np.concatenate([b, np.zeros(m, np.uint8)]).reshape(-1, 3).astype(np.uint32)
        word = w[:, 0] | (w[:, 1] << 8) | (w[:, 2] << 16)
        codes = np.stack([(word >> (6 * j)) & 0x3F for j in range(4)], axis=1).astype(np.uint8)
    else:
        per = 8 // bits
        mask = (1 << bits) - 1
        codes = np.stack([(b >> (j * bits)) & mask for j in range(per)], axis=1).astype(np.uint8)
    return codes.reshape(-1)[:n].view(fmt["dtype"]).reshape(shape)
