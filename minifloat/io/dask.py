"""Float32-accurate reductions of dask arrays of minifloat formats.

``x.sum()`` on a dask array asks NumPy for ``np.sum(block, dtype=x.dtype)`` on
every block (dask takes the result dtype from ``np.zeros(1, x.dtype).sum()``),
so each block's partial sum is rounded to the format before the partials are
added: on bfloat16 that is 8 significant bits per block, and a sum whose
blocks cancel can be far from the true one.  The functions here ask dask's own
reductions for float32 partials (their ``dtype=`` hook: the block step, the
tree combine and the final aggregate all run in float32) and round once at the
end, to the array's format, exactly as ``np.sum`` does on one machine::

    from minifloat.io import dask as mfd
    mfd.sum(x, axis=0)          # bfloat16, rounded once
    mfd.std(x)

``X @ Y`` and ``da.einsum`` have the same per-block rounding (every block
product is rounded to the format before the products are added);
:func:`matmul` and :func:`einsum` keep those partials in float32 too.

``x.rechunk(..., method="p2p")`` fails on minifloat arrays: distributed's P2P
shuffle takes ``memoryview(shard)`` of every shard, and NumPy's buffer protocol
cannot describe a user-defined dtype ("cannot include dtype 'E' in a buffer").
:func:`rechunk` moves the codes instead (an unsigned-integer view of the same
bytes, bit-exact, no copy) and views the result back.

Arrays of other dtypes (and minifloat's integer formats, whose NumPy sums
already accumulate in int64) go to dask's functions unchanged.  Importing this
module imports dask; ``import minifloat`` never does.
"""
import dask.array as da
import numpy as np

from .. import _core

__all__ = ["sum", "mean", "var", "std", "nansum", "nanmean", "nanvar", "nanstd",
           "matmul", "einsum", "rechunk"]

_FLOAT_DTYPES = tuple(type(f["dtype"]) for f in _core.formats() if f["kind"] == "float")
_ALL_DTYPES = tuple(type(f["dtype"]) for f in _core.formats())


def _is_mf_float(x):
    return isinstance(getattr(x, "dtype", x), _FLOAT_DTYPES)


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


def _result_dtype(operands):
    return np.result_type(*[o.dtype if hasattr(o, "dtype") else np.asarray(o).dtype
                            for o in operands])


def einsum(subscripts, *operands, **kwargs):
    """``dask.array.einsum`` with float32 partial sums when the result would be a
    minifloat float format, rounded once to it at the end."""
    out = _result_dtype(operands)
    if kwargs.get("dtype") is not None or not _is_mf_float(out):
        return da.einsum(subscripts, *operands, **kwargs)
    return da.einsum(subscripts, *operands, dtype=np.float32, **kwargs).astype(out)


def matmul(a, b):
    """``a @ b`` with float32 block products and sums when the result would be a
    minifloat float format, rounded once to it at the end (as ``np.matmul`` on one
    machine)."""
    out = _result_dtype((a, b))
    if not _is_mf_float(out):
        return da.matmul(a, b)
    return da.matmul(da.asarray(a).astype(np.float32), da.asarray(b).astype(np.float32)).astype(out)


def rechunk(x, chunks="auto", method=None, **kwargs):
    """``x.rechunk(chunks, method=...)``; for minifloat arrays the codes travel
    (an unsigned-integer view of the same bytes), so ``method="p2p"`` works."""
    if not isinstance(x.dtype, _ALL_DTYPES):
        return x.rechunk(chunks, method=method, **kwargs)
    codes = np.dtype(f"u{x.dtype.itemsize}")
    return x.view(codes).rechunk(chunks, method=method, **kwargs).view(x.dtype)
