"""ml_dtypes drop-in gaps (issue 7): finfo of arrays, ``<type>.dtype``, sign
operations that keep NaN payloads, and comparisons with Python numbers that
compare values."""
import pickle

import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _family_refs as R
from conftest import LEVELS, kernel_level, mf_type

ALL_TYPES = minifloat.scalar_types


# ------------------------------------------------------------------ finfo

@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_finfo_accepts_arrays_and_scalars(name):
    t = mf_type(name)
    fi = minifloat.finfo(t)
    for arg in (np.zeros(3, t), np.zeros((2, 0), t), t(1), np.dtype(t), name):
        got = minifloat.finfo(arg)
        assert got is fi, arg
        assert got.dtype == np.dtype(t)


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_iinfo_accepts_arrays(name):
    t = mf_type(name)
    ii = minifloat.iinfo(np.zeros(2, t))
    assert ii is minifloat.iinfo(t) and (ii.min, ii.max) == (minifloat.iinfo(name).min,
                                                             minifloat.iinfo(name).max)


def test_finfo_iinfo_of_numpy_arrays_and_wrong_kinds():
    assert minifloat.finfo(np.zeros(2, np.float32)) == np.finfo(np.float32)
    assert minifloat.iinfo(np.zeros(2, np.int8)).max == 127
    with pytest.raises(ValueError, match="iinfo"):
        minifloat.finfo(np.zeros(2, minifloat.int4))
    with pytest.raises(ValueError, match="finfo"):
        minifloat.iinfo(np.zeros(2, bf16))
    with pytest.raises((TypeError, ValueError)):
        minifloat.finfo(object())


# ------------------------------------------------------------ <type>.dtype

@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.__name__)
def test_scalar_type_has_dtype(t):
    assert isinstance(t.dtype, np.dtype)
    assert t.dtype == np.dtype(t) and t.dtype.type is t
    assert "dtype" in t.__dict__              # a class attribute, as in ml_dtypes
    assert t(0).dtype is t.dtype              # instances answer the same
    assert np.zeros(2, t.dtype).dtype == t.dtype
    assert pickle.loads(pickle.dumps(t(0))).dtype == t.dtype
