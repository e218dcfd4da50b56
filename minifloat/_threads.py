"""The size of the kernels' thread pool (``minifloat.get_num_threads`` /
``minifloat.set_num_threads``)."""
from . import _core

__all__ = ["get_num_threads", "set_num_threads"]


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
