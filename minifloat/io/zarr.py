"""Zarr v3 data types for every minifloat format (zarr-python >= 3.1).

zarr-python finds these through the ``zarr.data_type`` entry point in
minifloat's package metadata, so no user code is needed::

    z = zarr.create_array(store, shape=(n, d), chunks=(4096, d), dtype=minifloat.bfloat16)
    z[...] = x                                 # x: an ndarray of bfloat16

The names and JSON forms are zarr-extensions' (data-types/<name>/README.md):
``bfloat16``, ``float8_e3m4``, ``float8_e4m3``, ``float8_e4m3b11fnuz``,
``float8_e4m3fnuz``, ``float8_e5m2``, ``float8_e5m2fnuz``, ``float8_e8m0fnu``,
``float6_e2m3fn``, ``float6_e3m2fn``, ``float4_e2m1fn``, ``int4``, ``uint4``,
``int2``, ``uint2``.  ``float8_e4m3fn``, ``int1`` and ``uint1`` are not defined
there yet; they follow the same conventions (docs/zarr-dask.md).

Fill values in JSON, as the extensions specify: a JSON number for a finite
value; ``"NaN"`` for the format's canonical NaN (the code the extension names,
which is the code minifloat gives ``float("nan")``); ``"Infinity"`` and
``"-Infinity"``; any other code (a NaN with another payload or sign) as a hex
string of the code, ``"0x7fc1"`` (two hex digits per byte, big-endian as in the
core spec).  Constants a format cannot represent are errors.  The integer
formats take JSON integers in their range.

zarr-python 3.1 collects the ``zarr.data_type`` entry points but never loads
them (its registry's ``_lazy_load`` has no caller), so this module calls
:func:`register` when it is imported, and ``import minifloat`` imports it as
soon as zarr is imported (before or after minifloat; minifloat/_neighbours.py
watches for it); the entry points stay declared for zarr versions that load
them.

The data type classes are built from the format table (``_core.formats()``),
one class per format, so that zarr's registry, keyed by the class's
``_zarr_v3_name``, holds each under its own name.  Importing this module
imports zarr; ``import minifloat`` never does.
"""
import dataclasses
import math
import sys

import numpy as np
from zarr.core.dtype.common import HasEndianness, HasItemSize   # the mix-ins zarr's own use
from zarr.dtype import ZDType

try:
    from zarr.errors import DataTypeValidationError        # zarr >= 3.2
except ImportError:
    from zarr.dtype import DataTypeValidationError

from .. import _core

__all__ = ["data_types", "data_type_for", "register"]

_SPECIAL = ("NaN", "Infinity", "-Infinity")
# zarr v2 has no names for these formats, and its compressors take the chunk's
# buffer (memoryview), which NumPy cannot give for a user-defined dtype
_NO_V2 = ("{name} is a zarr v3 data type (zarr-extensions); zarr v2 has no name for it: "
          "use zarr_format=3")


def _code_dtype(fmt):
    return np.dtype(f"<u{fmt['itemsize']}")


def _code_of(fmt, value):
    """The code (a Python int) of a 0-d value already in the format."""
    return int(np.asarray(value, dtype=fmt["dtype"]).view(_code_dtype(fmt)))


def _from_code(fmt, code):
    return np.asarray(code, dtype=_code_dtype(fmt)).view(fmt["dtype"])[()]


class _Base(ZDType, HasItemSize):
    """Shared behaviour; each format's class sets ``_fmt``, ``dtype_cls`` and
    ``_zarr_v3_name`` (the format's name)."""

    _fmt = None

    # --- the native dtype --------------------------------------------------
    @classmethod
    def from_native_dtype(cls, dtype):
        if cls._check_native_dtype(dtype):
            return cls._from_native_checked(dtype)
        raise DataTypeValidationError(
            f"Invalid data type: {dtype}. Expected an instance of {cls.dtype_cls}")

    @classmethod
    def _from_native_checked(cls, dtype):
        return cls()

    def to_native_dtype(self):
        return self._fmt["dtype"]

    @property
    def item_size(self):
        return self._fmt["itemsize"]

    # --- JSON for the data type ---------------------------------------------
    @classmethod
    def _check_json_v3(cls, data):
        return data == cls._zarr_v3_name or (
            isinstance(data, dict) and data.get("name") == cls._zarr_v3_name
            and set(data) <= {"name", "configuration"}
            and data.get("configuration", {}) == {})

    @classmethod
    def _from_json_v3(cls, data):
        if cls._check_json_v3(data):
            return cls()
        raise DataTypeValidationError(
            f"Invalid JSON representation of {cls.__name__}. Got {data!r}, "
            f"expected {cls._zarr_v3_name!r}.")

    @classmethod
    def _from_json_v2(cls, data):
        raise DataTypeValidationError(_NO_V2.format(name=cls._zarr_v3_name))

    def to_json(self, zarr_format):
        if zarr_format == 3:
            return self._zarr_v3_name
        if zarr_format == 2:
            raise ValueError(_NO_V2.format(name=self._zarr_v3_name))
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format}")

    # --- scalars --------------------------------------------------------------
    def default_scalar(self):
        # 0, or 1.0 where the format has no zero (e8m0: its code 0 is 2**-127)
        return self.cast_scalar(0 if self._fmt.get("has_zero", True) else 1.0)

    def cast_scalar(self, data):
        if self._check_scalar(data):
            return self._cast_scalar_unchecked(data)
        raise TypeError(f"Cannot convert object {data!r} with type {type(data)} to a scalar "
                        f"compatible with the data type {self}.")


class _FloatBase(_Base):
    def _check_scalar(self, data):
        if isinstance(data, (bool, np.bool_)):
            return False
        if isinstance(data, str):
            try:
                float(data)
            except ValueError:
                return False
            return True
        return isinstance(data, (int, float, np.number, np.generic))

    def _cast_scalar_unchecked(self, data):
        dt = self.to_native_dtype()
        if isinstance(data, np.generic) and type(data.dtype) is type(dt):
            return np.asarray(data, dtype=dt)[()]
        value = float(data)
        self._check_representable_special(value)
        return np.asarray(value, dtype=np.float64).astype(dt)[()]

    def _check_representable_special(self, value):
        fmt = self._fmt
        if math.isnan(value) and not fmt["has_nan"]:
            raise ValueError(f"{fmt['name']} has no NaN (zarr-extensions: the constant 'NaN' "
                             f"is not supported for this data type)")
        if math.isinf(value) and not fmt["has_inf"]:
            raise ValueError(f"{fmt['name']} has no infinity (zarr-extensions: the constants "
                             f"'Infinity' and '-Infinity' are not supported for this data type)")

    def from_json_scalar(self, data, *, zarr_format):
        fmt = self._fmt
        if isinstance(data, str) and data not in _SPECIAL:
            if not data.startswith("0x"):
                raise ValueError(f"Invalid fill value {data!r} for {fmt['name']}: expected a "
                                 f"number, one of {', '.join(_SPECIAL)}, or a hex code '0x..'")
            digits = 2 * fmt["itemsize"]
            if len(data) != 2 + digits:
                raise ValueError(f"Invalid hex fill value {data!r} for {fmt['name']}: expected "
                                 f"'0x' and {digits} hex digits")
            code = int(data[2:], 16)
            if code >> fmt["bits"]:
                raise ValueError(f"Invalid hex fill value {data!r} for {fmt['name']}: the "
                                 f"format has {fmt['bits']} bits")
            return _from_code(fmt, code)
        if isinstance(data, str):
            value = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[data]
            self._check_representable_special(value)
            return self._cast_scalar_unchecked(value)
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise TypeError(f"Invalid fill value {data!r} for {fmt['name']}: expected a JSON "
                            f"number or string")
        return self._cast_scalar_unchecked(data)

    def to_json_scalar(self, data, *, zarr_format):
        fmt = self._fmt
        v = self.cast_scalar(data)
        f = float(v)
        if math.isnan(f):
            code = _code_of(fmt, v)
            if code == fmt["nan_code"]:
                return "NaN"
            return "0x" + format(code, f"0{2 * fmt['itemsize']}x")
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f


class _EndianFloatBase(_FloatBase, HasEndianness):
    """bfloat16: the one multi-byte format, stored little- or big-endian."""

    @classmethod
    def _from_native_checked(cls, dtype):
        order = dtype.byteorder
        if order in ("=", "|"):
            endianness = sys.byteorder
        else:
            endianness = "little" if order == "<" else "big"
        return cls(endianness=endianness)

    def to_native_dtype(self):
        dt = self._fmt["dtype"]
        return dt.newbyteorder("<" if self.endianness == "little" else ">")


class _IntBase(_Base):
    def _check_scalar(self, data):
        if isinstance(data, (bool, np.bool_)):
            return False
        if isinstance(data, np.generic) and type(data.dtype) is type(self._fmt["dtype"]):
            return True
        return isinstance(data, (int, np.integer)) or (
            isinstance(data, (float, np.floating)) and float(data).is_integer())

    def _range(self):
        return self._fmt["min"], self._fmt["max"]

    def _cast_scalar_unchecked(self, data):
        dt = self._fmt["dtype"]
        if isinstance(data, np.generic) and type(data.dtype) is type(dt):
            return np.asarray(data, dtype=dt)[()]
        value = int(data)
        lo, hi = self._range()
        if not lo <= value <= hi:
            raise ValueError(f"fill value {value} is out of range for {self._fmt['name']} "
                             f"[{lo}, {hi}]")
        return np.asarray(value, dtype=np.int64).astype(dt)[()]

    def from_json_scalar(self, data, *, zarr_format):
        if isinstance(data, bool) or not isinstance(data, int):
            raise TypeError(f"Invalid fill value {data!r} for {self._fmt['name']}: expected a "
                            f"JSON integer")
        return self._cast_scalar_unchecked(data)

    def to_json_scalar(self, data, *, zarr_format):
        return int(self.cast_scalar(data))


def _class_name(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _make(fmt):
    if fmt["kind"] == "float":
        base = _EndianFloatBase if fmt["itemsize"] > 1 else _FloatBase
    else:
        base = _IntBase
    ns = {"_fmt": fmt, "dtype_cls": type(fmt["dtype"]), "_zarr_v3_name": fmt["name"],
          "__module__": __name__,
          "__doc__": f"The zarr v3 data type {fmt['name']!r} (minifloat.{fmt['name']})."}
    cls = type(_class_name(fmt["name"]), (base,), ns)
    return dataclasses.dataclass(frozen=True, kw_only=True)(cls)


#: name -> ZDType class, in format-table order
data_types = {f["name"]: _make(f) for f in _core.formats()}
globals().update({cls.__name__: cls for cls in data_types.values()})
__all__ += [cls.__name__ for cls in data_types.values()]


def data_type_for(dtype):
    """The zarr data type (an instance) for a minifloat dtype or scalar type."""
    dt = np.dtype(dtype)
    for cls in data_types.values():
        if type(dt) is cls.dtype_cls:
            return cls.from_native_dtype(dt)
    raise TypeError(f"{dt} is not a minifloat format")


def register(registry=None):
    """Put the data types in zarr's data type registry (``registry``, default
    zarr's own), each under its name, where that name is free or already ours:
    a name another package registered first is left alone.  Returns the names
    registered.  This module calls it at its import, into zarr's registry."""
    if registry is None:
        from zarr.dtype import data_type_registry as registry
    done = []
    for name, cls in data_types.items():
        have = registry.contents.get(name)
        if have is None or have is cls:
            registry.register(name, cls)
            done.append(name)
    return done


# the registration, at this module's import: see the module's docstring
register()
