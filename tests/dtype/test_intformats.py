"""Family conformance: the integer formats int4, uint4, int2, uint2,
int1, uint1.

Arithmetic wraps like ml_dtypes (bit for bit, same dtype, for add, subtract,
multiply, floor_divide, remainder on every pair of values).  Deliberate
differences from ml_dtypes (docs/design.md, "Where minifloat deliberately
differs"), asserted here so that a change is noticed:
  * np.sum / np.prod of an integer format give int64 (signed) or uint64
    (unsigned), as NumPy does for int8; ml_dtypes keeps the format and wraps;
  * maximum, minimum, fmod, the bitwise ufuncs, shifts, negative, absolute,
    invert, sign, square, divmod keep the format (wrapping); ml_dtypes returns
    int8 -- the values agree after wrapping ml_dtypes' int8 result;
  * true division gives float64 (NumPy's int8 rule); ml_dtypes gives float16.
"""
import warnings

import numpy as np
import pytest

import minifloat

import _family_refs as R
from conftest import mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs)


def values(name):
    return R.int_wrap(np.arange(R.ncodes(name)), name)


def all_pairs(name):
    c = R.all_codes(name)
    n = len(c)
    return np.repeat(c, n), np.tile(c, n)


def ml_view(codes, name):
    return codes.view(R.ml_type(name))


def codes_of(arr):
    return np.ascontiguousarray(arr).view(np.uint8)


WRAPPING_LIKE_ML = ["add", "subtract", "multiply", "floor_divide", "remainder"]


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_arithmetic_wraps_like_ml_dtypes(name):
    ca, cb = all_pairs(name)
    a, b = ca.view(mf_type(name)), cb.view(mf_type(name))
    va, vb = R.int_wrap(ca, name), R.int_wrap(cb, name)
    with np.errstate(all="ignore"):
        for u in WRAPPING_LIKE_ML:
            uf = getattr(np, u)
            got = uf(a, b)
            theirs = uf(ml_view(ca, name), ml_view(cb, name))
            assert got.dtype == np.dtype(mf_type(name)), u
            assert str(theirs.dtype) == name
            np.testing.assert_array_equal(codes_of(got), codes_of(theirs), err_msg=u)
            # and the Python-integer reference: wrap(op(a, b)), 0 for division by 0
            ref = uf(va.astype(np.int64), vb.astype(np.int64))
            np.testing.assert_array_equal(got.astype(np.int64), R.int_wrap(ref, name), err_msg=u)
        # in place and with NumPy integer / Python scalars (weak)
        c = a.copy()
        c += b
        np.testing.assert_array_equal(codes_of(c), codes_of(np.add(a, b)))
        one = -1 if name == "int1" else 1    # a Python int the format holds (NumPy 2
        # raises OverflowError for others, e.g. int1 + 1)
        np.testing.assert_array_equal((a + one).astype(np.int64), R.int_wrap(va + one, name))
        assert (a + one).dtype == a.dtype


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_other_integer_ufuncs_keep_the_format(name):
    """values equal ml_dtypes' (int8) results wrapped to the format"""
    ca, cb = all_pairs(name)
    a, b = ca.view(mf_type(name)), cb.view(mf_type(name))
    ma, mb = ml_view(ca, name), ml_view(cb, name)
    vb = R.int_wrap(cb, name)
    with np.errstate(all="ignore"):
        for u in ["fmod", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor",
                  "left_shift", "right_shift", "gcd", "lcm"]:
            uf = getattr(np, u)
            if u in ("left_shift", "right_shift"):
                ok = (vb >= 0) & (vb < 8)       # NumPy's shifts by >= width / negative are C UB territory
            else:
                ok = np.ones(len(ca), bool)
            got = uf(a, b)
            assert got.dtype == a.dtype, u
            try:
                theirs = uf(ma, mb)
            except TypeError:
                theirs = uf(R.int_wrap(ca, name).astype(np.int8), vb.astype(np.int8))
            np.testing.assert_array_equal(got.astype(np.int64)[ok],
                                          R.int_wrap(theirs.astype(np.int64), name)[ok], err_msg=u)
        q, r = np.divmod(a, b)
        np.testing.assert_array_equal(codes_of(q), codes_of(np.floor_divide(a, b)))
        np.testing.assert_array_equal(codes_of(r), codes_of(np.remainder(a, b)))
        x = R.all_codes(name).view(mf_type(name))
        mx = ml_view(R.all_codes(name), name)
        for u in ["negative", "positive", "absolute", "invert", "sign", "square"]:
            got = getattr(np, u)(x)
            assert got.dtype == x.dtype, u
            np.testing.assert_array_equal(got.astype(np.int64),
                                          R.int_wrap(getattr(np, u)(mx).astype(np.int64), name),
                                          err_msg=u)
        lo, hi = (0, 1) if name != "int1" else (-1, 0)
        cl = np.clip(x, np.array(lo).astype(x.dtype), np.array(hi).astype(x.dtype))
        np.testing.assert_array_equal(cl.astype(np.int64), np.clip(values(name), lo, hi))


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_true_divide_gives_float64(name):
    """documented: NumPy's int8 rule (ml_dtypes gives float16)"""
    ca, cb = all_pairs(name)
    a, b = ca.view(mf_type(name)), cb.view(mf_type(name))
    with np.errstate(all="ignore"):
        got = a / b
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, R.int_wrap(ca, name).astype(np.float64)
                                      / R.int_wrap(cb, name).astype(np.float64))
        assert np.sqrt(a).dtype == np.sqrt(np.int8(1)).dtype == np.float16


@pytest.mark.parametrize("name", ["int4", "uint4"])
def test_power_stays_integer(name):
    a = np.array([2, 3], dtype=mf_type(name))
    b = np.array([3, 1], dtype=mf_type(name))
    r = np.power(a, b)
    assert r.dtype == a.dtype
    np.testing.assert_array_equal(r.astype(np.int64), R.int_wrap([8, 3], name))


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_comparisons_and_sorting(name):
    ca, cb = all_pairs(name)
    a, b = ca.view(mf_type(name)), cb.view(mf_type(name))
    va, vb = R.int_wrap(ca, name), R.int_wrap(cb, name)
    for u in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
              "logical_and", "logical_or", "logical_xor"]:
        got = getattr(np, u)(a, b)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, getattr(np, u)(va, vb), err_msg=u)
    rng = np.random.default_rng(0)
    c = rng.integers(0, R.ncodes(name), 5000).astype(np.uint8)
    x = c.view(mf_type(name))
    v = R.int_wrap(c, name)
    np.testing.assert_array_equal(np.sort(x).astype(np.int64), np.sort(v))
    np.testing.assert_array_equal(np.argsort(x, kind="stable"), np.argsort(v, kind="stable"))
    assert int(x.max()) == v.max() and int(x.min()) == v.min()
    assert x.argmax() == v.argmax() and x.argmin() == v.argmin()
    np.testing.assert_array_equal(np.unique(x).astype(np.int64), np.unique(v))


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_sum_and_prod_use_64_bit_integers(name):
    """DELIBERATE DIFFERENCE from ml_dtypes (which wraps in the format)"""
    signed = R.INT_DEFS[name][1]
    acc = np.int64 if signed else np.uint64
    rng = np.random.default_rng(1)
    c = rng.integers(0, R.ncodes(name), (300, 7)).astype(np.uint8)
    x = c.view(mf_type(name))
    v = R.int_wrap(c, name).astype(np.int64)
    for axis in (None, 0, 1):
        s = np.sum(x, axis=axis)
        assert np.asarray(s).dtype == acc
        np.testing.assert_array_equal(np.asarray(s).astype(np.int64), np.sum(v, axis=axis))
        assert x.sum(axis=axis).dtype == acc
    p = np.prod(x[:3], axis=0)
    assert p.dtype == acc
    np.testing.assert_array_equal(p.astype(np.int64), np.prod(v[:3], axis=0))
    assert np.mean(x).dtype == np.float64 and np.mean(x) == v.mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ml_sum = ml_view(c.reshape(-1), name).sum()
    assert str(np.asarray(ml_sum).dtype) == name      # ml_dtypes keeps the format
    # a 1-D sum in the format itself wraps (as ml_dtypes' does)
    x1, v1 = x.reshape(-1), v.reshape(-1)
    assert np.sum(x1, dtype=mf_type(name)).dtype == np.dtype(mf_type(name))
    assert int(np.sum(x1, dtype=mf_type(name))) == int(R.int_wrap([v1.sum()], name)[0])


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_reductions_over_several_axes(name):
    rng = np.random.default_rng(3)
    c = rng.integers(0, R.ncodes(name), (30, 7)).astype(np.uint8)
    x = c.view(mf_type(name))
    v = R.int_wrap(c, name).astype(np.int64)
    assert int(x.max()) == v.max() and int(x.min()) == v.min()
    assert int(np.maximum.reduce(x, axis=None)) == v.max()
    assert int(np.sum(x, dtype=mf_type(name))) == int(R.int_wrap([v.sum()], name)[0])
    assert int(np.bitwise_or.reduce(x, axis=None)) == int(R.int_wrap([np.bitwise_or.reduce(v, axis=None)],
                                                                     name)[0])


FLOAT_PROBE = np.array([0.0, -0.0, 0.4, -0.4, 0.5, 0.99, -0.99, 1.0, -1.0, 1.5, -1.5, 2.5, 3.7, -3.7,
                        7.0, 7.5, 8.0, -8.0, -8.5, 9.9, 15.9, 16.0, 17.2, -17.2, 100.3, -100.3,
                        255.9, 256.0, 32767.5, 65504.0, 1e6, -1e6, 2.0 ** 31 - 1, 2.0 ** 31,
                        -2.0 ** 31, 2.0 ** 40 + 3, 1e30, -1e30, np.inf, -np.inf, np.nan, -np.nan,
                        1e-30, 5e-324])


@pytest.mark.parametrize("name", R.INT_NAMES)
@pytest.mark.parametrize("src", [np.float16, np.float32, np.float64])
def test_cast_from_numpy_floats_like_ml_dtypes(name, src):
    """truncation toward zero, then wrap; NaN, inf and |x| >= 2^31 give 0"""
    rng = np.random.default_rng(2)
    with np.errstate(all="ignore"):
        x = np.concatenate([FLOAT_PROBE, rng.standard_normal(5000) * 40,
                            R.random_f32_bits(20000, 3).view(np.float32).astype(np.float64)]).astype(src)
        got = codes_of(x.astype(mf_type(name)))
        theirs = codes_of(x.astype(R.ml_type(name)))
    xf = x.astype(np.float64)
    ok = np.isfinite(xf) & (np.abs(xf) < 2.0 ** 31)
    # ml_dtypes before 0.7 converts NaN, inf and out-of-range values as the C
    # compiler does (x86: 0 after wrapping; Arm saturates): the same as ours
    # on x86 only; ml_dtypes 0.7 gives 0 for every value outside the format's
    # range; minifloat's rule is the same everywhere (checked below)
    if R.ML_07:
        bits, signed = R.INT_DEFS[name][:2]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        t = np.trunc(np.where(ok, xf, 0))
        fits = ok & (t >= lo) & (t <= hi)
        np.testing.assert_array_equal(got[fits], theirs[fits])
        assert (theirs[~fits] == 0).all() or not R.X86     # (measured on x86 only)
    else:
        np.testing.assert_array_equal(got if R.X86 else got[ok], theirs if R.X86 else theirs[ok])
    want = np.where(ok, np.trunc(np.where(ok, xf, 0)), 0).astype(np.int64) & ((1 << R.INT_DEFS[name][0]) - 1)
    np.testing.assert_array_equal(got, want.astype(np.uint8))


@pytest.mark.parametrize("name", R.INT_NAMES)
@pytest.mark.parametrize("src", [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                 np.uint32, np.int64, np.uint64])
def test_cast_from_numpy_integers_wraps(name, src):
    rng = np.random.default_rng(4)
    info = np.iinfo(src) if src is not np.bool_ else None
    if info is None:
        x = np.array([False, True, True])
    else:
        x = np.concatenate([rng.integers(info.min, info.max, 3000, dtype=src, endpoint=True),
                            np.array([info.min, info.max, 0, 1], dtype=src)])
    got = codes_of(x.astype(mf_type(name)))
    bits = R.INT_DEFS[name][0]
    want = (x.astype(np.uint64) & np.uint64((1 << bits) - 1)).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
    try:
        theirs = codes_of(x.astype(R.ml_type(name)))
    except TypeError:
        return
    np.testing.assert_array_equal(got, theirs)


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_cast_to_numpy_types_is_exact(name):
    x = R.all_codes(name).view(mf_type(name))
    v = values(name)
    for t in [np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64,
              np.complex64]:
        np.testing.assert_array_equal(x.astype(t), v.astype(t))
    np.testing.assert_array_equal(x.astype(np.bool_), v != 0)
    if not R.INT_DEFS[name][1]:
        for t in [np.uint8, np.uint16, np.uint32, np.uint64]:
            np.testing.assert_array_equal(x.astype(t), v.astype(t))
    # and the same as ml_dtypes
    mx = ml_view(R.all_codes(name), name)
    for t in [np.int8, np.int32, np.float32]:
        np.testing.assert_array_equal(x.astype(t), mx.astype(t))


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_scalars(name):
    t = mf_type(name)
    for v in values(name):
        s = t(int(v))
        assert type(s) is t and int(s) == v and hash(s) == hash(int(v))
        assert s == int(v)
    lo, hi = values(name).min(), values(name).max()
    if name == "int1":
        # 1 does not exist in int1; hi - (-1) wraps the same way hi + 1 does
        assert int(t(int(hi)) - t(-1)) == int(R.int_wrap([hi + 1], name)[0])
        assert int(t(int(lo)) + t(-1)) == int(R.int_wrap([lo - 1], name)[0])
        with pytest.raises(OverflowError, match="out of bounds"):
            t(1)
    else:
        assert int(t(int(hi)) + t(1)) == int(R.int_wrap([hi + 1], name)[0])
        assert int(t(int(lo)) - t(1)) == int(R.int_wrap([lo - 1], name)[0])
