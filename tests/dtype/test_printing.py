"""The printing rule, over every code of every float format: a value prints as
its exact decimal when that has at most 6 significant digits, otherwise as the
shortest decimal that rounds back in the format; repr round-trips (scalars
and arrays).  Holds on every supported NumPy (arrays are printed by NumPy:
< 2.5 with its float layout fed by the patched Dragon4, >= 2.5 with str() of
each element).  Then str / repr of scalars of every float format round-trip
within the format's rounding interval, and arrays name their dtype."""
import math
import sys

import numpy as np
import pytest

import minifloat as mf
import _family_refs as R
from conftest import FLOAT_FORMATS, mf_type

# the names `eval(repr(...))` needs: NumPy's (array, nan, inf) and minifloat's
NAMES = {**vars(np), **{k: getattr(mf, k) for k in mf.__all__}, "minifloat": mf}


def _exact_digits(x):
    import decimal

    return len(decimal.Decimal(abs(x)).normalize().as_tuple().digits)


def _sig_digits(text):
    """Significant digits of a printed decimal ('448.0' -> 3, '1e-05' -> 1)."""
    mant = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return max(len(mant), 1)


def _same_code(a, b, name):
    """Same codes, any NaN matching any NaN (a NaN prints as nan, which reads
    back as the format's quiet NaN)."""
    ca = np.asarray(a).view(R.code_dtype(name)).ravel()
    cb = np.asarray(b).view(R.code_dtype(name)).ravel()
    nan = np.isnan(np.asarray(a).astype(np.float64).ravel())
    return bool(np.all((ca == cb) | (nan & np.isnan(np.asarray(b).astype(np.float64).ravel()))))


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_every_code_prints_by_the_rule(name):
    t = mf_type(name)
    codes = R.all_codes(name)
    values = codes.view(t).astype(np.float64)
    scalars = codes.view(t)
    nexact = nshort = 0
    for i in range(len(codes)):
        x, v = scalars[i], float(values[i])
        s = str(x)
        assert repr(x) == f"minifloat.{name}({s})"
        # round trip: through the type and through eval of the repr
        back, back_repr = t(s), eval(repr(x), NAMES)
        if math.isnan(v):
            assert s == "nan" and math.isnan(float(back)) and math.isnan(float(back_repr))
            continue
        assert back.code == x.code or v == 0 == float(back), (name, s)
        assert back_repr.code == x.code or v == 0 == float(back_repr), (name, repr(x))
        if math.isinf(v) or v == 0:
            assert s in ("inf", "-inf", "0.0", "-0.0")
            assert math.copysign(1, float(back)) == math.copysign(1, v)
            continue
        if _exact_digits(v) <= 6:
            # the exact decimal, as Python prints that float
            assert s == repr(v), (name, s, v)
            nexact += 1
        else:
            # the shortest that rounds back: fewer digits than the exact value,
            # and no decimal with one digit less rounds back
            assert _sig_digits(s) < _exact_digits(v), (name, s, v)
            p = _sig_digits(s) - 1
            if p >= 1:
                m, ex = f"{abs(v):.{p - 1}e}".split("e")
                d, k = int(m.replace(".", "")), int(ex) - (p - 1)
                for c in (d - 1, d, d + 1):
                    if c > 0:
                        shorter = math.copysign(float(f"{c}e{k}"), v)
                        with np.errstate(over="ignore"):
                            again = t(shorter).code
                        assert again != x.code or (
                            # saturating formats take any large decimal back to
                            # the largest value: only decimals below the
                            # midpoint count (scalar.c)
                            R.fmt(name).special == "none" and abs(shorter) > abs(v)), \
                            (name, s, shorter)
            nshort += 1
    assert nexact > 0
    if name == "bfloat16":
        assert nshort > nexact


@pytest.mark.parametrize("name, value, text", [
    ("float8_e4m3fn", 448.0, "448.0"), ("float8_e4m3fn", -448.0, "-448.0"),
    ("float8_e5m2", 57344.0, "57344.0"), ("bfloat16", 0.125, "0.125"), ("bfloat16", 1.125, "1.125"),
    ("bfloat16", 0.1, "0.1"), ("bfloat16", 2.0**24, "16800000.0"), ("bfloat16", 99840.0, "99840.0"),
    ("float8_e8m0fnu", 2.0**19, "524288.0"), ("float8_e8m0fnu", 2.0**20, "1000000.0"),
    ("float8_e8m0fnu", 2.0**-127, "6e-39"), ("float4_e2m1fn", 6.0, "6.0"),
    ("float6_e3m2fn", 28.0, "28.0"), ("float8_e4m3b11fnuz", 30.0, "30.0"),
])
def test_examples(name, value, text):
    x = mf_type(name)(value)
    assert str(x) == text and repr(x) == f"minifloat.{name}({text})"


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_array_repr_round_trips_every_code(name):
    t = mf_type(name)
    a = R.all_codes(name).view(t)
    with np.printoptions(threshold=sys.maxsize):
        text = repr(a)
        back = eval(text, NAMES)
    assert back.dtype == a.dtype
    assert _same_code(back, a, name)
    # a 2-D block and a 0-d array too
    b = a[: (len(a) // 4) * 4].reshape(4, -1)[:, :6]
    assert _same_code(eval(repr(b), NAMES), b, name)
    z = np.array(a[len(a) // 3], t)
    assert _same_code(eval(repr(z), NAMES), z, name)


@pytest.mark.parametrize("name, values, printed", [
    ("float8_e4m3fn", [448.0, 0.125], [448.0, 0.125]),           # exact, not 450
    ("float8_e5m2", [57344.0, 1.5], [57344.0, 1.5]),
    ("bfloat16", [0.1, 1.125, 2.0**24], [0.1, 1.125, 16800000.0]),
])
def test_array_elements_print_by_the_rule(name, values, printed):
    # the layout is NumPy's (< 2.5: aligned, exponent notation from 10**precision
    # on, as for float16; >= 2.5: str() of each element); the digits are the rule's
    a = np.array(values, mf_type(name))
    elements = str(a).strip("[]").split()
    assert [float(e) for e in elements] == printed


# values float32 lays out positionally (below 10**6, within 1000x, none below 1e-4)
@pytest.mark.parametrize("name, values", [
    ("float8_e4m3fn", [448.0, 240.0]),
    ("float8_e4m3fn", [12.0, 0.5]),
    ("float4_e2m1fn", [6.0, 6.0]),
    ("float4_e2m1fn", [1.0, -3.0, 0.5]),
    ("float6_e2m3fn", [7.5, 1.0]),
    ("float6_e3m2fn", [28.0, 0.25]),
    ("float8_e5m2", [57344.0, 1024.0]),
    ("float8_e8m0fnu", [256.0, 1024.0]),
    ("bfloat16", [448.0, 240.0, 1000.0]),
])
def test_narrow_formats_lay_out_positionally_where_float32_does(name, values):
    a = np.array(values, mf_type(name))
    f32 = a.astype(np.float32)
    assert "e+" not in repr(f32) and "e-" not in repr(f32)
    text = repr(a)
    assert "e+" not in text and "e-" not in text, text
    assert [float(e) for e in str(a).strip("[]").split()] == f32.tolist()
    assert _same_code(eval(text, NAMES), a, name)


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) >= "2.5.0",
                    reason="NumPy >= 2.5 prints each element with str(), never in a shared exponent")
@pytest.mark.parametrize("name, values", [
    ("bfloat16", [0.001, 100.0]),          # over 1000x apart
    ("bfloat16", [2.0 ** 24, 3.0]),        # 10**6 and more
    ("float8_e4m3fn", [448.0, 0.125]),     # over 1000x apart
])
def test_narrow_formats_use_the_exponent_where_float32_does(name, values):
    a = np.array(values, mf_type(name))
    assert "e+" in repr(a.astype(np.float32))
    assert "e+" in repr(a)


# ==========================================================================
# str / repr of scalars and arrays of every float format (sampled)
# ==========================================================================
def within_rounding_interval(name, printed, value):
    """the printed decimal rounds to `value` by the format's own grid, without
    relying on saturation (a value past max + ulp/2 is not max, even in a
    format that clamps overflow)"""
    f = R.fmt(name)
    g, gm = f._grid()
    x = abs(printed)
    return R.fmt(name).encode(np.array([printed]))[0] == R.fmt(name).encode(np.array([value]))[0] \
        and (x < gm[-1] or (x == gm[-1] and f.max_mag % 2 == 0))


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_str_round_trips_within_the_rounding_interval(name):
    t = mf_type(name)
    codes = R.all_codes(name)
    if len(codes) > 256:
        codes = codes[::61]
    a = codes.view(t)
    v = a.astype(np.float64)
    for i in range(len(a)):
        s = str(a[i])
        r = repr(a[i])
        assert r == f"minifloat.{name}({s})"
        if math.isnan(v[i]):
            assert s == "nan"
            continue
        back = float(s)
        assert float(t(back)) == v[i], (name, s, v[i])
        if math.isinf(v[i]):
            continue
        assert within_rounding_interval(name, back, v[i]), (name, s, v[i])


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_array_repr_names_the_dtype(name):
    a = np.array([1.0, 2.0], dtype=mf_type(name))
    assert f"dtype={name}" in repr(a)
    np.testing.assert_array_equal(a, np.array([1.0, 2.0], dtype=mf_type(name)))
