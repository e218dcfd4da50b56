"""minifloat.finfo / np.finfo (and iinfo): for bfloat16
and every member of the family, the fields of ml_dtypes.finfo /
iinfo with equal values, and each value checked from the codes or the
format's definition."""
import math

import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R
import _family_refs as FR
from conftest import mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

BF = np.dtype(bf16)
FIELDS = ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal", "smallest_subnormal",
          "nmant", "nexp", "maxexp", "minexp", "machep", "negep", "precision", "resolution",
          "dtype", "iexp"]


def _ml():
    import ml_dtypes

    return ml_dtypes.finfo(ml_dtypes.bfloat16)


@pytest.mark.parametrize("get", [lambda: minifloat.finfo(bf16), lambda: minifloat.finfo(BF),
                                 lambda: minifloat.finfo(np.zeros(1, bf16).dtype),
                                 lambda: np.finfo(bf16), lambda: np.finfo(BF)],
                         ids=["mf-type", "mf-dtype", "mf-array-dtype", "np-type", "np-dtype"])
@pytest.mark.parametrize("field", FIELDS)
def test_fields_equal_ml_dtypes(get, field):
    fi = get()
    ref = getattr(_ml(), field)
    got = getattr(fi, field)
    if field == "dtype":
        assert got == BF
        assert str(got) == str(ref) == "bfloat16"
    elif isinstance(ref, (int, np.integer)):
        assert type(got) in (int, np.int32, np.int64) or isinstance(got, (int, np.integer))
        assert got == ref
    else:
        assert type(got) is bf16, (field, type(got))    # ml_dtypes gives its own scalars
        assert float(got) == float(ref)
        assert np.asarray(got).view(np.uint16) == np.asarray(ref).view(np.uint16)


def test_values_from_the_codes():
    fi = minifloat.finfo(bf16)
    dec = lambda c: float(R.decode_f64(np.uint16(c)))   # noqa: E731
    assert fi.bits == 16 and fi.nmant == 7 and fi.nexp == 8
    assert float(fi.max) == dec(0x7F7F) == 3.3895313892515355e38
    assert float(fi.min) == -dec(0x7F7F)
    assert float(fi.tiny) == float(fi.smallest_normal) == dec(0x0080) == 2.0 ** -126
    assert float(fi.smallest_subnormal) == dec(0x0001) == 2.0 ** -133
    assert float(fi.eps) == dec(0x3F81) - 1 == 2.0 ** -7
    assert float(fi.epsneg) == 1 - dec(0x3F7F) == 2.0 ** -8
    assert fi.machep == -7 and fi.negep == -8
    assert fi.maxexp == 128 and fi.minexp == -126
    assert fi.precision == 2
    assert float(fi.resolution) == float(bf16(0.01))
    assert fi.iexp == 8
    # consistency with the dtype's arithmetic
    assert np.nextafter(bf16(1), bf16(2)) - bf16(1) == fi.eps
    assert np.nextafter(bf16(fi.max), bf16(np.inf)) == np.inf
    assert np.nextafter(bf16(0), bf16(1)) == fi.smallest_subnormal
    assert math.floor(-math.log10(float(fi.eps))) == fi.precision


def test_np_finfo_and_minifloat_finfo_agree():
    a, b = np.finfo(bf16), minifloat.finfo(bf16)
    for f in FIELDS:
        va, vb = getattr(a, f), getattr(b, f)
        assert va == vb or (np.isnan(float(va)) and np.isnan(float(vb))), f


def test_finfo_is_cached_and_prints():
    assert minifloat.finfo(bf16) is minifloat.finfo(BF)
    s = str(minifloat.finfo(bf16))
    assert "bfloat16" in s and "eps" in s
    r = repr(minifloat.finfo(bf16))
    assert "bfloat16" in r and "finfo" in r


def test_finfo_passes_numpy_types_through():
    assert minifloat.finfo(np.float32) == np.finfo(np.float32)
    assert minifloat.finfo(np.float16).eps == np.finfo(np.float16).eps


def test_iinfo_rejects_bfloat16():
    with pytest.raises(ValueError):
        minifloat.iinfo(bf16)
    with pytest.raises(ValueError):
        np.iinfo(bf16)

# ==========================================================================
# Every member of the family (bfloat16 included)
# ==========================================================================
def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


FINFO_FIELDS = ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal",
                "smallest_subnormal", "nmant", "nexp", "maxexp", "minexp", "machep", "negep",
                "precision", "resolution", "iexp"]


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_finfo_equals_ml_dtypes_every_field(name):
    ours = minifloat.finfo(mf_type(name))
    theirs = ml_dtypes.finfo(FR.ml_type(name))
    for field in FINFO_FIELDS:
        a, b = getattr(ours, field), getattr(theirs, field)
        if isinstance(b, (int, np.integer)) and not isinstance(b, bool):
            assert a == b and isinstance(a, (int, np.integer)), (field, a, b)
        else:
            # a value of the format, equal to ml_dtypes' value of the same format
            assert type(a) is mf_type(name), (field, type(a))
            if type(b) is FR.ml_type(name):
                assert codes_of(np.array([a]), name)[0] == np.array([b]).view(FR.code_dtype(name))[0], \
                    (field, a, b)
            else:     # ml_dtypes gives some fields of float6/float4 as Python floats
                assert float(a) == float(b), (field, a, b)
    assert ours.dtype == np.dtype(mf_type(name))
    # the same object from a name, a dtype or the scalar type
    assert minifloat.finfo(name) is ours and minifloat.finfo(np.dtype(mf_type(name))) is ours
    # the values themselves, from the definition
    f = FR.fmt(name)
    assert float(ours.max) == float(f.max)
    assert float(ours.smallest_normal) == float(f.smallest_normal) == float(ours.tiny)
    assert float(ours.smallest_subnormal) == float(f.smallest_subnormal)
    assert ours.bits == f.bits and ours.nmant == f.M and ours.nexp == f.E
    with pytest.raises(ValueError):
        minifloat.finfo(minifloat.int4)


@pytest.mark.parametrize("t", [np.float16, np.float32, np.float64])
def test_finfo_of_numpy_types_is_numpys(t):
    assert minifloat.finfo(t).max == np.finfo(t).max
    assert minifloat.finfo(t).bits == np.finfo(t).bits


# np.finfo asks the DType for its constants: these fields come out right for
# every format.  DOCUMENTED LIMITATION (docs/design.md, "finfo / iinfo"): NumPy
# derives nexp from the storage size (wrong for the fn/fnuz/e8m0/float6/float4
# formats), bits (8 for float6/float4), epsneg/negep by radix arithmetic
# (0 and an error for float6_e2m3fn/float4_e2m1fn), and resolution (NaN for
# e8m0); minifloat.finfo has them right.
NP_FINFO_RIGHT = ["eps", "max", "min", "tiny", "smallest_normal", "smallest_subnormal", "nmant",
                  "maxexp", "minexp", "machep", "precision", "iexp"]


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_np_finfo_fields(name):
    ours = np.finfo(mf_type(name))
    ref = minifloat.finfo(mf_type(name))
    for field in NP_FINFO_RIGHT:
        if field == "iexp":
            continue      # derived from nexp
        assert float(getattr(ours, field)) == float(getattr(ref, field)), field


@pytest.mark.parametrize("name", FR.INT_NAMES)
def test_iinfo_equals_ml_dtypes(name):
    ours = minifloat.iinfo(mf_type(name))
    theirs = ml_dtypes.iinfo(FR.ml_type(name))
    assert (ours.min, ours.max, ours.bits) == (theirs.min, theirs.max, theirs.bits)
    assert type(ours.min) is int and type(ours.max) is int
    assert str(ours.dtype) == str(theirs.dtype) == name
    assert ours.kind == np.iinfo(mf_type(name)).kind == ("i" if name.startswith("int") else "u")
    assert repr(ours) == repr(theirs)
    for spec in (name, np.dtype(mf_type(name))):
        assert (minifloat.iinfo(spec).min, minifloat.iinfo(spec).max) == (ours.min, ours.max)
    bits, signed = FR.INT_DEFS[name]
    assert (ours.min, ours.max) == ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed
                                    else (0, (1 << bits) - 1))
    with pytest.raises(ValueError):
        minifloat.iinfo(minifloat.float8_e4m3fn)


@pytest.mark.parametrize("t", [np.int8, np.uint16])
def test_iinfo_of_numpy_types_is_numpys(t):
    assert minifloat.iinfo(t).max == np.iinfo(t).max


@pytest.mark.parametrize("name", FR.INT_NAMES)
def test_np_iinfo(name):
    info = np.iinfo(mf_type(name))
    ref = minifloat.iinfo(mf_type(name))
    assert (info.min, info.max, info.bits) == (ref.min, ref.max, ref.bits)
