"""Casts: to and from bfloat16, between any two members of
the family, with ml_dtypes arrays, and cast safety.

bfloat16, exhaustively: float32 -> bfloat16 against torch (every non-NaN
float32 input, bit for bit), ml_dtypes (NaN) and an integer-arithmetic
rounding of the float32/float64 bits (tests/_refs.py); wider sources
(float64, longdouble, int64, Python ints) against exact rational rounding.
bfloat16 -> anything against NumPy's own float32 cast of the decoded value,
which is exact.

Every format (bfloat16 included as one member): cross-format casts must
round once, directly: decoding the source to float64 (exact) and rounding
that once, with the C oracle (_core._oracle_encode) and with the independent
reference of tests/_family_refs.py.
"""
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minifloat
from minifloat import bfloat16 as bf16
from minifloat import _core

import _refs as R
import _family_refs as FR
from conftest import mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs)

BF = np.dtype(bf16)
ALL = R.ALL_CODES
ALL_BF = R.as_bf16(ALL)
ALL_F32 = R.decode_f32(ALL)

INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
             np.longlong, np.ulonglong, np.intp, np.uintp]


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, sorted({(x.category, str(x.message)) for x in w}, key=str)


# --------------------------------------------------------------------------
# bfloat16 -> float32 / float64 / ...: exact
# --------------------------------------------------------------------------
def test_to_float32_all_codes_exact(each_level):
    got = ALL_BF.astype(np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), ALL.astype(np.uint32) << 16)


@pytest.mark.parametrize("step", [2, -1, 3])
def test_to_float32_strided_non_nan_exact(each_level, step):
    src = np.concatenate([ALL, ALL, ALL])[::step]
    got = R.as_bf16(np.ascontiguousarray(src))   # contiguous copy as reference shape
    strided = np.concatenate([ALL, ALL, ALL]).view(BF)[::step]
    out = strided.astype(np.float32).view(np.uint32)
    want = got.astype(np.float32).view(np.uint32)
    keep = ~R.is_nan_code(src)
    assert np.array_equal(out[keep], want[keep])
    assert np.isnan(strided.astype(np.float32)[~keep]).all()


def test_to_float32_strided_keeps_nan_payload(each_level):
    one = np.array([0x7F81], np.uint16).view(BF).astype(np.float32).view(np.uint32)
    src = np.concatenate([ALL, ALL])
    out = src.view(BF)[::2].astype(np.float32).view(np.uint32)
    assert np.array_equal(out, src[::2].astype(np.uint32) << 16) and one[0] == 0x7F810000


@pytest.mark.parametrize("dt", [np.float64, np.longdouble, np.complex64, np.complex128,
                                np.clongdouble])
def test_to_wider_float_all_codes_value_exact(dt, each_level):
    got = ALL_BF.astype(dt)
    assert got.dtype == dt
    with np.errstate(invalid="ignore"):   # signalling NaNs
        want = ALL_F32.astype(dt)
    assert np.array_equal(got, want, equal_nan=True)
    # the sign of zeros and NaNs survives
    assert np.array_equal(np.signbit(got.real), np.signbit(ALL_F32))
    if np.dtype(dt).kind == "c":
        assert not got.imag.any()


def test_to_float16_all_codes(each_level):
    # bfloat16 -> float32 is exact, so NumPy's float32 -> float16 of the
    # decoded value is the one correct rounding (contiguous arrays go through
    # the level's float16 encode: VCVTPS2PH / FCVTN with NaNs made canonical)
    got, w = _warnings_of(lambda: ALL_BF.astype(np.float16))
    want, w_ref = _warnings_of(lambda: ALL_F32.astype(np.float16))
    assert got.dtype == np.float16
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))
    assert np.array_equal(np.signbit(got), np.signbit(want))
    if not R.X86:
        # NumPy's float32 -> float16 on Arm is the FCVT instruction, which
        # raises "invalid" for signalling NaNs; on x86 (and in minifloat,
        # everywhere) a NaN raises nothing
        w_ref = [x for x in w_ref if "invalid" not in str(x[1])]
    assert w == w_ref


def test_to_bool_all_codes():
    got = ALL_BF.astype(bool)
    with np.errstate(invalid="ignore"):
        want = ALL_F32.astype(bool)
    assert np.array_equal(got, want)
    assert not got[0] and not got[0x8000] and got[0x7FC0] and got[1]


@pytest.mark.parametrize("name", FR.FLOAT_NAMES + FR.INT_NAMES)
def test_to_bool_and_any_all_every_format(name):
    """value != 0 (NaN True, both zeros False) for every code, contiguous and
    strided (the tables and the bfloat16 mask, casts.c), and np.any/np.all
    (a cast to bool, then NumPy's reduction) as on the float32 values."""
    t = mf_type(name)
    codes = FR.all_codes(name)
    a = codes.view(t)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float32) != 0
    assert np.array_equal(a.astype(bool), want)
    wide = np.repeat(codes, 3).view(t)[1::3]          # a stride of 3 elements
    assert np.array_equal(wide.astype(bool), want)
    out = np.zeros(2 * codes.size, bool)[::2]         # a strided output
    np.copyto(out, a, casting="unsafe")
    assert np.array_equal(out, want)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.choice(codes, (8, 37)).view(t)
        with np.errstate(invalid="ignore"):      # float32's signalling NaNs
            f = x.astype(np.float32)
            for ax in (None, 0, 1):
                assert np.array_equal(np.any(x, axis=ax), np.any(f, axis=ax))
                assert np.array_equal(np.all(x, axis=ax), np.all(f, axis=ax))
    zero = codes[(a.astype(np.float32) == 0)]
    if zero.size:
        z = np.full(5000, zero[-1], codes.dtype).view(t)     # -0 where there is one
        assert not z.any() and not z.all()
        z[4321] = codes[1]
        assert z.any() and not z.all()


@pytest.mark.parametrize("it", INT_TYPES, ids=lambda t: np.dtype(t).name)
def test_to_int_in_range_all_codes(it, each_level):
    info = np.iinfo(it)
    vals = R.decode_f64(ALL)
    ok = np.isfinite(vals) & (vals > info.min - 1) & (vals < info.max + 1)
    got = ALL_BF[ok].astype(it)
    want = ALL_F32[ok].astype(it)
    assert got.dtype == it
    assert np.array_equal(got, want)
    assert np.array_equal(got, np.trunc(vals[ok]).astype(it))


@pytest.mark.parametrize("it", INT_TYPES, ids=lambda t: np.dtype(t).name)
def test_to_int_out_of_range_finite_warns_like_float32(it):
    # out-of-range finite values: the same warning as NumPy's float32 cast of
    # the same values.  The values are undefined behaviour in C and NumPy's
    # own float32 results differ between its SIMD and scalar paths (e.g.
    # 4.33e9 -> uint32 gives 0 in a vector and 33554432 alone), so they are
    # not compared.
    info = np.iinfo(it)
    vals = R.decode_f64(ALL)
    bad = np.isfinite(vals) & ~((vals > info.min - 1) & (vals < info.max + 1))
    if not bad.any():
        pytest.skip("every finite bfloat16 fits")
    got, w = _warnings_of(lambda: ALL_BF[bad].astype(it))
    want, w_ref = _warnings_of(lambda: ALL_F32[bad].astype(it))
    assert got.dtype == want.dtype
    assert w == w_ref


@pytest.mark.parametrize("it", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64,
                                np.uint64], ids=lambda t: np.dtype(t).name)
def test_to_int_nan_inf_like_float32(it):
    src = np.array([np.nan, np.inf, -np.inf, -np.nan], np.float32)
    got, w = _warnings_of(lambda: src.astype(bf16).astype(it))
    want, w_ref = _warnings_of(lambda: src.astype(it))
    assert np.array_equal(got, want), (got, want)
    assert w == w_ref


# --------------------------------------------------------------------------
# float32 -> bfloat16
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def random_f32():
    rng = np.random.default_rng(20240602)
    x = rng.integers(0, 1 << 32, 1 << 22, dtype=np.uint64).astype(np.uint32).view(np.float32)
    torch_ref = R.torch_round_f32(x) if R.have_torch() else None
    ml_ref = R.ml_round_f32(x)
    return x, torch_ref, ml_ref


def _boundary_f32():
    """Every exponent and sign, with the low 16 bits at and around the
    rounding boundary and the top mantissa bits where a carry ripples."""
    sign = np.arange(2, dtype=np.uint32)[:, None, None, None]
    exp = np.arange(256, dtype=np.uint32)[None, :, None, None]
    hi = np.array([0, 1, 2, 0x3F, 0x40, 0x7E, 0x7F], np.uint32)[None, None, :, None]
    lo = np.array([0, 1, 2, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0x8002, 0xFFFE, 0xFFFF],
                  np.uint32)[None, None, None, :]
    b = (sign << 31) | (exp << 23) | (hi << 16) | lo
    return b.ravel().view(np.float32)


def test_reference_agrees_with_peers(random_f32):
    # the peers agree with each other on every non-NaN input, and the
    # integer reference agrees with both (on a 2**18 subset, for time)
    x, torch_ref, ml_ref = random_f32
    nan = np.isnan(x)
    sub = slice(0, 1 << 18)
    ref = R.bf16_codes_from_f32(x[sub])
    assert np.array_equal(ref, ml_ref[sub])          # NaN codes included
    if torch_ref is None:
        pytest.skip("torch not installed")
    assert np.array_equal(ml_ref[~nan], torch_ref[~nan])
    assert np.array_equal(ref[~nan[sub]], torch_ref[sub][~nan[sub]])
    b = _boundary_f32()
    assert np.array_equal(R.bf16_codes_from_f32(b), R.ml_round_f32(b))


def test_from_float32_random_bits_vs_torch(random_f32, each_level):
    x, torch_ref, ml_ref = random_f32
    with np.errstate(over="ignore"):
        got = x.astype(bf16).view(np.uint16)
    nan = np.isnan(x)
    # torch and ml_dtypes agree on every non-NaN input (test_reference_agrees_with_peers)
    peer = torch_ref if torch_ref is not None else ml_ref
    R.assert_codes_equal(got[~nan], peer[~nan], nan_equal=False, what="f32->bf16 vs torch",
                         inputs=[x[~nan]])
    # NaN: ml_dtypes' convention, sign kept, quiet 0x7FC0 / 0xFFC0.
    # (torch's vectorised .to() gives 0xFFFF for every NaN; minifloat follows ml_dtypes.)
    R.assert_codes_equal(got[nan], ml_ref[nan], nan_equal=False, what="f32 NaN -> bf16")


def test_from_float32_boundary_classes(each_level):
    b = _boundary_f32()
    with np.errstate(over="ignore"):
        got = b.astype(bf16).view(np.uint16)
    want = R.ml_round_f32(b)
    nan = np.isnan(b)
    R.assert_codes_equal(got, want, nan_equal=False, what="boundary", inputs=[b])
    if R.have_torch():
        R.assert_codes_equal(got[~nan], R.torch_round_f32(b)[~nan], nan_equal=False,
                             what="boundary vs torch")


@pytest.mark.parametrize("n", list(range(0, 40)) + [63, 64, 65, 127, 1000, 4097])
def test_from_float32_every_length(n, each_level):
    # exercises the vector loops' tails
    rng = np.random.default_rng(n)
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        got = x.astype(bf16).view(np.uint16)
    R.assert_codes_equal(got, R.bf16_codes_from_f32(x), nan_equal=False)


@pytest.mark.parametrize("layout", ["strided_src", "negative", "strided_dst", "2d_transposed",
                                    "unaligned_dst"])
def test_from_float32_non_contiguous(layout, each_level):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1 << 32, 3001, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        if layout == "strided_src":
            src = x[::3]
            got = src.astype(bf16)
        elif layout == "negative":
            src = x[::-1]
            got = src.astype(bf16)
        elif layout == "strided_dst":
            src = x
            dst = np.zeros(2 * x.size, bf16)
            dst[::2] = x
            got = dst[::2]
        elif layout == "2d_transposed":
            src = x[:3000].reshape(60, 50).T
            got = src.astype(bf16)
        else:
            src = x
            buf = np.zeros(2 * x.size + 1, np.uint8)
            dst = buf[1:].view(np.uint8)[: 2 * x.size]
            got = np.ndarray(x.shape, BF, buffer=dst)
            got[...] = x
            assert not got.flags.aligned or True
    R.assert_codes_equal(R.bits(np.ascontiguousarray(got)),
                         R.bf16_codes_from_f32(np.ascontiguousarray(src)), nan_equal=False)


def test_from_float32_named_values():
    cases = [
        (0.0, 0x0000), (-0.0, 0x8000), (1.0, 0x3F80), (-2.0, 0xC000),
        (float(np.float32(1 + 2 ** -8)), 0x3F80),              # tie -> even (down)
        (float(np.float32(1 + 3 * 2 ** -8)), 0x3F82),          # tie -> even (up)
        (float(np.float32(1 + 2 ** -8 + 2 ** -23)), 0x3F81),   # just above the tie
        (3.3895313892515355e38, 0x7F7F),                       # max finite
        (float(np.uint32(0x7F7F8000).view(np.float32)), 0x7F80),  # tie above max -> inf
        (float(np.uint32(0x7F7F7FFF).view(np.float32)), 0x7F7F),  # just below it
        (float(np.finfo(np.float32).max), 0x7F80),
        (float(np.float32(2 ** -133)), 0x0001),                # smallest subnormal
        (float(np.float32(2 ** -134)), 0x0000),                # half of it: tie -> 0
        (float(np.float32(3 * 2 ** -134)), 0x0002),            # 1.5 units: tie -> 2
        (1e-45, 0x0000),
        (float(np.float32(2 ** -126)), 0x0080),                # smallest normal
        (float(np.float32(2 ** -126 - 2 ** -134)), 0x0080),    # rounds up into normal
    ]
    src = np.array([v for v, _ in cases], np.float32)
    with np.errstate(over="ignore"):
        got = src.astype(bf16).view(np.uint16)
    assert [hex(c) for c in got] == [hex(c) for _, c in cases]


def test_from_float32_nan_codes():
    nans = np.array([0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFFC00000, 0xFF800001,
                     0xFFFFFFFF, 0x7F810000, 0x7FC12345], np.uint32).view(np.float32)
    got = nans.astype(bf16).view(np.uint16)
    assert [hex(c) for c in got] == [hex(c) for c in R.ml_round_f32(nans)]
    assert set(got[:4]) == {0x7FC0} and set(got[4:7]) == {0xFFC0}


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_from_float32_property(b):
    x = np.array([b], np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        got = x.astype(bf16).view(np.uint16)[0]
        assert got == R.ml_round_f32(x)[0]
        # round trip: bf16 -> f32 -> bf16 is the identity on codes
        assert R.bits(R.as_bf16(np.array([got])).astype(np.float32).astype(bf16))[0] == got


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False), st.floats(width=32, allow_nan=False))
def test_from_float32_is_monotonic(x, y):
    a = np.array(sorted([x, y]), np.float32)
    with np.errstate(over="ignore"):
        b = a.astype(bf16).astype(np.float32)
    assert b[0] <= b[1]


# --------------------------------------------------------------------------
# float64 (and wider) -> bfloat16: one rounding
# --------------------------------------------------------------------------
def _tricky_f64(rng, n):
    """float64 values near bfloat16 midpoints: the inputs where rounding
    through float32 first goes wrong."""
    codes = rng.integers(0, 0x7F7F, n).astype(np.uint16)
    lo = R.decode_f64(codes)
    hi = R.decode_f64(codes + 1)
    mid = (lo + hi) / 2                               # exact in float64
    k = rng.integers(-4, 5, n)
    scale = np.abs(mid) * 2.0 ** rng.integers(-52, -24, n)
    x = mid + k * scale
    x = np.where(rng.random(n) < 0.5, -x, x)
    return x


@pytest.fixture(scope="module")
def random_f64():
    rng = np.random.default_rng(77)
    n = 1 << 18
    parts = [
        rng.integers(0, 1 << 64, n, dtype=np.uint64).view(np.float64),          # any bits
        rng.standard_normal(n) * 10.0 ** rng.integers(-45, 40, n),              # any magnitude
        _tricky_f64(rng, n),
        (rng.random(n) * 2 ** -126) * np.where(rng.random(n) < 0.5, -1, 1),     # subnormal range
    ]
    x = np.concatenate(parts)
    return x, R.bf16_codes_from_f64(x)


def test_f64_reference_against_fractions(random_f64):
    # the vectorised integer reference against exact rational rounding
    x, ref = random_f64
    idx = np.random.default_rng(1).choice(x.size, 3000, replace=False)
    for i in idx:
        if np.isfinite(x[i]):
            assert R.bf16_code_from_fraction(Fraction(float(x[i]))) == ref[i], x[i]


def test_from_float64_once_random(random_f64, each_level):
    x, ref = random_f64
    with np.errstate(over="ignore"):
        got = x.astype(bf16).view(np.uint16)
    R.assert_codes_equal(got, ref, nan_equal=False, what="f64->bf16", inputs=[x])


def test_from_float64_named_values():
    assert np.array([1 + 2 ** -8 + 2 ** -30]).astype(bf16).astype(float)[0] == 1.0078125
    assert np.array([1 + 2 ** -8 - 2 ** -30]).astype(bf16).astype(float)[0] == 1.0
    assert np.array([1 + 2 ** -8]).astype(bf16).astype(float)[0] == 1.0
    # float32 would round these to a bfloat16 tie first
    x = np.array([-(1 + 2 ** -8 + 2 ** -40), 3 * 2 ** -134 + 2 ** -160, 2 ** -134 + 2 ** -170])
    assert np.array_equal(x.astype(bf16).view(np.uint16), [0xBF81, 0x0002, 0x0001])
    big = np.array([3.3961514e38 * (1 - 2 ** -40), 3.3961514e38, 1e300, -1e300, 2.0 ** 128])
    with np.errstate(over="ignore"):
        got = big.astype(bf16).view(np.uint16)
    want = R.bf16_codes_from_f64(big)
    assert np.array_equal(got, want)
    nan = np.array([np.nan, -np.nan, np.float64("nan") * 0]).astype(bf16).view(np.uint16)
    assert nan[0] == 0x7FC0 and nan[1] == 0xFFC0


def test_from_float64_non_contiguous(each_level):
    rng = np.random.default_rng(8)
    x = _tricky_f64(rng, 5001)
    for src in (x[::3], x[::-1], x[:5000].reshape(50, 100).T):
        got = src.astype(bf16)
        R.assert_codes_equal(R.bits(np.ascontiguousarray(got)),
                             R.bf16_codes_from_f64(np.ascontiguousarray(src)), nan_equal=False)


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_from_float64_every_format_once(name, each_level):
    """float64 -> every float format: blocks through float32 rounded to odd
    and the level's encode (a contiguous source threaded, a strided one
    gathered), against the codec's direct rounding of each double: every
    value of the format, the midpoints between neighbours and the doubles
    either side of them, values past the range, zeros, infinities, NaN."""
    t = mf_type(name)
    with np.errstate(invalid="ignore"):
        v = np.unique(FR.all_codes(name).view(t).astype(np.float64))
    v = v[np.isfinite(v)]
    mids = (v[1:] + v[:-1]) / 2
    x = np.concatenate([
        v, -v, mids, -mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
        np.nextafter(-mids, np.inf), v * (1 + 2.0 ** -30), v * (1 - 2.0 ** -30), v * 2, v / 2,
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e300, -1e300, 5e-324, -5e-324,
         2.0 ** -149, 2.0 ** -150, 2.0 ** -150 * (1 + 2.0 ** -52), 2.0 ** -126,
         2.0 ** -126 * (1 - 2.0 ** -53), 2.0 ** 128, 2.0 ** 128 * (1 - 2.0 ** -53), 3.4e38,
         -3.4e38, 2.0 ** -134, 2.0 ** -134 * (1 + 2.0 ** -52)],
    ])
    x = np.resize(x, max(x.size, (1 << 16) + 4099))   # past the threads' threshold (512 KiB)
    want = _core._oracle_encode(name, x).astype(FR.code_dtype(name))
    with np.errstate(over="ignore", invalid="ignore"):
        got = x.astype(t)
        strided = x[::3].astype(t)
    np.testing.assert_array_equal(codes_of(got, name), want)
    np.testing.assert_array_equal(codes_of(strided, name), want[::3])
    # the overflow warning exactly where the element loop (a strided
    # destination) gives it
    fits = x[np.abs(np.nan_to_num(x, posinf=0, neginf=0)) <= np.abs(v).max()][:(1 << 16) + 4099]
    past = np.array([1e300, -1e300, 2.0 ** 128, 3.4e38])
    for src in (fits, past, np.array([np.inf, -np.inf, np.nan])):
        _, w = _warnings_of(lambda: src.astype(t))
        out = np.empty(2 * src.size, t)[::2]
        _, w_ref = _warnings_of(lambda: out.__setitem__(Ellipsis, src))
        assert w == w_ref, (src[:4], w, w_ref)


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_to_float64_every_format_like_float32(name, each_level):
    """every format -> float64 (contiguous: the decode kernel on threads) is
    the float32 value widened, bit for bit (NaN payloads as float32's
    widening gives them), and warns as the element loop does"""
    t = mf_type(name)
    a = np.resize(FR.all_codes(name), (1 << 16) + 4099).view(t)   # past the threshold
    got, w = _warnings_of(lambda: a.astype(np.float64))
    out = np.zeros(2 * a.size)
    _, w_ref = _warnings_of(lambda: out.__setitem__(slice(None, None, 2), a))
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(got.view(np.uint64), out[::2].view(np.uint64))
    assert w == w_ref


@pytest.mark.parametrize("it", [np.int8, np.uint8, np.int32, np.int64, np.uint64],
                         ids=lambda t: np.dtype(t).name)
def test_to_int_in_blocks_like_float32(it, each_level):
    # several blocks of NumPy's float32 -> integer cast, contiguous and strided
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(40_001) * 60).astype(np.float32).astype(bf16)   # 2^14 a block
    x32 = x.astype(np.float32)
    info = np.iinfo(it)
    x[(x32 <= info.min - 1) | (x32 >= info.max + 1)] = 0
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(x.astype(it), x32.astype(it))
    np.testing.assert_array_equal(x[::-3].astype(it), x32[::-3].astype(it))


def test_from_longdouble_once():
    rng = np.random.default_rng(9)
    n = 2000
    ld = (np.longdouble(1) + np.longdouble(2) ** -8
          + rng.integers(-5, 6, n).astype(np.longdouble) * np.longdouble(2) ** -62)
    ld = ld * np.longdouble(2) ** rng.integers(-140, 127, n)
    with np.errstate(over="ignore"):
        got = ld.astype(bf16).view(np.uint16)
    want = [R.bf16_code_from_fraction(Fraction(*v.as_integer_ratio())) for v in ld]
    assert np.array_equal(got, np.array(want, np.uint16))


@pytest.mark.parametrize("ct", [np.complex64, np.complex128, np.clongdouble])
def test_from_complex_warns_and_takes_real_part(ct):
    src = np.array([1 + 2 ** -8 + 2 ** -30 + 3j, -2.5 - 1j], ct)
    got, w = _warnings_of(lambda: src.astype(bf16))
    _, w_ref = _warnings_of(lambda: src.astype(np.float32))
    assert w == w_ref and any(c is np.exceptions.ComplexWarning for c, _ in w)
    want = R.bf16_codes_from_f64(src.real.astype(np.float64))
    if ct is np.clongdouble:
        want = np.array([R.bf16_code_from_fraction(Fraction(*v.as_integer_ratio()))
                         for v in src.real], np.uint16)
    assert np.array_equal(got.view(np.uint16), want)


def test_from_float16_all_codes(each_level):
    h = ALL.view(np.float16)
    got = h.astype(bf16).view(np.uint16)
    R.assert_codes_equal(got, R.bf16_codes_from_f64(h.astype(np.float64)), nan_equal=False)


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_float16_both_ways_contiguous_as_element_wise(name, each_level, threads):
    """float16 <-> every float format: contiguous arrays (the level's float16
    decode/encode kernels, on threads when large) give the codes and the
    warnings of the element-wise route that strided arrays take, for every
    float16 code and every code of the format, at one and two threads."""
    t = mf_type(name)
    h = np.tile(ALL.view(np.float16), 5)            # 327680 values: threaded
    c = np.tile(FR.all_codes(name), 40000 // len(FR.all_codes(name)) + 1)
    x = c.view(t)
    for n in (1, 2):
        threads(n)
        for src, dt in ((h, t), (x, np.float16)):
            for errs in ("ignore", "warn"):
                with np.errstate(all=errs):
                    got, w = _warnings_of(lambda: src.astype(dt))
                    spread = np.repeat(src, 2)[::2]
                    want, w_ref = _warnings_of(lambda: spread.astype(dt))
                assert not np.shares_memory(spread, src)
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (name, n, dt)
                assert [str(m[1]) for m in w] == [str(m[1]) for m in w_ref]
    # an odd length and an offset start: the kernels' tails
    for lo, hi in ((1, 1000), (3, 40), (0, 7)):
        got = h[lo:hi].astype(t)
        assert np.array_equal(got.view(np.uint8), h[lo:hi].astype(np.float32).astype(t).view(np.uint8))


# --------------------------------------------------------------------------
# integers and bool -> bfloat16
# --------------------------------------------------------------------------
def test_from_bool():
    got = np.array([True, False]).astype(bf16)
    assert np.array_equal(got.view(np.uint16), [0x3F80, 0x0000])


@pytest.mark.parametrize("it", [np.int8, np.uint8, np.int16, np.uint16])
def test_from_small_int_every_value(it, each_level):
    info = np.iinfo(it)
    v = np.arange(info.min, info.max + 1).astype(it)
    got = v.astype(bf16).view(np.uint16)
    R.assert_codes_equal(got, R.bf16_codes_from_f64(v.astype(np.float64)), nan_equal=False)


@pytest.mark.parametrize("it", [np.int32, np.uint32, np.int64, np.uint64])
def test_from_wide_int_rounds_once(it, each_level):
    info = np.iinfo(it)
    rng = np.random.default_rng(int(np.dtype(it).num))
    bitsz = np.dtype(it).itemsize * 8
    mant = rng.integers(0, 1 << 20, 3000).astype(object)
    shift = rng.integers(0, bitsz - 20, 3000)
    off = rng.integers(-3, 4, 3000)
    vals = [int(m) << int(s) for m, s in zip(mant, shift)]
    vals = [v + int(o) for v, o in zip(vals, off)]
    if info.min < 0:
        vals += [-v for v in vals[::2]]
    # just past bfloat16 midpoints (where a detour through a narrower float errs)
    vals += [(257 << (bitsz - 12)) + 1, (257 << (bitsz - 12)) - 1, int(info.max), int(info.min)]
    vals = [v for v in vals if info.min <= v <= info.max]
    src = np.array(vals, dtype=it)
    got = src.astype(bf16).view(np.uint16)
    want = np.array([R.bf16_code_from_fraction(int(v)) for v in src], np.uint16)
    R.assert_codes_equal(got, want, nan_equal=False, what=np.dtype(it).name)


# --------------------------------------------------------------------------
# strings and Python objects
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["U", "S"])
def test_from_strings(kind):
    texts = ["1.5", "0.1", "-3.4e38", "3.3895e38", "1e-45", "9.2e-41", "nan", "-inf", "  7 ",
             "1.00390625", "1.00390625000001", "1.01171875", "-0", "1e5"]
    src = np.array(texts, dtype=kind)
    got = src.astype(bf16).view(np.uint16)
    want = R.bf16_codes_from_f64(np.array([float(t) for t in texts]))
    R.assert_codes_equal(got, want, nan_equal=False)


@pytest.mark.parametrize("kind", ["U", "S"])
def test_bad_string_raises_like_float32(kind):
    src = np.array(["1.5", "abc"], dtype=kind)
    with pytest.raises(ValueError):
        src.astype(np.float32)
    with pytest.raises(ValueError):
        src.astype(bf16)
    with pytest.raises(ValueError):
        np.array([""], dtype=kind).astype(bf16)


def test_to_string_every_code_round_trips():
    s = ALL_BF.astype("U")
    assert s.dtype.kind == "U"
    for c in range(0, 1 << 16, 3):
        assert s[c] == str(ALL_BF[c])
    back = s.astype(bf16).view(np.uint16)
    assert R.same_codes(back, ALL).all()
    b = ALL_BF[::101].astype("S")
    assert b.dtype.kind == "S"
    assert np.array_equal(b.astype(bf16).view(np.uint16), ALL[::101]) or \
        R.same_codes(b.astype(bf16).view(np.uint16), ALL[::101]).all()


def test_from_python_objects():
    src = np.array([1.5, 2, True, 1 + 2 ** -8 + 2 ** -30, 2 ** 70 + 1, np.float32(0.1), bf16(3)],
                   dtype=object)
    got = src.astype(bf16).view(np.uint16)
    want = [0x3FC0, 0x4000, 0x3F80, 0x3F81, R.bf16_code_from_fraction(2 ** 70),
            int(R.bf16_codes_from_f32(np.float32(0.1))), 0x4040]
    assert list(got) == want
    with pytest.raises(TypeError):
        np.array([1.5, None], dtype=object).astype(bf16)


def test_to_python_objects_values():
    obj = ALL_BF[::257].astype(object)
    assert obj.dtype == object
    got = np.array([float(v) for v in obj])
    assert np.array_equal(got, R.decode_f64(ALL[::257]), equal_nan=True)


def test_to_python_objects_are_floats():
    obj = np.array([1.5, 2.0], bf16).astype(object)
    assert all(type(v) is float for v in obj)


# --------------------------------------------------------------------------
# casting safety
# --------------------------------------------------------------------------
SAFE_FROM_BF16 = [np.float32, np.float64, np.longdouble, np.complex64, np.complex128,
                  np.clongdouble]
SAFE_TO_BF16 = [np.bool_, np.int8, np.uint8]
SAME_KIND_TO_BF16 = [np.float16, np.float32, np.float64, np.longdouble, np.int16, np.uint16,
                     np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("to", SAFE_FROM_BF16, ids=lambda t: np.dtype(t).name)
def test_can_cast_safe_from_bf16(to):
    assert np.can_cast(bf16, to, "safe")
    assert np.can_cast(BF, np.dtype(to))
    np.ones(3, bf16).astype(to, casting="safe")


@pytest.mark.parametrize("frm", SAFE_TO_BF16, ids=lambda t: np.dtype(t).name)
def test_can_cast_safe_to_bf16(frm):
    assert np.can_cast(frm, bf16, "safe")
    np.ones(3, frm).astype(bf16, casting="safe")


@pytest.mark.parametrize("frm", SAME_KIND_TO_BF16, ids=lambda t: np.dtype(t).name)
def test_can_cast_same_kind_not_safe_to_bf16(frm):
    assert not np.can_cast(frm, bf16, "safe")
    assert np.can_cast(frm, bf16, "same_kind")
    with pytest.raises(TypeError):
        np.ones(3, frm).astype(bf16, casting="safe")
    np.ones(3, frm).astype(bf16, casting="same_kind")


def test_can_cast_misc():
    assert np.can_cast(bf16, bf16, "no")
    assert np.can_cast(bf16, bf16, "equiv")
    assert not np.can_cast(bf16, np.float16, "safe")
    assert np.can_cast(bf16, np.float16, "same_kind")
    for it in (np.int8, np.int32, np.uint64, np.bool_):
        assert not np.can_cast(bf16, it, "same_kind")
        assert np.can_cast(bf16, it, "unsafe")
    for ct in (np.complex64, np.complex128):
        assert not np.can_cast(ct, bf16, "same_kind")
        assert np.can_cast(ct, bf16, "unsafe")
    # can_cast agrees with NumPy's float16 for the same relation wherever
    # bfloat16 and float16 play the same role
    for t in (np.int8, np.uint8, np.bool_, np.int16, np.float32, np.float64, np.complex64):
        for casting in ("safe", "same_kind", "unsafe"):
            assert np.can_cast(t, bf16, casting) == np.can_cast(t, np.float16, casting), (t, casting)
            assert np.can_cast(bf16, t, casting) == np.can_cast(np.float16, t, casting), (t, casting)


def test_astype_copy_false_and_same_dtype():
    a = np.arange(5).astype(bf16)
    assert a.astype(bf16, copy=False) is a
    b = a.astype(bf16)
    assert b is not a and np.array_equal(b.view(np.uint16), a.view(np.uint16))


def test_copyto_casting():
    dst = np.zeros(3, bf16)
    np.copyto(dst, np.array([1.5, 2, 1 + 2 ** -8 + 2 ** -30]))
    assert np.array_equal(dst.view(np.uint16), [0x3FC0, 0x4000, 0x3F81])
    with pytest.raises(TypeError):
        np.copyto(dst, np.array([1.5, 2, 3]), casting="safe")
    np.copyto(dst, np.array([1, 2, 3], np.int8), casting="safe")
    assert dst.tolist() == [1, 2, 3]


# ==========================================================================
# Every member of the family: casts between any two, ml_dtypes arrays, cast safety
# ==========================================================================
FAMILY = FR.FLOAT_NAMES + FR.INT_NAMES


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


def source_codes(name):
    """every code of an 8-bit-or-less format; for bfloat16 every code too
    (65536 values are cheap)"""
    return FR.all_codes(name)


def exact_values(name):
    if name in FR.FLOAT_DEFS:
        return FR.fmt(name).decode_f64()
    return FR.int_wrap(np.arange(FR.ncodes(name)), name).astype(np.float64)


def expected_cast(a, b):
    """codes of format b for every code of format a (one rounding, ml_dtypes'
    integer rules)"""
    v = exact_values(a)
    if b in FR.FLOAT_DEFS:
        return FR.fmt(b).encode(v)
    bits, signed = FR.INT_DEFS[b]
    # integer targets: truncate toward zero, then wrap; NaN/inf/|x| >= 2^31 -> 0
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (np.abs(v) < 2.0 ** 31)
        t = np.where(ok, np.trunc(np.where(ok, v, 0)), 0).astype(np.int64)
    return (t & ((1 << bits) - 1)).astype(np.uint32)


PAIRS = [(a, b) for a in FAMILY for b in FAMILY]


@pytest.mark.parametrize("a,b", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_cast_between_family_members(a, b):
    codes = source_codes(a)
    src = codes.view(mf_type(a))
    with np.errstate(all="ignore"):
        got = codes_of(src.astype(mf_type(b)), b)
        # strided source and destination take the element loop
        rep = np.repeat(codes, 3).view(mf_type(a))[::3]
        out = np.zeros(2 * len(codes), mf_type(b))
        out[::2] = rep
    np.testing.assert_array_equal(codes_of(out, b)[::2], got)
    if a == b:
        # the self cast copies the bits (NaN payloads survive)
        np.testing.assert_array_equal(got, codes)
        return
    want = expected_cast(a, b)
    bad = np.nonzero(got != want.astype(got.dtype))[0]
    assert not len(bad), [(hex(int(codes[i])), exact_values(a)[i], hex(int(got[i])), hex(int(want[i])))
                          for i in bad[:8]]
    if b in FR.FLOAT_DEFS:
        oracle = _core._oracle_encode(b, src.astype(np.float64))
        np.testing.assert_array_equal(got, oracle.astype(got.dtype))


# ml_dtypes' casts between its own formats that are wrong, where minifloat
# deliberately gives the correctly rounded result:
#  * bfloat16 -> float8_e8m0fnu, before ml_dtypes 0.7: bfloat16 subnormals in
#    (2^-127, 1.5 * 2^-127) round UP to 2^-126 in ml_dtypes (nearest is
#    2^-127), as for float32 inputs (ml_dtypes 0.7 rounds them as minifloat);
#  * float8_e3m4/e4m3/e5m2 +inf -> int4/uint4/int2/uint2/int1/uint1: ml_dtypes
#    before 0.7 gives -1 (all bits set; it converts through a saturating
#    integer), while its own float32 +inf -> int4 gives 0.  minifloat gives 0
#    for every source.
#  * ml_dtypes 0.7 gives 0 for every value (inf, NaN included) outside the
#    integer format's range; minifloat keeps NumPy's rule for its own
#    integers (truncate, then wrap: 9.0 -> int4 is -7), as ml_dtypes did before.
#  * on other CPUs than x86 (Arm), ml_dtypes converts inf, NaN and values
#    outside the integer format's range as the C compiler does there
#    (saturating): unspecified, not compared (minifloat's rule, the same on
#    every CPU, is checked by dtype/test_intformats.py and expected_cast).
def ml_quirk_mask(a, b):
    v = exact_values(a)
    if ((FR.ML_07 and a in FR.FLOAT_NAMES) or not FR.X86) and b in FR.INT_NAMES:
        bits, signed = FR.INT_DEFS[b][:2]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        with np.errstate(invalid="ignore"):
            t = np.trunc(np.where(np.isfinite(v), v, 0))
        return ~(np.isfinite(v) & (t >= lo) & (t <= hi))
    if a == "bfloat16" and b == "float8_e8m0fnu" and not FR.ML_07:
        return (v > 2.0 ** -127) & (v < 1.5 * 2.0 ** -127)
    if a in ("float8_e3m4", "float8_e4m3", "float8_e5m2") and b in FR.INT_NAMES:
        return v == np.inf
    return np.zeros(len(v), bool)


@pytest.mark.parametrize("a,b", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_ml_dtypes_arrays_cast_like_ours(a, b):
    """ml_dtypes arrays astype minifloat (and back) are bit-exact, and an
    ml_dtypes array of format a cast to minifloat format b gives the same codes
    as minifloat's own a -> b cast."""
    codes = source_codes(a)
    ours = codes.view(mf_type(a))
    theirs = codes.view(FR.ml_type(a))
    with np.errstate(all="ignore"):
        want = codes_of(ours.astype(mf_type(b)), b)
        np.testing.assert_array_equal(codes_of(theirs.astype(mf_type(b)), b), want)
        np.testing.assert_array_equal(codes_of(ours.astype(FR.ml_type(b)), b), want)
        assert theirs.astype(mf_type(b)).dtype == np.dtype(mf_type(b))
        assert ours.astype(FR.ml_type(b)).dtype == np.dtype(FR.ml_type(b))
        try:
            ml = codes_of(theirs.astype(FR.ml_type(b)), b)
        except TypeError:
            return      # ml_dtypes has no cast between these two of its own types
    quirk = ml_quirk_mask(a, b)
    np.testing.assert_array_equal(want[~quirk], ml[~quirk])
    if quirk.any() and FR.ML_07 and b in FR.INT_NAMES and a in FR.FLOAT_NAMES:
        if FR.X86:                          # (measured on x86 only)
            assert (ml[quirk] == 0).all()   # ml_dtypes 0.7's rule: 0 outside the range
    elif quirk.any() and (FR.X86 or b not in FR.INT_NAMES):
        assert (want[quirk] != ml[quirk]).all()


@pytest.mark.parametrize("name", FAMILY)
def test_ml_dtypes_round_trip_bit_exact(name):
    codes = source_codes(name)
    a = codes.view(FR.ml_type(name))
    b = a.astype(mf_type(name))
    c = b.astype(FR.ml_type(name))
    np.testing.assert_array_equal(codes_of(b, name), codes)
    np.testing.assert_array_equal(codes_of(c, name), codes)
    # np.asarray with a dtype, and assignment between the two kinds of array
    d = np.asarray(a, dtype=mf_type(name))
    np.testing.assert_array_equal(codes_of(d, name), codes)
    e = np.empty(len(codes), FR.ml_type(name))
    e[...] = b
    np.testing.assert_array_equal(codes_of(e, name), codes)
    # the same format in the other library is a safe cast both ways
    assert np.can_cast(a.dtype, b.dtype, "safe") and np.can_cast(b.dtype, a.dtype, "safe")


# ------------------------------------------------------------------ safety

_VALUE_SETS = {}


def value_set(name):
    if name not in _VALUE_SETS:
        _VALUE_SETS[name] = _value_set(name)
    return _VALUE_SETS[name]


def _value_set(name):
    if name in FR.FLOAT_DEFS:
        f = FR.fmt(name)
        out = set()
        for c in range(1 << f.bits):
            v = f.value(c)
            out.add(v if isinstance(v, Fraction) else ("nan" if v != v else v))
        return out
    bits, signed = FR.INT_DEFS[name]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return {Fraction(i) for i in range(lo, hi + 1)}


NUMPY_VALUES = {
    "bool": {Fraction(0), Fraction(1)},
    "int8": {Fraction(i) for i in range(-128, 128)},
    "uint8": {Fraction(i) for i in range(256)},
    "int16": {Fraction(i) for i in range(-32768, 32768)},
    "uint16": {Fraction(i) for i in range(65536)},
}


def numpy_value_set(t):
    if t in NUMPY_VALUES:
        return NUMPY_VALUES[t]
    if t == "float16":
        h = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
        return {("nan" if v != v else (v if np.isinf(v) else Fraction(v))) for v in h}
    return None


def holds(big, small):
    return small <= big


@pytest.mark.parametrize("a", FAMILY)
def test_can_cast_safe_iff_every_value_survives(a):
    va = value_set(a)
    for b in FAMILY:
        vb = value_set(b)
        want = holds(vb, va)
        got = bool(np.can_cast(mf_type(a), mf_type(b), "safe"))
        assert got == want, (a, b, got, want)
        assert bool(_core._cast_is_safe(a, b)) == want, (a, b)
        if not want:
            # float/int -> float is same_kind, float -> int unsafe
            same_kind = bool(np.can_cast(mf_type(a), mf_type(b), "same_kind"))
            kinds = "buif"     # NumPy's kind order
            ka, kb = (FR.kind_char(n) for n in (a, b))
            assert same_kind == (kinds.index(ka) <= kinds.index(kb)), (a, b)
        assert np.can_cast(mf_type(a), mf_type(b), "unsafe")




@pytest.mark.parametrize("name", FAMILY)
def test_can_cast_bool_into(name):
    # split out of the next test so that the bool bug is visible on its own
    assert bool(np.can_cast(np.bool_, mf_type(name), "safe")) == holds(value_set(name),
                                                                       numpy_value_set("bool"))


@pytest.mark.parametrize("name", FAMILY)
def test_can_cast_with_numpy_types(name):
    va = value_set(name)
    for t in ["bool", "int8", "uint8", "int16", "uint16", "float16"]:
        vt = numpy_value_set(t)
        if t != "bool":
            assert bool(np.can_cast(np.dtype(t), mf_type(name), "safe")) == holds(va, vt), (t, name)
        # as in NumPy, nothing but bool casts safely to bool
        want = holds(vt, va) and t != "bool"
        assert bool(np.can_cast(mf_type(name), np.dtype(t), "safe")) == want, (name, t)
    # wider NumPy types: every format fits float32/float64/complex; nothing
    # wider than 16 bits fits into one of ours
    for t in ["float32", "float64", "longdouble", "complex64", "complex128"]:
        assert np.can_cast(mf_type(name), np.dtype(t), "safe")
        assert not np.can_cast(np.dtype(t), mf_type(name), "safe")
    for t in ["int32", "int64", "uint32", "uint64"]:
        assert not np.can_cast(np.dtype(t), mf_type(name), "safe")
        assert bool(np.can_cast(mf_type(name), np.dtype(t), "safe")) == (name in FR.INT_NAMES
                                                                        and not (t.startswith("u") and
                                                                                 FR.INT_DEFS[name][1]))


def test_bool_into_e8m0_and_int1_values():
    """What the bool bug does: False has no value in float8_e8m0fnu (NaN),
    True none in int1 (wraps to -1) -- the casts themselves do what ml_dtypes does."""
    got = np.array([False, True]).astype(minifloat.float8_e8m0fnu).view(np.uint8)
    assert got.tolist() == [0xFF, 127]
    assert got.tolist() == np.array([False, True]).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8).tolist()
    got = np.array([False, True]).astype(minifloat.int1).astype(np.int8)
    assert got.tolist() == [0, -1]


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
def test_large_fills_on_the_threads(fmt, threads):
    """A code repeated into a run of 512 KiB or more (fill, a[...] = v,
    np.full, np.copyto of a scalar) is cut between the threads: every
    element gets the code, and nothing outside the run changes."""
    dt = np.dtype(mf_type(fmt))
    u = np.uint8 if dt.itemsize == 1 else np.uint16
    n = 3 * (1 << 20) // dt.itemsize + 5
    for nthreads in (1, 2, 3):
        threads(nthreads)
        for v in (1.0, -0.5, 0.0):
            code = np.array([v], np.float32).astype(dt).view(u)[0]
            a = np.full(n, 7, u)
            a.view(dt)[1:-1].fill(v)
            assert a[0] == 7 and a[-1] == 7 and (a[1:-1] == code).all(), (nthreads, v)
            b = np.zeros((n // 64, 64), dt)
            b[...] = dt.type(v)
            assert (b.view(u) == code).all()
            c = np.full((n // 64, 64), dt.type(v))
            assert c.dtype == dt and (c.view(u) == code).all()
            d = np.ones(n, dt)
            np.copyto(d[::-1], dt.type(v))
            assert (d.view(u) == code).all()
