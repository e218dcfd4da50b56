"""Family conformance: the format table, exact decoding of every
code, and encoding (casts into a format) from float32, float64, float16, the
integer types, long double, Python objects and strings.

References: ml_dtypes 0.6.0 bit for bit where it rounds once, and the exact
single rounding of tests/_family_refs.py (built from the format definitions
with Fractions) everywhere.  bfloat16 is here only as one member of the family
(bfloat16-specific behaviour lives in the bfloat16 tests of each feature folder).
"""
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import minifloat
from minifloat import _core

import _family_refs as R
from conftest import FLOAT_FORMATS, INT_FORMATS, LEVELS, REPO_ROOT, kernel_level, mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

FORMATS = {f["name"]: f for f in _core.formats()}


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(R.code_dtype(name))


def assert_codes_equal(got, want, x=None, what=""):
    got = np.asarray(got)
    want = np.asarray(want).astype(got.dtype)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        show = [(None if x is None else x[i], hex(int(got[i])), hex(int(want[i]))) for i in bad[:8]]
        raise AssertionError(f"{what}: {len(bad)} codes differ (input, got, want): {show}")


# --------------------------------------------------------------------- table

def test_family_lists_match_the_definitions():
    assert FLOAT_FORMATS == R.FLOAT_NAMES
    assert INT_FORMATS == R.INT_NAMES
    for name in FLOAT_FORMATS + INT_FORMATS:
        assert hasattr(ml_dtypes, name), name   # every format has an ml_dtypes counterpart


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_format_table_row(name):
    """_core.formats() agrees with the formats' definitions and with the facts
    table in _family_refs (OFP8, OCP MX, ml_dtypes' finfo, DLPack 1.1's codes)."""
    row, f = FORMATS[name], R.fmt(name)
    e, m, bias, special, signed = R.FLOAT_DEFS[name]
    assert (row["exp_bits"], row["mant_bits"], row["bias"], row["special"], row["has_sign"]) == \
        (e, m, bias, special, signed)
    assert row["bits"] == f.bits
    assert row["itemsize"] == (2 if f.bits == 16 else 1)
    assert row["has_inf"] == f.has_inf and row["has_nan"] == f.has_nan
    assert row["has_negzero"] == f.has_negzero and row["has_zero"] == f.has_zero
    assert row["max"] == float(f.max) and row["min"] == (-float(f.max) if signed else float(f.smallest_normal))
    assert row["smallest_normal"] == float(f.smallest_normal)
    assert row["smallest_subnormal"] == float(f.smallest_subnormal)
    mx, sn, ss, eps, nnan, dl = R.FACTS[name]
    assert math.isclose(row["max"], mx, rel_tol=1e-5)
    assert math.isclose(row["smallest_normal"], sn, rel_tol=1e-5)
    assert math.isclose(row["smallest_subnormal"], ss, rel_tol=1e-5)
    assert row["eps"] == eps
    assert row["nan_codes"] == nnan == sum(f.is_nan_code(c) for c in range(1 << f.bits))
    assert row["dlpack_code"] == dl
    assert row["dlpack_bits"] == f.bits
    assert row["max_code"] == f.max_mag
    if f.has_nan:
        assert row["nan_code"] == f.nan_code(False)
    if f.has_inf:
        assert row["inf_code"] == f.inf_code(False)


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_int_table_row(name):
    row = FORMATS[name]
    bits, signed = R.INT_DEFS[name]
    assert row["bits"] == bits and row["itemsize"] == 1 and row["has_sign"] == signed
    assert (row["min"], row["max"]) == ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed
                                        else (0, (1 << bits) - 1))
    assert row["dlpack_code"] == (0 if signed else 1) and row["dlpack_bits"] == bits


def test_formats_doc_is_current():
    from minifloat import cli
    doc = REPO_ROOT / "docs" / "formats.md"
    assert cli.formats_markdown() == doc.read_text()


# -------------------------------------------------------------------- decode

@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_decode_every_code(name, each_level):
    """Every code -> float32 equals ml_dtypes bit for bit (NaN signs and
    payloads included) and the exact value of the definition; float64 too."""
    codes = R.all_codes(name)
    t, mlt = mf_type(name), R.ml_type(name)
    got32 = codes.view(t).astype(np.float32)
    want32 = codes.view(mlt).astype(np.float32)
    assert_codes_equal(got32.view(np.uint32), want32.view(np.uint32), codes, f"{name} -> float32")
    ref = R.fmt(name).decode_f64()
    with np.errstate(invalid="ignore"):        # bfloat16 has signalling NaN codes
        np.testing.assert_array_equal(got32.astype(np.float64), ref)      # NaN positions + values
    np.testing.assert_array_equal(np.signbit(got32), np.signbit(ref))      # signs, NaN's too
    got64 = codes.view(t).astype(np.float64)
    np.testing.assert_array_equal(got64, ref)
    np.testing.assert_array_equal(np.signbit(got64), np.signbit(ref))


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_decode_layout_independent(name, each_level):
    """Strided and unaligned sources (the non-kernel path) decode to the same
    float32 bits as contiguous ones, NaN payloads included."""
    codes = R.all_codes(name)
    t = mf_type(name)
    want = codes.view(t).astype(np.float32).view(np.uint32)
    rep = np.repeat(codes, 2)
    assert_codes_equal(rep.view(t)[::2].astype(np.float32).view(np.uint32), want,
                       codes, f"{name} strided -> float32")
    out = np.zeros(2 * len(codes), np.float32)
    out[::2] = codes.view(t)
    assert_codes_equal(out[::2].view(np.uint32), want, codes, f"{name} -> strided float32")
    buf = np.zeros(codes.nbytes + 1, np.uint8)
    un = buf[1:].view(codes.dtype)
    un[:] = codes
    assert_codes_equal(un.view(t).astype(np.float32).view(np.uint32), want,
                       codes, f"{name} unaligned -> float32")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_scalars_decode_like_arrays(name):
    codes = R.all_codes(name)
    arr = codes.view(mf_type(name))
    ref = R.fmt(name).decode_f64()
    step = 1 if len(codes) <= 256 else 97
    for c in range(0, len(codes), step):
        s = arr[c]
        assert type(s) is mf_type(name)
        v = float(s)
        assert (v == ref[c]) or (math.isnan(v) and math.isnan(ref[c]))
        assert math.copysign(1, v) == math.copysign(1, ref[c]) or math.isnan(v)
        if not math.isnan(v):
            assert hash(s) == hash(v)


# ------------------------------------------------------- encode from float32

def e8m0_ml_subnormal_quirk(x32):
    """ml_dtypes before 0.7 rounds float32 (and bfloat16) subnormal inputs in
    (2^-127, 1.5 * 2^-127) UP to 2^-126 (code 1) in float8_e8m0fnu, although
    2^-127 (code 0) is nearer; minifloat (and ml_dtypes 0.7) round to nearest.
    These inputs are the only place where float32 -> any format differs from
    ml_dtypes 0.6.  Empty from ml_dtypes 0.7 on."""
    with np.errstate(invalid="ignore"):
        x = x32.astype(np.float64)
    return (x > 2.0 ** -127) & (x < 1.5 * 2.0 ** -127) & (not R.ML_07)


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_encode_float32(name):
    """2^20 random float32 bit patterns plus every boundary class: equal to the
    exact single rounding, and to ml_dtypes bit for bit, at every kernel level
    (contiguous: the kernels; strided and unaligned: the element loop)."""
    bits = np.concatenate([R.random_f32_bits(1 << 20, seed=sum(map(ord, name))),
                           R.float32_boundary_bits(name)])
    x32 = bits.view(np.float32)
    t, mlt = mf_type(name), R.ml_type(name)
    with np.errstate(all="ignore"):
        via_ml = codes_of(x32.astype(mlt), name)
        want = R.fmt(name).encode(x32.astype(np.float64))
    for level in LEVELS:
        with kernel_level(level), np.errstate(all="ignore"):
            got = codes_of(x32.astype(t), name)
            assert_codes_equal(got, want, x32, f"float32 -> {name} at {level} (exact reference)")
            # odd lengths and offsets exercise the kernels' tails
            assert_codes_equal(codes_of(x32[3:1003].astype(t), name), want[3:1003], x32[3:1003],
                               f"float32[3:1003] -> {name} at {level}")
    with np.errstate(all="ignore"):
            out = np.zeros(2 * len(x32), t)
            out[::2] = x32
            assert_codes_equal(codes_of(out, name)[::2], want, x32, f"float32 -> strided {name}")
            buf = np.zeros(len(x32) * 4 + 1, np.uint8)
            un = buf[1:].view(np.float32)
            un[:] = x32
            assert not un.flags.aligned
            assert_codes_equal(codes_of(un.astype(t), name), want, x32, f"unaligned float32 -> {name}")
    differs = want != via_ml
    if name == "float8_e8m0fnu" and not R.ML_07:
        # DELIBERATE DIFFERENCE: see e8m0_ml_subnormal_quirk
        quirk = e8m0_ml_subnormal_quirk(x32)
        assert quirk.any()
        assert not (differs & ~quirk).any()
        assert (via_ml[quirk] == 1).all() and (want[quirk] == 0).all()
    else:
        assert_codes_equal(want.astype(via_ml.dtype), via_ml, x32, f"float32 -> {name} (ml_dtypes)")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_encode_float32_every_tie(name):
    """Each midpoint between two neighbours goes to the even code, on both
    sides of zero; one float32 ulp off a midpoint goes to the nearer value
    (including the carry into the next binade and into overflow)."""
    f = R.fmt(name)
    g, gm = f._grid()
    mids = gm.astype(np.float32)
    exact = mids.astype(np.float64) == gm
    mids = mids[exact]
    lo_idx = np.nonzero(exact)[0]
    t = mf_type(name)
    with np.errstate(all="ignore"):
        for sign in ((1, -1) if f.signed else (1,)):
            x = (sign * mids).astype(np.float32)
            got = codes_of(x.astype(t), name)
            want = R.fmt(name).encode(x.astype(np.float64))
            assert_codes_equal(got, want, x, f"{name} ties")
            mag = got.astype(np.int64) & ~f.sbit
            fin = lo_idx + 1 <= f.max_mag
            if f.special == "e8m0":
                assert (mag[fin] == lo_idx[fin] + 1).all()         # no mantissa bit: ties go up
            else:
                even = np.where(lo_idx % 2 == 0, lo_idx, lo_idx + 1)
                assert (mag[fin] == even[fin]).all()
            up = codes_of(np.nextafter(x, np.float32(sign * np.inf)).astype(t), name)
            dn = codes_of(np.nextafter(x, np.float32(-sign * np.inf)).astype(t), name)
            assert_codes_equal(up, f.encode(np.nextafter(x, np.float32(sign * np.inf)).astype(np.float64)),
                               x, f"{name} above ties")
            assert_codes_equal(dn, f.encode(np.nextafter(x, np.float32(-sign * np.inf)).astype(np.float64)),
                               x, f"{name} below ties")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_special_values(name):
    """inf, NaN (both signs), -0, overflow and underflow follow ml_dtypes'
    rules for each kind of format, written out here by hand."""
    f = R.fmt(name)
    t = mf_type(name)
    big = np.finfo(np.float32).max      # beyond every format's overflow threshold
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, big, -big,
                  1e-44, -1e-44], np.float32)
    with np.errstate(all="ignore"):
        got = [int(c) for c in codes_of(x.astype(t), name)]
    inf, ninf, nan, nnan, zero, nzero, over, nover, tiny, ntiny = got
    sp = f.special
    s = f.sbit
    if sp == "ieee":
        assert (inf, ninf) == (f.inf_code(False), f.inf_code(True))
        assert (over, nover) == (f.inf_code(False), f.inf_code(True))
        assert nan == f.nan_code(False) and nnan == f.nan_code(True) and nnan & s
    elif sp == "fn":                     # overflow and inf are NaN, sign kept
        assert (inf, ninf, over, nover) == (0x7F, 0xFF, 0x7F, 0xFF)
        assert (nan, nnan) == (0x7F, 0xFF)
    elif sp == "fnuz":                   # one NaN, 0x80; no -0
        assert inf == ninf == over == nover == nan == nnan == 0x80
        assert nzero == 0 and ntiny == 0
    elif sp == "none":                   # float6/float4: saturate; NaN -> zero of the other sign
        assert (inf, over) == (f.max_mag, f.max_mag)
        assert (ninf, nover) == (s | f.max_mag, s | f.max_mag)
        assert (nan, nnan) == (s, 0)
    elif sp == "e8m0":                   # no sign, no zero: 0, negatives, inf, NaN -> 0xFF
        assert inf == ninf == nan == nnan == zero == nzero == nover == ntiny == 0xFF
        assert over == 0xFF
        assert tiny == 0                 # below 2^-127 the nearest value is 2^-127
    if sp not in ("e8m0",):
        assert zero == 0 and tiny == 0
        if sp != "fnuz":
            assert nzero == s and ntiny == s


@pytest.mark.parametrize("name", [n for n in R.FLOAT_NAMES if R.fmt(n).special in ("ieee", "fn", "fnuz")])
def test_overflow_sets_the_fpu_flag(name):
    t = mf_type(name)
    x = np.array([min(float(R.fmt(name).max) * 4, 3.4e38)], np.float32)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            x.astype(t)
        np.array([1.0], np.float32).astype(t)      # no flag for in-range values


# ------------------------------------------------------- encode from float64

# ml_dtypes before 0.7 converts float64 through float32 for EVERY format (we found
# ml(x) == ml(float32(x)) for all inputs tried), so it rounds twice: e.g. for
# float8_e4m3fn, 1.0625 + 2^-40 (just above the midpoint of 1 and 1.125) becomes
# 1.0625 in float32, a tie, and ml_dtypes returns 1.0 where the correctly
# rounded result is 1.125.  For float8_e8m0fnu it also turns float64 values
# below float32's range (e.g. 1e-50) into zero first, hence NaN (0xFF), where
# the nearest value is 2^-127 (code 0).  minifloat rounds once, from the float64:
# DELIBERATE DIFFERENCE, checked below.  ml_dtypes 0.7 rounds once too, and
# agrees with minifloat bit for bit (checked below where it is installed).

def float64_probe(name, n_random, seed):
    f = R.fmt(name)
    g, gm = f._grid()
    rng = np.random.default_rng(seed)
    k = rng.integers(1, 1 << 28, size=len(gm))
    near_mid = np.concatenate([gm * (1 + np.ldexp(k, -52)), gm * (1 - np.ldexp(k, -52)),
                               np.nextafter(gm, np.inf), np.nextafter(gm, -np.inf)])
    x = np.concatenate([rng.integers(0, 1 << 64, size=n_random, dtype=np.uint64).view(np.float64),
                        rng.standard_normal(n_random) * float(f.max) / 3,
                        rng.standard_normal(n_random) * float(f.smallest_normal),
                        near_mid, -near_mid, R.boundary_values(name)])
    return x


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_encode_float64_rounds_once(name):
    x = float64_probe(name, 1 << 18, seed=len(name))
    t, mlt = mf_type(name), R.ml_type(name)
    with np.errstate(all="ignore"):
        got = codes_of(x.astype(t), name)
        ml = codes_of(x.astype(mlt), name)
        ml_twice = codes_of(x.astype(np.float32).astype(mlt), name)
    want = R.fmt(name).encode(x)
    assert_codes_equal(got, want, x, f"float64 -> {name}")
    if R.ML_07:
        # one rounding in ml_dtypes as well: the same codes
        assert_codes_equal(got, ml, x, f"float64 -> {name} (ml_dtypes 0.7)")
        return
    # the documented behaviour of ml_dtypes before 0.7: through float32
    assert_codes_equal(ml, ml_twice, x, f"ml_dtypes float64 -> {name} via float32")
    assert (ml != want).any(), "ml_dtypes no longer double-rounds: update the comment above"
    # where ml_dtypes is right it agrees with us
    with np.errstate(all="ignore"):
        single = x.astype(np.float32).astype(np.float64) == x
    assert_codes_equal(got[single & ~e8m0_ml_subnormal_quirk(x.astype(np.float32))]
                       if name == "float8_e8m0fnu" else got[single],
                       ml[single & ~e8m0_ml_subnormal_quirk(x.astype(np.float32))]
                       if name == "float8_e8m0fnu" else ml[single],
                       None, f"float64 representable in float32 -> {name}")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_encode_float64_double_rounding_example(name):
    """Just above the midpoint between 1 and the next value: one rounding
    goes up, rounding through float32 first gives a tie that goes to 1."""
    f = R.fmt(name)
    one = int(R.fmt(name).encode(np.array([1.0]))[0])
    g, gm = f._grid()
    mag = one & ~f.sbit
    mid = float(gm[mag])
    x = np.array([mid + mid * 2.0 ** -40, -(mid + mid * 2.0 ** -40)])
    assert (x.astype(np.float32) == np.array([mid, -mid], np.float32)).all()
    with np.errstate(all="ignore"):
        got = codes_of(x.astype(mf_type(name)), name)
        ml = codes_of(x.astype(R.ml_type(name)), name)
    assert_codes_equal(got, f.encode(x), x, name)
    assert int(got[0]) & ~f.sbit == mag + 1
    if R.ML_07:
        assert_codes_equal(ml, got, x, f"{name} (ml_dtypes 0.7: one rounding)")
    elif name != "float8_e8m0fnu":          # e8m0's ties go up anyway
        assert int(ml[0]) & ~f.sbit == mag         # ml_dtypes: rounded twice, down to 1


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_python_floats_scalars_and_setitem_round_once(name):
    """np.array(list of Python floats), arr[i] = float, and the scalar type's
    constructor take the float64 value and round it once."""
    x = R.boundary_values(name)
    want = R.fmt(name).encode(x)
    t = mf_type(name)
    with np.errstate(all="ignore"):
        a = np.array([float(v) for v in x], dtype=t)
        b = np.empty(len(x), t)
        for i, v in enumerate(x):
            b[i] = float(v)
        c = np.empty(len(x), t)
        for i, v in enumerate(x):
            c[i] = t(float(v))
    for arr, what in ((a, "np.array"), (b, "setitem"), (c, "scalar constructor")):
        assert_codes_equal(codes_of(arr, name), want, x, f"{what} -> {name}")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_strings_parse_then_round_once(name):
    x = R.boundary_values(name)
    x = x[~np.isnan(x)]
    if len(x) > 5000:
        x = x[::37]
    strs = [repr(float(v)) for v in x] + ["nan", "-nan", "inf", "-inf", " 1.5 "]
    vals = np.array([float(s) for s in strs])
    want = R.fmt(name).encode(vals)
    t = mf_type(name)
    with np.errstate(all="ignore"):
        for arr in (np.array(strs), np.array(strs).astype("S")):
            assert_codes_equal(codes_of(arr.astype(t), name), want, vals, f"str -> {name}")
    with pytest.raises(ValueError):
        np.array(["abc"]).astype(t)


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_encode_every_float16(name):
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        got = codes_of(h.astype(mf_type(name)), name)
        ml = codes_of(h.astype(R.ml_type(name)), name)
    want = R.fmt(name).encode(h.astype(np.float64))
    assert_codes_equal(got, want, h, f"float16 -> {name}")
    assert_codes_equal(got, ml, h, f"float16 -> {name} (ml_dtypes)")


def wide_integer_probe(name, signed, rng):
    """int64/uint64 values next to the midpoints of the format's large values
    (where rounding the integer to float64 first could double-round)."""
    f = R.fmt(name)
    g, gm = f._grid()
    lim = 2.0 ** 63 if signed else 2.0 ** 64
    mids = [int(Fraction(float(m))) for m in gm if 1 <= m < lim]
    out = set()
    for m in mids[-40:]:
        for d in (-1, 0, 1, 2, -2, 1 << 11, -(1 << 11)):
            v = m + d
            if (-(1 << 63) if signed else 0) <= v < ((1 << 63) if signed else (1 << 64)):
                out.add(v)
                if signed:
                    out.add(-v)
    lo, hi = (-(1 << 63), (1 << 63) - 1) if signed else (0, (1 << 64) - 1)
    out.update(int(v) for v in rng.integers(lo, hi, size=300, dtype=np.int64 if signed else np.uint64,
                                            endpoint=True))
    out.update([lo, hi, 0, 1, -1 if signed else 2, 7, 255, 256, 65535, 65536])
    return sorted(out)


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
@pytest.mark.parametrize("itype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_encode_integers_round_once(name, itype):
    rng = np.random.default_rng(5)
    info = np.iinfo(itype)
    if itype in (np.int64, np.uint64):
        vals = wide_integer_probe(name, itype == np.int64, rng)
    else:
        vals = sorted({int(v) for v in rng.integers(info.min, info.max, 2000, endpoint=True)}
                      | {info.min, info.max, 0, 1})
    vals = [v for v in vals if info.min <= v <= info.max]
    x = np.array(vals, dtype=itype)
    with np.errstate(all="ignore"):
        got = codes_of(x.astype(mf_type(name)), name)
    want = np.array([R.encode_fraction(name, v) for v in vals], np.uint32)
    assert_codes_equal(got, want, x, f"{np.dtype(itype)} -> {name}")
    if itype in (np.int8, np.uint8, np.int16, np.uint16, np.int32):
        with np.errstate(all="ignore"):
            assert_codes_equal(got, codes_of(x.astype(R.ml_type(name)), name), x,
                               f"{np.dtype(itype)} -> {name} (ml_dtypes)")
    assert x.astype(mf_type(name)).dtype == np.dtype(mf_type(name))


@pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52, reason="long double is float64 here")
@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_encode_longdouble_rounds_once(name):
    f = R.fmt(name)
    g, gm = f._grid()
    tiny = np.longdouble(2) ** -60
    mids = gm[(gm >= 2.0 ** -100) & (gm < 2.0 ** 100)]
    mids = mids[:: max(1, len(mids) // 200)]
    x = np.concatenate([np.longdouble(mids) * (1 + tiny), np.longdouble(mids) * (1 - tiny),
                        np.longdouble(mids)])
    x = np.concatenate([x, -x])
    want = np.array([R.encode_fraction(name, Fraction(*v.as_integer_ratio())) for v in x], np.uint32)
    with np.errstate(all="ignore"):
        got = codes_of(x.astype(mf_type(name)), name)
    assert_codes_equal(got, want, x, f"longdouble -> {name}")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_complex_sources_warn_and_take_the_real_part(name):
    z = np.array([1.5 + 2j, -0.25 - 1j, 3e38 + 0j], np.complex128)
    t = mf_type(name)
    with np.errstate(all="ignore"), pytest.warns(np.exceptions.ComplexWarning):
        got = codes_of(z.astype(t), name)
    assert_codes_equal(got, R.fmt(name).encode(z.real), z.real, f"complex -> {name}")
    with np.errstate(all="ignore"), pytest.warns(np.exceptions.ComplexWarning):
        got64 = codes_of(z.astype(np.complex64).astype(t), name)
    assert_codes_equal(got64, R.fmt(name).encode(z.real.astype(np.float32).astype(np.float64)),
                       z.real, f"complex64 -> {name}")


# ----------------------------------------------------------- to NumPy types

@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_to_numpy_floats_and_bool(name):
    codes = R.all_codes(name)
    a = codes.view(mf_type(name))
    ref = R.fmt(name).decode_f64()
    with np.errstate(all="ignore"):
        # float16 rounds once from the exact value
        np.testing.assert_array_equal(a.astype(np.float16).view(np.uint16)[~np.isnan(ref)],
                                      ref.astype(np.float16).view(np.uint16)[~np.isnan(ref)])
        assert np.isnan(a.astype(np.float16)[np.isnan(ref)]).all()
        np.testing.assert_array_equal(a.astype(np.longdouble), ref.astype(np.longdouble))
        np.testing.assert_array_equal(a.astype(np.complex128), ref.astype(np.complex128))
        np.testing.assert_array_equal(a.astype(np.complex64), ref.astype(np.complex64))
    np.testing.assert_array_equal(a.astype(np.bool_), ref != 0)
    np.testing.assert_array_equal(a.astype(np.bool_), codes.view(R.ml_type(name)).astype(np.bool_))


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
@pytest.mark.parametrize("itype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_to_numpy_integers_like_float32(name, itype):
    """Documented: float formats -> NumPy integers give what NumPy's float32
    cast gives (also for NaN, inf and out-of-range values)."""
    codes = R.all_codes(name)
    a = codes.view(mf_type(name))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = a.astype(itype)
        want = a.astype(np.float32).astype(itype)
    np.testing.assert_array_equal(got, want)
    # finite in-range values agree with ml_dtypes (truncation)
    ref = R.fmt(name).decode_f64()
    info = np.iinfo(itype)
    ok = np.isfinite(ref) & (ref >= info.min) & (ref < float(info.max + 1))   # exact bounds
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ml = codes.view(R.ml_type(name)).astype(itype)
    np.testing.assert_array_equal(got[ok], ml[ok])
    np.testing.assert_array_equal(got[ok], np.trunc(ref[ok]).astype(itype))
