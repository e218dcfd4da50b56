"""Family conformance: every format is a NumPy dtype with what
bfloat16 has -- scalar type, name lookup, array creation, views and copies.
The same for pickle and save/load: test_pickle_io.py; printing:
test_printing.py; finfo / iinfo: test_finfo.py (bfloat16's scalar type in
detail: test_scalar.py).
"""
import math

import numpy as np
import pytest

import minifloat
from minifloat import _core

import _family_refs as R
from conftest import mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

ALL = R.FLOAT_NAMES + R.INT_NAMES
FORMATS = {f["name"]: f for f in _core.formats()}


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(R.code_dtype(name))


@pytest.mark.parametrize("name", ALL)
def test_dtype_identity_and_lookup(name):
    # by name (np.dtype(name), dt.str round trip): tests/numpy_compat/test_neighbours.py, in
    # fresh processes; this session imported ml_dtypes, whose names win
    t = mf_type(name)
    dt = np.dtype(t)
    assert dt.type is t and dt is np.dtype(t)
    assert str(dt) == name and dt.name == name
    assert dt.itemsize == FORMATS[name]["itemsize"]
    assert type(dt).__module__ == "minifloat.dtypes"
    assert getattr(minifloat.dtypes, type(dt).__name__) is type(dt)
    assert t in minifloat.scalar_types and name in minifloat.__all__
    assert np.sctypeDict[name] is R.ml_type(name)
    if name in R.FLOAT_DEFS:
        assert dt.kind == "V"   # legacy-compatible: docs/design.md, "Which dtype API"
        assert np.issubdtype(dt, np.floating) and np.issubdtype(dt, np.inexact)
        assert not np.issubdtype(dt, np.integer)
        assert issubclass(t, np.floating)
    else:
        signed = R.INT_DEFS[name][1]
        assert dt.kind == "V"
        assert minifloat.iinfo(t).kind == ("i" if signed else "u")
        assert np.issubdtype(dt, np.signedinteger if signed else np.unsignedinteger)
        assert not np.issubdtype(dt, np.floating)
    # the ml_dtypes type of the same name is a different dtype with the same codes
    assert np.dtype(R.ml_type(name)) != dt


@pytest.mark.parametrize("name", ALL)
def test_array_creation_views_and_copies(name):
    t = mf_type(name)
    codes = R.all_codes(name)
    a = codes.view(t)
    assert a.dtype == np.dtype(t) and a.shape == codes.shape
    np.testing.assert_array_equal(a.view(R.code_dtype(name)), codes)
    if R.code_dtype(name) == np.uint8:
        np.testing.assert_array_equal(a.view(np.uint8), codes)
        np.testing.assert_array_equal(a.view(np.int8), codes.view(np.int8))
    b = np.frombuffer(codes.tobytes(), dtype=t)
    np.testing.assert_array_equal(codes_of(b, name), codes)
    c = a.copy()
    assert not np.shares_memory(a, c)
    np.testing.assert_array_equal(codes_of(c, name), codes)
    m = a[: (len(a) // 4) * 4].reshape(4, -1)
    np.testing.assert_array_equal(codes_of(m.T.copy().T, name), codes_of(m, name))
    f = np.asfortranarray(m)
    np.testing.assert_array_equal(codes_of(np.ascontiguousarray(f), name), codes_of(m, name))
    assert a.astype(t, copy=False) is a
    if name == "int1":
        # 1 is out of int1's range.  np.array([1], int1) raises OverflowError
        # (NumPy 2's rule for Python integers); np.ones fills through an
        # unsafe int64 -> int1 cast, which wraps (docs/design.md, Known limits)
        with pytest.raises(OverflowError, match="out of bounds for int1"):
            np.array([1], t)
        assert np.ones(3, t).tolist() == [-1, -1, -1]
        one = np.full(3, -1, t)
    else:
        one = np.ones(3, t)
    np.testing.assert_array_equal(one.astype(np.float64), [1.0] * 3 if name != "int1" else [-1.0] * 3)
    full = np.full((2, 2), 1 if name != "int1" else -1, t)
    np.testing.assert_array_equal(codes_of(full, name).reshape(-1), codes_of(one, name)[:1].repeat(4))
    e = np.empty_like(a)
    assert e.dtype == a.dtype
    # tolist gives Python numbers, as float16's and int8's do; a[i] a scalar
    lst = a[:5].tolist()
    assert all(type(s) is (float if name in R.FLOAT_DEFS else int) for s in lst)
    assert all(type(a[i]) is t for i in range(len(lst)))
    np.testing.assert_array_equal(codes_of(np.array(lst, dtype=t), name), codes[:5])
    if name in R.FLOAT_DEFS:
        v = R.fmt(name).decode_f64()
        item = a[3].item()
        assert type(item) is float
        assert item == v[3] or (math.isnan(item) and math.isnan(v[3]))
    else:
        k = min(3, len(a) - 1)
        assert type(a[k].item()) is int
        assert int(a[k]) == int(R.int_wrap([k], name)[0])
