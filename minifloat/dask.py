"""Float32-accurate reductions of dask arrays of minifloat formats.

``x.sum()`` on a dask array asks NumPy for ``np.sum(block, dtype=x.dtype)`` on
every block (dask takes the result dtype from ``np.zeros(1, x.dtype).sum()``),
so each block's partial sum is rounded to the format before the partials are
added: on bfloat16 that is 8 significant bits per block, and a sum whose
blocks cancel can be far from the true one.  The functions here ask dask's own
reductions for float32 partials (their ``dtype=`` hook: the block step, the
tree combine and the final aggregate all run in float32) and round once at the
end, to the array's format, exactly as ``np.sum`` does on one machine::

    import minifloat.dask as mfd
    mfd.sum(x, axis=0)          # bfloat16, rounded once
    mfd.std(x)

Arrays of other dtypes (and minifloat's integer formats, whose NumPy sums
already accumulate in int64) go to dask's reductions unchanged.  Importing this
module imports dask; ``import minifloat`` never does.
"""
import dask.array as da
import numpy as np

from . import _core

__all__ = ["sum", "mean", "var", "std", "nansum", "nanmean", "nanvar", "nanstd"]

_FLOAT_DTYPES = tuple(type(f["dtype"]) for f in _core.formats() if f["kind"] == "float")


def _is_mf_float(x):
    return isinstance(getattr(x, "dtype", None), _FLOAT_DTYPES)


def _make(name):
    dask_fn = getattr(da, name)

    def reduce(x, axis=None, keepdims=False, split_every=None, **kwargs):
        if not _is_mf_float(x) or kwargs.get("dtype") is not None:
            return dask_fn(x, axis=axis, keepdims=keepdims, split_every=split_every, **kwargs)
        out = dask_fn(x, axis=axis, keepdims=keepdims, split_every=split_every,
                      dtype=np.float32, **kwargs)
        return out.astype(x.dtype)

    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = (f"``dask.array.{name}`` with float32 partials, rounded once to a minifloat "
                      f"array's format; other arrays go to ``dask.array.{name}`` unchanged.")
    return reduce


sum = _make("sum")
mean = _make("mean")
var = _make("var")
std = _make("std")
nansum = _make("nansum")
nanmean = _make("nanmean")
nanvar = _make("nanvar")
nanstd = _make("nanstd")
