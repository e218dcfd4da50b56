"""Interoperation with ml_dtypes and torch."""
import numpy as np
import pytest

from minifloat import bfloat16 as bf16

import _refs as R

ml_dtypes = pytest.importorskip("ml_dtypes")
BF = np.dtype(bf16)
MLBF = np.dtype(ml_dtypes.bfloat16)
PENDING_ML = pytest.mark.xfail(strict=True, reason="PENDING: casts between ml_dtypes.bfloat16 "
                               "and minifloat.bfloat16 (TypeError 'Cannot cast array data' today)")


def _ml_all():
    return R.ALL_CODES.copy().view(MLBF)


def test_ml_astype_minifloat_exact():
    got = _ml_all().astype(bf16)
    assert got.dtype == BF
    assert np.array_equal(R.bits(got), R.ALL_CODES)


def test_minifloat_astype_ml_exact():
    got = R.as_bf16(R.ALL_CODES).astype(ml_dtypes.bfloat16)
    assert got.dtype == MLBF
    assert np.array_equal(got.view(np.uint16), R.ALL_CODES)


def test_asarray_and_array_constructor_from_ml():
    m = _ml_all()
    assert np.array_equal(R.bits(np.asarray(m, dtype=bf16)), R.ALL_CODES)
    assert np.array_equal(R.bits(np.array([ml_dtypes.bfloat16(1.5)], dtype=bf16)), [0x3FC0])


def test_can_cast_between_the_two_bfloat16s():
    assert np.can_cast(MLBF, BF, "equiv") or np.can_cast(MLBF, BF, "safe")
    assert np.can_cast(BF, MLBF, "equiv") or np.can_cast(BF, MLBF, "safe")


def test_bit_exchange_through_uint16_views():
    # what works today, and what users can fall back to
    m = _ml_all()
    mf = m.view(np.uint16).view(bf16)
    assert np.array_equal(R.bits(mf), R.ALL_CODES)
    back = mf.view(np.uint16).view(ml_dtypes.bfloat16)
    assert np.array_equal(back.view(np.uint16), R.ALL_CODES)
    # and values agree through float32
    fin = R.finite_codes()
    assert np.array_equal(R.as_bf16(fin).astype(np.float32),
                          fin.copy().view(MLBF).astype(np.float32))


def test_scalar_conversion_both_ways():
    for v in (1.5, -0.0, 0.1, 3e38, 1e-40, float("inf")):
        m = ml_dtypes.bfloat16(v)
        x = bf16(m)
        assert type(x) is bf16
        assert R.bits(x) == np.asarray(m).view(np.uint16)
        m2 = ml_dtypes.bfloat16(x)
        assert np.asarray(m2).view(np.uint16) == R.bits(x)
    assert np.isnan(bf16(ml_dtypes.bfloat16(float("nan"))))


def test_same_rounding_as_ml_dtypes_from_float32():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.array_equal(R.bits(x.astype(bf16)), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_float64_rounding_against_ml_dtypes_where_documented():
    # ml_dtypes before 0.7 (and torch) round float64 through float32 (twice);
    # minifloat rounds once, and so does ml_dtypes 0.7
    x = np.array([1 + 2 ** -8 + 2 ** -30])
    assert float(x.astype(bf16)[0]) == 1.0078125
    ml_version = tuple(int(p) for p in ml_dtypes.__version__.split(".")[:2])
    assert float(x.astype(ml_dtypes.bfloat16)[0]) == (1.0078125 if ml_version >= (0, 7) else 1.0)


def test_torch_exchange_through_int16_views():
    torch = R.torch_or_skip()

    a = R.as_bf16(R.ALL_CODES)
    t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    assert t.dtype == torch.bfloat16
    fin = R.finite_codes()
    assert np.array_equal(t.float().numpy()[fin], a.astype(np.float32)[fin])
    back = t.view(torch.int16).numpy().view(bf16)
    assert np.array_equal(R.bits(back), R.ALL_CODES)
