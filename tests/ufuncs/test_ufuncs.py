"""Element-wise ufuncs: bfloat16 exhaustively, then every
float format of the family.

Contract (docs/design.md): every ufunc decodes its operands to float32, runs
NumPy's float32 loop and rounds the result once; identical at every kernel
level.

bfloat16: reference NumPy's own float32 ufunc on the decoded values
(bfloat16 -> float32 is exact), rounded with the float32 -> bfloat16
reference (ml_dtypes' rounding, itself checked against torch in
casts/test_casts.py).  Compared bit for bit, NaN codes included unless a test
says otherwise.  Unary ufuncs: all 65536 codes.  Binary: 2**18 random code
pairs plus the cross product of special values, at every kernel level.

Every float format: every unary ufunc on every code and every binary ufunc on
every pair of codes (a random sample for bfloat16) must equal "decode to
float32, NumPy's float32 ufunc, exact single rounding" (tests/_family_refs.py).
nextafter and spacing work on the format's own grid.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R
import _family_refs as FR
from conftest import LEVELS, kernel_level, mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

BF = np.dtype(bf16)
ALL = R.ALL_CODES
ALL_BF = R.as_bf16(ALL)
ALL_F32 = R.decode_f32(ALL)

UNARY = ["negative", "positive", "absolute", "fabs", "sign", "sqrt", "cbrt", "square",
         "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
         "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh", "deg2rad", "rad2deg", "degrees", "radians", "floor", "ceil", "trunc", "rint",
         "conjugate"]
UNARY_BOOL = ["isnan", "isinf", "isfinite", "signbit", "logical_not"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "remainder", "fmod", "floor_divide",
          "copysign", "hypot", "arctan2", "logaddexp", "logaddexp2", "heaviside", "maximum",
          "minimum", "fmax", "fmin"]
BINARY_BOOL = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
               "logical_and", "logical_or", "logical_xor"]

SPECIAL_CODES = np.array([
    0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x00FF, 0x3F80, 0xBF80, 0x3F81,
    0x3F7F, 0x4000, 0xC000, 0x3F00, 0x4040, 0xC040, 0x4049, 0x42C8, 0x7F7F, 0xFF7F, 0x7F00,
    0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x0100, 0x1F80, 0x5F80, 0x3C00, 0x4B00,
], np.uint16)


# IEEE 754 sign operations act on the sign bit alone: NaN payloads are kept
_SIGN_BIT = {"negative": lambda a: a ^ 0x8000, "absolute": lambda a: a & 0x7FFF,
             "fabs": lambda a: a & 0x7FFF, "positive": lambda a: a, "conjugate": lambda a: a}


def _ref_unary(name, codes):
    if name in _SIGN_BIT:
        return _SIGN_BIT[name](np.asarray(codes, np.uint16)).astype(np.uint16)
    with np.errstate(all="ignore"):
        return R.ml_round_f32(getattr(np, name)(R.decode_f32(codes)))


def _ref_binary(name, a, b):
    if name == "copysign":
        return ((np.asarray(a, np.uint16) & 0x7FFF) | (np.asarray(b, np.uint16) & 0x8000)).astype(np.uint16)
    with np.errstate(all="ignore"):
        return R.ml_round_f32(getattr(np, name)(R.decode_f32(a), R.decode_f32(b)))


@pytest.fixture(scope="module")
def pairs():
    rng = np.random.default_rng(123)
    n = 1 << 18
    a = rng.integers(0, 1 << 16, n).astype(np.uint16)
    b = rng.integers(0, 1 << 16, n).astype(np.uint16)
    # near-equal magnitudes (cancellation in add/subtract), and sign flips
    c = rng.integers(0, 0x7F7F, n // 4).astype(np.uint16)
    d = (c.astype(np.int32) + rng.integers(-3, 4, n // 4)).clip(0, 0x7F7F).astype(np.uint16)
    d ^= (rng.integers(0, 2, n // 4) << 15).astype(np.uint16)
    sa, sb = np.meshgrid(SPECIAL_CODES, SPECIAL_CODES)
    a = np.concatenate([a, c, sa.ravel()])
    b = np.concatenate([b, d, sb.ravel()])
    return a, b


# --------------------------------------------------------------------------
# unary, all codes
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", UNARY)
def test_unary_all_codes(name, each_level):
    with np.errstate(all="ignore"):
        got = getattr(np, name)(ALL_BF)
    assert got.dtype == BF
    R.assert_codes_equal(R.bits(got), _ref_unary(name, ALL), nan_equal=False, what=name,
                         inputs=[ALL])


@pytest.mark.parametrize("name", UNARY_BOOL)
def test_unary_bool_all_codes(name, each_level):
    with np.errstate(all="ignore"):
        got = getattr(np, name)(ALL_BF)
        want = getattr(np, name)(ALL_F32)
    assert got.dtype == bool
    assert np.array_equal(got, want)


def _warning_set(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, {str(x.message).split(" encountered")[0] for x in w
                 if issubclass(x.category, RuntimeWarning)}


@pytest.mark.parametrize("name", ["sqrt", "log", "log2", "log10", "log1p", "reciprocal", "exp",
                                  "square", "arccos", "arctanh", "cosh", "sinh", "exp2"])
def test_unary_floating_point_warnings(name):
    # the warnings float32 raises on the same values, plus "overflow" when
    # the float32 result is finite but rounds to bfloat16 infinity
    x = R.finite_codes()
    got, w = _warning_set(lambda: getattr(np, name)(R.as_bf16(x)))
    want, w_ref = _warning_set(lambda: getattr(np, name)(R.decode_f32(x)))
    if (np.isinf(got.astype(np.float32)) & np.isfinite(want)).any():
        w_ref.add("overflow")
    assert w == w_ref


def test_unary_named_values():
    assert float(np.sqrt(bf16(2))) == 1.4140625
    assert float(np.exp(bf16(1))) == 2.71875
    assert float(np.reciprocal(bf16(3))) == 0.333984375
    assert np.signbit(np.negative(bf16(0.0)))
    assert np.sign(np.array([-2, 0, 3, np.nan], bf16)).tolist()[:3] == [-1, 0, 1]
    assert np.isnan(np.sign(bf16(np.nan)))
    assert np.rint(np.array([0.5, 1.5, 2.5, -0.5], bf16)).tolist() == [0, 2, 2, -0.0]
    assert np.deg2rad(bf16(180)) == bf16(np.pi)


@pytest.mark.parametrize("n", list(range(0, 70)) + [127, 128, 129, 1023, 4097])
@pytest.mark.parametrize("step", [1, 2, -1])
def test_unary_lengths_and_strides(n, step, each_level):
    rng = np.random.default_rng(n * 7 + step + 1)
    codes = rng.integers(0, 1 << 16, max(n * abs(step), 1)).astype(np.uint16)[: n * abs(step)]
    x = codes.view(BF)[::step]
    c = codes[::step]
    for name in ("sqrt", "negative", "exp", "absolute", "floor", "square"):
        with np.errstate(all="ignore"):
            got = getattr(np, name)(x)
        R.assert_codes_equal(R.bits(got), _ref_unary(name, c), nan_equal=False,
                             what=f"{name} n={n} step={step}")
    assert np.array_equal(np.isnan(x), np.isnan(R.decode_f32(c)))


# --------------------------------------------------------------------------
# binary, random pairs
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", BINARY)
def test_binary_random_pairs(name, pairs, each_level):
    a, b = pairs
    with np.errstate(all="ignore"):
        got = getattr(np, name)(R.as_bf16(a), R.as_bf16(b))
    assert got.dtype == BF
    # NaN signs: NumPy's float32 loops are CPU-dependent (_refs.X86)
    R.assert_codes_equal(R.bits(got), _ref_binary(name, a, b), nan_equal=not R.X86, what=name,
                         inputs=[a, b])


@pytest.mark.parametrize("name", BINARY_BOOL)
def test_binary_bool_random_pairs(name, pairs, each_level):
    a, b = pairs
    with np.errstate(all="ignore"):
        got = getattr(np, name)(R.as_bf16(a), R.as_bf16(b))
        want = getattr(np, name)(R.decode_f32(a), R.decode_f32(b))
    assert got.dtype == bool
    assert np.array_equal(got, want)


def test_divmod_random_pairs(pairs, each_level):
    a, b = pairs
    with np.errstate(all="ignore"):
        q, r = np.divmod(R.as_bf16(a), R.as_bf16(b))
        fq, fr = np.divmod(R.decode_f32(a), R.decode_f32(b))
    assert q.dtype == BF and r.dtype == BF
    R.assert_codes_equal(R.bits(q), R.ml_round_f32(fq), nan_equal=False, what="divmod q")
    R.assert_codes_equal(R.bits(r), R.ml_round_f32(fr), nan_equal=False, what="divmod r")


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide"])
def test_arithmetic_correctly_rounded(name, pairs, each_level):
    # float32 has 24 >= 2*8+2 bits, so computing in float32 and rounding to
    # bfloat16 equals rounding the exact result once.  Independent reference:
    # the float64 result (exact for +,-,*; itself correctly rounded for /)
    # rounded once to bfloat16 with integer arithmetic.
    a, b = pairs
    fa, fb = R.decode_f64(a), R.decode_f64(b)
    with np.errstate(all="ignore"):
        got = getattr(np, name)(R.as_bf16(a), R.as_bf16(b))
        exact = getattr(np, name)(fa, fb)
    R.assert_codes_equal(R.bits(got), R.bf16_codes_from_f64(exact), nan_equal=True, what=name,
                         inputs=[a, b])


def test_sqrt_correctly_rounded(each_level):
    with np.errstate(all="ignore"):
        got = np.sqrt(ALL_BF)
        exact = np.sqrt(R.decode_f64(ALL))
    R.assert_codes_equal(R.bits(got), R.bf16_codes_from_f64(exact), nan_equal=True)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "minimum"])
def test_binary_vs_torch(name, pairs, each_level):
    # torch's bf16 ops also compute in float32 and round once; NaN codes
    # differ between torch's paths, so only non-NaN results are compared
    torch = R.torch_or_skip()

    a, b = pairs
    ta, tb = R.torch_bf16(a), R.torch_bf16(b)
    top = {"add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "divide": torch.div,
           "maximum": torch.maximum, "minimum": torch.minimum}[name]
    want = R.torch_codes(top(ta, tb))
    with np.errstate(all="ignore"):
        got = R.bits(getattr(np, name)(R.as_bf16(a), R.as_bf16(b)))
    keep = ~R.is_nan_code(want)
    R.assert_codes_equal(got[keep], want[keep], nan_equal=False, what=f"{name} vs torch")
    assert R.is_nan_code(got[~keep]).all()


@pytest.mark.parametrize("name", ["sqrt", "negative", "absolute", "floor", "ceil", "trunc",
                                  "square", "reciprocal"])
def test_unary_vs_torch(name, each_level):
    torch = R.torch_or_skip()

    t = R.torch_bf16(ALL)
    top = {"sqrt": torch.sqrt, "negative": torch.neg, "absolute": torch.abs,
           "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc,
           "square": torch.square, "reciprocal": torch.reciprocal}[name]
    want = R.torch_codes(top(t))
    with np.errstate(all="ignore"):
        got = R.bits(getattr(np, name)(ALL_BF))
    keep = ~R.is_nan_code(want)
    R.assert_codes_equal(got[keep], want[keep], nan_equal=False, what=f"{name} vs torch")


def _quiet(codes):
    return np.where(R.is_nan_code(codes), codes | 0x0040, codes).astype(np.uint16)


def test_fmin_signalling_nan_layout_independent(each_level):
    a = np.array([1.0, 1.0], bf16)
    s = np.array([0x7F81, 0x7F81], np.uint16).view(BF)
    assert np.array_equal(R.bits(np.fmin(a, s))[::2], R.bits(np.fmin(a[::2], s[::2])))


@pytest.mark.parametrize("n", list(range(0, 70)) + [127, 128, 129, 1023, 4097])
@pytest.mark.parametrize("layout", ["contig", "strided", "reversed", "scalar_rhs", "scalar_lhs"])
def test_binary_lengths_and_layouts(n, layout, each_level):
    rng = np.random.default_rng(n * 11 + len(layout))
    # signalling NaNs are made quiet here: NumPy's float32 fmin/fmax treat a
    # signalling NaN differently, and the strided loops quiet NaNs (see
    # test_fmin_signalling_nan_layout_independent)
    a = _quiet(rng.integers(0, 1 << 16, 2 * n).astype(np.uint16))
    b = _quiet(rng.integers(0, 1 << 16, 2 * n).astype(np.uint16))
    if layout == "contig":
        ca, cb = a[:n], b[:n]
        xa, xb = a[:n].view(BF), b[:n].view(BF)
    elif layout == "strided":
        ca, cb = a[::2], b[1::2]
        xa, xb = a.view(BF)[::2], b.view(BF)[1::2]
    elif layout == "reversed":
        ca, cb = a[:n][::-1], b[:n]
        xa, xb = a[:n].view(BF)[::-1], b[:n].view(BF)
    elif layout == "scalar_rhs":
        ca, cb = a[:n], np.full(n, b[0] if n else 0, np.uint16)
        xa, xb = a[:n].view(BF), R.as_bf16(cb[:1])[0] if n else bf16(0)
    else:
        ca, cb = np.full(n, a[0] if n else 0, np.uint16), b[:n]
        xa, xb = R.as_bf16(ca[:1])[0] if n else bf16(0), b[:n].view(BF)
    for name in ("add", "subtract", "multiply", "divide", "maximum", "fmin", "copysign"):
        with np.errstate(all="ignore"):
            got = getattr(np, name)(xa, xb)
        R.assert_codes_equal(R.bits(np.atleast_1d(got)).reshape(-1)[:n] if n else R.bits(got).reshape(-1),
                             _ref_binary(name, ca, cb), nan_equal=not R.X86,
                             what=f"{name} n={n} {layout}")
    with np.errstate(all="ignore"):
        assert np.array_equal(np.less(xa, xb), np.less(R.decode_f32(ca), R.decode_f32(cb)))


def test_binary_broadcasting_2d(each_level):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 1 << 16, (37, 1)).astype(np.uint16)
    b = rng.integers(0, 1 << 16, (1, 53)).astype(np.uint16)
    for name in ("add", "multiply", "arctan2"):
        with np.errstate(all="ignore"):
            got = getattr(np, name)(a.view(BF), b.view(BF))
            want = R.ml_round_f32(getattr(np, name)(R.decode_f32(a), R.decode_f32(b)))
        assert got.shape == (37, 53)
        R.assert_codes_equal(R.bits(got), want, nan_equal=not R.X86, what=name)


def test_out_where_inplace_and_overlap():
    rng = np.random.default_rng(5)
    a = R.as_bf16(rng.integers(0, 0x7F00, 100).astype(np.uint16))
    b = R.as_bf16(rng.integers(0, 0x7F00, 100).astype(np.uint16))
    want = R.bits(a + b).copy()
    out = np.full(100, 7, bf16)
    r = np.add(a, b, out=out)
    assert r is out and np.array_equal(R.bits(out), want)
    # where=: untouched elements keep their value
    mask = np.arange(100) % 3 == 0
    out = np.full(100, 7, bf16)
    np.add(a, b, out=out, where=mask)
    assert np.array_equal(R.bits(out)[mask], want[mask])
    assert (out[~mask] == 7).all()
    # in place
    c = a.copy()
    c += b
    assert np.array_equal(R.bits(c), want)
    c = a.copy()
    c *= 2
    assert np.array_equal(R.bits(c), R.bits(a * bf16(2)))
    # overlapping input and output: same result as on copies
    d = np.concatenate([a, b])
    ref = R.bits(d[:-1] + d[1:]).copy()
    np.add(d[:-1], d[1:], out=d[1:])
    assert np.array_equal(R.bits(d[1:]), ref)
    # float32 out: the bfloat16 result, cast exactly
    o32 = np.empty(100, np.float32)
    with np.errstate(over="ignore"):
        np.multiply(a, b, out=o32)
        assert np.array_equal(o32, (a * b).astype(np.float32))


def test_ufunc_at_and_outer():
    a = np.zeros(4, bf16)
    np.add.at(a, [0, 0, 1, 3, 3, 3], bf16(1.5))
    assert a.tolist() == [3.0, 1.5, 0.0, 4.5]
    x = np.array([1, 2, 3], bf16)
    o = np.multiply.outer(x, x)
    assert o.dtype == BF and o.shape == (3, 3) and o[2, 2] == 9


# --------------------------------------------------------------------------
# nextafter, spacing (on the bfloat16 grid), frexp, ldexp, modf, clip
# --------------------------------------------------------------------------
def test_nextafter_named():
    assert float(np.nextafter(bf16(1), bf16(2))) == 1.0078125
    assert float(np.nextafter(bf16(1), bf16(0))) == 1 - 2 ** -8
    assert float(np.nextafter(bf16(0), bf16(1))) == 2.0 ** -133
    assert float(np.nextafter(bf16(0), bf16(-1))) == -(2.0 ** -133)
    assert np.nextafter(bf16(3.3895313892515355e38), bf16(np.inf)) == np.inf
    assert np.nextafter(bf16(np.inf), bf16(0)) == bf16(3.3895313892515355e38)
    assert np.nextafter(bf16(2), bf16(2)) == 2
    assert np.isnan(np.nextafter(bf16(np.nan), bf16(1)))
    assert np.isnan(np.nextafter(bf16(1), bf16(np.nan)))
    r = np.nextafter(np.array([1.0], bf16), np.array([2.0], bf16))
    assert r.dtype == BF and float(r[0]) == 1.0078125


def test_nextafter_vs_ml_dtypes(pairs, each_level):
    # ml_dtypes defines nextafter on the bfloat16 grid too; its NaN results
    # are always 0x7FC0 while minifloat's follow the input NaN: NaN-equal.
    import ml_dtypes

    a, b = pairs
    with np.errstate(all="ignore"):
        got = R.bits(np.nextafter(R.as_bf16(a), R.as_bf16(b)))
        want = np.nextafter(a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16)).view(np.uint16)
    R.assert_codes_equal(got, want, nan_equal=True, what="nextafter", inputs=[a, b])


def test_nextafter_property_all_codes():
    # every finite code steps to its neighbour on the ordered code line
    x = R.finite_codes()
    up = R.bits(np.nextafter(R.as_bf16(x), bf16(np.inf)))
    down = R.bits(np.nextafter(R.as_bf16(x), bf16(-np.inf)))
    fx = R.decode_f64(x)
    fup, fdown = R.decode_f64(up), R.decode_f64(down)
    assert (fup > fx).all() and (fdown < fx).all()
    # nothing lies strictly between: the step is one code
    assert (R.ulps_apart(up, x)[fx != 0] == 1).all()
    assert (R.ulps_apart(down, x)[fx != 0] == 1).all()


def test_spacing_all_codes(each_level):
    import ml_dtypes

    with np.errstate(all="ignore"):
        got = R.bits(np.spacing(ALL_BF))
        want = np.spacing(ALL.view(ml_dtypes.bfloat16)).view(np.uint16)
    assert np.spacing(ALL_BF).dtype == BF
    R.assert_codes_equal(got, want, nan_equal=True, what="spacing")
    assert float(np.spacing(bf16(1))) == 2.0 ** -7
    assert float(np.spacing(bf16(-1))) == -(2.0 ** -7)
    assert float(np.spacing(bf16(0))) == 2.0 ** -133
    # finite codes: spacing == nextafter(x, +-inf) - x, on the grid
    x = R.finite_codes()
    x = x[(x & 0x7FFF) != 0x7F7F]
    sp = R.decode_f64(R.bits(np.spacing(R.as_bf16(x))))
    step = R.decode_f64(R.bits(np.nextafter(R.as_bf16(x), np.where(
        x & 0x8000, bf16(-np.inf), bf16(np.inf)).astype(bf16)))) - R.decode_f64(x)
    assert np.array_equal(sp, step)


def test_frexp_all_codes(each_level):
    with np.errstate(all="ignore"):
        m, e = np.frexp(ALL_BF)
        fm, fe = np.frexp(ALL_F32)
    assert m.dtype == BF and e.dtype == np.int32
    R.assert_codes_equal(R.bits(m), R.ml_round_f32(fm), nan_equal=False, what="frexp mantissa")
    fin = np.isfinite(ALL_F32)
    assert np.array_equal(e[fin], fe[fin])


@pytest.mark.parametrize("etype", [np.int32, np.int64])
def test_ldexp(etype, each_level):
    rng = np.random.default_rng(6)
    x = rng.integers(0, 1 << 16, 20000).astype(np.uint16)
    n = rng.integers(-300, 300, 20000).astype(etype)
    n[:10] = [0, 1, -1, 2 ** 20, -(2 ** 20), 127, -133, 254, -260, 7]
    with np.errstate(all="ignore"):
        got = np.ldexp(R.as_bf16(x), n)
        want = R.ml_round_f32(np.ldexp(R.decode_f32(x), n.astype(np.int32)
                                      if etype is np.int64 else n))
    assert got.dtype == BF
    R.assert_codes_equal(R.bits(got), want, nan_equal=False, what="ldexp", inputs=[x])
    assert float(np.ldexp(bf16(1.5), 3)) == 12.0
    assert float(np.ldexp(bf16(1), -133)) == 2.0 ** -133


def test_modf_all_codes(each_level):
    with np.errstate(all="ignore"):
        f, i = np.modf(ALL_BF)
        ff, fi = np.modf(ALL_F32)
    assert f.dtype == BF and i.dtype == BF
    R.assert_codes_equal(R.bits(f), R.ml_round_f32(ff), nan_equal=False, what="modf frac")
    R.assert_codes_equal(R.bits(i), R.ml_round_f32(fi), nan_equal=False, what="modf int")


def test_heaviside_and_clip():
    x = np.array([-1, 0, 2, np.nan, -0.0], bf16)
    h = np.heaviside(x, bf16(0.5))
    assert h.dtype == BF
    assert np.array_equal(h, np.array([0, 0.5, 1, np.nan, 0.5], np.float32), equal_nan=True)
    c = np.clip(np.array([0.5, 2.7, 10, np.nan, -3], bf16), 1, 2.7)
    assert c.dtype == BF
    assert np.array_equal(R.bits(c), R.bits(np.array([1, 2.7, 2.7, np.nan, 1], bf16)))
    c = np.clip(np.arange(5).astype(bf16), bf16(1), bf16(3))
    assert c.tolist() == [1, 1, 2, 3, 3]


def test_not_for_floats_raise_typeerror():
    a = np.ones(3, bf16)
    for uf in (np.bitwise_and, np.left_shift, np.gcd, np.lcm):
        with pytest.raises(TypeError):
            uf(a, a)
    with pytest.raises(TypeError):
        np.invert(a)


def test_matvec_vecmat():
    A = np.arange(6).reshape(2, 3).astype(bf16)
    v = np.array([1, 2, 3], bf16)
    assert np.matvec(A, v).tolist() == [8, 26]
    assert np.vecmat(np.array([1, 1], bf16), A).tolist() == [3, 5, 7]


@pytest.mark.skipif(not hasattr(np, "matvec"), reason="NumPy < 2.2 has no np.matvec")
@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("layout", ["C", "F", "step2", "offset"])
def test_matvec_vecmat_are_vecdots(fmt, layout, each_level):
    """np.matvec / np.vecmat: each output is np.vecdot's dot of a row (a
    column) with the vector, rounded once -- contiguous rows read in place,
    strided and unaligned ones gathered: the same bits either way."""
    t = mf_type(fmt)
    rng = np.random.default_rng(5)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        A = (rng.standard_normal((67, 301)) * 4).astype(np.float32).astype(t)
        v = rng.standard_normal(301).astype(np.float32).astype(t)
        w = rng.standard_normal(67).astype(np.float32).astype(t)
    A.reshape(-1)[5] = np.float32(np.nan)
    if layout == "F":
        A = np.asfortranarray(A)
    elif layout == "step2":
        A = np.repeat(A, 2, axis=1)[:, ::2]
        v = np.repeat(v, 2)[::2]
    elif layout == "offset":        # rows starting at odd bytes: not aligned for bfloat16
        raw = np.zeros(A.nbytes + 1, np.uint8)
        src, A = A, np.ndarray(A.shape, A.dtype, raw.data, offset=1)
        A[...] = src
        assert A.itemsize == 1 or not A.flags.aligned
    with np.errstate(all="ignore"):
        got = np.matvec(A, v)
        want = np.vecdot(A, v)
        got_t = np.vecmat(w, A)
        want_t = np.vecdot(A.T, w)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(got_t.view(np.uint8), want_t.view(np.uint8))


@pytest.mark.skipif(not hasattr(np, "matvec"), reason="NumPy < 2.2 has no np.matvec")
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_matvec_threads(nthreads, threads):
    """np.matvec of 2^20 values or more: rows on the threads, the same bits
    as one thread's np.vecdot, and an invalid operation met by any thread
    (inf * 0 in the last row) still warns."""
    threads(nthreads)
    rng = np.random.default_rng(9)
    A = rng.standard_normal((1100, 1000)).astype(np.float32).astype(bf16)
    v = rng.standard_normal(1000).astype(np.float32).astype(bf16)
    A[-1, 7], v[7] = np.inf, 0
    with pytest.warns(RuntimeWarning, match="invalid value"):
        got = np.matvec(A, v)
    with np.errstate(all="ignore"):
        want = np.vecdot(A, v)
    assert np.isnan(got[-1]) and not np.isnan(got[:-1]).any()
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.skipif(not hasattr(np, "vecmat"), reason="NumPy < 2.2 has no np.vecmat")
@pytest.mark.parametrize("nthreads", [1, 2, 3])
@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e5m2"])
def test_vecmat_columns_side_by_side(nthreads, fmt, threads, each_level):
    """np.vecmat of a C-ordered matrix: the columns side by side in the
    kernels' lanes (dot_cols), panels of columns on the threads; each output
    the bits of np.vecdot of its gathered column (a column longer than one
    4096-value block, NaN and inf among them), and flags still warn."""
    threads(nthreads)
    t = mf_type(fmt)
    rng = np.random.default_rng(3)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        A = (rng.standard_normal((4500, 700)) * 2).astype(np.float32).astype(t)
        w = rng.standard_normal(4500).astype(np.float32).astype(t)
    A[17, 5], A[4400, 600], A[3, 699] = np.nan, np.inf, -np.inf
    A[-1, 500], w[-1] = np.inf, 0           # inf * 0 in one column: invalid
    with pytest.warns(RuntimeWarning, match="invalid value"):
        got = np.vecmat(w, A)
    with np.errstate(all="ignore"):
        want = np.vecdot(np.asfortranarray(A).T, w)
        got_view = np.vecmat(w, A[:, 3:])               # a view: columns from the 4th
    assert np.isnan(got[[5, 500]]).all() and np.isinf(got[[600, 699]]).all()
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(got_view.view(np.uint8), want[3:].view(np.uint8))


# --------------------------------------------------------------------------
# warnings from binary ufuncs
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name, a, b, expected", [
    ("divide", 1.0, 0.0, "divide by zero"),
    ("divide", 0.0, 0.0, "invalid value"),
    ("multiply", 3e38, 2.0, "overflow"),
    ("multiply", 3.3e38, 1.03, "overflow"),   # finite in float32, overflows on rounding
    ("add", 3e38, 3e38, "overflow"),
    ("subtract", np.inf, np.inf, "invalid value"),
    ("power", 10.0, 50.0, "overflow"),
    ("floor_divide", 1.0, 0.0, "divide by zero"),
    ("remainder", 1.0, 0.0, "invalid value"),
])
def test_binary_warnings(name, a, b, expected):
    x, y = np.array([a], bf16), np.array([b], bf16)
    with pytest.warns(RuntimeWarning, match=expected):
        getattr(np, name)(x, y)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match=expected):
        getattr(np, name)(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            getattr(np, name)(x, y)


def test_no_spurious_warnings(pairs):
    # finite inputs whose float32 result and bfloat16 rounding are both fine
    # raise nothing
    a = R.as_bf16(np.array([0x3F80, 0x4000, 0x4049, 0xC2C8], np.uint16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in BINARY + BINARY_BOOL:
            getattr(np, name)(a, a[::-1])
        for name in ("exp", "sin", "absolute", "floor", "square", "isnan"):
            getattr(np, name)(a)


# --------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------
codes = st.integers(0, 0xFFFF)


@settings(max_examples=300, deadline=None)
@given(codes, codes)
def test_algebraic_properties(ca, cb):
    a = R.as_bf16(np.array([ca], np.uint16))
    b = R.as_bf16(np.array([cb], np.uint16))
    with np.errstate(all="ignore"):
        assert R.same_codes(R.bits(a + b), R.bits(b + a)).all()
        assert R.same_codes(R.bits(a * b), R.bits(b * a)).all()
        assert R.same_codes(R.bits(a - b), R.bits(-(b - a))).all() or (a == b).all()
        assert R.same_codes(R.bits(a * bf16(1)), R.bits(a)).all() or np.isnan(a).all()
        assert R.same_codes(R.bits(np.maximum(a, b)), R.bits(np.maximum(b, a))).all() or \
            (np.isnan(a) & np.isnan(b)).all()
        # one rounding of the exact result
        exact = R.decode_f64(np.array([ca])) * R.decode_f64(np.array([cb]))
        assert R.same_codes(R.bits(a * b), R.bf16_codes_from_f64(exact)).all()


# ==========================================================================
# Every float format of the family (bfloat16 included, sampled)
# ==========================================================================
KERNEL_OPS = ["add", "subtract", "multiply", "divide"]     # the ops with SIMD kernels


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


def round_ref(name, f32):
    return FR.fmt(name).encode(np.asarray(f32, np.float32).astype(np.float64)).astype(FR.code_dtype(name))


def check_codes(got, want, what, a=None, b=None, name=None):
    diff = got != want
    if name is not None and not FR.X86 and diff.any():
        # which NaN a NaN operand gives is NumPy's float32 loop's choice,
        # CPU-dependent (_refs.X86): off x86, any NaN for a NaN
        table = FR.fmt(name).decode_f64()
        diff &= ~(np.isnan(table[got.astype(np.int64)]) & np.isnan(table[want.astype(np.int64)]))
    bad = np.nonzero(diff)[0]
    if len(bad):
        show = [(None if a is None else float(a[i]), None if b is None else float(b[i]),
                 hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]
        raise AssertionError(f"{what}: {len(bad)} results differ (a, b, got, want): {show}")


def code_pairs(name):
    n = FR.ncodes(name)
    if n <= 256:
        c = FR.all_codes(name)
        return np.repeat(c, n), np.tile(c, n)
    rng = np.random.default_rng(7)
    a = rng.integers(0, n, 1 << 17).astype(FR.code_dtype(name))
    b = rng.integers(0, n, 1 << 17).astype(FR.code_dtype(name))
    # plus every special code against a few values
    specials = np.array([0, FR.fmt(name).sbit, FR.fmt(name).inf_code(False), FR.fmt(name).inf_code(True),
                         FR.fmt(name).nan_code(False), FR.fmt(name).nan_code(True), 0x3F80, 0x0001],
                        FR.code_dtype(name))
    sa, sb = np.repeat(specials, len(specials)), np.tile(specials, len(specials))
    return np.concatenate([a, sa]), np.concatenate([b, sb])


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_unary_ufuncs_every_code(name):
    codes = FR.all_codes(name)
    x = codes.view(mf_type(name))
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        for u in UNARY:
            uf = getattr(np, u)
            got = uf(x)
            assert got.dtype == x.dtype, u
            if u in FR.SIGN_UFUNCS and FR.fmt(name).signed:
                want = FR.sign_ref(name, u, codes)
            else:
                want = round_ref(name, uf(x32))
            check_codes(codes_of(got, name), want, f"{u}({name})", x)
            # strided input and output
            out = np.zeros(2 * len(x), x.dtype)
            uf(np.repeat(x, 2)[::2], out=out[::2])
            check_codes(codes_of(out, name)[::2], codes_of(got, name), f"strided {u}({name})", x)
        for u in UNARY_BOOL:
            uf = getattr(np, u)
            got = uf(x)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, uf(x32), err_msg=u)


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_binary_ufuncs_every_pair(name):
    ca, cb = code_pairs(name)
    a, b = ca.view(mf_type(name)), cb.view(mf_type(name))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    results = {}
    with np.errstate(all="ignore"):
        for u in BINARY:
            uf = getattr(np, u)
            got = codes_of(uf(a, b), name)
            if u in FR.SIGN_UFUNCS and FR.fmt(name).signed:
                want = FR.sign_ref(name, u, ca, cb)
            else:
                want = round_ref(name, uf(a32, b32))
            check_codes(got, want, f"{u}({name})", a32, b32, name=name)
            results[u] = got
        for u in BINARY_BOOL:
            uf = getattr(np, u)
            got = uf(a, b)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, uf(a32, b32), err_msg=u)
        # the SIMD kernels (contiguous add/sub/mul/div, also with odd offsets)
        # are identical to serial at every level
        for level in LEVELS:
            with kernel_level(level):
                for u in KERNEL_OPS:
                    uf = getattr(np, u)
                    check_codes(codes_of(uf(a, b), name), results[u], f"{u}({name}) at {level}", a32, b32)
                    check_codes(codes_of(uf(a[5:-3], b[2:-6]), name),
                                round_ref(name, uf(a32[5:-3], b32[2:-6])),
                                f"{u}({name}) offset operands at {level}", name=name)
                    out = np.empty(len(a) - 1, a.dtype)
                    uf(a[1:], b[:-1], out=out)
                    check_codes(codes_of(out, name), round_ref(name, uf(a32[1:], b32[:-1])),
                                f"{u}({name}, out=) at {level}", name=name)
                    # in place
                    c = a.copy()
                    uf(c, b, out=c)
                    check_codes(codes_of(c, name), results[u], f"{u}({name}) in place at {level}")


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_multi_output_and_mixed_ufuncs(name):
    codes = FR.all_codes(name)
    x = codes.view(mf_type(name))
    x32 = x.astype(np.float32)
    rng = np.random.default_rng(3)
    y = rng.permutation(codes).view(mf_type(name))
    y32 = y.astype(np.float32)
    with np.errstate(all="ignore"):
        q, r = np.divmod(x, y)
        q32, r32 = np.divmod(x32, y32)
        check_codes(codes_of(q, name), round_ref(name, q32), f"divmod[0]({name})")
        check_codes(codes_of(r, name), round_ref(name, r32), f"divmod[1]({name})")
        fr, ip = np.modf(x)
        fr32, ip32 = np.modf(x32)
        check_codes(codes_of(fr, name), round_ref(name, fr32), f"modf[0]({name})")
        check_codes(codes_of(ip, name), round_ref(name, ip32), f"modf[1]({name})")
        m, e = np.frexp(x)
        m32, e32 = np.frexp(x32)
        check_codes(codes_of(m, name), round_ref(name, m32), f"frexp[0]({name})")
        fin = np.isfinite(x32)
        np.testing.assert_array_equal(e[fin], e32[fin])
        for k in (np.int32(-3), np.int64(2), np.arange(len(x), dtype=np.int32) % 7 - 3):
            got = np.ldexp(x, k)
            check_codes(codes_of(got, name), round_ref(name, np.ldexp(x32, k)), f"ldexp({name})")
        lo = np.array(-1.5).astype(mf_type(name))
        hi = np.array(3.0).astype(mf_type(name))
        got = np.clip(x, lo, hi)
        assert got.dtype == x.dtype
        check_codes(codes_of(got, name), round_ref(name, np.clip(x32, np.float32(lo), np.float32(hi))),
                    f"clip({name})")


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_scalar_operations_match_arrays(name):
    t = mf_type(name)
    rng = np.random.default_rng(11)
    ca = rng.integers(0, FR.ncodes(name), 200).astype(FR.code_dtype(name))
    cb = rng.integers(0, FR.ncodes(name), 200).astype(FR.code_dtype(name))
    a, b = ca.view(t), cb.view(t)
    with np.errstate(all="ignore"):
        for op in ("__add__", "__sub__", "__mul__", "__truediv__", "__pow__", "__mod__",
                   "__floordiv__"):
            arr = getattr(a, op)(b)
            for i in range(len(a)):
                s = getattr(a[i], op)(b[i])
                assert type(s) is t, op
                assert codes_of(np.array([s], t), name)[0] == codes_of(arr, name)[i], (op, a[i], b[i])
        for i in range(len(a)):
            assert (a[i] < b[i]) == (a.astype(np.float32)[i] < b.astype(np.float32)[i])
            assert (a[i] == b[i]) == (a.astype(np.float32)[i] == b.astype(np.float32)[i])
            assert type(-a[i]) is t and type(abs(a[i])) is t


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_python_scalar_operands(name):
    """weak Python scalars are rounded into the format first (NEP 50), then
    the operation rounds once"""
    t = mf_type(name)
    x = FR.all_codes(name).view(t)
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        for s in (1, 2, 0.5, 3.0, 0.1, -1.75):
            s_in_fmt = np.float32(np.array(s).astype(t))
            for got, ref in ((x + s, x32 + s_in_fmt), (s * x, s_in_fmt * x32),
                             (x / s, x32 / s_in_fmt), (s - x, s_in_fmt - x32)):
                assert got.dtype == x.dtype
                check_codes(codes_of(got, name), round_ref(name, ref), f"{name} with {s}")


# ------------------------------------------------------- nextafter / spacing

def grid_values(name):
    """sorted distinct values of the format (zero once), with +-inf if any"""
    v = FR.fmt(name).decode_f64()
    v = np.unique(v[~np.isnan(v)])
    return v


def nextafter_ref(name, x, t):
    g = grid_values(name)
    out = np.empty(len(x))
    for i, (xi, ti) in enumerate(zip(x, t)):
        if np.isnan(xi) or np.isnan(ti):
            out[i] = np.nan
        elif xi == ti:
            out[i] = ti
        elif ti > xi:
            j = np.searchsorted(g, xi, side="right")
            out[i] = g[j] if j < len(g) else np.nan
        else:
            j = np.searchsorted(g, xi, side="left") - 1
            out[i] = g[j] if j >= 0 else np.nan
        if out[i] == 0 and xi != ti:
            # stepping onto zero keeps x's sign (formats without -0: +0)
            out[i] = np.copysign(0.0, xi) if FR.fmt(name).has_negzero else 0.0
    return out


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_nextafter_on_the_grid(name):
    f = FR.fmt(name)
    t = mf_type(name)
    codes = FR.all_codes(name)
    if len(codes) > 256:
        codes = codes[::53]
    x = codes.view(t)
    x64 = x.astype(np.float64)
    big = np.inf if f.has_inf else float(f.max)
    targets = [big, -big if f.signed else float(f.smallest_subnormal), 1.0]
    if f.has_zero:
        targets.append(0.0)
    for tgt in targets:
        tt = np.array(tgt).astype(t)
        with np.errstate(all="ignore"):
            got = np.nextafter(x, tt)
            ml = np.nextafter(codes.view(FR.ml_type(name)), np.array(tgt).astype(FR.ml_type(name)))
        assert got.dtype == x.dtype
        g64 = got.astype(np.float64)
        want = nextafter_ref(name, x64, np.full(len(x), float(tt)))
        # the reference has no sign for zero results of x == t; compare values, NaN-ness,
        # and the sign of every non-NaN result
        np.testing.assert_array_equal(g64, want, err_msg=f"nextafter({name}, {tgt})")
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(g64[ok]), np.signbit(want[ok]))
        # ml_dtypes agrees on values (it returns a canonical NaN where we keep x's NaN)
        np.testing.assert_array_equal(g64, ml.astype(np.float64))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_spacing_on_the_grid(name):
    f = FR.fmt(name)
    t = mf_type(name)
    codes = FR.all_codes(name)
    x = codes.view(t)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        got = np.spacing(x).astype(np.float64)
        ml = np.spacing(codes.view(FR.ml_type(name))).astype(np.float64)
    np.testing.assert_array_equal(got, ml)
    g = grid_values(name)
    fin = np.isfinite(x64) & (np.abs(x64) < float(f.max))
    for xi, si in zip(x64[fin], got[fin]):
        if xi == 0:
            # NumPy: spacing(+-0) = +-smallest subnormal (fnuz: zero is unsigned)
            assert si == np.copysign(float(f.smallest_subnormal), xi), (name, xi, si)
        elif xi > 0 or not f.signed:
            j = np.searchsorted(g, xi, side="right")
            assert si == g[j] - xi, (name, xi, si)
        else:
            j = np.searchsorted(g, xi, side="left") - 1
            assert si == g[j] - xi, (name, xi, si)
    if f.has_zero:
        assert np.spacing(np.array(0.0).astype(t)) == float(f.smallest_subnormal)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
def test_scalar_and_strided_operands_decode_like_contiguous(name, each_level):
    """An operand of stride 0 (a scalar) is decoded once and repeated, a
    strided one gathered for the level's decode: every code against the same
    ufunc on contiguous copies, bit for bit (NaN payloads and both zeros)."""
    t = mf_type(name)
    codes = FR.all_codes(name)
    x = np.resize(codes, 3 * 4099).view(t)
    specials = [0, len(codes) // 2, len(codes) - 1, 1, len(codes) // 2 + 1]
    with np.errstate(all="ignore"):
        for c in specials:
            s = codes[c:c + 1].view(t)[0]
            full = np.full(x.shape, s, t)
            for ufunc in (np.greater_equal, np.arctan2, np.copysign, np.maximum, np.hypot):
                for got, want in ((ufunc(x, s), ufunc(x, full)), (ufunc(s, x), ufunc(full, x)),
                                  (ufunc(x[::3], s), ufunc(x[::3].copy(), full[::3])),
                                  (ufunc(x[-2::-2], x[1::2]),
                                   ufunc(x[-2::-2].copy(), x[1::2].copy()))):
                    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                                  np.ascontiguousarray(want).view(np.uint8))
