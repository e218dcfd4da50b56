"""minifloat: low-precision number formats (bfloat16, float8, float6, float4,
e8m0 scales, int4/int2/int1) as first-class NumPy dtypes, with ml_dtypes'
names and semantics, float32-accurate arithmetic and reductions, and
zero-copy exchange with torch, JAX and anything that speaks DLPack.

This file only gathers the public names; each is defined in a submodule:

    _core          the C extension: scalar types, DTypes, ufunc loops, kernels
    dtypes         the DType classes and ``scalar_types``
    casting        cast (convert: its earlier name), pack, unpack
    blocks         block-scaled formats: quantize, block_matmul, BlockScaled
    exchange       DLPack and framework exchange: from_dlpack, asnumpy, ...
    io             files: io.npyio (save/load), io.safetensors, io.checkpoint,
                   io.zarr, io.dask
    cli            the command line

Submodules that are not needed by a top-level name load at first use
(``minifloat.io.safetensors``, ``minifloat.cli``, ...), so ``import
minifloat`` imports no optional dependency.  ``minifloat.safetensors``,
``minifloat.checkpoint``, ``minifloat.npyio``, ``minifloat.zarr`` and
``minifloat.dask`` are the same modules as ``minifloat.io.<name>``.
"""
try:
    from . import _core
except ImportError:
    from ._source_tree import check_not_source_tree as _check

    _check()          # raises a clear ImportError in an unbuilt source tree
    raise
from ._core import (
    __version__,
    bfloat16,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float6_e2m3fn,
    float6_e3m2fn,
    float4_e2m1fn,
    int4,
    uint4,
    int2,
    uint2,
    int1,
    uint1,
)
from . import dtypes
from .dtypes import scalar_types
# np.dtype("bfloat16") etc. where the name is free (ml_dtypes' names win, in
# either import order), the casts/promoters with ml_dtypes once the user
# imports it (first: before anything compares a minifloat dtype with an
# ml_dtypes one): see _neighbours
from . import _neighbours
_neighbours.install(scalar_types)
from ._finfo import finfo, iinfo
from ._threads import get_num_threads, set_num_threads
from . import exchange
from .exchange import *  # noqa: F401,F403  (from_dlpack, asnumpy, dlpack, ...)
from .io.npyio import save, load, savez, savez_compressed
from .casting import cast, convert, pack, unpack
from . import blocks
from .blocks import quantize, block_matmul, BlockScaled

# the NumPy functions that need a minifloat-aware path: see _numpy_patches
from . import _numpy_patches
_numpy_patches.apply()
# zarr's data types once the user imports zarr (see _neighbours)
_neighbours.install_zarr()
# loops on scipy.special's unary ufuncs once the user imports it (see _neighbours)
_neighbours.install_scipy_special()

from ._lazy import attach as _attach

__getattr__, __dir__ = _attach(
    __name__,
    ["io", "casting", "blocks", "dtypes", "exchange", "cli"],
    {name: f"{__name__}.io.{name}" for name in ("safetensors", "checkpoint", "npyio", "zarr", "dask")})

__all__ = ([t.__name__ for t in scalar_types] + ["finfo", "iinfo", "dtypes", "scalar_types",
                                                 "save", "load", "savez", "savez_compressed",
                                                 "cast", "convert", "pack", "unpack",
                                                 "quantize", "block_matmul", "BlockScaled",
                                                 "get_num_threads", "set_num_threads"]
           + list(exchange.__all__))
