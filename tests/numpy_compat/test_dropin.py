"""minifloat as a drop-in for ml_dtypes.

First the gaps that were closed: finfo of arrays, ``<type>.dtype``, sign
operations that keep NaN payloads, and comparisons with Python numbers that
compare values.

Then minifloat under the name ml_dtypes: a sample of ml_dtypes' public
behaviour (_mldtypes_probe.py) observed with the real ml_dtypes and with
``sys.modules["ml_dtypes"] = minifloat``, each in its own process.  Every
observation on which they differ must be listed in KNOWN, with the section of
docs/design.md ("ml_dtypes drop-in: differences") that argues it.  A new
difference fails the test; a listed one that no longer shows (a fix here, or
a change in ml_dtypes) is reported as a warning.
"""
import fnmatch
import importlib.metadata
import json
import os
import pickle
import subprocess
import sys
import warnings

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


# ------------------------------------------------------- sign operations

SIGNED = [n for n in R.FLOAT_NAMES if R.fmt(n).signed]


def nan_codes(name):
    """every NaN code of a format (payloads and both signs)"""
    f = R.fmt(name)
    c = R.all_codes(name)
    return c[[f.value(int(x)) != f.value(int(x)) for x in c]] if name != "bfloat16" else \
        c[((c & 0x7F80) == 0x7F80) & ((c & 0x7F) != 0)]


@pytest.mark.parametrize("name", SIGNED)
@pytest.mark.parametrize("level", LEVELS)
def test_sign_operations_keep_nan_payloads(name, level):
    t = mf_type(name)
    nans = nan_codes(name)
    if not len(nans):
        pytest.skip(f"{name} has no NaN")
    x = nans.view(t)
    f = R.fmt(name)
    neg = np.full(len(nans), f.sbit, nans.dtype).view(t)
    pos = np.zeros(len(nans), nans.dtype).view(t)
    if f.special == "fnuz":
        pos = np.full(len(nans), 1, nans.dtype).view(t)
    with kernel_level(level):
        for u in ("negative", "absolute", "fabs", "positive", "conjugate"):
            got = getattr(np, u)(x).view(nans.dtype)
            np.testing.assert_array_equal(got, R.sign_ref(name, u, nans), err_msg=u)
            assert np.isnan(getattr(np, u)(x).astype(np.float32)).all(), u
        for sgn in (neg, pos):
            got = np.copysign(x, sgn).view(nans.dtype)
            np.testing.assert_array_equal(got, R.sign_ref(name, "copysign", nans, sgn.view(nans.dtype)))
    if name == "bfloat16":
        p = np.array([0x7FC1, 0xFF81, 0x7F81], np.uint16).view(bf16)   # payloads, a signaling NaN
        assert np.negative(p).view(np.uint16).tolist() == [0xFFC1, 0x7F81, 0xFF81]
        assert np.abs(p).view(np.uint16).tolist() == [0x7FC1, 0x7F81, 0x7F81]
        assert np.copysign(p, bf16(-1)).view(np.uint16).tolist() == [0xFFC1, 0xFF81, 0xFF81]
        assert np.positive(p).view(np.uint16).tolist() == [0x7FC1, 0xFF81, 0x7F81]
        s = p[0]
        assert (-s).code == 0xFFC1 and abs(-s).code == 0x7FC1


@pytest.mark.parametrize("name", ["float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"])
def test_fnuz_sign_operations(name):
    """fnuz: 0x80 is the only NaN (the would-be -0); negating or taking the
    absolute value of NaN gives NaN, and no operation makes a -0 (which would
    be that NaN): copysign(0, -1) is 0 (ml_dtypes gives NaN there)."""
    t = mf_type(name)
    nan, zero, one = np.array([0x80, 0x00, 0x08], np.uint8).view(t)
    for u in (np.negative, np.abs, np.fabs, np.positive):
        assert u(nan).view(np.uint8) == 0x80, u
        assert u(zero).view(np.uint8) == 0x00, u
    assert np.copysign(zero, t(-1)).view(np.uint8) == 0
    assert np.copysign(nan, t(1)).view(np.uint8) == 0x80
    assert np.copysign(one, t(-1)).view(np.uint8) == 0x88
    assert np.copysign(one, nan).view(np.uint8) == 0x88     # NaN's sign bit is set, as np.signbit says
    assert np.signbit(nan)


def test_sign_operations_without_sign_bit_unchanged():
    """e8m0 has no sign bit: its values are what float32 gives, rounded (no
    negative number: NaN)"""
    e = minifloat.float8_e8m0fnu
    x = R.all_codes("float8_e8m0fnu").view(e)
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.negative(x).astype(np.float32)).all()
        assert np.array_equal(np.abs(x).view(np.uint8), x.view(np.uint8))
        assert np.array_equal(np.copysign(x, e(2)).view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("name", SIGNED)
def test_sign_operations_layouts(name):
    """strided, reversed, in place, broadcast and accumulate paths agree with
    the contiguous one"""
    t = mf_type(name)
    c = np.random.default_rng(5).integers(0, R.ncodes(name), 1001).astype(R.code_dtype(name))
    x = c.view(t)
    y = np.roll(c, 7).view(t)
    dt = c.dtype
    for u in ("negative", "absolute", "positive"):
        want = R.sign_ref(name, u, c)
        np.testing.assert_array_equal(getattr(np, u)(x[::-1]).view(dt), want[::-1])
        np.testing.assert_array_equal(getattr(np, u)(x[::3]).view(dt), want[::3])
        z = x.copy()
        getattr(np, u)(z, out=z)
        np.testing.assert_array_equal(z.view(dt), want)
    want = R.sign_ref(name, "copysign", c, np.roll(c, 7))
    np.testing.assert_array_equal(np.copysign(x, y).view(dt), want)
    np.testing.assert_array_equal(np.copysign(x[1::2], y[1::2]).view(dt), want[1::2])
    np.testing.assert_array_equal(np.copysign(x, y[3]).view(dt),
                                  R.sign_ref(name, "copysign", c, np.full_like(c, c[(3 - 7) % 1001])))
    # accumulate: out[i] = copysign(out[i-1], y[i]): the magnitude of x[0], y[i]'s sign
    acc = np.copysign.accumulate(np.concatenate([x[:1], y[1:20]]))
    seq = [c[0]]
    for i in range(1, 20):
        seq.append(R.sign_ref(name, "copysign", [seq[-1]], [np.roll(c, 7)[i]])[0])
    np.testing.assert_array_equal(acc.view(dt), np.array(seq, dt))


# ------------------------------------------- comparisons with Python numbers

OPS = ("__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__")


def exact_compare(name, codes, y, op):
    f = R.fmt(name)
    vals = [f.value(int(c)) for c in codes]
    return np.array([getattr(float(v), op)(y) for v in vals])


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_compare_with_python_numbers_by_value(name):
    t = mf_type(name)
    codes = R.all_codes(name) if R.ncodes(name) <= 256 else \
        np.random.default_rng(1).integers(0, 1 << 16, 4000).astype(np.uint16)
    x = codes.view(t)
    fi = minifloat.finfo(t)
    ys = [0.0, -0.0, -1.0, 1.0, 0.1, 1e6, -1e6, 1e-300, float(fi.max) * 1.01, float(fi.max),
          float("inf"), -float("inf"), float("nan"), 0, -3, 100, 10 ** 30,
          # between two float32 neighbours, beyond float32's range, below its subnormals
          1.0 + 2.0 ** -40, -(1.0 + 2.0 ** -40), 0.5 - 2.0 ** -60, float(fi.max) + 2.0 ** -20,
          3.5e38, -3.5e38, 2.0 ** -149 / 3, -(2.0 ** -149) / 3, 2.0 ** 127 + 2.0 ** 90]
    for y in ys:
        for op in OPS:
            want = exact_compare(name, codes, y, op)
            got = getattr(x, op)(y)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {op} {y!r}")
            # reflected, and scalars agree with arrays
            rop = {"__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__",
                   "__ge__": "__le__"}.get(op, op)
            np.testing.assert_array_equal(getattr(np, {"__lt__": "less", "__le__": "less_equal",
                                                       "__eq__": "equal", "__ne__": "not_equal",
                                                       "__gt__": "greater",
                                                       "__ge__": "greater_equal"}[rop])(y, x),
                                          want, err_msg=f"{y!r} reflected {op} {name}")
            for i in range(0, len(x), max(1, len(x) // 17)):
                assert bool(getattr(x[i], op)(y)) == want[i], (name, op, y, hex(int(codes[i])))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn"])
def test_compare_with_float64_arrays_and_layouts(name):
    """the float64 loops: elementwise against float64 arrays (values, as the
    float64 promotion gave before), strided and reversed operands and outputs"""
    t = mf_type(name)
    codes = R.all_codes(name) if R.ncodes(name) <= 256 else \
        np.random.default_rng(2).integers(0, 1 << 16, 3000).astype(np.uint16)
    x = codes.view(t)
    x64 = x.astype(np.float64)
    y = np.random.default_rng(3).permutation(np.concatenate([x64, x64 * (1 + 2.0 ** -30)]))[:len(x)]
    y[::7] = np.nan
    with np.errstate(invalid="raise"):                    # quiet comparisons: no flag
        for uf in (np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal):
            np.testing.assert_array_equal(uf(x, y), uf(x64, y), err_msg=uf.__name__)
            np.testing.assert_array_equal(uf(y, x), uf(y, x64), err_msg=uf.__name__)
            np.testing.assert_array_equal(uf(x[::-3], y[::-3]), uf(x64[::-3], y[::-3]))
            out = np.zeros(2 * len(x), bool)
            uf(x, 0.75, out=out[::2])
            np.testing.assert_array_equal(out[::2], uf(x64, 0.75))
            np.testing.assert_array_equal(uf(x[::2], np.float64(0.1)), uf(x64[::2], 0.1))
            np.testing.assert_array_equal(uf(x.reshape(-1, 1), np.array([0.1, -2.0, np.nan])),
                                          uf(x64.reshape(-1, 1), np.array([0.1, -2.0, np.nan])))


def test_compare_cases_of_the_issue():
    e8 = minifloat.float8_e8m0fnu
    assert minifloat.finfo(e8).min >= 0.0
    assert minifloat.finfo(e8).min > 0 and not (minifloat.finfo(e8).min == 0.0)
    assert (np.array([1, 2], e8) > -1).all() and (np.array([1, 2], e8) >= 0.0).all()
    assert not (np.array([1, 2], e8) < 0).any()
    e4 = minifloat.float8_e4m3fn
    x = np.array([448, -448, 1], e4)
    assert (x < 1e6).all() and (x > -1e6).all() and not (x == 1e6).any()
    assert e4(448) < 1e6 and e4(448) < 460.0          # 460 would round to 448 in the format
    i4 = np.array([-8, 0, 7], minifloat.int4)
    assert (i4 < 100).all() and (i4 > -100).all() and not (i4 == 16).any()
    assert minifloat.int4(7) < 100 and minifloat.uint2(3) > -1
    assert (i4 == 7).tolist() == [False, False, True]
    assert not bf16(0.1) == 0.1 and bf16(0.1) == float(bf16(0.1))
    assert bf16(1) < 1.001


def test_compare_keeps_nep50_elsewhere():
    """only comparisons with Python numbers change: arithmetic keeps the format
    (NEP 50), and a NumPy float32 operand is compared in float32"""
    x = np.array([1, 2], bf16)
    assert (x + 1.0).dtype == x.dtype and (x * 3).dtype == x.dtype
    assert (x < np.float32(1.5)).tolist() == [True, False]
    assert (x < np.array([1.5, 1.5], np.float32)).tolist() == [True, False]
    # signature= asking for the format's loop rounds the Python number first
    BF = minifloat.dtypes.BFloat16DType
    assert np.less(x, 1.001, signature=(BF, BF, None)).tolist() == [False, False]
    assert (x == x).all() and (x[0] == x[1]) == False   # noqa: E712
    with pytest.raises(OverflowError):
        x < 10 ** 400


# ------------------------------------- integer scalars from floats

def test_int_format_scalar_from_float_checks_range():
    """int4(3.7) is int4(int(3.7)), as np.int8(300.7) is np.int8(300) and as in
    ml_dtypes: out of range raises OverflowError, never wraps around"""
    i4, i1, u2 = minifloat.int4, minifloat.int1, minifloat.uint2
    assert i4(3.7) == 3 and i4(-3.7) == -3 and i4(np.float32(7.5)) == 7 and i4(-8.5) == -8
    assert i1(-0.5) == 0 and u2(3.99) == 3
    for t, v in ((i4, 8.0), (i4, -9.0), (i1, 3.7), (u2, -1.0), (i4, np.float64(100.5)),
                 (i4, float("inf"))):
        with pytest.raises(OverflowError):
            t(v)
    with pytest.raises(ValueError):
        i4(float("nan"))
    with pytest.raises(OverflowError):
        np.int8(300.7)                       # the NumPy rule this follows


# ------------------------------------------------------------------ np.fft

@pytest.mark.parametrize("name", R.FLOAT_NAMES + R.INT_NAMES)
def test_fft_of_minifloat_arrays(name):
    """np.fft's gufuncs have float32/float64 loops only: a float format goes to
    float32/complex64, an integer format to float64/complex128 (as float16 and
    int8 do), so np.fft.rfft(bf16) works as with ml_dtypes"""
    t = mf_type(name)
    codes = R.all_codes(name)
    x = codes.view(t)
    with np.errstate(all="ignore"):
        ref = x.astype(np.float32 if name in R.FLOAT_DEFS else np.float64)
        ok = np.isfinite(ref)
        x, ref = x[ok][:64], ref[ok][:64]
        for fn in (np.fft.rfft, np.fft.fft, np.fft.hfft):
            got, want = fn(x), fn(ref)
            if fn is not np.fft.hfft:
                assert got.dtype == want.dtype == (np.complex64 if name in R.FLOAT_DEFS
                                                   else np.complex128), fn
            # compared as float64/complex128 (numpy.testing on NumPy 2.3 treats a
            # user dtype's NaN as a value)
            wide = np.complex128 if np.iscomplexobj(got) else np.float64
            np.testing.assert_array_equal(got.astype(wide), want.astype(got.dtype).astype(wide),
                                          err_msg=fn.__name__)
        x2 = np.resize(x, (4, 6))
        np.testing.assert_array_equal(np.fft.rfft2(x2), np.fft.rfft2(x2.astype(ref.dtype)))
        np.testing.assert_array_equal(np.fft.fftn(x2), np.fft.fftn(x2.astype(ref.dtype)))


def test_fft_limits():
    """NumPy's ifft/irfft and norm= pass dtype=<the array's real dtype> to
    np.reciprocal/np.sqrt with a Python int operand, an output-only dtype=
    NumPy finds no loop for (docs/design.md, Known limits); cast to float32
    first"""
    x = np.array([1, 2, 3, 4], bf16)
    for call in (lambda: np.fft.ifft(x), lambda: np.fft.irfft(x),
                 lambda: np.fft.rfft(x, norm="ortho")):
        with pytest.raises(TypeError, match="reciprocal|sqrt"):
            call()
    assert np.fft.ifft(x.astype(np.float32)).dtype == np.complex64


# ==========================================================================
# minifloat under the name ml_dtypes, against the real ml_dtypes
# ==========================================================================
PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mldtypes_probe.py")

# observation pattern -> the difference, as docs/design.md lists it
KNOWN = {
    "name.bcomplex32": "complex32/bcomplex32 are not provided",
    "name.complex32": "complex32/bcomplex32 are not provided",
    "dtype.kind.*": "dtype.kind is 'f'/'i'/'u', not 'V'",
    "type.mro.*": "scalar types subclass np.floating / np.signedinteger / np.unsignedinteger",
    "dtype.char.*": "dtype.char: one distinct character per format",
    "arith.py_float.dtype.*": "Python scalars are weak (NEP 50)",
    "arith.py_int.dtype.*": "Python scalars are weak (NEP 50)",
    "arith.f16.dtype.*": "promotion: the first type that holds both exactly",
    "arith.div.dtype.int*": "integer formats follow NumPy's int8 rules",
    "arith.div.dtype.uint*": "integer formats follow NumPy's int8 rules",
    "arith.neg.int*": "integer formats follow NumPy's int8 rules",
    "arith.neg.uint*": "integer formats follow NumPy's int8 rules",
    "reduce.sum.int*": "integer formats follow NumPy's int8 rules",
    "reduce.sum.uint*": "integer formats follow NumPy's int8 rules",
    "matmul.*": "matmul returns the format (float32 accumulation, one rounding)",
    "reduce.sum.float8_e8m0fnu": "reductions accumulate in float32 (e8m0 has no zero)",
    "reduce.mean.float8_e8m0fnu": "reductions accumulate in float32 (e8m0 has no zero)",
    "finfo.*.np_finfo_max": "np.finfo works",
    "sort.*": "np.sort puts NaN last",
    "cast.to_int.float8_e8m0fnu": "float -> int of NaN gives NumPy's float32 cast result",
    "scalar.int*": "integer scalars follow NumPy's int8 range rule",
    "scalar.uint*": "integer scalars follow NumPy's int8 range rule",
    "print.*": "printing: shortest round-trip digits, NumPy 2 repr",
    "fft.ifft.*": "np.fft.ifft/irfft and norm= raise TypeError",
    "linalg.norm.*": "np.linalg.norm raises TypeError (Known limits)",
    # ml_dtypes 0.7's changes (earlier versions agreed with minifloat here)
    "cast.f32.int*": "NumPy float -> int4/int2/int1 out of range: NumPy's rule (wraps)",
    "cast.f32.uint*": "NumPy float -> int4/int2/int1 out of range: NumPy's rule (wraps)",
    "cmp.py.*": "comparisons with Python numbers compare values",
    "finfo.float8_e8m0fnu.min_ge_0": "comparisons with Python numbers compare values",
}


def observe(mode):
    out = subprocess.run([sys.executable, PROBE, mode], capture_output=True, text=True,
                         timeout=300, cwd=os.path.dirname(PROBE))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def observations():
    pytest.importorskip("ml_dtypes")      # the probe compares against it
    return observe("real"), observe("shim")


def test_probe_sees_each_library(observations):
    real, shim = observations
    assert real.keys() == shim.keys() and len(real) > 1000
    # the shim really is minifloat, the real run really is ml_dtypes
    assert shim["print.repr.bfloat16"].startswith("'minifloat.")
    assert not real["print.repr.bfloat16"].startswith("'minifloat.")


def test_every_difference_is_listed(observations):
    real, shim = observations
    differ = sorted(k for k in real if real[k] != shim[k])
    unlisted = [f"{k}: ml_dtypes {real[k][:120]} | minifloat {shim[k][:120]}"
                for k in differ if not any(fnmatch.fnmatchcase(k, p) for p in KNOWN)]
    assert not unlisted, ("differences from ml_dtypes not listed in docs/design.md "
                          "(ml_dtypes drop-in: differences):\n" + "\n".join(unlisted))
    gone = [p for p in KNOWN if not any(fnmatch.fnmatchcase(k, p) for k in differ)]
    if gone:
        warnings.warn(f"listed ml_dtypes differences that no longer show: {gone}")


def test_agreements_with_ml_dtypes(observations):
    """finfo(array), <type>.dtype, sign operations on NaN and (before
    ml_dtypes 0.7, which rounds the Python number to the format first, as
    NEP 50 does for float16) comparisons with Python numbers agree with
    ml_dtypes"""
    real, shim = observations
    keys = ["finfo.bfloat16.of_array", "dtype.attr.bfloat16", "dtype.attr.int4",
            "cmp.py.float8_e8m0fnu.lt(0.0)", "cmp.py.int4.lt(100)",
            "sign.bfloat16", "scalar.int1(3.7)", "fft.rfft.bfloat16", "fft.fft.float8_e4m3fn"]
    ml_version = tuple(int(p) for p in importlib.metadata.version("ml_dtypes").split(".")[:2])
    if ml_version < (0, 7):
        keys += ["finfo.float8_e8m0fnu.min_ge_0", "cmp.py.float8_e4m3fn.lt(1000000.0)",
                 "cmp.py.bfloat16.eq(0.1)"]
    for key in keys:
        assert real[key] == shim[key], (key, real[key], shim[key])
