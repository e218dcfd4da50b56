"""finfo and iinfo for minifloat's formats, with ml_dtypes' fields and values.

Values come from the format table (``_core.formats()``) and from NumPy's
``np.finfo``, which asks the DType for its constants (NumPy >= 2.4); the
properties below replace what NumPy derives from the storage size (bits,
nexp) or from a radix assumption (epsneg) that does not hold for the narrow
formats.  NumPy 2.3 (no get_constant) derives finfo from tables of its own
types only: there every field comes from the format table.
"""
import math

import numpy as np
from numpy._core import getlimits as _getlimits

from . import _core
from ._neighbours import as_dtype

# NumPy >= 2.4 fills np.finfo from the DType's get_constant slot
_NUMPY_ASKS_DTYPE = hasattr(_getlimits, "_populate_finfo_constants")

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
            if _NUMPY_ASKS_DTYPE:
                obj._init(fmt["dtype"])
            else:
                obj._init_from_format(fmt)
            # plain attributes np.finfo derives from the storage size
            obj.bits = fmt["bits"]
            obj.smallest_subnormal = obj.dtype.type(fmt["smallest_subnormal"])
            cls._mf_cache[fmt["name"]] = obj
        return obj

    def _init_from_format(self, fmt):
        """np.finfo's fields where NumPy cannot ask the DType (NumPy < 2.4)."""
        t = fmt["type"]
        self.dtype = fmt["dtype"]
        self.eps = t(fmt["eps"])
        self.max = t(fmt["max"])
        self.min = t(fmt["min"])
        self._mf_smallest_normal = t(fmt["smallest_normal"])
        self.nmant = fmt["mant_bits"]
        self.minexp = fmt["minexp"]
        self.maxexp = fmt["maxexp"]
        # floor(nmant * log10(2)), at least 1 for the 8-bit and wider
        # formats: ml_dtypes' convention, as dtype.c's get_constant gives
        digits = int(fmt["mant_bits"] * math.log10(2))
        self.precision = max(digits, 1) if fmt["bits"] >= 8 else digits

    if not _NUMPY_ASKS_DTYPE:
        # NumPy < 2.4 reads these from a MachAr that user dtypes lack
        @property
        def smallest_normal(self):
            return self._mf_smallest_normal

        tiny = smallest_normal

    def __str__(self):
        # NumPy 2.4's layout, on every NumPy (2.3's formats strings it keeps
        # in a MachAr, which user dtypes lack)
        mn = "-max" if -float(self.min) == float(self.max) else str(self.min)
        return (f"Machine parameters for {self.dtype}\n"
                f"---------------------------------------------------------------\n"
                f"precision = {self.precision}   resolution = {self.resolution}\n"
                f"machep = {self.machep}   eps =        {self.eps}\n"
                f"negep =  {self.negep}   epsneg =     {self.epsneg}\n"
                f"minexp = {self.minexp}   tiny =       {self.tiny}\n"
                f"maxexp = {self.maxexp}   max =        {self.max}\n"
                f"nexp =   {self.nexp}   min =        {mn}\n"
                f"smallest_normal = {self.smallest_normal}   "
                f"smallest_subnormal = {self.smallest_subnormal}\n"
                f"---------------------------------------------------------------\n")

    def __repr__(self):
        return (f"{type(self).__name__}(resolution={self.resolution}, min={self.min}, "
                f"max={self.max}, dtype={self.dtype})")

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
