"""np.cumsum / np.cumprod of the float formats along any axis of a
C-ordered array (patch "fast_accumulate": all rows in one C call, several
rows' chains at once, or a whole row of column chains at once, on the
threads) against NumPy's route, which the
ndarray methods keep (a.cumsum(axis), np.add.accumulate): the same codes and
the same floating-point warnings, for every layout the fast path takes and
the ones it leaves to NumPy."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minifloat

from conftest import FLOAT_FORMATS, mf_type

OPS = [("cumsum", np.add), ("cumprod", np.multiply)]


def codes(x):
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)


def route(fname, a, axis):
    """NumPy's route: the ndarray method (C, never patched)."""
    return getattr(a, fname)(axis=axis)


def check(fname, a, axis):
    with warnings.catch_warnings(record=True) as w_fast:
        warnings.simplefilter("always")
        got = getattr(np, fname)(a, axis=axis)
    with warnings.catch_warnings(record=True) as w_route:
        warnings.simplefilter("always")
        want = route(fname, a, axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(codes(got), codes(want))
    assert sorted(str(x.message) for x in w_fast) == sorted(str(x.message) for x in w_route)


@pytest.mark.parametrize("name", FLOAT_FORMATS)
@pytest.mark.parametrize("fname,ufunc", OPS)
def test_every_code_in_rows(name, fname, ufunc, threads):
    """Every code of the format (NaNs of both signs, infinities, signalling
    NaNs, the sub-byte formats' high bits) spread over rows of several
    lengths (a block edge included) and row counts (a ragged group of rows),
    1-3 threads (70 x 4100: enough work for the threads to share)."""
    itemsize = np.dtype(mf_type(name)).itemsize
    rng = np.random.default_rng(11)
    allc = np.arange(1 << (8 * itemsize), dtype=np.uint16 if itemsize == 2 else np.uint8)
    for rows, length in ((1, 2), (3, 7), (13, 1025), (17, 1026), (9, 3000), (70, 4100)):
        raw = rng.choice(allc, size=rows * length)
        if fname == "cumprod":      # mostly values near 1: long products stay finite
            ones = np.ones(1, mf_type(name)).view(raw.dtype)[0]
            raw = np.where(rng.random(raw.size) < 0.9, ones, raw).astype(raw.dtype)
        a = raw.view(mf_type(name)).reshape(rows, length)
        for nt in (1, 2, 3):
            threads(nt)
            check(fname, a, -1)
            check(fname, a, 1)
            check(fname, a, None)
            check(fname, a, 0)          # chains down the columns


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
@pytest.mark.parametrize("fname,ufunc", OPS)
def test_every_code_down_columns(name, fname, ufunc, threads):
    """Chains along an axis that is not the last (the elements after it,
    B, advance together, 512 columns a block): every code, B below, at and
    past a block (ragged last block), several slabs before the axis, 1-3
    threads; np.add.accumulate (NumPy's route) agrees."""
    itemsize = np.dtype(mf_type(name)).itemsize
    rng = np.random.default_rng(13)
    allc = np.arange(1 << (8 * itemsize), dtype=np.uint16 if itemsize == 2 else np.uint8)
    for shape, axis in (((2, 3), 0), ((300, 7), 0), ((40, 512), 0), ((9, 1537), 0),
                        ((3, 50, 600), 1), ((3, 50, 600), 0), ((4, 5, 6, 70), 1),
                        ((4, 5, 6, 70), -3), ((64, 1), 0), ((5, 64, 1), 1)):
        raw = rng.choice(allc, size=int(np.prod(shape)))
        if fname == "cumprod":
            ones = np.ones(1, mf_type(name)).view(raw.dtype)[0]
            raw = np.where(rng.random(raw.size) < 0.9, ones, raw).astype(raw.dtype)
        a = raw.view(mf_type(name)).reshape(shape)
        for nt in (1, 2, 3):
            threads(nt)
            check(fname, a, axis)
            np.testing.assert_array_equal(codes(getattr(np, fname)(a, axis=axis)),
                                          codes(ufunc.accumulate(a, axis=axis)))


@pytest.mark.parametrize("fname,ufunc", OPS)
def test_layouts(fname, ufunc, threads):
    """Shapes and axes the fast path takes (any axis of C-ordered 1-3-D
    arrays, axis None) and leaves (views, dtype=, out=): NumPy's
    codes in every case; np.add.accumulate agrees."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((6, 40, 33)).astype(np.float32).astype(minifloat.bfloat16)
    threads(2)
    for a in (x, x[0], x[0, 0], x[:, ::2], x[..., ::-1], x.transpose(2, 0, 1)):
        for axis in (None, -1, 0, a.ndim - 1, np.int64(a.ndim - 1)):
            check(fname, a, axis)
    with pytest.raises(np.exceptions.AxisError):
        getattr(np, fname)(x, axis=3)
    with pytest.raises(TypeError):
        getattr(np, fname)(x, axis=1.0)
    np.testing.assert_array_equal(codes(getattr(np, fname)(x, axis=-1)),
                                  codes(ufunc.accumulate(x, axis=-1)))
    got = getattr(np, fname)(x, axis=-1, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, getattr(x, fname)(axis=-1, dtype=np.float32))
    out = np.empty_like(x)
    assert getattr(np, fname)(x, axis=-1, out=out) is out
    np.testing.assert_array_equal(codes(out), codes(route(fname, x, -1)))
    # byte-swapped codes (a non-native descriptor): NumPy's route, which swaps
    sw = x.astype(x.dtype.newbyteorder())
    assert not sw.dtype.isnative
    check(fname, sw, -1)
    np.testing.assert_array_equal(codes(getattr(np, fname)(sw, axis=-1).astype(x.dtype)),
                                  codes(getattr(np, fname)(x, axis=-1)))
    # zero-size and one-element rows: NumPy's route
    for a in (x[:, :, :0], x[:, :0], x[:, :, :1], np.zeros((0,), minifloat.bfloat16)):
        check(fname, a, -1)
    # a float32 array, a list: NumPy's own function
    f = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(getattr(np, fname)(f, axis=1), getattr(f, fname)(axis=1))
    assert getattr(np, fname)([1, 2, 3]).tolist() == ([1, 3, 6] if fname == "cumsum" else [1, 2, 6])


def test_errstate_raises_as_numpy():
    """Overflow inside the chain (finite + finite -> inf) and inf - inf raise
    what NumPy's route raises under np.errstate."""
    big = np.full((9, 4), 3e38, np.float32).astype(minifloat.bfloat16)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError, match="overflow"):
            big.cumsum(axis=1)
        with pytest.raises(FloatingPointError, match="overflow"):
            np.cumsum(big, axis=1)
    x = np.array([[np.inf, -np.inf, 1.0]] * 9, np.float32).astype(minifloat.bfloat16)
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError, match="invalid"):
            np.cumsum(x, axis=-1)
    with np.errstate(over="raise"):             # down the columns
        with pytest.raises(FloatingPointError, match="overflow"):
            np.cumsum(big, axis=0)
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError, match="invalid"):
            np.cumsum(x.T.copy(), axis=0)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FLOAT_FORMATS), st.integers(1, 20), st.integers(2, 70),
       st.sampled_from(OPS), st.integers(0, 2**32 - 1))
def test_random_arrays_as_numpy(name, rows, length, op, seed):
    rng = np.random.default_rng(seed)
    itemsize = np.dtype(mf_type(name)).itemsize
    raw = rng.integers(0, 1 << (8 * itemsize), size=(rows, length),
                       dtype=np.uint16 if itemsize == 2 else np.uint8)
    check(op[0], raw.view(mf_type(name)), -1)
    check(op[0], raw.view(mf_type(name)), 0)
