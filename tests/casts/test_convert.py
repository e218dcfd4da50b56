"""Family conformance: minifloat.convert(x, dtype, *, saturate,
rounding, seed, out) for every float format.

References: the exact single rounding of tests/_family_refs.py (nearest-even
and toward zero, saturating or not), the C oracle, and torch 2.13:
  * torch's float8_e4m3fn conversion saturates (+-448, NaN stays NaN): equal
    bit for bit to convert(saturate=True);
  * torch's float8_e5m2, float8_e4m3fnuz and float8_e5m2fnuz conversions do not
    saturate: equal bit for bit to minifloat's cast, except that torch's
    float8_e5m2 NaN is 0x7F/0xFF where minifloat (and ml_dtypes) give the quiet
    NaN 0x7E/0xFE (DELIBERATE DIFFERENCE: minifloat follows ml_dtypes).
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from hypothesis.extra import numpy as hnp

import minifloat
from minifloat import _core

import _family_refs as R
from _refs import torch_e4m3fn_saturates
from conftest import mf_type

torch = pytest.importorskip("torch")

convert = minifloat.convert


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(R.code_dtype(name))


def probe64(name, n=1 << 17, seed=0):
    rng = np.random.default_rng(seed)
    f = R.fmt(name)
    return np.concatenate([
        R.random_f32_bits(n, seed).view(np.float32).astype(np.float64),
        rng.integers(0, 1 << 64, n // 2, dtype=np.uint64).view(np.float64),
        rng.standard_normal(n // 2) * float(f.max),
        R.boundary_values(name)])


def check(got, want, x, what):
    bad = np.nonzero(got != want.astype(got.dtype))[0]
    if len(bad):
        raise AssertionError(f"{what}: {len(bad)} differ (x, got, want): "
                             f"{[(float(x[i]), hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]}")


# ------------------------------------------------------ nearest / toward zero

@pytest.mark.parametrize("name", R.FLOAT_NAMES)
@pytest.mark.parametrize("rounding,saturate", [("nearest", False), ("nearest", True),
                                               ("toward_zero", False)])
def test_deterministic_roundings(name, rounding, saturate):
    x = probe64(name, seed=len(name))
    with np.errstate(all="ignore"):
        got = codes_of(convert(x, mf_type(name), rounding=rounding, saturate=saturate), name)
        got32 = codes_of(convert(x.astype(np.float32), mf_type(name), rounding=rounding,
                                 saturate=saturate), name)
    f = R.fmt(name)
    check(got, f.encode(x, rounding, saturate), x, f"{rounding} saturate={saturate} {name}")
    x32 = x.astype(np.float32).astype(np.float64)
    check(got32, f.encode(x32, rounding, saturate), x32, f"float32 {rounding} saturate={saturate}")
    oracle = _core._oracle_encode(name, x, rounding={"nearest": 0, "toward_zero": 1}[rounding],
                                  saturate=saturate)
    check(got, oracle, x, "oracle")
    if rounding == "nearest" and not saturate:
        with np.errstate(all="ignore"):
            check(got, codes_of(x.astype(mf_type(name)), name), x, "cast")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_saturate_clamps_overflow_and_keeps_nan(name):
    f = R.fmt(name)
    t = mf_type(name)
    big = [float(f.max) * 1.5, float(f.max) * 1000, 1e300, np.inf]
    got = codes_of(convert(np.array(big), t, saturate=True), name)
    assert (got == f.max_mag).all()
    if f.signed:
        got = codes_of(convert(-np.array(big), t, saturate=True), name)
        assert (got == (f.sbit | f.max_mag)).all()
    nan = codes_of(convert(np.array([np.nan, -np.nan]), t, saturate=True), name)
    if f.has_nan:
        assert all(f.is_nan_code(c) for c in nan)
    # saturation never warns
    with np.errstate(over="raise"):
        convert(np.array([1e30]), t, saturate=True)


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_toward_zero_saturating(name):
    x = probe64(name, n=1 << 14, seed=9)
    with np.errstate(all="ignore"):
        got = codes_of(convert(x, mf_type(name), rounding="toward_zero", saturate=True), name)
    check(got, R.fmt(name).encode(x, "toward_zero", saturate=True), x, f"toward_zero saturating {name}")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_toward_zero_never_increases_magnitude(name):
    f = R.fmt(name)
    x = probe64(name, n=1 << 14, seed=3)
    x = x[np.isfinite(x) & (np.abs(x) <= float(f.max))]
    with np.errstate(all="ignore"):
        v = convert(x, mf_type(name), rounding="toward_zero").astype(np.float64)
    ok = x >= float(f.smallest_normal) if f.special == "e8m0" else np.ones(len(x), bool)
    assert (np.abs(v[ok]) <= np.abs(x[ok])).all()
    assert (np.signbit(v[ok & (v != 0)]) == np.signbit(x[ok & (v != 0)])).all()


# ------------------------------------------------------------------ torch

def torch_codes(x32, tdtype):
    return torch.from_numpy(x32).to(tdtype).view(torch.uint8).numpy()


def torch_probe():
    bits = np.concatenate([R.random_f32_bits(1 << 20, 11), R.float32_boundary_bits("float8_e4m3fn"),
                           R.float32_boundary_bits("float8_e5m2")])
    return bits.view(np.float32)


def test_saturating_e4m3fn_equals_torch():
    """torch 2.12+ saturates; an older torch's NaN on overflow is the
    non-saturating cast's (_refs.torch_e4m3fn_saturates)."""
    x = torch_probe()
    sat = torch_e4m3fn_saturates(torch)
    with np.errstate(all="ignore"):
        got = codes_of(convert(x, minifloat.float8_e4m3fn, saturate=sat), "float8_e4m3fn")
    check(got, torch_codes(x, torch.float8_e4m3fn), x, "torch float8_e4m3fn")
    # the well-known values
    v = np.array([448, 464, 465, 500, 1e9, np.inf, -np.inf, np.nan], np.float32)
    assert codes_of(convert(v, minifloat.float8_e4m3fn, saturate=True), "float8_e4m3fn").tolist() == \
        [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F]


@pytest.mark.parametrize("name", ["float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_non_saturating_casts_equal_torch(name):
    x = torch_probe()
    with np.errstate(all="ignore"):
        got = codes_of(x.astype(mf_type(name)), name)
        got_conv = codes_of(convert(x, mf_type(name)), name)
    np.testing.assert_array_equal(got, got_conv)
    theirs = torch_codes(x, getattr(torch, name))
    nan = np.isnan(x)
    check(got[~nan], theirs[~nan], x[~nan], f"torch {name}")
    if name == "float8_e5m2":
        # DELIBERATE DIFFERENCE: NaN codes (torch 0x7F/0xFF, minifloat/ml_dtypes 0x7E/0xFE)
        assert set(theirs[nan].tolist()) <= {0x7F, 0xFF}
        assert set(got[nan].tolist()) <= {0x7E, 0xFE}
    else:
        check(got[nan], theirs[nan], x[nan], f"torch {name} NaN")


# ---------------------------------------------------------------- stochastic

def stochastic_inputs(name):
    """values strictly between two neighbours: normal range, subnormal range,
    below the smallest subnormal, near the top"""
    f = R.fmt(name)
    g, gm = f._grid()
    mid = len(g) // 2
    xs = [float(g[1]) * 0.3, float(g[1]) * 1.7, float(g[mid]) * 1.1 + float(g[mid + 1] - g[mid]) * 0.05,
          float(g[f.max_mag - 1]) + 0.8 * float(g[f.max_mag] - g[f.max_mag - 1]),
          float(f.smallest_normal) * 1.37, float(f.smallest_subnormal) * 0.01]
    if f.special == "e8m0":
        xs = [x for x in xs if x > float(f.smallest_normal)]      # no zero below 2^-127
    if f.signed:
        xs += [-xs[0], -xs[2]]
    return xs


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_stochastic_rounding_is_unbiased(name):
    """each result is one of the two neighbours; the mean of N conversions of
    x is x within 6 standard deviations of a Bernoulli mean (p(fail) ~ 1e-9
    per input); the frequency of rounding up is the remaining fraction"""
    f = R.fmt(name)
    t = mf_type(name)
    N = 200_000
    for k, x in enumerate(stochastic_inputs(name)):
        lo, hi = f.neighbours(np.array([x]))
        dec = f.decode_f64()
        vlo, vhi = dec[lo[0]], dec[hi[0]]
        assert vlo != vhi and min(vlo, vhi) < x < max(vlo, vhi)
        got = convert(np.full(N, x), t, rounding="stochastic", seed=1234 + k)
        c = codes_of(got, name)
        assert np.isin(c, [lo[0], hi[0]]).all(), (x, np.unique(c), lo, hi)
        p = (abs(x) - abs(vlo)) / (abs(vhi) - abs(vlo))
        up = (c == hi[0]).mean()
        sd = math.sqrt(p * (1 - p) / N)
        assert abs(up - p) <= 6 * sd + 1e-12, (name, x, up, p, sd)
        mean = got.astype(np.float64).mean()
        assert abs(mean - x) <= 6 * sd * abs(vhi - vlo) + abs(x) * 1e-12, (name, x, mean)


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_stochastic_exact_values_and_specials(name):
    """representable values are returned unchanged; NaN/inf/overflow follow
    the cast's rules (or saturate)"""
    f = R.fmt(name)
    t = mf_type(name)
    dec = f.decode_f64()
    ok = ~np.isnan(dec)
    for seed in (0, 1, 2):
        with np.errstate(all="ignore"):
            got = codes_of(convert(dec[ok], t, rounding="stochastic", seed=seed), name)
        check(got, f.encode(dec[ok]), dec[ok], f"stochastic on exact values of {name}")
    with np.errstate(all="ignore"):
        sp = np.array([np.nan, -np.nan, np.inf, -np.inf, float(f.max) * 4])
        got = codes_of(convert(sp, t, rounding="stochastic", seed=5), name)
        check(got, f.encode(sp), sp, f"stochastic specials {name}")
        got = codes_of(convert(sp, t, rounding="stochastic", seed=5, saturate=True), name)
        check(got, f.encode(sp, saturate=True), sp, f"stochastic saturating specials {name}")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_stochastic_seeds(name):
    t = mf_type(name)
    g, gm = R.fmt(name)._grid()
    x = np.full((50, 40), float(gm[len(gm) // 2]))        # p = 1/2 everywhere
    a = convert(x, t, rounding="stochastic", seed=7)
    b = convert(x, t, rounding="stochastic", seed=7)
    c = convert(x, t, rounding="stochastic", seed=8)
    np.testing.assert_array_equal(codes_of(a, name), codes_of(b, name))
    assert (codes_of(a, name) != codes_of(c, name)).any()
    d = convert(x, t, rounding="stochastic")
    e = convert(x, t, rounding="stochastic")
    assert (codes_of(d, name) != codes_of(e, name)).any()           # seed=None: fresh draws
    # per element position in C order: independent of the memory layout
    xr = np.random.default_rng(1).uniform(-2, 2, (30, 20)) if R.fmt(name).signed else \
        np.random.default_rng(1).uniform(0.1, 2, (30, 20))
    f1 = convert(np.asfortranarray(xr), t, rounding="stochastic", seed=3)
    f2 = convert(np.ascontiguousarray(xr), t, rounding="stochastic", seed=3)
    np.testing.assert_array_equal(codes_of(f1, name), codes_of(f2, name))
    out = np.empty((20, 30), t).T
    convert(xr, t, rounding="stochastic", seed=3, out=out)
    np.testing.assert_array_equal(codes_of(out, name), codes_of(f2, name))


# ----------------------------------------------------------- array handling

@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_array_likes_shapes_out_and_broadcasting(name):
    t = mf_type(name)
    f = R.fmt(name)
    kwargs_list = [{}, {"saturate": True}, {"rounding": "toward_zero"},
                   {"rounding": "stochastic", "seed": 1}]
    for kw in kwargs_list:
        # any array-like, any shape
        for x in ([1.0, 2.0, 3.0], [[1, 2], [3, 4]], (0.5,), np.float32(1.5), 2.0, 3,
                  np.arange(24, dtype=np.int16).reshape(2, 3, 4), np.ones((0, 3)),
                  np.array([1.5, 2.5], np.float16), np.array([1.0, 3.0], dtype=t)):
            with np.errstate(all="ignore"):
                r = convert(x, t, **kw)
                want = np.asarray(x, np.float64)
            if np.ndim(x) == 0 and not isinstance(x, np.ndarray):
                assert type(r) is t
                r = np.array([r])
                want = want.reshape(1)
            else:
                assert isinstance(r, np.ndarray) and r.dtype == np.dtype(t) and r.shape == np.shape(x)
            if kw.get("rounding") != "stochastic":
                np.testing.assert_array_equal(codes_of(r, name).reshape(-1),
                                              f.encode(want.reshape(-1), kw.get("rounding", "nearest"),
                                                       kw.get("saturate", False)))
        # into out, without allocating: the returned object is out
        base = np.zeros((4, 6), t)
        out = base[:, ::2]
        x = np.array([1.0, 2.0, 0.5])
        r = convert(x, t, out=out, **kw)
        assert r is out and np.shares_memory(r, base)
        np.testing.assert_array_equal(codes_of(out, name), np.tile(f.encode(x), (4, 1)))
        np.testing.assert_array_equal(codes_of(base[:, 1::2], name), np.zeros((4, 3), R.code_dtype(name)))
        convert(np.float64(3.0).reshape(()), t, out=out, **kw)     # a 0-d array broadcasts into out
        if kw.get("rounding") != "stochastic":
            assert (codes_of(out, name) == f.encode(np.array([3.0]), kw.get("rounding", "nearest"))[0]).all()
        with pytest.raises(ValueError):
            convert(np.ones(5), t, out=np.empty(4, t), **kw)     # cannot broadcast


def test_scalar_into_out_returns_out():
    out = np.zeros((2, 3), minifloat.float8_e4m3fn)
    r = convert(3.0, minifloat.float8_e4m3fn, out=out)
    assert (out.astype(np.float32) == 3).all()
    assert r is out


def test_bad_arguments_raise_value_error():
    t = minifloat.float8_e4m3fn
    with pytest.raises(ValueError, match="nearest.*toward_zero.*stochastic"):
        convert([1.0], t, rounding="up")
    for bad in (np.float32, np.float16, np.int8, minifloat.int4, minifloat.uint1, "float32",
                "no_such_format"):
        with pytest.raises(ValueError, match="float8_e4m3fn") as e:
            convert([1.0], bad)
        for n in R.FLOAT_NAMES:
            assert n in str(e.value)
    for rounding in ("nearest", "toward_zero"):
        with pytest.raises(ValueError, match="stochastic"):
            convert([1.0], t, rounding=rounding, seed=1)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        convert([1.0], t, out=np.empty(1, minifloat.float8_e5m2))
    with pytest.raises(ValueError):
        convert([1.0], t, out=np.empty(1, np.float32))
    ro = np.empty(1, t)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        convert([1.0], t, out=ro)
    # names and dtypes are accepted as well as scalar types
    assert convert([1.0], "float8_e4m3fn").dtype == np.dtype(t)
    assert convert([1.0], np.dtype(t)).dtype == np.dtype(t)




def test_convert_wide_integers_round_once():
    # 2^62 - 1 toward zero in e8m0 is 2^61; via float64 (2^62) it becomes 2^62
    x = np.array([2 ** 62 - 1], np.int64)
    got = convert(x, minifloat.float8_e8m0fnu, rounding="toward_zero")
    assert float(got[0]) == 2.0 ** 61
    # 3 * 2^61 - 1 is below the midpoint of 2^62 and 2^63
    y = np.array([3 * 2 ** 61 - 1], np.int64)
    assert float(convert(y, minifloat.float8_e8m0fnu, saturate=True)[0]) == 2.0 ** 62
    assert float(y.astype(minifloat.float8_e8m0fnu)[0]) == 2.0 ** 62          # the cast is right


@pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52, reason="long double is float64 here")
def test_convert_long_double_rounds_once():
    x = np.array([np.longdouble(2) - np.longdouble(2) ** -60])
    assert float(x.astype(minifloat.float8_e4m3fn)[0]) == 2.0                  # nearest: 2
    assert float(convert(x, minifloat.float8_e4m3fn, rounding="toward_zero")[0]) == 1.875


# ------------------------------------------------------------- properties

FMT = st.sampled_from(R.FLOAT_NAMES)
F64 = hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=6),
                 elements=st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FMT, F64, st.integers(0, 2 ** 64 - 1))
def test_property_roundings(name, x, seed):
    f = R.fmt(name)
    t = mf_type(name)
    flat = x.reshape(-1)
    with np.errstate(all="ignore"):
        near = convert(x, t)
        tz = convert(x, t, rounding="toward_zero")
        sr = convert(x, t, rounding="stochastic", seed=seed)
        sat = convert(x, t, saturate=True)
        cast = x.astype(t)
    for r in (near, tz, sr, sat):
        assert np.shape(r) == x.shape
    nc = codes_of(np.asarray(near), name).reshape(-1)
    np.testing.assert_array_equal(nc, codes_of(np.asarray(cast), name).reshape(-1))
    np.testing.assert_array_equal(nc, f.encode(flat))
    np.testing.assert_array_equal(codes_of(np.asarray(tz), name).reshape(-1), f.encode(flat, "toward_zero"))
    np.testing.assert_array_equal(codes_of(np.asarray(sat), name).reshape(-1), f.encode(flat, saturate=True))
    # stochastic: toward zero or the next value away from zero (in range)
    sc = codes_of(np.asarray(sr), name).reshape(-1)
    fin = np.isfinite(flat) & (np.abs(flat) <= float(f.max))
    if f.special == "e8m0":
        fin &= flat >= float(f.smallest_normal)
    lo, hi = f.neighbours(flat[fin]) if fin.any() else (np.array([], np.uint32),) * 2
    assert ((sc[fin] == lo) | (sc[fin] == hi)).all()
