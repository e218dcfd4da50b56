"""Family conformance (issue 3): every format is a NumPy dtype with what
bfloat16 has -- scalar type, name lookup, views, pickle, save/load, printing
that round-trips -- and minifloat.finfo / iinfo equal ml_dtypes' field by field.
"""
import io
import math
import pickle

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
    # by name (np.dtype(name), dt.str round trip): tests/test_neighbours.py, in
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


@pytest.mark.parametrize("name", ALL)
def test_pickle_round_trip(name):
    t = mf_type(name)
    codes = R.all_codes(name)
    a = codes.view(t)
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        dt = pickle.loads(pickle.dumps(np.dtype(t), protocol=proto))
        assert dt == np.dtype(t)
        b = pickle.loads(pickle.dumps(a, protocol=proto))
        assert b.dtype == a.dtype
        np.testing.assert_array_equal(codes_of(b, name), codes)
        m = a[: (len(a) // 2) * 2].reshape(2, -1)[:, ::2]      # non-contiguous
        c = pickle.loads(pickle.dumps(m, protocol=proto))
        np.testing.assert_array_equal(codes_of(c, name), codes_of(m, name))
        for i in (0, 1, len(codes) - 1):
            s = pickle.loads(pickle.dumps(a[i], protocol=proto))
            assert type(s) is t
            assert codes_of(np.array([s], t), name)[0] == codes[i]


@pytest.mark.parametrize("name", ALL)
def test_save_load_without_pickle(name):
    a = R.all_codes(name).view(mf_type(name)).reshape(-1, 2)
    buf = io.BytesIO()
    minifloat.save(buf, a)
    buf.seek(0)
    b = minifloat.load(buf)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(codes_of(b, name), codes_of(a, name))
    buf.seek(0)
    raw = np.load(buf, allow_pickle=False)          # plain NumPy can read it
    assert raw.dtype.itemsize == a.dtype.itemsize


# ------------------------------------------------------------------ printing

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


# ------------------------------------------------------------- finfo/iinfo

FINFO_FIELDS = ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal",
                "smallest_subnormal", "nmant", "nexp", "maxexp", "minexp", "machep", "negep",
                "precision", "resolution", "iexp"]


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_finfo_equals_ml_dtypes_every_field(name):
    ours = minifloat.finfo(mf_type(name))
    theirs = ml_dtypes.finfo(R.ml_type(name))
    for field in FINFO_FIELDS:
        a, b = getattr(ours, field), getattr(theirs, field)
        if isinstance(b, (int, np.integer)) and not isinstance(b, bool):
            assert a == b and isinstance(a, (int, np.integer)), (field, a, b)
        else:
            # a value of the format, equal to ml_dtypes' value of the same format
            assert type(a) is mf_type(name), (field, type(a))
            if type(b) is R.ml_type(name):
                assert codes_of(np.array([a]), name)[0] == np.array([b]).view(R.code_dtype(name))[0], \
                    (field, a, b)
            else:     # ml_dtypes gives some fields of float6/float4 as Python floats
                assert float(a) == float(b), (field, a, b)
    assert ours.dtype == np.dtype(mf_type(name))
    # the same object from a name, a dtype or the scalar type
    assert minifloat.finfo(name) is ours and minifloat.finfo(np.dtype(mf_type(name))) is ours
    # the values themselves, from the definition
    f = R.fmt(name)
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


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_np_finfo_fields(name):
    ours = np.finfo(mf_type(name))
    ref = minifloat.finfo(mf_type(name))
    for field in NP_FINFO_RIGHT:
        if field == "iexp":
            continue      # derived from nexp
        assert float(getattr(ours, field)) == float(getattr(ref, field)), field


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_iinfo_equals_ml_dtypes(name):
    ours = minifloat.iinfo(mf_type(name))
    theirs = ml_dtypes.iinfo(R.ml_type(name))
    assert (ours.min, ours.max, ours.bits) == (theirs.min, theirs.max, theirs.bits)
    assert type(ours.min) is int and type(ours.max) is int
    assert str(ours.dtype) == str(theirs.dtype) == name
    assert ours.kind == np.iinfo(mf_type(name)).kind == ("i" if name.startswith("int") else "u")
    assert repr(ours) == repr(theirs)
    for spec in (name, np.dtype(mf_type(name))):
        assert (minifloat.iinfo(spec).min, minifloat.iinfo(spec).max) == (ours.min, ours.max)
    bits, signed = R.INT_DEFS[name]
    assert (ours.min, ours.max) == ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed
                                    else (0, (1 << bits) - 1))
    with pytest.raises(ValueError):
        minifloat.iinfo(minifloat.float8_e4m3fn)


@pytest.mark.parametrize("t", [np.int8, np.uint16])
def test_iinfo_of_numpy_types_is_numpys(t):
    assert minifloat.iinfo(t).max == np.iinfo(t).max


@pytest.mark.parametrize("name", R.INT_NAMES)
def test_np_iinfo(name):
    info = np.iinfo(mf_type(name))
    ref = minifloat.iinfo(mf_type(name))
    assert (info.min, info.max, info.bits) == (ref.min, ref.max, ref.bits)
