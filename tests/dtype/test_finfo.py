"""minifloat.finfo / np.finfo for bfloat16 (issue 2, item 10): the fields of
ml_dtypes.finfo with equal values, and each value checked from the codes."""
import math

import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R

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
