"""Saving and loading minifloat arrays without pickle.

``np.save`` stores arrays of new-style (NEP 42) dtypes by pickling them, so
``np.load`` needs ``allow_pickle=True`` (and NumPy warns when saving).  The
functions here store the codes instead, in a standard .npy/.npz file whose
dtype is a one-field structured type named after the format::

    [('minifloat:bfloat16', '<u2')]

Any NumPy reads such a file safely with ``allow_pickle=False`` (as a
structured array of the raw codes); ``minifloat.load`` turns it back into the
minifloat dtype, as a view (so ``mmap_mode`` stays zero-copy).
"""
import os
import tempfile
import tokenize

import numpy as np

from .. import _core

_PREFIX = "minifloat:"
_BY_NAME = {f["name"]: f for f in _core.formats()}
_MF_DTYPES = {type(f["dtype"]): f for f in _core.formats()}

__all__ = ["save", "load", "savez", "savez_compressed", "to_storable", "from_storable"]


def to_storable(arr):
    """The array as its codes, with the one-field structured dtype above
    (a view when the array is contiguous).  Other dtypes pass through."""
    arr = np.asanyarray(arr)
    fmt = _MF_DTYPES.get(type(arr.dtype))
    if fmt is None:
        return arr
    codes_dt = np.dtype(f"<u{fmt['itemsize']}")
    codes = np.ascontiguousarray(arr).view(f"u{fmt['itemsize']}")
    if codes.dtype.byteorder not in ("<", "|") and codes_dt.itemsize > 1 and \
            not np.dtype(f"u{fmt['itemsize']}").isnative:
        codes = codes.astype(codes_dt)
    return codes.view(np.dtype([(_PREFIX + fmt["name"], codes_dt)]))


def from_storable(arr):
    """Inverse of :func:`to_storable` (a view); anything else passes through."""
    names = getattr(arr.dtype, "names", None)
    if not names or len(names) != 1 or not names[0].startswith(_PREFIX):
        return arr
    fmt = _BY_NAME.get(names[0][len(_PREFIX):])
    if fmt is None:
        raise ValueError(f"unknown minifloat format {names[0][len(_PREFIX):]!r} in file; "
                         f"this minifloat knows {', '.join(_BY_NAME)}")
    codes = arr[names[0]]
    if not codes.dtype.isnative:
        codes = codes.astype(codes.dtype.newbyteorder("="))
    return codes.view(fmt["dtype"])


def _atomic(file, suffix, write):
    """Call write(f) on a temporary file beside `file` and move it into place
    (os.replace) only when write succeeded: a failure leaves no file, or the
    old one.  File objects are written directly.  Like NumPy, `suffix` is
    appended to a path that lacks it."""
    if not isinstance(file, (str, os.PathLike)):
        write(file)
        return
    path = os.fspath(file)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path.endswith(suffix):
        path += suffix
    fd, tmp = tempfile.mkstemp(prefix=".minifloat-", suffix=suffix,
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def save(file, arr, allow_pickle=False):
    """np.save for any array; minifloat arrays are stored as their codes.
    A path is written atomically (a failed save leaves no partial file)."""
    codes = to_storable(arr)
    _atomic(file, ".npy", lambda f: np.save(f, codes, allow_pickle=allow_pickle))


def savez(file, *args, **kwds):
    """np.savez with minifloat arrays stored as their codes (atomically, for a path)."""
    a = [to_storable(x) for x in args]
    k = {n: to_storable(v) for n, v in kwds.items()}
    _atomic(file, ".npz", lambda f: np.savez(f, *a, **k))


def savez_compressed(file, *args, **kwds):
    """np.savez_compressed with minifloat arrays stored as their codes (atomically, for a path)."""
    a = [to_storable(x) for x in args]
    k = {n: to_storable(v) for n, v in kwds.items()}
    _atomic(file, ".npz", lambda f: np.savez_compressed(f, *a, **k))


class _NpzFile:
    """np.load's NpzFile, giving minifloat arrays back with their dtype."""

    def __init__(self, npz):
        self._npz = npz

    def __getitem__(self, key):
        return from_storable(self._npz[key])

    def __getattr__(self, name):
        return getattr(self._npz, name)

    def __iter__(self):
        return iter(self._npz)

    def __len__(self):
        return len(self._npz)

    def __contains__(self, key):
        return key in self._npz

    def keys(self):
        return self._npz.keys()

    def items(self):
        return [(k, self[k]) for k in self._npz.keys()]

    def values(self):
        return [self[k] for k in self._npz.keys()]

    def close(self):
        self._npz.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_npy_size(fp):
    """Raise ValueError when a seekable .npy stream's header describes more
    data than the stream holds, before NumPy allocates it (np.load allocates
    the whole array first: a corrupt header asked for 8 GB, found by fuzzing).
    Leaves the position where it was; anything not a .npy passes."""
    try:
        start = fp.tell()
    except (AttributeError, OSError, ValueError):
        return
    try:
        if fp.read(6) != b"\x93NUMPY":
            return
        fp.seek(start)
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            return               # np.load says what is wrong
        if dtype.hasobject:
            return
        data_start = fp.tell()
        end = fp.seek(0, os.SEEK_END)
        if any(n < 0 for n in shape):
            # NumPy multiplies the shape in int64: (-4, 2**63-1, ...) wrapped to
            # a 2 GB allocation (found by fuzzing)
            raise ValueError(f"the .npy header describes a negative dimension {shape}: the "
                             f"file is truncated or corrupt")
        need = dtype.itemsize
        for n in shape:
            need *= n          # Python integers: no wrap-around
        if need > end - data_start:
            raise ValueError(f"the .npy header describes {need} bytes of data ({shape} of "
                             f"{dtype}) but the file holds {end - data_start}: it is truncated "
                             f"or corrupt")
    except (ValueError, TypeError, OverflowError, EOFError) as e:
        if isinstance(e, ValueError) and str(e).startswith("the .npy header describes"):
            raise
        return                   # np.load reports header errors itself
    except (tokenize.TokenError, SyntaxError):
        return                   # load() turns these into ValueError
    finally:
        fp.seek(start)


def load(file, mmap_mode=None, allow_pickle=False, **kwargs):
    """np.load that restores minifloat dtypes from files written by
    minifloat.save/savez (and reads every other .npy/.npz as np.load does).
    A .npy whose header asks for more data than the file holds raises
    ValueError before anything is allocated."""
    if isinstance(file, (str, os.PathLike)):
        try:
            with open(file, "rb") as f:
                check_npy_size(f)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            pass                 # np.load raises it
    else:
        check_npy_size(file)
    try:
        res = np.load(file, mmap_mode=mmap_mode, allow_pickle=allow_pickle, **kwargs)
    except (tokenize.TokenError, SyntaxError) as e:
        # NumPy's header filter lets the tokenizer's errors out for some
        # corrupt headers (TokenError, IndentationError; found by fuzzing);
        # NumPy says ValueError for every other unparsable header
        raise ValueError(f"Cannot parse header: {e}; the file is not a valid .npy file") from e
    if isinstance(res, np.lib.npyio.NpzFile):
        return _NpzFile(res)
    if isinstance(res, np.ndarray):
        return from_storable(res)
    return res
