"""The DType classes of minifloat's formats, like ``numpy.dtypes``.

``minifloat.dtypes.BFloat16DType`` is ``type(np.dtype(minifloat.bfloat16))``.
Its use beyond ``isinstance`` checks: NumPy's ufuncs accept a *DType class*
for ``dtype=``/``signature=`` where they reject a new-style dtype instance, so
``np.add(a, b, dtype=minifloat.dtypes.BFloat16DType)`` works (see
docs/design.md, "dtype= in ufuncs").

``scalar_types`` (``minifloat.scalar_types``) holds the formats' scalar types,
``minifloat.bfloat16`` and the others, in format-table order; ``__all__``
lists the DType classes only, as ``numpy.dtypes`` does.
"""
from . import _core

__all__ = []
for _f in _core.formats():
    _cls = type(_f["dtype"])
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
del _f, _cls

#: every scalar type minifloat defines, in format-table order
scalar_types = tuple(f["type"] for f in _core.formats())
