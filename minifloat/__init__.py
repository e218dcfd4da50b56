"""minifloat: low-precision number formats (bfloat16, float8, float6, float4,
e8m0 scales, int4/int2/int1) as first-class NumPy dtypes, with ml_dtypes'
names and semantics, float32-accurate arithmetic and reductions, and
zero-copy exchange with torch, JAX and anything that speaks DLPack."""
import numpy as _np

try:
    from . import _core
except ImportError:
    from ._source_tree import check_not_source_tree as _check

    _check()          # raises a clear ImportError in an unbuilt source tree
    raise
from ._core import (
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
from ._finfo import finfo, iinfo
from . import exchange
from .exchange import *  # noqa: F401,F403  (from_dlpack, asnumpy, dlpack, ...)

__version__ = "0.1.0"

#: every scalar type minifloat defines, in format-table order
scalar_types = tuple(f["type"] for f in _core.formats())

# np.dtype("bfloat16") etc. where the name is free (ml_dtypes' names win, in
# either import order), and the casts/promoters with ml_dtypes once the user
# imports it: see _neighbours
from . import _neighbours
_neighbours.install(scalar_types)


def get_num_threads():
    """The number of threads minifloat's kernels use for large arrays.

    Elementwise arithmetic and float32 casts from 512 KiB of output, sums from
    1 MiB of input,
    and matmul, split their work across this many threads (a persistent
    pool); results are bit-identical whatever the count.  The default is the
    environment variable ``MINIFLOAT_NUM_THREADS`` if set (read once, at the
    first use), else the CPUs this process may run on."""
    return _core.get_num_threads()


def set_num_threads(n):
    """Use ``n`` threads (an int >= 1) for large arrays, or the default for
    ``None``; returns the previous count.  Process-wide, like
    ``torch.set_num_threads``; see :func:`get_num_threads`."""
    return _core.set_num_threads(n)


from .npyio import save, load, savez, savez_compressed
from .convert import convert, pack, unpack
from . import blocks
from .blocks import quantize, block_matmul, BlockScaled
from . import _numpy_patches

_numpy_patches.apply()

__all__ = ([t.__name__ for t in scalar_types] + ["finfo", "iinfo", "dtypes", "scalar_types",
                                                 "save", "load", "savez", "savez_compressed",
                                                 "convert", "pack", "unpack",
                                                 "quantize", "block_matmul", "BlockScaled",
                                                 "get_num_threads", "set_num_threads"]
           + list(exchange.__all__))
