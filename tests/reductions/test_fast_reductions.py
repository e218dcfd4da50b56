"""Whole reductions in one C call (src/umath/reduce.c, patch "fast_reductions").

ndarray.sum/prod/max/min and np.sum/prod/max/min of the float formats run
in one call, threaded; np.add.reduce (np.multiply/maximum/minimum.reduce)
is NumPy's route through the ufunc loops, untouched, and is the reference:
every result must be bit-identical to it, at every kernel level and thread
count, for every layout, axis, where=, out= and keepdims.  Random real data
(orders matter) and NaN/inf are included.  Where the one-call path does not
apply (dtype=, initial=, some strided views, ...) NumPy's route runs, which these
tests check too: same bits either way.  F-ordered arrays are reduced as the
C-ordered view with reversed axes (the "F" and "T" layouts).
"""
import itertools
import warnings

import numpy as np
import pytest

import minifloat
from minifloat import _core

from conftest import LEVELS, kernel_level, mf_type

FORMATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float16"]
FORMATS = [n for n in FORMATS if hasattr(minifloat, n)]
UFUNC = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}


def bits(x):
    x = np.asarray(x)
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(a), bits(b))


def data(shape, fmt, seed=0, special=False, op="sum"):
    rng = np.random.default_rng(seed)
    if op == "prod":
        x = rng.choice([0.5, 0.75, 1.0, 1.25, 1.5, 2.0, -1.0, 1.0625], size=shape).astype(np.float32)
        x *= (1 + rng.standard_normal(shape).astype(np.float32) / 64)
    else:
        x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    if special and x.size > 4:
        flat = x.reshape(-1)
        idx = rng.choice(flat.size, size=max(1, flat.size // 50), replace=False)
        flat[idx[::3]] = np.nan
        flat[idx[1::3]] = np.inf
        flat[idx[2::3]] = -np.inf
        flat[idx[:1]] = -np.nan
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return x.astype(mf_type(fmt))


def layouts(a):
    yield "C", a
    if a.ndim >= 1 and a.shape[-1] > 2:
        yield "step2_last", a[..., ::2]
    if a.shape[0] > 2:
        yield "step3_first", a[::3]
        yield "offset", a[1:]
    if a.ndim >= 2:
        yield "F", np.asfortranarray(a)
        yield "T", a.T
    yield "rev", a[::-1]


def axes_of(nd):
    out = [None] + list(range(nd)) + [-1]
    out += [c for k in range(2, nd + 1) for c in itertools.combinations(range(nd), k)]
    return out


def reference(op, x, **kw):
    with np.errstate(all="ignore"):
        return UFUNC[op].reduce(x, **kw)


def fast(op, x, **kw):
    with np.errstate(all="ignore"):
        return getattr(x, op)(**kw)


SHAPES = [(7,), (5000,), (33, 17), (300, 130), (9, 4500), (4500, 9), (3, 5, 7), (6, 40, 70),
          (2, 1, 300), (4, 3, 2, 65)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_same_bits_as_numpys_route(shape, op, each_level):
    for fmt in FORMATS:
        for special in (False, True):
            base = data(shape, fmt, special=special, op=op)
            for name, x in layouts(base):
                for ax in axes_of(x.ndim):
                    for kd in (False, True):
                        want = reference(op, x, axis=ax, keepdims=kd)
                        got = fast(op, x, axis=ax, keepdims=kd)
                        assert same(got, want), (fmt, special, name, ax, kd)
                        assert type(got) is type(want)
                        if x.ndim and kd is False:
                            with np.errstate(all="ignore"):
                                got2 = getattr(np, op)(x, axis=ax)
                            assert same(got2, want), (fmt, special, name, ax, "np." + op)


@pytest.mark.parametrize("shape", [(7,), (300, 130), (6, 40, 70)], ids=str)
def test_ptp_same_bits_as_numpys(shape):
    """np.ptp: the one-call max and min, then NumPy's subtract: the bits,
    types and warnings of NumPy's _ptp (np.maximum/np.minimum.reduce)."""
    from numpy._core import _methods
    numpys = _methods._ptp.__wrapped__
    for fmt in FORMATS:
        for special in (False, True):
            base = data(shape, fmt, special=special)
            for name, x in layouts(base):
                for ax in axes_of(x.ndim):
                    for kd in (False, True):
                        with warnings.catch_warnings(record=True) as w1:
                            warnings.simplefilter("always")
                            want = numpys(x, ax, None, kd)
                        with warnings.catch_warnings(record=True) as w2:
                            warnings.simplefilter("always")
                            got = np.ptp(x, axis=ax, keepdims=kd)
                        assert same(got, want) and type(got) is type(want), (fmt, name, ax, kd)
                        assert [str(w.message) for w in w1] == [str(w.message) for w in w2]
    x = data((5, 6), "bfloat16")
    out = np.empty(6, x.dtype)
    assert np.ptp(x, axis=0, out=out) is out and same(out, numpys(x, 0, None, False))


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_where(op, each_level):
    rng = np.random.default_rng(3)
    for fmt in ("bfloat16", "float8_e4m3fn"):
        for shape in [(5000,), (40, 300), (300, 40), (5, 6, 70), (3, 4500)]:
            x = data(shape, fmt, seed=5, special=True, op=op)
            masks = [rng.random(shape) < 0.7, rng.random(shape[-1:]) < 0.5,
                     np.ones(shape, bool), np.zeros(shape, bool)]
            if len(shape) > 1:
                masks.append(rng.random(shape[:1] + (1,) * (len(shape) - 1)) < 0.5)
                # runs: long stretches of True
                m = np.zeros(shape, bool)
                m.reshape(-1)[100:3000] = True
                masks.append(m)
            for m in masks:
                for ax in axes_of(len(shape)):
                    for kd in (False, True):
                        want = reference(op, x, axis=ax, keepdims=kd, where=m)
                        got = fast(op, x, axis=ax, keepdims=kd, where=m)
                        assert same(got, want), (fmt, shape, m.shape, ax, kd)
                        got = getattr(np, op)(x, axis=ax, keepdims=kd, where=m)
                        assert same(got, want), (fmt, shape, m.shape, ax, kd, "np")


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_out(op, each_level):
    x = data((50, 300), "bfloat16", special=True, op=op)
    for ax, keep in [(0, False), (1, False), (0, True), (-1, True)]:
        want = reference(op, x, axis=ax, keepdims=keep)
        out = np.full(want.shape, 7, x.dtype)
        r = fast(op, x, axis=ax, out=out, keepdims=keep)
        assert r is out and same(out, want)
        out2 = np.full(want.shape, 7, x.dtype)
        r = getattr(np, op)(x, axis=ax, out=out2, keepdims=keep)
        assert r is out2 and same(out2, want)
    # outputs the one-call path leaves to NumPy: strided, float32, 0-d
    want = reference(op, x, axis=0)
    big = np.zeros((2, 300), x.dtype)
    assert same(fast(op, x, axis=0, out=big[1]), want) and same(big[1], want)
    strided = np.zeros(600, x.dtype)[::2]
    fast(op, x, axis=0, out=strided)
    assert same(strided, want)
    o32 = np.zeros(300, np.float32)
    fast(op, x, axis=0, out=o32)
    assert np.array_equal(o32, reference(op, x, axis=0, out=np.zeros(300, np.float32)), equal_nan=True)
    o0 = np.zeros((), x.dtype)
    y = x[0]
    assert same(fast(op, y, axis=0, out=o0), reference(op, y, axis=0))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_thread_counts(threads, op):
    prev = _core.set_num_threads(threads)
    try:
        for level in LEVELS:
            with kernel_level(level):
                for fmt in ("bfloat16", "float8_e5m2"):
                    for shape, ax in [((1024, 1024), 0), ((1024, 1024), 1), ((1 << 20,), None),
                                      ((16, 64, 600), 1), ((1500, 700), -1), ((700, 1500), 0),
                                      ((8, 128, 512), (1, 2)), ((128, 8, 512), (0, 1)),
                                      # narrow rows: column sums with the sums in
                                      # registers, whole rows on one thread; short
                                      # row sums
                                      ((20000, 16), 0), ((4100, 256), 0), ((3000, 40), 0),
                                      ((70, 30, 24), (0, 1)), ((9000, 256), 1),
                                      # fewer outputs than threads: each run's sum
                                      # split between the threads (mf_par_sum)
                                      ((2, 1 << 19), 1), ((3, 1, 1 << 18), -1)]:
                        x = data(shape, fmt, seed=11, special=True, op=op)
                        want = reference(op, x, axis=ax)
                        assert same(fast(op, x, axis=ax), want), (level, fmt, shape, ax)
                        if op in ("sum", "prod"):
                            m = np.random.default_rng(1).random(shape) < 0.8
                            want = reference(op, x, axis=ax, where=m)
                            assert same(fast(op, x, axis=ax, where=m), want), (level, fmt, shape, ax)
    finally:
        _core.set_num_threads(prev)


def nan_columns(shape, fmt, seed):
    """Data whose columns hold NaNs of both signs and several payloads: a
    column sum's NaN then depends on which operand each addition returns,
    which the column-sum kernels leave to NumPy's route (they redo such
    columns); some columns have inf and -inf (NaN from finite-looking rows)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    cols = rng.choice(shape[-1], size=max(1, shape[-1] // 9), replace=False)
    u = flat.view(np.uint32)
    for j, c in enumerate(cols):
        rows = rng.choice(flat.shape[0], size=min(4, flat.shape[0]), replace=False)
        if j % 3 == 2:
            flat[rows[0], c] = np.inf
            flat[rows[-1], c] = -np.inf
            continue
        for k, r in enumerate(rows):
            u[r, c] = (0xFFC00000 if k % 2 else 0x7FC00000) | (k << 16)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return x.astype(mf_type(fmt))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_column_sums(threads):
    # sums along outer axes go through the kernels' column sums, in tasks
    # of any width (down to 128 columns): NumPy's bits, NaNs included
    prev = _core.set_num_threads(threads)
    try:
        for level in LEVELS:
            with kernel_level(level):
                for fmt in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
                    for shape, ax in [((4000, 256), 0), ((2100, 700), 0), ((1200, 1100), 0),
                                      ((500, 3, 300), (0, 1)), ((5, 600, 130), 1),
                                      ((3000, 1), 0), ((70, 4000), 0)]:
                        base = nan_columns(shape, fmt, seed=sum(shape))
                        for x in (base, base[1:], base[::2], base[..., 1:]):
                            want = reference("sum", x, axis=ax)
                            assert same(fast("sum", x, axis=ax), want), (level, fmt, shape, ax)
                            assert same(fast("sum", x, axis=ax, keepdims=True),
                                        reference("sum", x, axis=ax, keepdims=True))
                            out = np.empty_like(want)
                            assert fast("sum", x, axis=ax, out=out) is out
                            assert same(out, want), (level, fmt, shape, ax, "out=")
    finally:
        _core.set_num_threads(prev)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("op", ["max", "min"])
def test_column_maxima(threads, op):
    # max/min along an outer axis go through the kernels' column maxima;
    # columns ending NaN (either sign, payloads) or zero (both signs in the
    # column) are redone NumPy's way: NumPy's bits everywhere
    prev = _core.set_num_threads(threads)
    try:
        for level in LEVELS:
            with kernel_level(level):
                for fmt in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
                    for shape, ax in [((4000, 256), 0), ((1200, 1100), 0), ((3000, 16), 0),
                                      ((5, 600, 130), 1), ((70, 4000), 0), ((3000, 1), 0)]:
                        base = nan_columns(shape, fmt, seed=sum(shape) + 1)
                        flat = base.reshape(-1, shape[-1])
                        # zeros of both signs: columns whose max (min) is zero
                        signs = np.where(np.arange(flat.shape[0]) % 2, 0.0, -0.0)
                        flat[:, 5 % shape[-1]] = signs.astype(np.float32).astype(base.dtype)
                        flat[::2, -1] = base.dtype.type(-0.0)
                        flat[1::2, -1] = base.dtype.type(0.0)
                        for x in (base, base[1:], base[..., 1:]):
                            want = reference(op, x, axis=ax)
                            assert same(fast(op, x, axis=ax), want), (level, fmt, shape, ax)
                            out = np.empty_like(want)
                            assert fast(op, x, axis=ax, out=out) is out
                            assert same(out, want), (level, fmt, shape, ax, "out=")
    finally:
        _core.set_num_threads(prev)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("op", ["max", "min"])
def test_keyed_max_min(threads, op):
    # max/min of runs of the formats whose codes order as sign and magnitude:
    # the run's extreme code (the argmax kernels), a long run cut between the
    # threads; results that are NaN or zero (whose sign NumPy's route
    # decides) computed NumPy's way, or over several axes left to NumPy
    prev = _core.set_num_threads(threads)
    try:
        for level in LEVELS:
            with kernel_level(level):
                for fmt in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
                    for shape, ax in [((1 << 20,), None), ((3, 1 << 19), 1), ((2, 700, 800), (1, 2)),
                                      ((900, 1200), -1), ((4, 5, 6000), None)]:
                        rng = np.random.default_rng(sum(shape))
                        x = (rng.standard_normal(shape) * 3).astype(np.float32)
                        flat = x.reshape(-1)
                        cases = {"plain": x}
                        y = -np.abs(x) if op == "max" else np.abs(x)     # extreme: a zero
                        y.reshape(-1)[rng.integers(0, flat.size, 7)] = -0.0
                        y.reshape(-1)[rng.integers(flat.size // 2, flat.size, 7)] = 0.0
                        cases["zeros"] = y
                        z = x.copy()
                        z.reshape(-1)[-5] = np.nan                   # a NaN late in a run
                        cases["nan"] = z
                        t = np.round(x)                                # many ties
                        cases["ties"] = t
                        for name, v in cases.items():
                            with np.errstate(all="ignore"):
                                a = v.astype(mf_type(fmt))
                            want = reference(op, a, axis=ax)
                            assert same(fast(op, a, axis=ax), want), (level, fmt, shape, ax, name)
                            assert same(fast(op, a[1:], axis=ax), reference(op, a[1:], axis=ax))
    finally:
        _core.set_num_threads(prev)


@pytest.mark.arm   # in the Arm leg of CI: the NEON build of the vector chains
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_products_of_many_runs(threads):
    # products along the last axis: eight or sixteen runs' chains
    # interleaved (rows of 3-D arrays too, adjacent or every other one), each the
    # float32 chain of NumPy's route; thousands of rows, so that some land
    # near a rounding boundary of the format, where another order of the
    # same multiplications would show; NaN rows go NumPy's way
    prev = _core.set_num_threads(threads)
    try:
        rng = np.random.default_rng(7)
        x = (1 + rng.standard_normal((4099, 600)) / 6).astype(np.float32)
        x[5, 17] = np.nan
        x[9, 3] = -np.nan
        x[13, [4, 400]] = [np.nan, -np.nan]
        x[20, 0] = np.inf
        x[20, 1] = 0.0
        for level in LEVELS:
            with kernel_level(level):
                for fmt in ("bfloat16", "float8_e5m2"):
                    with np.errstate(all="ignore"):
                        a = x.astype(mf_type(fmt))
                    for v in (a, a[:, 1:], a[:, ::3], a[:4096].reshape(16, 256, 600),
                              a[:4096, :512].reshape(64, 64, 512)[:, ::2]):
                        assert same(fast("prod", v, axis=-1), reference("prod", v, axis=-1)), (level, fmt)
    finally:
        _core.set_num_threads(prev)


def test_one_call_path_is_taken():
    # the cases that must not fall back to NumPy's route
    x = data((64, 96), "bfloat16")
    for op, ax in [("sum", 0), ("sum", 1), ("sum", None), ("sum", (0, 1)), ("prod", 0),
                   ("max", 0), ("min", -1)]:
        r = _core._reduce(OPS[op], x, ax, None, False, True)
        assert r is not NotImplemented and same(r, reference(op, x, axis=ax))
    m = np.ones(x.shape, bool)
    assert _core._reduce(0, x, 0, None, False, m) is not NotImplemented
    assert _core._reduce(0, x, 0, None, False, m[0]) is NotImplemented     # broadcast mask
    # views that are not contiguous: with where=, or where NumPy's iterator
    # copies pieces spanning several runs into its buffer: NumPy's route
    assert _core._reduce(0, x[:, ::2], 1, None, False, m[:, ::2].copy()) is NotImplemented
    assert _core._reduce(0, x.reshape(8, 8, 96)[:, :, :40], (1, 2), None, False, True) is NotImplemented
    assert _core._reduce(0, data((6, 40, 70), "bfloat16")[:, ::2], 0, None, False, True) is NotImplemented
    # and in place: one run a call, as for a contiguous array
    for v, axes in ((x[::2], (0, 1)), (x[:, :50], (0, 1)), (x[:, ::2], (0, 1, None))):
        for ax in axes:
            r = _core._reduce(0, v, ax, None, False, True)
            assert r is not NotImplemented and same(r, reference("sum", v, axis=ax))
    # F order: the C-ordered view with reversed axes, the result reversed back
    # (F-ordered, as NumPy allocates it)
    xf = np.asfortranarray(x)
    for ax in (0, 1, None, (0, 1)):
        for kd in (False, True):
            r = _core._reduce(0, xf, ax, None, kd, True)
            want = reference("sum", xf, axis=ax, keepdims=kd)
            assert r is not NotImplemented and same(r, want), (ax, kd)
            assert np.asarray(r).flags.f_contiguous == np.asarray(want).flags.f_contiguous
    # what it leaves to NumPy: F order with out= or where=
    assert _core._reduce(0, xf, 0, np.empty(96, x.dtype), False, True) is NotImplemented
    assert _core._reduce(0, xf, 0, None, False, m) is NotImplemented
    # max/min over several axes: the keyed path (formats whose codes order as
    # sign and magnitude) where the results are neither NaN nor zero
    r = _core._reduce(2, x, (0, 1), None, False, True)
    assert r is not NotImplemented and same(r, reference("max", x, axis=(0, 1)))
    z = np.abs(x)
    z[3, 7] = 0.0
    assert _core._reduce(3, z, (0, 1), None, False, True) is NotImplemented     # a zero min
    assert _core._reduce(2, x.astype(mf_type("float8_e4m3fnuz")), (0, 1), None, False,
                         True) is NotImplemented                               # not keyed
    assert _core._reduce(0, np.zeros((0, 3), x.dtype), 0, None, False, True) is NotImplemented
    assert _core._reduce(0, x.astype(np.float32), 0, None, False, True) is NotImplemented
    assert _core._reduce(0, x, 5, None, False, True) is NotImplemented


def test_errors_warnings_and_fallbacks():
    bf = mf_type("bfloat16")
    big = np.full((4, 8), 3e38, np.float32).astype(bf)
    for ax in (0, 1, None):
        with np.errstate(over="raise"):
            with pytest.raises(FloatingPointError, match="overflow encountered in reduce"):
                big.sum(axis=ax)
            with pytest.raises(FloatingPointError, match="overflow encountered in reduce"):
                np.add.reduce(big, axis=ax)
    inf = np.array([[np.inf, -np.inf]] * 3, np.float32).astype(bf)
    for y, ax in ((inf, 1), (inf.T.copy(), 0), (inf, None)):
        with np.errstate(invalid="raise"):
            with pytest.raises(FloatingPointError, match="invalid value"):
                np.add.reduce(y, axis=ax)
            with pytest.raises(FloatingPointError, match="invalid value"):
                y.sum(axis=ax)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.ones((3, 4), bf).sum(axis=0)
    # NumPy's errors for bad arguments are NumPy's own
    x = np.ones((3, 4), bf)
    with pytest.raises(np.exceptions.AxisError):
        x.sum(axis=2)
    with pytest.raises(ValueError):
        x.sum(axis=(0, 0))
    with pytest.raises(ValueError):
        x.max(axis=0, where=np.ones((3, 4), bool))
    # arguments handled by NumPy's route: same bits
    y = data((30, 40), "bfloat16")
    assert same(y.sum(axis=0, dtype=y.dtype), reference("sum", y, axis=0))
    assert same(y.sum(axis=0, initial=1), reference("sum", y, axis=0, initial=1))
    assert same(y.max(axis=1, initial=-1), reference("max", y, axis=1, initial=-1))
    assert y.sum(axis=0, dtype=np.float32).dtype == np.float32
    assert same(y.sum(axis=np.int64(0)), reference("sum", y, axis=0))
    # zero-size arrays and empty reductions
    for shape, ax in [((0, 3), 0), ((3, 0), 1), ((0, 3), 1), ((0,), None)]:
        z = np.zeros(shape, bf)
        assert same(z.sum(axis=ax), reference("sum", z, axis=ax))
        assert same(z.prod(axis=ax), reference("prod", z, axis=ax))
    with pytest.raises(ValueError):
        np.zeros((0, 3), bf).max(axis=0)


def test_plain_numpy_untouched():
    from numpy._core import _methods, fromnumeric
    assert isinstance(_methods._sum, _core.FastPath)
    assert isinstance(fromnumeric._wrapreduction, _core.FastPath)
    a = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(a.sum(axis=0), [12, 15, 18, 21])
    assert np.sum([1, 2, 3]) == 6 and np.max([[1, 5]], axis=1)[0] == 5


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_strided_views_in_one_call(threads):
    # C-ordered views that are not contiguous (rows apart, rows cut short,
    # stepped columns; 2-D and 3-D): one call where NumPy's iterator takes
    # them in place, NumPy's route where it buffers them; NumPy's bits
    prev = _core.set_num_threads(threads)
    try:
        for fmt in ("bfloat16", "float8_e4m3fn"):
            x = data((130, 600), fmt, seed=3, special=True)
            y = data((6, 40, 70), fmt, seed=4, special=True)
            p = data((130, 600), fmt, seed=5, op="prod")
            views = [x[::2], x[:, :300], x[:, ::2], x[1::3, 5:], y[:, ::2], y[..., 1:], y[::2, :, 3:]]
            views += [p[::2], p[:, 7:]]
            taken = 0
            for level in LEVELS:
                with kernel_level(level):
                    for v in views:
                        for op in OPS:
                            for ax in [None] + list(range(v.ndim)) + [(0, v.ndim - 1)]:
                                r = _core._reduce(OPS[op], v, ax, None, False, True)
                                taken += r is not NotImplemented
                                if r is not NotImplemented:
                                    assert same(r, reference(op, v, axis=ax)), (level, fmt, v.strides, op, ax)
                                assert same(fast(op, v, axis=ax, keepdims=True),
                                            reference(op, v, axis=ax, keepdims=True))
            assert taken > len(LEVELS) * len(views) * 4
    finally:
        _core.set_num_threads(prev)


@pytest.mark.parametrize("threads", [1, 2])
def test_extremes_over_several_axes_in_stages(threads):
    # max/min over axes that are not one run: the outermost reduced axis
    # first, then the rest; NumPy's route where a result is NaN or zero
    prev = _core.set_num_threads(threads)
    try:
        for fmt in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            y = data((40, 30, 50), fmt, seed=8)
            z = data((6, 5, 4, 70), fmt, seed=9)
            for level in LEVELS:
                with kernel_level(level):
                    for v, ax in ((y, (0, 2)), (y, (0, 1)), (z, (0, 1, 3)), (z, (0, 2)), (z, (1, 3))):
                        for op in ("max", "min"):
                            r = _core._reduce(OPS[op], v, ax, None, False, True)
                            assert r is not NotImplemented, (fmt, v.shape, ax, op)
                            assert same(r, reference(op, v, axis=ax)), (level, fmt, v.shape, ax, op)
                            assert same(fast(op, v, axis=ax, keepdims=True),
                                        reference(op, v, axis=ax, keepdims=True))
                    # views: staged where NumPy's iterator takes them in place
                    for v, ax in ((y[:, ::2], (0, 2)), (z[:, :, 1:], (0, 3)), (y[::2, :, 5:], (0, 1))):
                        for op in ("max", "min"):
                            assert same(fast(op, v, axis=ax), reference(op, v, axis=ax)), (level, fmt, ax)
            # a group whose extreme is a zero or a NaN: NumPy's route, NumPy's bits
            w = y.copy()
            w[:, 3, :] = -np.abs(w[:, 3, :].astype(np.float32)).astype(w.dtype)
            w[5, 3, 7] = 0.0
            w[2, 4, 9] = np.nan
            for op in ("max", "min"):
                assert _core._reduce(OPS[op], w, (0, 2), None, False, True) is NotImplemented
                assert same(fast(op, w, axis=(0, 2)), reference(op, w, axis=(0, 2)))
    finally:
        _core.set_num_threads(prev)


@pytest.mark.parametrize("bufsize", [64, 1008, 100000])
def test_strided_views_follow_the_buffer_size(bufsize):
    # whether NumPy's iterator buffers a view depends on np.getbufsize(): the
    # one-call path asks it each call, so the bits stay NumPy's for any size
    prev = np.getbufsize()
    np.setbufsize(bufsize)
    try:
        taken = 0
        for shape in [(33, 17), (300, 130), (9, 4500), (6, 40, 70), (4, 3, 2, 65)]:
            a = data(shape, "bfloat16", seed=11, special=True)
            for v in (a[::2], a[..., ::2], a[1::3], a[..., 1:]):
                for ax in axes_of(v.ndim):
                    for op in OPS:
                        with np.errstate(all="ignore"):
                            r = _core._reduce(OPS[op], v, ax, None, False, True)
                        if r is not NotImplemented:
                            taken += 1
                            assert same(r, reference(op, v, axis=ax)), (shape, v.strides, ax, op)
        assert taken > 100
    finally:
        np.setbufsize(prev)
