"""finfo and iinfo for minifloat's formats, with ml_dtypes' fields and values.

Values come from the format table (``_core.formats()``) and from NumPy's
``np.finfo``, which asks the DType for its constants (NumPy >= 2.4); the
properties below replace what NumPy derives from the storage size (bits,
nexp) or from a radix assumption (epsneg) that does not hold for the narrow
formats.
"""
import math

import numpy as np

from . import _core
from ._neighbours import as_dtype

_FORMATS = {f["name"]: f for f in _core.formats()}


def _as_dtype(obj):
    """The dtype ``obj`` names or, for an array (or anything with a ``dtype``
    attribute that is a dtype), its dtype, as ml_dtypes.finfo accepts; None
    if neither."""
    try:
        return as_dtype(obj)
    except TypeError:
        dt = getattr(obj, "dtype", None)
        return dt if isinstance(dt, np.dtype) else None


def _format_of(dtype):
    dt = _as_dtype(dtype)
    if dt is None:
        return None
    return _FORMATS.get(str(dt)) if type(dt).__module__ == "minifloat.dtypes" else None


def _numpy_arg(obj):
    """What np.finfo/np.iinfo get for a non-minifloat argument: an array's
    dtype instead of the array (which np.finfo reads as object)."""
    if isinstance(obj, np.ndarray):
        return obj.dtype
    return obj


class finfo(np.finfo):
    """Machine limits of a float format; ``np.finfo`` for NumPy's types.

    Fields are those of ``ml_dtypes.finfo``: bits, eps, epsneg, max, min, tiny,
    smallest_normal, smallest_subnormal, nmant, nexp, maxexp, minexp, machep,
    negep, precision, resolution, dtype.
    """

    _mf_cache = {}

    def __new__(cls, dtype):
        fmt = _format_of(dtype)
        if fmt is None:
            return np.finfo(_numpy_arg(dtype))
        if fmt["kind"] != "float":
            raise ValueError(f"data type {fmt['name']} not inexact; use minifloat.iinfo")
        obj = cls._mf_cache.get(fmt["name"])
        if obj is None:
            obj = object.__new__(cls)
            obj._mf_format = fmt
            obj._init(fmt["dtype"])
            # plain attributes np.finfo derives from the storage size
            obj.bits = fmt["bits"]
            obj.smallest_subnormal = obj.dtype.type(fmt["smallest_subnormal"])
            cls._mf_cache[fmt["name"]] = obj
        return obj

    @property
    def nexp(self):
        return self._mf_format["exp_bits"]

    @property
    def iexp(self):
        return self.nexp

    @property
    def epsneg(self):
        # 1 minus the largest value below 1: one code down
        below = _core._scalar_from_code(self._mf_format["name"], self.dtype.type(1).code - 1)
        return self.dtype.type(1.0 - float(below))

    @property
    def negep(self):
        return int(math.log2(float(self.epsneg)))

    @property
    def resolution(self):
        return self.dtype.type(10.0 ** -self.precision)

    @property
    def machep(self):
        return -self._mf_format["mant_bits"]


class iinfo(np.iinfo):
    """Machine limits of an integer format (int4, uint2, ...); ``np.iinfo``
    for NumPy's types."""

    _mf_cache = {}

    def __new__(cls, int_type):
        fmt = _format_of(int_type)
        if fmt is None:
            return np.iinfo(_numpy_arg(int_type))
        if fmt["kind"] == "float":
            raise ValueError(f"Invalid integer data type {fmt['name']!r}; use minifloat.finfo")
        obj = cls._mf_cache.get(fmt["name"])
        if obj is None:
            obj = object.__new__(cls)
            obj._mf_format = fmt
            obj.dtype = fmt["dtype"]
            obj.kind = "u" if fmt["kind"] == "uint" else "i"   # the descriptor says "V"
            obj.key = fmt["name"]
            obj.bits = fmt["bits"]
            cls._mf_cache[fmt["name"]] = obj
        return obj

    def __init__(self, int_type):
        pass   # everything is set in __new__

    @property
    def min(self):
        return int(self._mf_format["min"])

    @property
    def max(self):
        return int(self._mf_format["max"])

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.key})"

    def __str__(self):
        return (f"Machine parameters for {self.key}\n"
                f"---------------------------------------------------------------\n"
                f"min = {self.min}\nmax = {self.max}\n"
                f"---------------------------------------------------------------\n")


def _seed_numpy_finfo():
    """np.finfo(<minifloat dtype>) returns minifloat.finfo's object: np.finfo
    looks its cache up first, so the cache is seeded (np.finfo would derive
    bits/nexp from the storage size)."""
    cache = getattr(np.finfo, "_finfo_cache", None)
    if not isinstance(cache, dict):
        return
    for f in _core.formats():
        if f["kind"] == "float":
            fi = finfo(f["dtype"])
            cache[f["dtype"]] = fi
            cache[f["type"]] = fi


_seed_numpy_finfo()
