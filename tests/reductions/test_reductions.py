"""Reductions: bfloat16, then every float format of the
family.  Sums and products accumulate in float32 and round once
(docs/design.md), along any axis.

bfloat16: with integer data in [-8, 8] every partial sum of up to 2**20
elements is an integer below 2**24, so float32 accumulation is exact in any
order and the result must be exactly round_bf16(exact sum).  A reduction
that rounds a partial result to bfloat16 anywhere (partial sums beyond 256
are not all representable) shows up as a wrong code.  For random real data
the tolerances are stated per test and compared with torch's bfloat16
reductions (float32 accumulation) and a float64 reference.

Every float format: the inputs are chosen so that every float32 partial sum
is exact whatever the summation order; then the result must be the exact sum
rounded once.  ml_dtypes accumulates in the format itself (np.ones(10**6,
bfloat16).sum() is 256 there): a deliberate difference, not compared.
Sorting of every format: sorting/test_sorting.py.
"""
import itertools
import warnings

import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R
import _family_refs as FR
from conftest import LEVELS, kernel_level, mf_type

BF = np.dtype(bf16)
BFD = minifloat.dtypes.BFloat16DType

SHAPES = [(1,), (7,), (1000,), (70001,), (33, 17), (4096, 8), (8, 4096), (300, 300),
          (3, 5, 7), (64, 3, 129), (2, 1, 300), (40, 50, 60)]


def _axes(nd):
    out = [None] + list(range(nd)) + [-1]
    out += [c for k in range(2, nd) for c in itertools.combinations(range(nd), k)]
    return out


def _int_data(shape, seed=1):
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(np.float32)


def _layout(a, name):
    return {"C": a, "F": np.asfortranarray(a), "T": a.T, "rev": a[::-1],
            "step2": a[..., ::2], "step3": a[::3]}[name]


# --------------------------------------------------------------------------
# the headline cases
# --------------------------------------------------------------------------
def test_sum_of_2_24_ones(each_level):
    r = np.ones(1 << 24, bf16).sum()
    assert type(r) is bf16
    assert float(r) == 2.0 ** 24


def test_sum_axis0_of_tall_array(each_level):
    # NumPy's own float16 gets 2048 here (it rounds every step)
    r = np.ones((4096, 8), bf16).sum(axis=0)
    assert r.dtype == BF
    assert r.astype(np.float32).tolist() == [4096.0] * 8
    assert np.ones((8, 4096), bf16).sum(axis=1).astype(np.float32).tolist() == [4096.0] * 8
    assert float(np.ones((64, 64, 64), bf16).sum()) == 2.0 ** 18
    assert np.ones((64, 64, 64), bf16).sum(axis=(0, 2)).astype(np.float32).tolist() == [4096.0] * 64


def test_mean_of_ones(each_level):
    assert float(np.ones(10 ** 6, bf16).mean()) == 1.0
    assert float(np.ones(1 << 24, bf16).mean()) == 1.0
    m = np.ones((4096, 8), bf16).mean(axis=0)
    assert m.dtype == BF and (m == 1).all()


# --------------------------------------------------------------------------
# sum: exact on integer data, every shape, axis, layout, keepdims, out=
# --------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["C", "F", "T"])
def test_sum_exact_axes_keepdims_out(shape, layout, each_level):
    x = _int_data(shape)
    xv, fv = _layout(x.astype(bf16), layout), _layout(x, layout)
    for ax in _axes(fv.ndim):
        ref = np.sum(fv.astype(np.float64), axis=ax)
        want = R.bf16_codes_from_f64(ref)
        got = np.sum(xv, axis=ax)
        assert np.asarray(got).dtype == BF
        assert np.array_equal(R.bits(got), want), (ax, "plain")
        got = np.sum(xv, axis=ax, keepdims=True)
        assert got.shape == np.sum(fv, axis=ax, keepdims=True).shape
        assert np.array_equal(R.bits(got).reshape(np.shape(want)), want), (ax, "keepdims")
        out = np.full(np.shape(ref), 99, bf16)
        r = np.sum(xv, axis=ax, out=out)
        assert r is out and np.array_equal(R.bits(out), want), (ax, "out bf16")
        out32 = np.full(np.shape(ref), 99, np.float32)
        np.sum(xv, axis=ax, out=out32)
        assert np.array_equal(out32, ref.astype(np.float32)), (ax, "out float32")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["rev", "step2", "step3"])
def test_sum_exact_non_contiguous_along_axes(shape, layout, each_level):
    # reductions along one or more axes (axis=None is in the next test)
    x = _int_data(shape, seed=2)
    xv, fv = _layout(x.astype(bf16), layout), _layout(x, layout)
    for ax in _axes(fv.ndim)[1:]:
        want = R.bf16_codes_from_f64(np.sum(fv.astype(np.float64), axis=ax))
        assert np.array_equal(R.bits(np.sum(xv, axis=ax)), want), ax


@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) == 1], ids=str)
@pytest.mark.parametrize("layout", ["rev", "step2", "step3"])
def test_sum_exact_non_contiguous_1d_full(shape, layout, each_level):
    x = _int_data(shape, seed=2)
    xv, fv = _layout(x.astype(bf16), layout), _layout(x, layout)
    assert R.bits(xv.sum()) == R.bf16_codes_from_f64(fv.astype(np.float64).sum())


def test_sum_non_contiguous_nd_full_reduction(each_level):
    assert float(np.ones((1000, 1000), bf16)[::2].sum()) == float(bf16(500000))
    assert float(np.ones((3000, 3000), bf16)[::3, ::3].sum()) == float(bf16(10 ** 6))
    for shape in [s for s in SHAPES if len(s) > 1]:
        x = _int_data(shape, seed=2)
        for layout in ("rev", "step2", "step3"):
            xv, fv = _layout(x.astype(bf16), layout), _layout(x, layout)
            want = R.bf16_codes_from_f64(fv.astype(np.float64).sum())
            assert R.bits(xv.sum()) == want, (shape, layout)


def test_sum_where_1d_and_last_axis(each_level):
    x = _int_data((70001,), seed=3)
    m = np.arange(x.size) % 3 != 0
    assert R.bits(x.astype(bf16).sum(where=m)) == R.bf16_codes_from_f64(x.astype(np.float64).sum(where=m))
    y = _int_data((8, 4096), seed=3)
    m = (np.arange(y.size).reshape(y.shape) % 5) != 0
    got = y.astype(bf16).sum(axis=1, where=m)
    assert np.array_equal(R.bits(got), R.bf16_codes_from_f64(y.astype(np.float64).sum(axis=1, where=m)))


def test_sum_where_outer_axis(each_level):
    a = np.ones((4096, 8), bf16)
    m = (np.arange(4096 * 8) % 3 != 0).reshape(4096, 8)
    got = a.sum(axis=0, where=m).astype(np.float32)
    assert got.tolist() == [2736.0] * 8      # 2730 or 2731 ones -> bf16 2736
    x = _int_data((4096, 8), seed=4)
    m = (np.arange(x.size).reshape(x.shape) % 3) != 0
    want = R.bf16_codes_from_f64(x.astype(np.float64).sum(axis=0, where=m))
    assert np.array_equal(R.bits(x.astype(bf16).sum(axis=0, where=m)), want)


def test_sum_initial_1d(each_level):
    x = _int_data((70001,), seed=5)
    got = np.add.reduce(x.astype(bf16), initial=5.0)
    assert R.bits(got) == R.bf16_codes_from_f64(x.astype(np.float64).sum() + 5)
    assert float(np.ones(4096, bf16).sum(initial=1)) == 4096.0


def test_sum_initial_outer_axis(each_level):
    got = np.ones((4096, 8), bf16).sum(axis=0, initial=1).astype(np.float32)
    assert got.tolist() == [4096.0] * 8


def test_sum_dtype_arguments():
    x = _int_data((4096, 8), seed=6)
    xb = x.astype(bf16)
    want = R.bf16_codes_from_f64(x.astype(np.float64).sum(axis=0))
    assert np.array_equal(R.bits(xb.sum(axis=0, dtype=BFD)), want)
    s32 = xb.sum(axis=0, dtype=np.float32)
    assert s32.dtype == np.float32 and np.array_equal(s32, x.sum(axis=0))
    s64 = xb.sum(dtype=np.float64)
    assert s64.dtype == np.float64 and s64 == x.astype(np.float64).sum()


def test_empty_and_degenerate():
    assert float(np.array([], bf16).sum()) == 0.0 and np.array([], bf16).sum().dtype == BF
    assert float(np.array([], bf16).prod()) == 1.0
    assert np.zeros((0, 3), bf16).sum(axis=0).tolist() == [0, 0, 0]
    assert np.zeros((3, 0), bf16).sum(axis=1).tolist() == [0, 0, 0]
    with pytest.raises(ValueError):
        np.array([], bf16).max()
    assert float(np.minimum.reduce(np.array([], bf16), initial=np.inf)) == np.inf
    assert float(np.array([2.5], bf16).sum()) == 2.5
    s = np.array(3.5, bf16).sum()
    assert float(s) == 3.5


def test_sum_special_values():
    assert np.isnan(np.array([1, np.nan, 2], bf16).sum())
    assert np.array([1, np.inf, 2], bf16).sum() == np.inf
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.array([np.inf, -np.inf], bf16).sum())
    with np.errstate(over="ignore"):
        assert np.array([3e38, 3e38], bf16).sum() == np.inf
    # float32 accumulation then one rounding: 3e38 + 3e38 - 3e38 overflows
    # float32 too, so inf; the sum of max and -max is exact
    assert np.array([3.3895313892515355e38, -3.3895313892515355e38], bf16).sum() == 0
    with pytest.warns(RuntimeWarning, match="overflow"):
        np.array([3e38, 3e38], bf16).sum()
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        np.array([3e38, 3e38], bf16).sum()
    # a float32 sum that is finite but rounds past the bfloat16 max
    x = np.full(2, 1.7e38, bf16)
    with np.errstate(over="ignore"):
        assert x.sum() == np.inf


# --------------------------------------------------------------------------
# random real data: accuracy against float64 and torch
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [10, 1000, 100_000, 1_000_000])
def test_sum_random_positive_within_one_ulp(n, each_level):
    # one-signed data (condition number 1): float32 accumulation of n terms
    # is within n * 2**-24 relative in the worst case, far less in practice;
    # the bfloat16 result must be within 1 ulp of the exactly rounded float64
    # sum, and equal to it for at least 90% of 64 trials
    rng = np.random.default_rng(n)
    exact_hits = 0
    for trial in range(64 if n <= 100_000 else 4):
        x = (rng.random(n) * 4 + 0.01).astype(np.float32).astype(bf16)
        got = R.bits(x.sum())
        want = R.bf16_codes_from_f64(x.astype(np.float64).sum())
        assert R.ulps_apart(got, want) <= 1
        exact_hits += int(got == want)
    if n <= 100_000:
        assert exact_hits >= 58


def test_sum_matches_torch(each_level):
    # torch sums bfloat16 in float32 and rounds once; summation orders differ,
    # so up to 1 ulp apart (data of mixed sign but no heavy cancellation)
    rng = np.random.default_rng(42)
    for shape, axis in [((100_000,), None), ((4096, 64), 0), ((64, 4096), 1), ((50, 60, 70), 1)]:
        x = (rng.standard_normal(shape) + 3).astype(np.float32).astype(bf16)
        t = R.torch_bf16(R.bits(x)).reshape(shape)
        tw = R.torch_codes(t.sum() if axis is None else t.sum(dim=axis))
        got = R.bits(x.sum(axis=axis))
        assert (R.ulps_apart(got, tw) <= 1).all()
        assert (got == tw).mean() > 0.9


def test_mean_accuracy_and_torch(each_level):
    # NumPy's mean is sum / n computed in the array's dtype: the bfloat16 sum
    # is rounded before the division, so the mean is rounded twice and may be
    # 1 ulp from the exactly rounded mean (torch rounds once).  Tolerance:
    # 1 ulp from the float64 mean rounded, for one-signed data.
    rng = np.random.default_rng(7)
    for n in (10, 1000, 100_000):
        x = (rng.random(n) + 0.5).astype(np.float32).astype(bf16)
        m = x.mean()
        assert type(m) is bf16
        want = R.bf16_codes_from_f64(x.astype(np.float64).mean())
        assert R.ulps_apart(R.bits(m), want) <= 1
        tm = R.torch_codes(R.torch_bf16(R.bits(x)).mean().reshape(1))
        assert R.ulps_apart(R.bits(m), tm) <= 1


def test_mean_rounds_once():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10000) + 1000).astype(np.float32).astype(bf16)
    want = R.bf16_codes_from_f64(x.astype(np.float64).mean())
    assert R.bits(x.mean()) == want


def test_mean_with_float32_dtype_is_accurate():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10000) + 1000).astype(np.float32).astype(bf16)
    m = x.mean(dtype=np.float32)
    assert m.dtype == np.float32
    assert abs(float(m) - x.astype(np.float64).mean()) < 1e-3


@pytest.mark.parametrize("loc, scale", [(0, 1), (1, 0.01), (5, 1)])
def test_var_std_centred_data(loc, scale):
    # data whose mean is small against its spread, or whose mean is exactly
    # representable: NumPy's var (mean in the array dtype, squares rounded to
    # bfloat16, summed in float32) is within 2% of the float64 variance of
    # the same bfloat16 values; std within 1%.  torch (float32 throughout)
    # is checked against the same reference for comparison.
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(100_000) * scale + loc).astype(np.float32).astype(bf16)
    x64 = x.astype(np.float64)
    for ddof in (0, 1):
        v, s = x.var(ddof=ddof), x.std(ddof=ddof)
        assert type(v) is bf16 and type(s) is bf16
        assert abs(float(v) / x64.var(ddof=ddof) - 1) < 0.02
        assert abs(float(s) / x64.std(ddof=ddof) - 1) < 0.01
    tv = float(R.torch_bf16(R.bits(x)).float().var(correction=0))
    assert abs(tv / x64.var() - 1) < 1e-3


def test_var_std_offset_data():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10000) + 1000).astype(np.float32).astype(bf16)
    x64 = x.astype(np.float64)
    assert abs(float(x.var()) / x64.var() - 1) < 0.02
    assert abs(float(x.std()) / x64.std() - 1) < 0.01


def test_var_with_float32_dtype_is_accurate():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10000) + 1000).astype(np.float32).astype(bf16)
    v = x.var(dtype=np.float32)
    assert abs(float(v) / x.astype(np.float64).var() - 1) < 1e-3


def test_prod_accumulates_in_float32(each_level):
    # (1 + 2**-7) ** 4096: bfloat16 accumulation would round every step
    x = np.full(4096, 1.0078125, bf16)
    want = R.bf16_codes_from_f64(np.array(np.exp(4096 * np.log1p(2.0 ** -7))))
    assert R.ulps_apart(R.bits(x.prod()), want) <= 1
    y = np.full((4096, 4), 1.0078125, bf16)
    assert (R.ulps_apart(R.bits(y.prod(axis=0)), np.full(4, want)) <= 1).all()


def test_prod_exact_powers_of_two(each_level):
    rng = np.random.default_rng(3)
    vals = np.array([0.5, 1, 2, -1, -0.5, -2, 1, 1], np.float32)
    for shape in [(500,), (100, 7), (7, 100), (10, 10, 10)]:
        x = vals[rng.integers(0, 8, shape)]
        for ax in _axes(x.ndim):
            want = R.bf16_codes_from_f64(np.prod(x.astype(np.float64), axis=ax))
            assert np.array_equal(R.bits(np.prod(x.astype(bf16), axis=ax)), want), (shape, ax)


# --------------------------------------------------------------------------
# cumulative reductions
# --------------------------------------------------------------------------
def _bf_exact_ints(n):
    # integers as stored in bfloat16 (above 256 they round), as float32
    return np.arange(1, n + 1).astype(bf16).astype(np.float32)


def test_cumsum_exact(each_level):
    for n in (5, 100, 1000, 5000):
        x = _bf_exact_ints(n)
        # float32 partial sums of these integers are exact (< 2**24)
        want = R.bf16_codes_from_f64(np.cumsum(x.astype(np.float64)))
        assert np.array_equal(R.bits(np.cumsum(x.astype(bf16))), want), n
        assert np.array_equal(R.bits(np.add.accumulate(x.astype(bf16))), want), n


def test_cumsum_axes(each_level):
    x = _int_data((300, 40), seed=9)
    for ax in (0, 1):
        want = R.bf16_codes_from_f64(np.cumsum(x.astype(np.float64), axis=ax))
        assert np.array_equal(R.bits(np.cumsum(x.astype(bf16), axis=ax)), want), ax
    y = np.ones((4096, 3), bf16)
    assert np.cumsum(y, axis=0)[-1].astype(np.float32).tolist() == [4096.0] * 3


def test_cumprod(each_level):
    # accumulate is sequential: the reference is float32's own cumprod rounded
    y = np.full(300, 1.0078125, np.float32)
    with np.errstate(over="ignore"):
        assert np.array_equal(R.bits(np.cumprod(y.astype(bf16))), R.ml_round_f32(np.cumprod(y)))
    x = np.array([0.5, 2, -1, 2, 2, 0.5, -2] * 40, np.float32)
    want = R.bf16_codes_from_f64(np.cumprod(x.astype(np.float64)))
    assert np.array_equal(R.bits(np.cumprod(x.astype(bf16))), want)
    assert np.array_equal(R.bits(np.multiply.accumulate(x.astype(bf16))), want)


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_cumsum_cumprod_like_float32_of_every_code(name, each_level):
    """cumsum/cumprod of random codes (NaNs, signaling NaNs, infinities,
    overflow) along each axis, contiguous and strided: NumPy copies the first
    element's code, every later one is float32's own cumsum/cumprod of the
    decoded values rounded once (bits, and the same invalid/overflow flags
    raised by the accumulation)."""
    rng = np.random.default_rng(11)
    t = mf_type(name)
    codes = FR.all_codes(name)
    x = rng.choice(codes, size=(37, 1100)).view(t)
    for a in (x, x[:, ::3], x.T):
        for fn in (np.cumsum, np.cumprod):
            for ax in (0, 1):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    got = fn(a, axis=ax)
                with warnings.catch_warnings(record=True) as w32:
                    warnings.simplefilter("always")
                    f = fn(a.astype(np.float32), axis=ax)
                    want = f.astype(t)     # its overflow is the accumulation's
                first = (slice(None), slice(0, 1)) if ax == 1 else (slice(0, 1), slice(None))
                want[first] = a[first]
                assert np.array_equal(np.ascontiguousarray(got).view(codes.dtype),
                                      np.ascontiguousarray(want).view(codes.dtype)), (fn, ax)
                assert ({str(m.message) for m in w}
                        == {str(m.message).replace("in cast", "in accumulate") for m in w32}), (fn, ax)


def test_cumsum_float32_dtype_workaround():
    x = np.arange(1, 1001).astype(bf16)
    c = np.cumsum(x, dtype=np.float32)
    assert c.dtype == np.float32 and np.array_equal(c, np.cumsum(x.astype(np.float32)))


def test_maximum_accumulate():
    x = np.array([1, 3, 2, np.nan, 5], bf16)
    got = np.maximum.accumulate(x).astype(np.float32)
    want = np.maximum.accumulate(x.astype(np.float32))
    assert np.array_equal(got, want, equal_nan=True)


def test_reduceat():
    x = np.arange(1, 9).astype(bf16)
    r = np.add.reduceat(x, [0, 4, 6])
    assert r.dtype == BF and r.tolist() == [10, 11, 15]


# --------------------------------------------------------------------------
# max / min / argmax / argmin and NaN
# --------------------------------------------------------------------------
NAN_CASES = [
    [[1, np.nan, 3], [np.nan, np.nan, np.nan], [2, 1, 0]],
    [[-np.inf, 0, -0.0], [np.inf, 5, -5], [1e-40, -1e-40, 0]],
    [[np.nan, 1, 2], [3, np.nan, 1], [1, 2, np.nan]],
]


@pytest.mark.parametrize("case", range(len(NAN_CASES)))
@pytest.mark.parametrize("fn", ["max", "min", "argmax", "argmin", "ptp", "nanmax", "nanmin",
                                "fmax.reduce", "fmin.reduce", "nansum", "nanprod"])
def test_extrema_and_nan_like_float32(case, fn, each_level):
    xb = np.array(NAN_CASES[case], np.float32).astype(bf16)
    x = xb.astype(np.float32)      # the same values (all results here are exact)
    f = eval("np." + fn)
    for ax in (None, 0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = np.asarray(f(xb, axis=ax))
            want = np.asarray(f(x, axis=ax))
        if want.dtype.kind == "f":
            assert got.dtype == BF
            assert np.array_equal(got.astype(np.float32), want, equal_nan=True), ax
            assert np.array_equal(np.signbit(got.astype(np.float32)), np.signbit(want)), ax
        else:
            assert np.array_equal(got, want), ax


def test_nanmean_nanstd():
    x = np.array(NAN_CASES[0], np.float32).astype(bf16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for fn in (np.nanmean, np.nanstd, np.nanvar):
            for ax in (None, 0, 1):
                got = np.asarray(fn(x, axis=ax))
                want = np.asarray(fn(x.astype(np.float64), axis=ax))
                assert got.dtype == BF
                assert np.array_equal(np.isnan(got), np.isnan(want))
                ok = ~np.isnan(want)
                assert np.allclose(got.astype(np.float64)[ok], want[ok], rtol=2 ** -7, atol=0)


@pytest.mark.parametrize("fn", ["nanargmax", "nanargmin"])
def test_nanarg_like_float32(fn):
    x = np.array(NAN_CASES[0], np.float32)
    f = getattr(np, fn)
    assert f(x.astype(bf16)) == f(x)
    assert np.array_equal(f(x.astype(bf16), axis=0), f(x, axis=0))
    with pytest.raises(ValueError):
        f(x.astype(bf16), axis=1)


def test_argmax_all_codes(each_level):
    # every code once, shuffled: argmax/argmin find the NaN first, as float32
    rng = np.random.default_rng(0)
    perm = rng.permutation(R.ALL_CODES)
    xb = R.as_bf16(perm)
    xf = R.decode_f32(perm)
    with np.errstate(invalid="ignore"):
        assert np.argmax(xb) == np.argmax(xf)
        assert np.argmin(xb) == np.argmin(xf)
        keep = ~np.isnan(xf)
        assert np.argmax(xb[keep]) == np.argmax(xf[keep])
        assert np.argmin(xb[keep]) == np.argmin(xf[keep])
        assert float(xb[keep].max()) == float(xf[keep].max())
        assert float(xb[keep].min()) == float(xf[keep].min())


def test_max_min_with_initial_where_out(each_level):
    x = _int_data((4096, 8), seed=12).astype(bf16)
    assert np.array_equal(x.max(axis=0).astype(np.float32),
                          x.astype(np.float32).max(axis=0))
    assert float(np.maximum.reduce(x.ravel(), initial=100)) == 100
    m = np.zeros((4096, 8), bool)
    m[5] = True
    got = np.max(x, axis=0, where=m, initial=-100)
    assert np.array_equal(got.astype(np.float32), x.astype(np.float32)[5])
    out = np.empty(8, bf16)
    assert np.min(x, axis=0, out=out) is out


# --------------------------------------------------------------------------
# boolean reductions
# --------------------------------------------------------------------------
def test_all_any():
    x = np.array([1, 2, 0.5], bf16)
    assert np.all(x) and np.any(x)
    assert not np.all(np.array([1, 0], bf16)) and not np.any(np.zeros(3, bf16))
    assert np.all(np.array([np.nan], bf16))
    assert np.all(np.ones((4, 3), bf16), axis=0).tolist() == [True] * 3


def test_count_nonzero_and_nonzero():
    x = np.array([0, 1, -0.0, np.nan, 2], bf16)
    assert np.count_nonzero(x) == 3
    assert np.nonzero(x)[0].tolist() == [1, 3, 4]
    assert np.flatnonzero(x).tolist() == [1, 3, 4]


def test_other_numpy_reducers_work():
    x = np.array([1.5, 2.5, 3.0, 4.0], bf16)
    assert float(np.median(x)) == 2.75
    assert float(np.percentile(x, 50)) == 2.75
    assert np.median(x).dtype == BF
    assert np.average(x, weights=[1, 1, 1, 1]) == 2.75
    assert float(np.trapezoid(x)) == float(np.trapezoid(x.astype(np.float32)))
    assert np.diff(x).tolist() == [1.0, 0.5, 1.0]
    assert float(np.ptp(x)) == 2.5


# ==========================================================================
# Every float format of the family (bfloat16 included)
# ==========================================================================
def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


def enc(name, v):
    return FR.fmt(name).encode(np.asarray(v, np.float64).reshape(-1)).astype(FR.code_dtype(name)) \
        .reshape(np.shape(v))


def moderate_codes(name):
    """codes of finite values that are multiples of 2^-8 with |v| <= 16: sums
    of fewer than 4096 of them are exact in float32 in any order"""
    v = FR.fmt(name).decode_f64()
    ok = np.isfinite(v) & (np.abs(v) <= 16) & (v * 256 == np.round(v * 256))
    return FR.all_codes(name)[ok]


SHAPES_AXES = [((4000,), None), ((4000,), 0), ((1000, 4), 0), ((1000, 4), 1), ((4, 1000), 0),
               ((4, 1000), 1), ((3, 500, 2), 1), ((3, 500, 2), (0, 2)), ((3, 500, 2), None),
               ((2, 3, 4, 5), (1, 3)), ((4095, 3), 0)]


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_sum_of_ones_along_axes(name):
    t = mf_type(name)
    for level in LEVELS:
        with kernel_level(level), np.errstate(all="ignore"):
            for shape, axis in SHAPES_AXES + [((4096, 8), 0), ((8, 4096), 1), ((64, 5, 3), None)]:
                a = np.ones(shape, t)
                s = a.sum(axis=axis)
                assert s.dtype == np.dtype(t)
                count = a.size // np.size(s)
                np.testing.assert_array_equal(codes_of(s, name).reshape(-1),
                                              np.full(np.size(s), enc(name, count)),
                                              err_msg=f"{name} sum of ones {shape} axis={axis} at {level}")
                k = np.sum(a, axis=axis, keepdims=True)
                assert k.ndim == a.ndim
                np.testing.assert_array_equal(codes_of(k, name).reshape(-1), codes_of(s, name).reshape(-1))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_sum_rounds_the_exact_sum_once(name):
    t = mf_type(name)
    pool = moderate_codes(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    for shape, axis in SHAPES_AXES:
        c = rng.choice(pool, size=shape)
        a = c.view(t)
        exact = np.sum(a.astype(np.float64), axis=axis)
        want = enc(name, exact).reshape(-1)
        for level in LEVELS:
            with kernel_level(level), np.errstate(all="ignore"):
                got = codes_of(np.sum(a, axis=axis), name).reshape(-1)
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {shape} axis={axis} {level}")
                # non-contiguous view of the same data
                if a.ndim >= 2:
                    tr = a.T
                    ax = None if axis is None else tuple(a.ndim - 1 - x for x in np.atleast_1d(axis))
                    got_t = codes_of(np.sum(tr, axis=ax), name).reshape(-1)
                    want_t = enc(name, np.sum(tr.astype(np.float64), axis=ax)).reshape(-1)
                    np.testing.assert_array_equal(got_t, want_t, err_msg=f"{name} transposed {shape}")
    # a float32 accumulator given explicitly returns float32
    a = rng.choice(pool, size=1000).view(t)
    assert np.sum(a, dtype=np.float32) == np.sum(a.astype(np.float64))
    assert a.sum(dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_mean(name):
    """documented: the mean of a float format is computed in float32 and
    rounded once (as NumPy does for float16)"""
    t = mf_type(name)
    pool = moderate_codes(name)
    rng = np.random.default_rng(2)
    a = rng.choice(pool, size=(300, 3)).view(t)
    a32 = a.astype(np.float32)
    with np.errstate(all="ignore"):
        for axis in (None, 0, 1):
            m = np.mean(a, axis=axis)
            assert m.dtype == np.dtype(t)
            np.testing.assert_array_equal(codes_of(m, name).reshape(-1),
                                          enc(name, np.mean(a32, axis=axis)).reshape(-1))


def accumulate_cases(name):
    t = mf_type(name)
    pool = moderate_codes(name)
    rng = np.random.default_rng(6)
    return rng.choice(pool, size=(300, 3)).view(t)


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_cumsum_along_the_outer_axis(name):
    """accumulations carry the float32 running value and round each output
    once: with exact partial sums, output i is the exact prefix sum rounded once"""
    a = accumulate_cases(name)
    with np.errstate(all="ignore"):
        c = np.cumsum(a, axis=0)
    assert c.dtype == a.dtype and c.shape == a.shape
    np.testing.assert_array_equal(codes_of(c, name), enc(name, np.cumsum(a.astype(np.float64), axis=0)))




@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_cumsum_along_the_inner_axis(name):
    a = accumulate_cases(name)
    with np.errstate(all="ignore"):
        c = np.cumsum(a, axis=1)
        d = np.cumsum(np.ascontiguousarray(a[:, 0]))
    np.testing.assert_array_equal(codes_of(c, name), enc(name, np.cumsum(a.astype(np.float64), axis=1)))
    np.testing.assert_array_equal(codes_of(d, name), enc(name, np.cumsum(a[:, 0].astype(np.float64))))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_accumulate_1d(name):
    """minimal: np.cumsum([1, 2, 4]) and np.cumprod([1, 2, 2, 2]) in the format
    (sums/products exact in float32, rounded once)"""
    t = mf_type(name)
    with np.errstate(all="ignore"):
        c = np.cumsum(np.array([1, 2, 4], dtype=t))
        p = np.cumprod(np.array([1, 2, 2, 2], dtype=t))
        s = np.subtract.accumulate(np.array([4, 1, 1, 1], dtype=t))
    np.testing.assert_array_equal(codes_of(c, name), enc(name, [1, 3, 7]))
    np.testing.assert_array_equal(codes_of(p, name), enc(name, [1, 2, 4, 8]))
    np.testing.assert_array_equal(codes_of(s, name), enc(name, [4, 3, 2, 1]))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_prod(name):
    """products of +-1, +-2, +-0.5 (or powers of two for e8m0) are exact in
    float32: the result is the exact product rounded once (overflow to inf or
    NaN, or saturation, per the format)"""
    f = FR.fmt(name)
    t = mf_type(name)
    vals = [1.0, 2.0, 0.5, -1.0, -2.0, -0.5] if f.signed else [1.0, 2.0, 0.5, 4.0]
    rng = np.random.default_rng(4)
    for shape, axis in [((40,), None), ((30, 4), 0), ((4, 30), 1), ((6, 5, 4), (0, 2))]:
        v = rng.choice(vals, size=shape)
        a = v.astype(t)
        with np.errstate(all="ignore"):
            got = codes_of(np.prod(a, axis=axis), name).reshape(-1)
        want = enc(name, np.prod(v, axis=axis)).reshape(-1)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} prod {shape} axis={axis}")


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_max_min_argmax_argmin(name):
    """max/min propagate NaN (formats with NaN); argmax/argmin return the first
    NaN; all equal to NumPy's float32 on the decoded values"""
    f = FR.fmt(name)
    t = mf_type(name)
    rng = np.random.default_rng(9)
    codes = rng.permutation(FR.all_codes(name))
    if len(codes) > 4096:
        codes = codes[:4096]
    for arr in (codes, codes.reshape(8, -1), moderate_codes(name)):
        a = arr.view(t)
        a32 = a.astype(np.float32)
        for axis in ([None] + list(range(a.ndim))):
            with np.errstate(all="ignore"):
                for fn in (np.max, np.min, np.nanmax, np.nanmin):
                    got = fn(a, axis=axis)
                    assert np.asarray(got).dtype == np.dtype(t)
                    want = fn(a32, axis=axis)
                    np.testing.assert_array_equal(codes_of(np.asarray(got), name).reshape(-1),
                                                  enc(name, want).reshape(-1),
                                                  err_msg=f"{fn.__name__}({name}) axis={axis}")
            np.testing.assert_array_equal(np.argmax(a, axis=axis), np.argmax(a32, axis=axis))
            np.testing.assert_array_equal(np.argmin(a, axis=axis), np.argmin(a32, axis=axis))
    full = FR.all_codes(name).view(t)
    if f.has_nan:
        assert np.isnan(float(full.max())) and np.isnan(float(full.min()))
        first_nan = int(np.nonzero(np.isnan(full.astype(np.float32)))[0][0])
        assert full.argmax() == first_nan and full.argmin() == first_nan
    else:
        assert float(full.max()) == float(f.max)
        assert float(full.min()) == -float(f.max)
