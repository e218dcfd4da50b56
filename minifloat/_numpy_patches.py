"""Work-arounds for holes NumPy (2.3 to 2.5) leaves for new-style (NEP 42) dtypes.

Each patch replaces one NumPy function (or a module global a NumPy function
looks up at call time) by a wrapper that handles arrays of minifloat dtypes
and calls the original, unchanged, for everything else.  A patch is applied
only where the running NumPy has the hole: before replacing a function, the
patch calls NumPy's own on a minifloat operand and keeps it when it works
(``not_needed`` lists those; e.g. NumPy 2.5 computes ``np.dot`` of the float
formats through their dotfunc).  docs/design.md
lists each hole, what NumPy does, and why the patch is the smallest fix; the
patches can be switched off with the environment variable
MINIFLOAT_NO_NUMPY_PATCHES=1 (the holes then come back), all but iinfo: without
it ``import numpy.ma`` raises once the integer formats are in np.sctypeDict
(numpy.ma asks np.iinfo of each integer type there), and np.unique imports it.

    arrayprint   the format's printing rule (exact up to 6 significant
                 digits, else the shortest digits of the *format*: 0.1, not
                 the float64 digits 0.10009765625) in np.format_float_* and,
                 where NumPy formats arrays of user floats with its float64
                 Dragon4 (NumPy < 2.5), in arrays; ``dtype=bfloat16``
    dot          np.dot, np.vdot, np.inner: only where NumPy's own fails
                 (none since the formats' ArrFuncs have a dotfunc)
    einsum       np.einsum: NumPy's C einsum indexes its loop tables with the
                 type number, which new-style dtypes do not have
    statistics   mean/var/std: accumulate in float32 and round once, as NumPy
                 already does for float16 means; on C-contiguous arrays the
                 float32 sums come from src/umath/pairwise.c (NumPy's float32
                 sums of the values, in its order, threaded, no float32 copy)
    fast_reductions
                 ndarray.sum/prod/max/min and np.sum/prod/max/min of the
                 float formats in one C call (src/umath/reduce.c: SIMD,
                 threads, bit-identical to NumPy's route through the ufunc
                 loops); a FastPath front, so NumPy arrays pay a type check.
                 any/all (the methods, np.any/np.all) of every format, on
                 the codes' truth (src/umath/truth.c), the same way
    fast_count_nonzero
                 np.count_nonzero without an axis: the same truth counted
                 in one threaded call (NumPy's calls nonzero once a value)
    reductions   sums and products of the integer formats (int4, ...) default
                 to int64/uint64, NumPy's rule for its small integers; the
                 C core does it with a (None, F, None) promoter, so this
                 applies only where that does not take (never so far)
    fast_accumulate
                 np.cumsum/np.cumprod of the float formats along the last
                 axis of a C-ordered array (or flattened) in one C call
                 (src/umath/loops.c: several rows' chains at once, threads,
                 bit-identical to NumPy's route); a FastPath front on
                 fromnumeric._wrapfunc, so NumPy arrays pay a type check
    isdtype      (a registry, not a wrapper) np.isdtype knows the types in
                 numerictypes.allTypes/sctypes only (numpy#27545)
    linalg       (a registry, not a wrapper) np.linalg takes the types in
                 its _real_types_map
    iinfo        np.iinfo(int4) would give int8's limits (NumPy derives them
                 from the storage size); it gives minifloat.iinfo's
    kind_f       three NumPy functions that test ``dtype.kind == 'f'`` (the
                 formats' descriptors say 'V'): np.unique collapses the
                 NaNs into one (equal_nan), np.sinc(0) is 1 in every format
                 (not 0/0 where 1e-20 rounds to zero), np.asarray_chkfinite
                 refuses NaN and inf
"""
import functools
import os
import sys

import numpy as np
from numpy._core import _methods, arrayprint, einsumfunc, fromnumeric, multiarray, numeric

from . import _core

_FLOAT_DTYPES = frozenset(type(f["dtype"]) for f in _core.formats() if f["kind"] == "float")
_ALL_DTYPES = frozenset(type(f["dtype"]) for f in _core.formats())
# the sort kinds NumPy takes by these names: its sorts of a format are one
# stable sort whatever the kind (others go to NumPy, which checks them)
_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")
_FLOAT_SCALARS = frozenset(f["type"] for f in _core.formats() if f["kind"] == "float")

applied = []      # (name, target) of every patch in effect
not_needed = []   # (name, target) of every patch the running NumPy does not need


def _numpy_fails(call):
    """Does NumPy's own function fail on minifloat operands (the hole a
    patch closes)?  `call` runs it and checks the answer: an exception or a
    false check is the hole."""
    try:
        return not call()
    except Exception:
        return True


_INT_DTYPES = _ALL_DTYPES - _FLOAT_DTYPES
#: 'i' or 'u' of each integer format (their descriptors' kind is 'V')
_INT_KIND = {type(f["dtype"]): "u" if f["kind"] == "uint" else "i"
             for f in _core.formats() if f["kind"] != "float"}


def _int_accumulator(a):
    """int64/uint64 for arrays of the integer formats, else None."""
    dt = getattr(a, "dtype", None)
    if dt is not None and type(dt) in _INT_DTYPES:
        return np.dtype(np.uint64 if _INT_KIND[type(dt)] == "u" else np.int64)
    return None


def _is_mf(x):
    dt = getattr(x, "dtype", None)
    return dt is not None and type(dt) in _ALL_DTYPES


def _is_mf_float(x):
    dt = getattr(x, "dtype", None)
    return dt is not None and type(dt) in _FLOAT_DTYPES


def _replace(module, name, wrapper, label, fast=None):
    """Put `wrapper` where module.name was.  With `fast` (a FastPath kind,
    src/numpy/fastpath.c), a C object stands there instead and calls NumPy's
    original directly when the arguments cannot involve minifloat, so plain
    NumPy calls pay no Python frame for the work-around."""
    original = getattr(module, name)
    wrapper.__wrapped__ = original
    setattr(module, name, wrapper if fast is None else _core.FastPath(original, wrapper, fast))
    applied.append((label, f"{module.__name__}.{name}"))
    return original


# --------------------------------------------------------------- arrayprint

def _patch_arrayprint():
    """Dragon4 is given the decimal a value prints as (_core._shortest); it
    serves np.format_float_positional/scientific and, on NumPy < 2.5, array
    printing (FloatingFormat).  NumPy >= 2.5 prints arrays of non-NumPy
    scalar types with str() of each element (numpy#30798), which is the
    scalar's own printing: nothing to patch there.  ``dtype_short_repr``:
    NumPy prints a new-style dtype as its repr, ``dtype=dtype(bfloat16)``."""
    orig_pos = arrayprint.dragon4_positional
    orig_sci = arrayprint.dragon4_scientific
    orig_short_repr = arrayprint.dtype_short_repr
    bf16 = _core.bfloat16
    # NumPy formats the float64 digits 0.10009765625 of bfloat16's 0.1
    dragon4_hole = _numpy_fails(lambda: np.format_float_positional(bf16(0.1)) == "0.1")
    # every format's name, unquoted (NumPy quotes names that are not alphanumeric)
    repr_hole = _numpy_fails(lambda: all(orig_short_repr(f["dtype"]) == f["name"]
                                         for f in _core.formats()))

    def _digits_source(x, kwargs):
        # the decimal x prints as (exact up to 6 significant digits, else the
        # shortest that rounds back to x in its format), as a float64 whose
        # own shortest digits are those; the exact value when a fixed number
        # of digits is asked for
        if type(x) in _FLOAT_SCALARS:
            if kwargs.get("unique", True):
                return np.float64(_core._shortest(x))
            return np.float64(float(x))
        return x

    @functools.wraps(orig_pos)
    def dragon4_positional(x, *args, **kwargs):
        return orig_pos(_digits_source(x, kwargs), *args, **kwargs)

    @functools.wraps(orig_sci)
    def dragon4_scientific(x, *args, **kwargs):
        return orig_sci(_digits_source(x, kwargs), *args, **kwargs)

    @functools.wraps(orig_short_repr)
    def dtype_short_repr(dtype):
        if type(dtype) in _ALL_DTYPES:
            return dtype.name
        return orig_short_repr(dtype)

    for name, wrapper, hole in (("dragon4_positional", dragon4_positional, dragon4_hole),
                                ("dragon4_scientific", dragon4_scientific, dragon4_hole),
                                ("dtype_short_repr", dtype_short_repr, repr_hole)):
        if hole:
            _replace(arrayprint, name, wrapper, "arrayprint")
        else:
            not_needed.append(("arrayprint", f"{arrayprint.__name__}.{name}"))
    _patch_exponent_cutoff()


def _patch_exponent_cutoff():
    """NumPy < 2.5 lays a float array out in exponent notation from
    10**finfo.precision on: from 10 on in float8_e4m3fn (precision 1), from 1
    in float4 (precision 0), so [448, 240] printed as [4.48e+02, 2.40e+02].
    The narrow formats are laid out as float32 lays out the same values
    (positional below 10**6 unless the values span more than 1000x or go
    below 1e-4, NumPy's other two rules).  FloatingFormat.fillFormat decides
    and lays out in one method: for a minifloat format whose values float32
    would print positionally, the call runs with NumPy's legacy cutoff (1e8,
    above every value below float32's 1e6, and the only thing ``legacy=202``
    changes there), so NumPy still does the whole layout.  NumPy >= 2.5
    prints these arrays with str() of each element: no hole, no patch."""
    cls = arrayprint.FloatingFormat
    if not _numpy_fails(lambda: "e+" not in repr(np.array([448.0], _core.float8_e4m3fn))):
        not_needed.append(("arrayprint", f"{arrayprint.__name__}.FloatingFormat.fillFormat"))
        return
    orig_fill = cls.fillFormat
    f32_cutoff = 10.0 ** min(8, np.finfo(np.float32).precision)

    def float32_would_use_exponent(self, data):
        with np.errstate(all="ignore"):
            vals = np.asarray(data, dtype=np.float32)
            vals = np.abs(vals[np.isfinite(vals)])
            vals = vals[vals != 0]
            if vals.size == 0:
                return False
            lo, hi = vals.min(), vals.max()
            return bool(hi >= f32_cutoff or (not self.suppress_small and (lo < 0.0001 or hi / lo > 1000.0)))

    @functools.wraps(orig_fill)
    def fillFormat(self, data):
        if (type(data.dtype) not in _FLOAT_DTYPES or self._legacy <= 202
                or float32_would_use_exponent(self, data)):
            return orig_fill(self, data)
        legacy, self._legacy = self._legacy, 202
        try:
            return orig_fill(self, data)
        finally:
            self._legacy = legacy

    _replace(cls, "fillFormat", fillFormat, "arrayprint")


# ---------------------------------------------------------------------- dot

def _as_arrays(a, b):
    return np.asanyarray(a), np.asanyarray(b)


def _mf_dot(a, b, out=None):
    """np.dot's contraction (last axis of a with second-to-last of b), through
    np.matmul, which has minifloat loops."""
    a, b = _as_arrays(a, b)
    rt = np.result_type(a, b)
    if type(rt) not in _ALL_DTYPES:
        # NumPy's own type computes it (e.g. bf16 with float32 -> float32)
        res = _orig_dot(a.astype(rt), b.astype(rt))
        return _into(res, out)
    # minifloat floats: float32 accumulation, result in the format; integer
    # formats: np.matmul's rule for them (int64, no wrap-around)
    kw = {"dtype": type(rt)} if type(rt) in _FLOAT_DTYPES else {}
    if a.ndim == 0 or b.ndim == 0:
        res = np.multiply(a, b, dtype=type(rt))
    elif b.ndim == 1 or (a.ndim == 1 and b.ndim == 2):
        res = np.matmul(a, b, **kw)
    else:
        k = a.shape[-1]
        if b.shape[-2] != k:
            raise ValueError(f"shapes {a.shape} and {b.shape} not aligned: "
                             f"{k} (dim {a.ndim - 1}) != {b.shape[-2]} (dim {b.ndim - 2})")
        a2 = a.reshape(-1, k)
        b2 = np.moveaxis(b, -2, 0).reshape(k, -1)
        res = np.matmul(a2, b2, **kw).reshape(a.shape[:-1] + b.shape[:-2] + b.shape[-1:])
    return _into(res, out)


def _into(res, out):
    if out is None:
        return res
    if out.dtype != np.asarray(res).dtype:
        raise ValueError("output array is not acceptable (must have the right datatype, "
                         "number of dimensions, and be a C-Array)")
    np.copyto(out, res)
    return out


def _dot_holes(func):
    """The minifloat DType classes for which NumPy's `func` (np.dot, np.vdot,
    np.inner) fails.  NumPy < 2.5 refuses every user dtype; NumPy 2.5's
    np.dot calls a dtype's dotfunc, which the float formats have."""
    holes = set()
    for f in _core.formats():
        v = np.zeros(2, f["dtype"])
        if _numpy_fails(lambda: func(v, v) is not None):
            holes.add(type(f["dtype"]))
    return frozenset(holes)


def _patch_dot():
    global _orig_dot

    _orig_dot = np.dot
    orig_vdot = np.vdot
    orig_inner = np.inner
    dot_holes = _dot_holes(_orig_dot)

    def _in_holes(x):
        dt = getattr(x, "dtype", None)
        return dt is not None and type(dt) in dot_holes

    @functools.wraps(_orig_dot)
    def dot(a, b, out=None):
        if _in_holes(a) or _in_holes(b) or _in_holes(out):
            return _mf_dot(a, b, out)
        return _orig_dot(a, b, out)

    @functools.wraps(orig_vdot)
    def vdot(a, b):
        if _is_mf(a) or _is_mf(b):
            a, b = _as_arrays(a, b)
            if a.size != b.size:
                raise ValueError("cannot reshape array of size "
                                 f"{b.size} into shape ({a.size},)")
            rt = np.result_type(a, b)
            if type(rt) not in _ALL_DTYPES:
                return orig_vdot(a.astype(rt), b.astype(rt))
            kw = {"dtype": type(rt)} if type(rt) in _FLOAT_DTYPES else {}
            return np.vecdot(a.ravel(), b.ravel(), **kw)[()]
        return orig_vdot(a, b)

    @functools.wraps(orig_inner)
    def inner(a, b):
        if _is_mf(a) or _is_mf(b):
            a, b = _as_arrays(a, b)
            rt = np.result_type(a, b)
            if type(rt) not in _ALL_DTYPES:
                return orig_inner(a.astype(rt), b.astype(rt))
            if a.ndim == 0 or b.ndim == 0:
                return np.multiply(a, b, dtype=type(rt))
            k = a.shape[-1]
            if b.shape[-1] != k:
                raise ValueError(f"shapes {a.shape} and {b.shape} not aligned: "
                                 f"{k} (dim {a.ndim - 1}) != {b.shape[-1]} (dim {b.ndim - 1})")
            kw = {"dtype": type(rt)} if type(rt) in _FLOAT_DTYPES else {}
            res = np.matmul(a.reshape(-1, k), b.reshape(-1, k).T, **kw)
            return res.reshape(a.shape[:-1] + b.shape[:-1])
        return orig_inner(a, b)

    if dot_holes:
        for mod in (np, multiarray, numeric):
            _replace(mod, "dot", dot, "dot")
    else:
        not_needed.append(("dot", "numpy.dot"))
        _patch_fast_dot()
    for name, wrapper in (("vdot", vdot), ("inner", inner)):
        if _dot_holes(getattr(np, name)):
            _replace(np, name, wrapper, "dot")
        else:
            not_needed.append(("dot", f"numpy.{name}"))


def _patch_fast_dot():
    """NumPy's np.dot of two matrices calls a user dtype's dotfunc once per
    output element (the only hook it gives one), walking b's columns: a
    (512, 4096) @ (4096, 512) bfloat16 product takes 75 ms where `@` takes
    5.6 ms, and with b a column slice of a wider C-ordered matrix 7.5 s.
    np.dot of two matrices, or of a matrix and a vector, of the same float
    format is np.matmul's product, so that is what computes it here (the
    float32 accumulation rounded once, in matmul's order: np.dot(a, b) is
    a @ b bit for bit, as NumPy's float32 np.dot and @ both are sgemm's).
    Everything else (vectors, N-D contractions, out=, mixed types, the
    integer formats, which wrap in np.dot and not in @) is NumPy's np.dot.
    The front is a FastPath (plain NumPy arrays go straight to np.dot after
    one type check) at np.dot and where np.tensordot and friends find it
    (numpy._core.numeric, numpy._core.multiarray); ndarray.dot is C and stays
    NumPy's.  Not a hole (np.dot works): no check, applied on NumPy 2.3-2.5
    where NumPy's np.dot takes the formats (docs/design.md, "np.dot")."""
    orig = np.dot

    @functools.wraps(orig)
    def dot(*args, **kwargs):
        # the arguments go on exactly as given: np.dot hands them to an
        # operand's __array_function__ (dask's dot takes no `out`)
        if len(args) == 2 and not kwargs:
            a, b = args
            if (type(a) is np.ndarray and type(b) is np.ndarray
                    and a.dtype == b.dtype and type(a.dtype) in _FLOAT_DTYPES
                    and a.dtype.isnative and b.ndim <= 2 and 1 <= a.ndim <= 2
                    and a.ndim + b.ndim >= 3 and a.shape[-1] == b.shape[0]):
                return np.matmul(a, b)
        return orig(*args, **kwargs)

    _replace(np, "dot", dot, "fast_dot", fast=0)
    for mod in (multiarray, numeric):      # the same front (it pickles as numpy.dot)
        if getattr(mod, "dot") is orig:
            setattr(mod, "dot", np.dot)
            applied.append(("fast_dot", f"{mod.__name__}.dot"))


def _patch_fast_count_nonzero():
    """np.count_nonzero(a) without an axis is NumPy's C count, which calls a
    user dtype's nonzero function once a value: 28 ms for (4096, 4096)
    bfloat16, against 8 ms with an axis (the cast to bool and a sum).
    _core._count_nonzero counts the codes' truth (the masks of any/all) in
    one threaded call and answers NotImplemented for the rest (not
    contiguous, not a format): then NumPy's function runs.  The count comes
    back as the type NumPy's gives.  A FastPath at np.count_nonzero and
    numpy._core.numeric.count_nonzero; not a hole, always applied."""
    orig = np.count_nonzero
    int_type = type(orig(np.zeros(1, bool)))
    count = _core._count_nonzero

    @functools.wraps(orig)
    def count_nonzero(a, axis=None, *, keepdims=False):
        if axis is None and not keepdims:
            r = count(a)
            if r is not NotImplemented:
                return int_type(r)
        return orig(a, axis=axis, keepdims=keepdims)

    _replace(np, "count_nonzero", count_nonzero, "fast_count_nonzero", fast=0)
    if getattr(numeric, "count_nonzero", None) is orig:
        numeric.count_nonzero = np.count_nonzero
        applied.append(("fast_count_nonzero", "numpy._core.numeric.count_nonzero"))


# ------------------------------------------------------------------- einsum

def _einsum_arrays(operands):
    """The array operands of c_einsum's two call forms:
    (subscripts, a, b, ...) and (a, sublist_a, b, sublist_b, ..., [sublist_out])."""
    if isinstance(operands[0], str):
        return list(range(1, len(operands)))
    return list(range(0, len(operands) - (len(operands) % 2), 2))


def _patch_einsum():
    orig = einsumfunc.c_einsum
    if not _numpy_fails(lambda: orig("i->", np.ones(2, _core.bfloat16)) == 2):
        not_needed.append(("einsum", f"{einsumfunc.__name__}.c_einsum"))
        return

    @functools.wraps(orig)
    def c_einsum(*operands, **kwargs):
        dtype = kwargs.get("dtype")
        out = kwargs.get("out")
        if dtype is None and out is None:
            # the common call, on NumPy arrays and subscripts: no work here
            for op in operands:
                t = type(op)
                if not (t is str or (t is np.ndarray and type(op.dtype) not in _ALL_DTYPES)):
                    break
            else:
                return orig(*operands, **kwargs)
        idx = _einsum_arrays(operands) if operands else []
        ops = list(operands)
        for i in idx:
            ops[i] = np.asanyarray(ops[i])
        if not (any(_is_mf(ops[i]) for i in idx) or _is_mf(out)
                or (dtype is not None and type(np.dtype(dtype)) in _ALL_DTYPES)):
            return orig(*operands, **kwargs)
        if not any(_is_mf_float(ops[i]) for i in idx) and dtype is None:
            # integer formats only: int64 arithmetic (no wrap-around), as matmul
            for i in idx:
                if _is_mf(ops[i]):
                    ops[i] = ops[i].astype(np.uint64 if _INT_KIND[type(ops[i].dtype)] == "u"
                                           else np.int64)
            return orig(*ops, **kwargs)
        # NumPy's rule: the result has the operands' common dtype.  Compute
        # in float32 (float32 accumulation) and round once.
        kwargs = dict(kwargs)
        kwargs.pop("dtype", None)
        kwargs.pop("out", None)
        kwargs.pop("casting", None)
        result_dt = np.dtype(dtype) if dtype is not None else np.result_type(*[ops[i] for i in idx])
        if out is not None:
            kwargs["out"] = out
        if type(result_dt) not in _FLOAT_DTYPES:
            # a NumPy result type (e.g. with float32 operands): NumPy computes
            for i in idx:
                if _is_mf(ops[i]):
                    ops[i] = ops[i].astype(result_dt)
            return orig(*ops, **kwargs)
        kwargs.pop("out", None)
        for i in idx:
            if _is_mf_float(ops[i]):
                ops[i] = ops[i].astype(np.float32)
        res = orig(*ops, dtype=np.float32, casting="unsafe", **kwargs)
        if out is not None:
            np.copyto(out, res, casting="unsafe")
            return out
        res = np.asarray(res).astype(result_dt)
        return res if res.ndim else res[()]

    _replace(einsumfunc, "c_einsum", c_einsum, "einsum", fast=1)


# --------------------------------------------------------------- statistics

def _patch_statistics():
    sum_f32 = _core._sum_f32

    def mean_f32(arr, axis, keepdims):
        """_mean(arr, axis, float32, keepdims=keepdims) of a C-contiguous
        array, its float32 sum from src/umath/pairwise.c (NumPy's float32
        add.reduce of the values, without a float32 copy or the cast
        buffers), divided as _mean divides; NotImplemented where that sum
        does not cover the array"""
        s = sum_f32(arr, axis, keepdims)
        if s is NotImplemented:
            return s
        rcount = _methods._count_reduce_items(arr, axis, keepdims=keepdims, where=True)
        if isinstance(s, np.ndarray):
            return np.true_divide(s, rcount, out=s, casting="unsafe", subok=False)
        return s.dtype.type(s / rcount)

    def var_f32(arr, axis, ddof, keepdims, std, kwargs):
        """_var (_std) of a C-contiguous array in float32: _var's own steps
        -- its mean, the sum of np.square(arr - mean) (src/umath/pairwise.c,
        in one pass), the division by max(count - ddof, 0) -- or
        NotImplemented (then kwargs["mean"] is the mean, where computed)"""
        rcount = _methods._count_reduce_items(arr, axis, keepdims=keepdims, where=True)
        if ddof >= rcount:
            return NotImplemented          # NumPy's route, with its warning
        m = mean_f32(arr, axis, True)
        if m is NotImplemented:
            return m
        ret = sum_f32(arr, axis, keepdims, m)
        if ret is NotImplemented:
            kwargs["mean"] = m             # NumPy's route from _var's mean on
            return ret
        rcount = np.maximum(rcount - ddof, 0)
        if isinstance(ret, np.ndarray):
            ret = np.true_divide(ret, rcount, out=ret, casting="unsafe", subok=False)
            return np.sqrt(ret, out=ret) if std else ret
        ret = ret.dtype.type(ret / rcount)
        return ret.dtype.type(np.sqrt(ret)) if std else ret

    def fast(name, arr, axis, args, kwargs):
        """the float32 statistic without NumPy's cast buffers, or NotImplemented"""
        if type(arr) is not np.ndarray or kwargs.get("where", True) is not True:
            return NotImplemented
        if name == "_mean":
            if len(args) > 1 or not set(kwargs) <= {"keepdims", "where"}:
                return NotImplemented
            return mean_f32(arr, axis, bool(args[0] if args else kwargs.get("keepdims", False)))
        if len(args) > 2 or not set(kwargs) <= {"ddof", "keepdims", "where", "mean"} \
                or kwargs.get("mean") is not None:
            return NotImplemented
        named = dict(zip(("ddof", "keepdims"), args))
        if set(named) & set(kwargs):
            return NotImplemented          # NumPy raises its TypeError
        ddof = named.get("ddof", kwargs.get("ddof", 0))
        keepdims = named.get("keepdims", kwargs.get("keepdims", False))
        if not isinstance(ddof, (int, float, np.integer, np.floating)):
            return NotImplemented
        return var_f32(arr, axis, ddof, bool(keepdims), name == "_std", kwargs)

    def wrap(orig, name):
        @functools.wraps(orig)
        def stat(a, axis=None, dtype=None, out=None, *args, **kwargs):
            if dtype is None and out is None and _is_mf_float(a):
                arr = np.asanyarray(a)
                res = fast(name, arr, axis, args, kwargs)
                if res is NotImplemented:
                    res = orig(arr, axis, np.float32, None, *args, **kwargs)
                if isinstance(res, np.ndarray):
                    return res.astype(arr.dtype)
                return arr.dtype.type(res)
            return orig(a, axis, dtype, out, *args, **kwargs)
        return stat

    for name in ("_mean", "_var", "_std"):
        _replace(_methods, name, wrap(getattr(_methods, name), name), "statistics", fast=0)


def _patch_reductions():
    orig_wrap = fromnumeric._wrapreduction
    a = np.ones(2, _core.bfloat16)
    i4 = np.ones(2, _core.int4)
    if not (_numpy_fails(lambda: np.add.reduce(a, dtype=a.dtype) == 2)
            or _numpy_fails(lambda: np.add.reduce(i4).dtype == np.int64)):
        not_needed.append(("reductions", f"{fromnumeric.__name__}._wrapreduction"))
        return

    @functools.wraps(orig_wrap)
    def _wrapreduction(obj, ufunc, method, axis, dtype, out, **kwargs):
        if dtype is None and out is None and method in ("sum", "prod"):
            dtype = _int_accumulator(obj)
        return orig_wrap(obj, ufunc, method, axis, dtype, out, **kwargs)

    _replace(fromnumeric, "_wrapreduction", _wrapreduction, "reductions")

    def wrap(orig):
        @functools.wraps(orig)
        def reduction(a, axis=None, dtype=None, out=None, *args, **kwargs):
            if dtype is None and out is None:
                dtype = _int_accumulator(a)
            return orig(a, axis, dtype, out, *args, **kwargs)
        return reduction

    for name in ("_sum", "_prod"):
        _replace(_methods, name, wrap(getattr(_methods, name)), "reductions")


_REDUCE_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}


def _patch_fast_reductions():
    """NumPy reduces along an outer axis one row per inner-loop call, on one
    thread; src/umath/reduce.c does the whole reduction in one call, with the
    operations (and so the bits) NumPy's route gives each output element.  It
    answers NotImplemented for what it does not cover (dtype=, initial=,
    layouts other than C order, ...): then NumPy's own function runs.  Not a
    hole of NumPy: no check, always applied (docs/design.md "Reductions")."""
    reduce = _core._reduce
    novalue = np._NoValue
    ufunc_ops = {np.add: 0, np.multiply: 1, np.maximum: 2, np.minimum: 3}

    def method(orig, op):
        @functools.wraps(orig)
        def red(a, axis=None, dtype=None, out=None, keepdims=False, initial=novalue, where=True):
            if dtype is None and initial is novalue:
                r = reduce(op, a, axis, out, keepdims, where)
                if r is not NotImplemented:
                    return r
            return orig(a, axis, dtype, out, keepdims, initial, where)
        return red

    def extremum(orig, op):
        @functools.wraps(orig)
        def red(a, axis=None, out=None, keepdims=False, initial=novalue, where=True):
            if initial is novalue:
                r = reduce(op, a, axis, out, keepdims, where)
                if r is not NotImplemented:
                    return r
            return orig(a, axis, out, keepdims, initial, where)
        return red

    orig_wrap = fromnumeric._wrapreduction

    @functools.wraps(orig_wrap)
    def _wrapreduction(obj, ufunc, method, axis, dtype, out, **kwargs):
        op = ufunc_ops.get(ufunc)
        if (op is not None and dtype is None and kwargs.get("initial", novalue) is novalue
                and _REDUCE_OPS.get(method) == op):
            keepdims = kwargs.get("keepdims", novalue)
            where = kwargs.get("where", novalue)
            r = reduce(op, obj, axis, out, False if keepdims is novalue else keepdims,
                       True if where is novalue else where)
            if r is not NotImplemented:
                return r
        return orig_wrap(obj, ufunc, method, axis, dtype, out, **kwargs)

    _replace(fromnumeric, "_wrapreduction", _wrapreduction, "fast_reductions", fast=0)
    for name, op in (("_sum", 0), ("_prod", 1)):
        _replace(_methods, name, method(getattr(_methods, name), op), "fast_reductions", fast=0)
    for name, op in (("_amax", 2), ("_amin", 3)):
        _replace(_methods, name, extremum(getattr(_methods, name), op), "fast_reductions", fast=0)

    # np.ptp: NumPy's _ptp calls np.maximum/np.minimum.reduce themselves
    orig_ptp = _methods._ptp

    @functools.wraps(orig_ptp)
    def _ptp(a, axis=None, out=None, keepdims=False):
        if out is None:
            hi = reduce(2, a, axis, None, keepdims, True)
            if hi is not NotImplemented:
                lo = reduce(3, a, axis, None, keepdims, True)
                if lo is not NotImplemented:
                    return np.subtract(hi, lo)
        return orig_ptp(a, axis, out, keepdims)

    _replace(_methods, "_ptp", _ptp, "fast_reductions", fast=0)

    # any/all: _core._any_all reads the codes' truth in one call (src/umath/truth.c)
    any_all = _core._any_all

    def truth(orig, want_all):
        @functools.wraps(orig)
        def red(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
            if dtype is None and out is None and where is True:
                r = any_all(want_all, a, axis, keepdims)
                if r is not NotImplemented:
                    return r
            return orig(a, axis, dtype, out, keepdims, where=where)
        return red

    for name, want_all in (("_any", False), ("_all", True)):
        _replace(_methods, name, truth(getattr(_methods, name), want_all), "fast_reductions",
                 fast=0)
    orig_any_all = getattr(fromnumeric, "_wrapreduction_any_all", None)
    if orig_any_all is None:        # np.any/np.all take another route: NumPy's
        return
    truth_ops = {np.logical_or: ("any", False), np.logical_and: ("all", True)}

    @functools.wraps(orig_any_all)
    def _wrapreduction_any_all(obj, ufunc, method, axis, out, **kwargs):
        which = truth_ops.get(ufunc)
        if which is not None and which[0] == method and out is None:
            keepdims = kwargs.get("keepdims", novalue)
            where = kwargs.get("where", novalue)
            if where is novalue or where is True:
                r = any_all(which[1], obj, axis, False if keepdims is novalue else keepdims)
                if r is not NotImplemented:
                    return r
        return orig_any_all(obj, ufunc, method, axis, out, **kwargs)

    _replace(fromnumeric, "_wrapreduction_any_all", _wrapreduction_any_all, "fast_reductions",
             fast=0)


def _patch_fast_accumulate():
    """NumPy accumulates one chain per inner-loop call, on one thread, so
    cumsum's chain latency bounds it (and along axis 0, a walk down each
    column); _core._accumulate does all chains of any axis in one call, each
    as NumPy's route does it.  np.cumsum and
    np.cumprod reach the ndarray methods through fromnumeric._wrapfunc, which
    this front stands for (np.cumsum itself stays NumPy's object: libraries
    that key their __array_function__ tables by it keep finding it); the
    ndarray methods are C and stay NumPy's.  NotImplemented (another layout)
    and dtype=/out= run NumPy's route.  The same front sends np.argmax /
    np.argmin along a leading axis to _core._arg_axis (NumPy scans a
    transposed copy), np.argpartition to the stable argsort (patch
    "fast_partition"), np.argsort along the last axis to the rows' argsort
    on the threads, and np.nonzero (np.flatnonzero, np.argwhere) to
    NumPy's bool nonzero of the truth cast.  Not a hole of NumPy: no
    check, always applied (docs/design.md, "cumsum and cumprod")."""
    accumulate = _core._accumulate
    arg_axis = _core._arg_axis
    argsort_rows = _core._argsort_rows
    ops = {"cumsum": 0, "cumprod": 1}
    orig = fromnumeric._wrapfunc

    @functools.wraps(orig)
    def _wrapfunc(obj, method, *args, **kwds):
        op = ops.get(method)
        if (op is not None and not args and kwds.get("dtype") is None
                and kwds.get("out") is None and _is_mf_float(obj)):
            r = accumulate(op, obj, kwds.get("axis"))
            if r is not NotImplemented:
                return r
        elif (method in ("argmax", "argmin") and not args and kwds.get("out") is None
                and not kwds.get("keepdims", False) and kwds.get("axis") is not None
                and _is_mf(obj)):
            # along an axis that is not the last: a row of columns at a time
            # (NumPy scans a transposed copy); NotImplemented: NumPy's route
            r = arg_axis(method == "argmax", obj, kwds["axis"])
            if r is not NotImplemented:
                return r
        elif (method == "nonzero" and not args and not kwds and type(obj) is np.ndarray
                and type(obj.dtype) in _ALL_DTYPES and obj.ndim >= 1):
            # NumPy's nonzero calls the format's nonzero function once a
            # value, in two passes; the truth cast's bools take NumPy's own
            # bool nonzero (np.flatnonzero, np.argwhere come this way too)
            return obj.astype(bool).nonzero()
        elif (method == "argsort" and not args and type(obj) is np.ndarray and _is_mf(obj)
                and kwds.get("order") is None and kwds.get("stable") is None
                and kwds.get("kind") in _SORT_KINDS and type(kwds.get("axis", -1)) is int
                and obj.ndim and kwds.get("axis", -1) in (-1, obj.ndim - 1)):
            # np.argsort along the last axis: the rows on the threads (every
            # kind is the one stable argsort ndarray.argsort runs a row at a time)
            r = argsort_rows(obj)
            if r is not NotImplemented:
                return r
        elif method == "argpartition" and len(args) == 1 and _sorts_for_partition(obj, kwds):
            # np.argpartition: the stable argsort is one of its valid answers
            axis = kwds.get("axis", -1)
            _check_kth(obj, args[0], axis)
            if type(axis) is int and obj.ndim and axis in (-1, obj.ndim - 1):
                r = argsort_rows(obj)          # the rows on the threads
                if r is not NotImplemented:
                    return r
            return obj.argsort(axis=axis, kind="stable")
        return orig(obj, method, *args, **kwds)

    _replace(fromnumeric, "_wrapfunc", _wrapfunc, "fast_accumulate", fast=0)


def _sorts_for_partition(a, kwds):
    """Whether np.partition / np.argpartition of `a` with these keywords
    is done by sorting (patch "fast_partition")."""
    return (type(a) is np.ndarray and type(a.dtype) in _ALL_DTYPES and a.dtype.isnative
            and a.ndim >= 1 and kwds.get("kind", "introselect") == "introselect"
            and kwds.get("order") is None and set(kwds) <= {"axis", "kind", "order"})


def _check_kth(a, kth, axis):
    """NumPy's own checks of kth (an integer or a 1-D sequence of them,
    each within the axis) and of axis, with NumPy's errors.  Integers within
    the axis pass at once; anything else gets NumPy's partition of as many
    zero bytes as the axis holds, which raises what NumPy raises (that pass
    took 13 ms of a 41 ms np.median of 2^24 values)."""
    n = a.size if axis is None else a.shape[np.lib.array_utils.normalize_axis_index(axis, a.ndim)]
    k = np.asarray(kth)
    if k.ndim <= 1 and k.size and k.dtype.kind in "iu" and bool(((k >= -n) & (k < n)).all()):
        return
    fromnumeric.partition.__wrapped__(np.zeros(n, np.uint8), kth)


def _patch_fast_partition():
    """NumPy 2.3-2.5 give a user dtype no partition function: ndarray.partition
    then sorts each row with NumPy's generic quicksort, calling the dtype's
    compare for every comparison (np.partition of (256, 4096) bfloat16 along
    the rows: 115 ms).  A sorted array is one of partition's valid answers,
    and the formats' sorts are O(n) (a counting sort over all codes, or a
    radix sort: 12 ms for the same array), so np.partition (and so np.median,
    which calls it) and np.argpartition (through fromnumeric._wrapfunc, the
    "fast_accumulate" front) sort instead, after NumPy's own checks of kth.
    Along the last axis of a C-contiguous array the rows are sorted on the
    threads (_core._sort_rows: the same sort a row, so the same codes).
    kind= other than "introselect", order= and byte-swapped arrays are
    NumPy's; ndarray.partition (and so np.percentile/np.quantile, which call
    the method) is C and stays NumPy's.  The front is a FastPath at
    np.partition, where np.median finds it (numpy.lib._function_base_impl)
    and in fromnumeric: one object.  Not a hole (NumPy's works): no check
    (docs/design.md, "partition by sorting")."""
    orig = fromnumeric.partition
    sort_rows = _core._sort_rows

    @functools.wraps(orig)
    def partition(a, kth, axis=-1, kind="introselect", order=None):
        if _sorts_for_partition(a, {"kind": kind, "order": order}):
            _check_kth(a, kth, axis)
            if type(axis) is int and a.ndim and axis in (-1, a.ndim - 1):
                # along the last axis: the rows sorted on the threads
                r = sort_rows(a)
                if r is not NotImplemented:
                    return r
            return np.sort(a, axis=axis)
        return orig(a, kth, axis=axis, kind=kind, order=order)

    from numpy.lib import _function_base_impl
    _replace(fromnumeric, "partition", partition, "fast_partition", fast=0)
    for mod in (np, _function_base_impl):      # the same front (it pickles as numpy.partition)
        if getattr(mod, "partition") is orig:
            setattr(mod, "partition", fromnumeric.partition)
            applied.append(("fast_partition", f"{mod.__name__}.partition"))


def _patch_fast_sort():
    """np.sort along the last axis of a C-contiguous array of a format: the
    rows sorted on minifloat's threads (_core._sort_rows, the sort
    ndarray.sort calls for each row on one thread, so the same codes; every
    kind is that one stable sort, as ndarray.sort's are).  order=, stable=,
    other kinds (NumPy validates them), other axes and layouts, subclasses
    and byte-swapped arrays are NumPy's np.sort.  A FastPath at np.sort
    (one object wherever NumPy's modules hold it).  Not a hole (NumPy's
    works): no check (docs/design.md, "Sorting")."""
    orig = fromnumeric.sort
    sort_rows = _core._sort_rows

    @functools.wraps(orig)
    def sort(a, axis=-1, kind=None, order=None, *, stable=None):
        if (type(a) is np.ndarray and type(a.dtype) in _ALL_DTYPES and order is None
                and stable is None and kind in _SORT_KINDS and type(axis) is int
                and a.ndim and axis in (-1, a.ndim - 1)):
            r = sort_rows(a)
            if r is not NotImplemented:
                return r
        return orig(a, axis=axis, kind=kind, order=order, stable=stable)

    _replace(fromnumeric, "sort", sort, "fast_sort", fast=0)
    for name in ("numpy", "numpy._core", "numpy._core.numeric", "numpy.linalg._linalg"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "sort", None) is orig:
            setattr(mod, "sort", fromnumeric.sort)
            applied.append(("fast_sort", f"{name}.sort"))


def _patch_fast_nan_to_num():
    """np.nan_to_num of a float format: NumPy's route is a copy, isnan,
    isposinf and isneginf (each a bool array, the last two of three ufunc
    calls each) and three masked copyto's, 37 ms for (4096, 4096) bfloat16
    (torch's nan_to_num 3 ms).  The front makes the copy as NumPy does
    (np.array(x, copy=copy)), casts the three replacement values as NumPy's
    copyto's do (copyto into a 3-element array of the dtype: the same casts,
    warnings and errors), then replaces the codes in one pass on the
    threads (_core._replace_special, which classifies every code before
    replacing it, as NumPy's route does).  Exact ndarrays of the float
    formats with replacement values that are scalars (or None); anything
    else is NumPy's.  A FastPath at np.nan_to_num.  Not a hole (NumPy's
    works): no check (docs/design.md, "nan_to_num in one pass")."""
    from numpy.lib import _type_check_impl
    orig = _type_check_impl.nan_to_num
    getmaxmin = _type_check_impl._getmaxmin
    replace = _core._replace_special
    scalar = (int, float, np.generic)

    @functools.wraps(orig)
    def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
        if (type(x) is np.ndarray and type(x.dtype) in _FLOAT_DTYPES and x.ndim
                and isinstance(nan, scalar) and (posinf is None or isinstance(posinf, scalar))
                and (neginf is None or isinstance(neginf, scalar))):
            y = np.array(x, copy=copy)
            maxf, minf = getmaxmin(y.dtype)
            rep = np.empty(3, y.dtype)
            np.copyto(rep[0:1], nan)
            np.copyto(rep[1:2], maxf if posinf is None else posinf)
            np.copyto(rep[2:3], minf if neginf is None else neginf)
            if replace(y, rep) is not NotImplemented:
                return y
            return orig(y, copy=False, nan=nan, posinf=posinf, neginf=neginf)
        return orig(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)

    _replace(_type_check_impl, "nan_to_num", nan_to_num, "fast_nan_to_num", fast=0)
    if getattr(np, "nan_to_num", None) is orig:
        np.nan_to_num = _type_check_impl.nan_to_num
        applied.append(("fast_nan_to_num", "numpy.nan_to_num"))


def _patch_iinfo():
    from numpy._core import getlimits

    orig_init = getlimits.iinfo.__init__
    if not _numpy_fails(lambda: np.iinfo(_core.int4).max == 7):
        not_needed.append(("iinfo", "numpy.iinfo.__init__"))
        return

    @functools.wraps(orig_init)
    def __init__(self, int_type):
        try:
            dt = np.dtype(int_type)
        except TypeError:
            dt = None
        if type(dt) not in _INT_DTYPES:
            return orig_init(self, int_type)
        # NumPy reads kind and size from the descriptor (kind 'V' here)
        from ._finfo import iinfo as mf_iinfo
        ref = mf_iinfo(dt)
        self.dtype = dt
        self.kind = _INT_KIND[type(dt)]
        self.bits = ref.bits
        self.key = ref.key
        getlimits.iinfo._min_vals[ref.key] = ref.min
        getlimits.iinfo._max_vals[ref.key] = ref.max

    getlimits.iinfo.__init__ = __init__
    __init__.__wrapped__ = orig_init
    applied.append(("iinfo", "numpy.iinfo.__init__"))


# ------------------------------------------------------------------ kind_f
#
# NumPy tells its floats by ``dtype.kind == 'f'`` (or ``dtype.char in
# typecodes['AllFloat']``) in a few Python functions; a legacy user dtype's
# kind is 'V' here (docs/design.md, "Which dtype API": 'f' would make a
# bfloat16 array's typestr read back as float16).  Each wrapper below runs
# NumPy's function and only adds what the kind test left out, for the float
# formats.

def _collapse_nans(ret, return_index, return_inverse, return_counts):
    """_unique1d's result with its NaNs (sorted last, each its own entry as
    NaN != NaN) made one, as NumPy's equal_nan does for float16: the first
    NaN's value and index, every NaN's inverse pointing at it, their counts
    summed"""
    vals = ret[0]
    nans = np.flatnonzero(np.isnan(vals))
    if nans.size < 2 or nans[0] + nans.size != vals.size:
        return ret
    first = int(nans[0])
    out = [vals[:first + 1]]
    pos = 1
    if return_index:
        out.append(ret[pos][:first + 1])
        pos += 1
    if return_inverse:
        out.append(np.minimum(ret[pos], first))
        pos += 1
    if return_counts:
        counts = ret[pos][:first + 1].copy()
        counts[first] = ret[pos][first:].sum()
        out.append(counts)
    return tuple(out)


def _patch_unique():
    from numpy.lib import _arraysetops_impl as aso

    orig = getattr(aso, "_unique1d", None)
    if orig is None:
        return                 # a NumPy without it: np.unique as it is
    nan2 = np.array([np.nan, np.nan], np.float32)
    # (return_counts: the sorting path, the one with the kind test)
    if not _numpy_fails(lambda: np.unique(nan2.astype(_core.bfloat16),
                                          return_counts=True)[0].size == 1):
        not_needed.append(("kind_f", f"{aso.__name__}._unique1d"))
        return

    @functools.wraps(orig)
    def _unique1d(ar, return_index=False, return_inverse=False, return_counts=False, *,
                  equal_nan=True, axis=None, **kwargs):
        ret = orig(ar, return_index, return_inverse, return_counts, equal_nan=equal_nan,
                   axis=axis, **kwargs)
        if equal_nan and axis is None and _is_mf_float(ar):
            return _collapse_nans(ret, return_index, return_inverse, return_counts)
        return ret

    _replace(aso, "_unique1d", _unique1d, "kind_f", fast=0)


def _patch_sinc():
    orig = np.sinc

    def sinc0():
        with np.errstate(all="ignore"):
            return float(orig(np.zeros(1, _core.float8_e4m3fn))[0]) == 1.0

    if not _numpy_fails(sinc0):
        not_needed.append(("kind_f", "numpy.sinc"))
        return

    @functools.wraps(orig)
    def sinc(x):
        if not _is_mf_float(x):
            return orig(x)
        # NumPy's own steps, with the format's epsilon where x is 0 (NumPy
        # takes 1e-20 for a kind it does not know: zero in the 8-bit formats,
        # and sinc(0) was 0/0)
        x = np.pi * np.asanyarray(x)
        y = np.where(x, x, np.finfo(x.dtype).eps)
        return np.sin(y) / y

    _replace(np, "sinc", sinc, "kind_f", fast=0)


def _patch_chkfinite():
    orig = np.asarray_chkfinite

    def refuses():
        try:
            orig(np.full(1, np.nan, np.float32).astype(_core.bfloat16))
        except ValueError:
            return True
        return False

    if not _numpy_fails(refuses):
        not_needed.append(("kind_f", "numpy.asarray_chkfinite"))
        return

    @functools.wraps(orig)
    def asarray_chkfinite(a, dtype=None, order=None):
        a = orig(a, dtype=dtype, order=order)
        if _is_mf_float(a) and not np.isfinite(a).all():
            raise ValueError("array must not contain infs or NaNs")
        return a

    # (kind 1: a dtype= that names a format goes to the wrapper)
    _replace(np, "asarray_chkfinite", asarray_chkfinite, "kind_f", fast=1)


# ------------------------------------------------ NumPy's type registries
#
# Not wrappers: NumPy keeps tables of the scalar types it knows, keyed by
# type, and a few functions answer only for types in them.  Adding our own
# types (never replacing an entry) is how a NumPy type would be known.

def _isdtype_answers():
    try:
        return np.isdtype(np.dtype(_core.bfloat16), "real floating")
    except TypeError:
        return False


def _register_isdtype():
    """np.isdtype(dt, "real floating") and the libraries that ask it (scipy.signal,
    scipy.stats, xarray, scikit-learn): NumPy answers only for the types in
    numerictypes.allTypes and .sctypes (numpy/numpy#27545)."""
    from numpy._core import numerictypes as nt

    if _isdtype_answers():
        return
    groups = {"float": "float", "int": "int", "uint": "uint"}
    for f in _core.formats():
        t = f["type"]
        nt.allTypes.setdefault("minifloat." + t.__name__, t)
        group = nt.sctypes[groups[f["kind"]]]
        if t not in group:
            group.insert(0, t)    # not last: maximum_sctype() reads the last
    applied.append(("isdtype", "numpy._core.numerictypes.allTypes/sctypes"))


def _register_linalg():
    """np.linalg (solve, inv, det, svd, qr, lstsq, and so np.polyfit): NumPy's
    linalg takes the float types in its _real_types_map (float32, float64;
    float16 is refused too).  Our float formats compute in float64 there and
    give float32 results, as float32 input does."""
    from numpy.linalg import _linalg

    table = getattr(_linalg, "_real_types_map", None)
    if table is None:
        return
    for t in _FLOAT_SCALARS:
        table.setdefault(t, np.float32)
    applied.append(("linalg", "numpy.linalg._linalg._real_types_map"))


def apply():
    if applied:
        return
    if os.environ.get("MINIFLOAT_NO_NUMPY_PATCHES", "") not in ("", "0"):
        # all but iinfo: numpy.ma asks np.iinfo of every integer type in
        # np.sctypeDict when it is imported (which np.unique does, for any
        # array), and NumPy's own raises for the integer formats there
        _patch_iinfo()
        return
    _register_isdtype()
    _register_linalg()
    _patch_arrayprint()
    _patch_dot()
    _patch_einsum()
    _patch_statistics()
    _patch_reductions()
    _patch_fast_reductions()
    _patch_fast_accumulate()
    _patch_fast_partition()
    _patch_fast_sort()
    _patch_fast_nan_to_num()
    _patch_fast_count_nonzero()
    _patch_iinfo()
    _patch_unique()
    _patch_sinc()
    _patch_chkfinite()
