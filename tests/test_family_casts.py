"""Family conformance (issue 3): casts between any two family members
(bfloat16 included as one member), interchange with ml_dtypes arrays, and
cast safety.

Cross-format casts must round once, directly: decoding the source to float64
(exact) and rounding that once, with the C oracle (_core._oracle_encode) and
with the independent reference of tests/_family_refs.py.
"""
import warnings
from fractions import Fraction

import numpy as np
import pytest

import minifloat
from minifloat import _core

import _family_refs as R
from conftest import mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

ALL = R.FLOAT_NAMES + R.INT_NAMES


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(R.code_dtype(name))


def source_codes(name):
    """every code of an 8-bit-or-less format; for bfloat16 every code too
    (65536 values are cheap)"""
    return R.all_codes(name)


def exact_values(name):
    if name in R.FLOAT_DEFS:
        return R.fmt(name).decode_f64()
    return R.int_wrap(np.arange(R.ncodes(name)), name).astype(np.float64)


def expected_cast(a, b):
    """codes of format b for every code of format a (one rounding, ml_dtypes'
    integer rules)"""
    v = exact_values(a)
    if b in R.FLOAT_DEFS:
        return R.fmt(b).encode(v)
    bits, signed = R.INT_DEFS[b]
    # integer targets: truncate toward zero, then wrap; NaN/inf/|x| >= 2^31 -> 0
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (np.abs(v) < 2.0 ** 31)
        t = np.where(ok, np.trunc(np.where(ok, v, 0)), 0).astype(np.int64)
    return (t & ((1 << bits) - 1)).astype(np.uint32)


PAIRS = [(a, b) for a in ALL for b in ALL]


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
    if b in R.FLOAT_DEFS:
        oracle = _core._oracle_encode(b, src.astype(np.float64))
        np.testing.assert_array_equal(got, oracle.astype(got.dtype))


# ml_dtypes' casts between its own formats that are wrong, where minifloat
# deliberately gives the correctly rounded result:
#  * bfloat16 -> float8_e8m0fnu: bfloat16 subnormals in (2^-127, 1.5 * 2^-127)
#    round UP to 2^-126 in ml_dtypes (nearest is 2^-127), as for float32 inputs;
#  * float8_e3m4/e4m3/e5m2 +inf -> int4/uint4/int2/uint2/int1/uint1: ml_dtypes
#    gives -1 (all bits set; it converts through a saturating integer), while
#    its own float32 +inf -> int4 gives 0.  minifloat gives 0 for every source.
#  * on other CPUs than x86 (Arm), ml_dtypes converts inf, NaN and values
#    outside the integer format's range as the C compiler does there
#    (saturating): unspecified, not compared (minifloat's rule, the same on
#    every CPU, is checked by test_family_intformats and expected_cast).
def ml_quirk_mask(a, b):
    v = exact_values(a)
    if not R.X86 and b in R.INT_NAMES:
        bits, signed = R.INT_DEFS[b][:2]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        with np.errstate(invalid="ignore"):
            t = np.trunc(np.where(np.isfinite(v), v, 0))
        return ~(np.isfinite(v) & (t >= lo) & (t <= hi))
    if a == "bfloat16" and b == "float8_e8m0fnu":
        return (v > 2.0 ** -127) & (v < 1.5 * 2.0 ** -127)
    if a in ("float8_e3m4", "float8_e4m3", "float8_e5m2") and b in R.INT_NAMES:
        return v == np.inf
    return np.zeros(len(v), bool)


@pytest.mark.parametrize("a,b", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_ml_dtypes_arrays_cast_like_ours(a, b):
    """ml_dtypes arrays astype minifloat (and back) are bit-exact, and an
    ml_dtypes array of format a cast to minifloat format b gives the same codes
    as minifloat's own a -> b cast."""
    codes = source_codes(a)
    ours = codes.view(mf_type(a))
    theirs = codes.view(R.ml_type(a))
    with np.errstate(all="ignore"):
        want = codes_of(ours.astype(mf_type(b)), b)
        np.testing.assert_array_equal(codes_of(theirs.astype(mf_type(b)), b), want)
        np.testing.assert_array_equal(codes_of(ours.astype(R.ml_type(b)), b), want)
        assert theirs.astype(mf_type(b)).dtype == np.dtype(mf_type(b))
        assert ours.astype(R.ml_type(b)).dtype == np.dtype(R.ml_type(b))
        try:
            ml = codes_of(theirs.astype(R.ml_type(b)), b)
        except TypeError:
            return      # ml_dtypes has no cast between these two of its own types
    quirk = ml_quirk_mask(a, b)
    np.testing.assert_array_equal(want[~quirk], ml[~quirk])
    if quirk.any() and (R.X86 or b not in R.INT_NAMES):
        assert (want[quirk] != ml[quirk]).all()


@pytest.mark.parametrize("name", ALL)
def test_ml_dtypes_round_trip_bit_exact(name):
    codes = source_codes(name)
    a = codes.view(R.ml_type(name))
    b = a.astype(mf_type(name))
    c = b.astype(R.ml_type(name))
    np.testing.assert_array_equal(codes_of(b, name), codes)
    np.testing.assert_array_equal(codes_of(c, name), codes)
    # np.asarray with a dtype, and assignment between the two kinds of array
    d = np.asarray(a, dtype=mf_type(name))
    np.testing.assert_array_equal(codes_of(d, name), codes)
    e = np.empty(len(codes), R.ml_type(name))
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
    if name in R.FLOAT_DEFS:
        f = R.fmt(name)
        out = set()
        for c in range(1 << f.bits):
            v = f.value(c)
            out.add(v if isinstance(v, Fraction) else ("nan" if v != v else v))
        return out
    bits, signed = R.INT_DEFS[name]
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


@pytest.mark.parametrize("a", ALL)
def test_can_cast_safe_iff_every_value_survives(a):
    va = value_set(a)
    for b in ALL:
        vb = value_set(b)
        want = holds(vb, va)
        got = bool(np.can_cast(mf_type(a), mf_type(b), "safe"))
        assert got == want, (a, b, got, want)
        assert bool(_core._cast_is_safe(a, b)) == want, (a, b)
        if not want:
            # float/int -> float is same_kind, float -> int unsafe
            same_kind = bool(np.can_cast(mf_type(a), mf_type(b), "same_kind"))
            kinds = "buif"     # NumPy's kind order
            ka, kb = (R.kind_char(n) for n in (a, b))
            assert same_kind == (kinds.index(ka) <= kinds.index(kb)), (a, b)
        assert np.can_cast(mf_type(a), mf_type(b), "unsafe")




@pytest.mark.parametrize("name", ALL)
def test_can_cast_bool_into(name):
    # split out of the next test so that the bool bug is visible on its own
    assert bool(np.can_cast(np.bool_, mf_type(name), "safe")) == holds(value_set(name),
                                                                       numpy_value_set("bool"))


@pytest.mark.parametrize("name", ALL)
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
        assert bool(np.can_cast(mf_type(name), np.dtype(t), "safe")) == (name in R.INT_NAMES
                                                                        and not (t.startswith("u") and
                                                                                 R.INT_DEFS[name][1]))


def test_bool_into_e8m0_and_int1_values():
    """What the bool bug does: False has no value in float8_e8m0fnu (NaN),
    True none in int1 (wraps to -1) -- the casts themselves do what ml_dtypes does."""
    got = np.array([False, True]).astype(minifloat.float8_e8m0fnu).view(np.uint8)
    assert got.tolist() == [0xFF, 127]
    assert got.tolist() == np.array([False, True]).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8).tolist()
    got = np.array([False, True]).astype(minifloat.int1).astype(np.int8)
    assert got.tolist() == [0, -1]
