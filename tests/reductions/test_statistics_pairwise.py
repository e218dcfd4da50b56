"""mean/var/std of the float formats through src/umath/pairwise.c (patch
"statistics").

The float32 sum under them is, bit for bit, NumPy's float32 add.reduce of
the values: ``_core._sum_f32(x, axis, keepdims)`` must equal
``np.add.reduce(x.astype(np.float32), axis, keepdims=keepdims)`` (the
reference: NumPy's own float32 loop on the float32 values), at every kernel
level and thread count; and ``np.mean``/``np.var``/``np.std`` of a format
must equal NumPy's float32 statistic of the float32 values, rounded once to
the format.  NaN results compare as NaN (which of two NaNs a sum keeps is
the compiler's choice, in NumPy's loop as here).
"""
import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import minifloat
from minifloat import _core

from conftest import EMULATED, LEVELS, kernel_level, mf_type

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs): the NEON build of the sums

FORMATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float4_e2m1fn",
           "float8_e8m0fnu"]
FORMATS = [n for n in FORMATS if hasattr(minifloat, n)]


# binary exponents the values spread over: wide enough that float32 sums of
# the format's values round (sums of values of one magnitude are often exact,
# and then any order of additions gives NumPy's bits)
SPREAD = {"bfloat16": 24, "float8_e5m2": 8, "float8_e8m0fnu": 24}


def values(shape, fmt, seed=0, special=False):
    rng = np.random.default_rng(seed)
    e = SPREAD.get(fmt, 4)
    x = (rng.standard_normal(shape) * 3 + 0.5) * np.exp2(rng.integers(-e, e + 1, shape))
    x = x.astype(np.float32)
    if fmt == "float8_e8m0fnu":
        x = np.abs(x) + 0.25          # no zero, no sign
    if special and x.size > 4:
        flat = x.reshape(-1)
        idx = rng.choice(flat.size, size=max(3, flat.size // 50), replace=False)
        flat[idx[::3]] = np.nan
        flat[idx[1::3]] = np.inf
        flat[idx[2::3]] = -np.inf
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return x.astype(mf_type(fmt))


def same_f32(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def reference_sum(x, axis, keepdims):
    with np.errstate(all="ignore"):
        return np.add.reduce(x.astype(np.float32), axis=axis, keepdims=keepdims)


SHAPES_AXES = [((4096,), None), ((300, 8193), -1), ((3, 20000), 1), ((64, 129), -1),
               ((7, 9, 11), (1, 2)), ((5, 1, 300), -1), ((5, 300, 1), (1, 2)), ((4096, 1), 0),
               ((2, 3, 4), (0, 1, 2)), ((1,), 0), ((17,), None), ((6, 7), None),
               # leading axes reduced: each column's chain in row order (column mode)
               ((300, 257), 0), ((7, 9, 1100), (0, 1)), ((1, 70, 3), (0, 1)), ((2000, 3), 0),
               # middle axes: the same chains for each index of the axes before them
               ((6, 300, 257), 1), ((3, 4, 90, 5, 70), (2, 3)), ((2, 1, 50, 1, 3), 2),
               ((9, 2000, 3), 1)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("level", LEVELS)
def test_sum_f32_is_numpys_float32_sum(fmt, level):
    with kernel_level(level):
        for i, (shape, axis) in enumerate(SHAPES_AXES):
            x = values(shape, fmt, seed=i, special=i % 3 == 0)
            for keepdims in (False, True):
                with np.errstate(all="ignore"):
                    got = _core._sum_f32(x, axis, keepdims)
                want = reference_sum(x, axis, keepdims)
                assert type(got) is type(want), (shape, axis, keepdims)
                same_f32(got, want)


@pytest.mark.parametrize("level", LEVELS)
def test_squared_deviations_are_vars_own(level, threads):
    """with a mean, the sum of np.square(x.astype(float32) - mean): _var's
    subtract, square and float32 sum, along runs and along leading axes"""
    with kernel_level(level):
        for n in (1, 2):
            threads(n)
            for i, (shape, axis) in enumerate(SHAPES_AXES + [((600, 3000), 0), ((64, 20000), -1)]):
                for fmt in ("bfloat16", "float8_e4m3fn"):
                    x = values(shape, fmt, seed=i, special=i % 5 == 2)
                    x32 = x.astype(np.float32)
                    with np.errstate(all="ignore"):
                        m = np.mean(x32, axis=axis, keepdims=True, dtype=np.float32)
                        got = _core._sum_f32(x, axis, False, np.ascontiguousarray(m))
                        want = np.add.reduce(np.square(x32 - m), axis=axis)
                    same_f32(got, want)


@pytest.mark.parametrize("shape,axis", [((1 << 21,), None), ((64, 1 << 15), -1), ((3, 1 << 20), 1),
                                        ((4096, 300), -1), ((300, 4096), 0), ((64, 1 << 14), 0),
                                        ((64, 512, 64), 1), ((3, 512, 2048), 1)])
def test_every_thread_count_the_same_bits(shape, axis, threads):
    """one long run is cut into subtrees of NumPy's tree, many runs into tasks:
    the bits do not depend on the count"""
    x = values(shape, "bfloat16", seed=3, special=True)
    want = reference_sum(x, axis, False)
    for n in (1, 2, 3):
        threads(n)
        with np.errstate(all="ignore"):
            same_f32(_core._sum_f32(x, axis, False), want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=4), data=st.data(),
       fmt=st.sampled_from(["bfloat16", "float8_e4m3fn", "float6_e2m3fn"]))
def test_sum_f32_any_shape_and_axes(shape, data, fmt):
    nd = len(shape)
    k = data.draw(st.integers(0, nd))
    kind = data.draw(st.sampled_from(["trailing", "leading", "middle"]))
    if kind == "trailing":
        axes = tuple(range(k, nd)) if k < nd else None    # a trailing block: runs
    elif kind == "leading":
        axes = tuple(range(0, k)) if k > 0 else None      # a leading block: columns
    else:                                                 # a middle block: columns of
        j = data.draw(st.integers(k, nd))                 # each outer index
        axes = tuple(range(k, j)) if j > k else None
    if axes is not None and data.draw(st.booleans()):
        axes = tuple(a - nd for a in axes)                # negative axes
    keepdims = data.draw(st.booleans())
    x = values(tuple(shape), fmt, seed=sum(shape))
    got = _core._sum_f32(x, axes, keepdims)
    same_f32(got, reference_sum(x, axes, keepdims))


def test_what_it_does_not_cover_is_notimplemented():
    x = values((6, 8), "bfloat16")
    s = _core._sum_f32
    x3 = values((4, 6, 8), "bfloat16")
    assert s(x3, (0, 2), False) is NotImplemented            # reduced axes on both sides
    assert s(values((2, 3, 4, 5), "bfloat16"), (1, 3), False) is NotImplemented
    assert s(x3, 1, False, np.zeros(8, np.float32)) is NotImplemented  # 4 x 8 needed
    assert s(x, 0, False, np.zeros(6, np.float32)) is NotImplemented   # columns: one per column (8)
    assert s(x[:, ::2], -1, False) is NotImplemented         # not C-contiguous
    assert s(x.T, -1, False) is NotImplemented
    assert s(np.zeros((3, 0), x.dtype), -1, False) is NotImplemented   # empty
    assert s(x.astype(np.float32), -1, False) is NotImplemented        # not a format
    assert s(x, 5, False) is NotImplemented and s(x, (1, 1), False) is NotImplemented
    assert s(x, (), False) is NotImplemented
    raw = np.zeros(2 * x.size + 1, np.uint8)[1:].view(x.dtype).reshape(x.shape)   # unaligned
    assert not raw.flags.aligned and s(raw, -1, False) is NotImplemented
    bad_mean = np.zeros(5, np.float32)                          # one per run: 6 needed
    assert s(x, -1, False, bad_mean) is NotImplemented
    assert s(x, -1, False, np.zeros(6, np.float64)) is NotImplemented


def to_format(r, dt):
    return r.astype(dt) if isinstance(r, np.ndarray) else dt.type(r)


def bits(x):
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16}[x.dtype.itemsize])


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("stat,kw", [("mean", {}), ("var", {}), ("std", {}), ("var", {"ddof": 1}),
                                     ("std", {"ddof": 1}), ("var", {"ddof": 2.5})])
def test_statistics_are_numpys_float32_ones_rounded_once(fmt, stat, kw, threads):
    fn = getattr(np, stat)
    for n in (2,) if EMULATED else (1, 2):
        threads(n)
        for i, (shape, axis) in enumerate(SHAPES_AXES + [((4096, 4096 // 8), -1), ((512, 4096), 0)]):
            if shape == (1,) and kw:
                continue
            x = values(shape, fmt, seed=i, special=i % 4 == 1)
            dt = x.dtype
            for keepdims in (False, True):
                with np.errstate(all="ignore"):
                    got = fn(x, axis=axis, keepdims=keepdims, **kw)
                    want = to_format(fn(x.astype(np.float32), axis=axis, keepdims=keepdims,
                                        dtype=np.float32, **kw), dt)
                assert type(got) is type(want) and np.shape(got) == np.shape(want)
                g, w = np.asarray(got), np.asarray(want)
                assert g.dtype == dt
                nan = np.isnan(w.astype(np.float32))
                np.testing.assert_array_equal(np.isnan(g.astype(np.float32)), nan)
                np.testing.assert_array_equal(bits(g)[~nan], bits(w)[~nan])
    # the methods and positional keepdims/ddof take the same route
    x = values((40, 300), fmt)
    with np.errstate(over="ignore"):       # a variance past float8_e4m3fn's range
        assert np.array_equal(bits(x.mean(-1)), bits(np.mean(x, -1)))
        assert np.array_equal(bits(x.var(1, None, None, 1, True)), bits(np.var(x, 1, ddof=1, keepdims=True)))


def test_other_layouts_and_arguments_take_numpys_route():
    """views, where=, dtype=, out=, mean=: NumPy's own steps (same values
    here, where every run is shorter than NumPy's cast buffer)"""
    x = values((50, 64), "bfloat16", seed=2)
    x32 = x.astype(np.float32)
    f = lambda r: to_format(r, x.dtype)          # noqa: E731
    for view, v32 in ((x[:, ::2], x32[:, ::2]), (x.T, x32.T), (x[::-1], x32[::-1])):
        assert np.array_equal(bits(np.mean(view, axis=-1)), bits(f(np.mean(v32, axis=-1))))
        assert np.array_equal(bits(np.std(view, axis=0)), bits(f(np.std(v32, axis=0))))
    w = np.arange(64) % 3 > 0
    assert np.array_equal(bits(np.mean(x, axis=-1, where=w)), bits(f(np.mean(x32, axis=-1, where=w))))
    assert np.mean(x, dtype=np.float64) == np.mean(x32, dtype=np.float64)
    out = np.empty(50, np.float32)
    assert np.var(x, axis=-1, out=out) is out          # NumPy's route: its own dtype rules
    m = np.mean(x32, axis=-1, keepdims=True)
    assert np.array_equal(bits(np.var(x, axis=-1, mean=m)), bits(f(np.var(x32, axis=-1, mean=m))))
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"), np.errstate(divide="ignore"):
        assert np.isinf(np.var(values((3, 2), "bfloat16"), axis=-1, ddof=2)).all()


def test_overflow_and_invalid_follow_errstate():
    big = np.full(64, 3e38, np.float32).astype(minifloat.bfloat16)
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert np.mean(big) == np.inf
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        np.mean(big)
    both = np.array([np.inf, -np.inf] * 8, np.float32).astype(minifloat.bfloat16)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        np.mean(both)
    with np.errstate(all="ignore"):
        assert np.isnan(np.mean(both))


def test_no_float32_copy():
    """the statistics read the codes: no float32 copy of the array (NumPy
    traces its allocations for tracemalloc)"""
    x = values((256, 4096), "bfloat16")           # 2 MiB; a float32 copy is 4 MiB
    np.mean(x, axis=-1)
    tracemalloc.start()
    try:
        np.mean(x)
        np.var(x, axis=-1)
        np.std(x, axis=-1, ddof=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes // 2
