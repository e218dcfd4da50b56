"""Family conformance (issue 3): promotion between family members and NumPy
types.  np.result_type must be defined for every pair, agree with the dtype the
ufuncs return, follow the documented rule (checked here from the formats'
value sets, independently of the C code), and docs/promotion.md must be the
current table.
"""
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import minifloat

import _family_refs as R
from conftest import mf_type

ALL = R.FLOAT_NAMES + R.INT_NAMES
NUMPY = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
         np.uint64, np.float16, np.float32, np.float64, np.longdouble, np.complex64,
         np.complex128]


def test_promotion_doc_is_current():
    from minifloat import cli
    doc = Path(__file__).resolve().parent.parent / "docs" / "promotion.md"
    text = cli.promotion_markdown()
    assert text == doc.read_text()
    assert "| error" not in text and "error |" not in text


@pytest.mark.parametrize("a", ALL)
def test_result_type_is_what_ufuncs_return(a):
    ta = mf_type(a)
    others = [mf_type(b) for b in ALL] + NUMPY
    for tb in others:
        for x, y in ((ta, tb), (tb, ta)):
            rt = np.result_type(x, y)
            assert np.result_type(np.dtype(x), np.dtype(y)) == rt
            assert np.promote_types(x, y) == rt
            # (zeros: 1 is out of int1's range, an OverflowError in NumPy 2)
            xs, ys = np.zeros(3, x), np.zeros(3, y)
            with np.errstate(all="ignore"):
                for uf in (np.add, np.multiply, np.maximum, np.minimum, np.equal):
                    r = uf(xs, ys)
                    want = np.dtype(np.bool_) if uf is np.equal else rt
                    assert r.dtype == want, (uf.__name__, x, y, r.dtype, rt)
                if not (x is np.bool_ and y is np.bool_):
                    assert np.subtract(xs, ys).dtype == rt
                # concatenate uses the same common dtype
                assert np.concatenate([xs, ys]).dtype == rt


@pytest.mark.parametrize("a", ALL)
def test_python_scalars_are_weak(a):
    """NEP 50: Python int and float take the array's type (float formats);
    integer formats with a Python float give float64, as NumPy's int8 does."""
    t = mf_type(a)
    x = np.zeros(3, t)
    one = -1 if a == "int1" else 1      # a Python int the format holds
    assert (x + one).dtype == np.dtype(t)
    assert (one + x).dtype == np.dtype(t)
    assert np.result_type(t, one) == np.dtype(t)
    if a in R.FLOAT_DEFS:
        assert (x * 1.5).dtype == np.dtype(t)
        assert np.result_type(t, 1.5) == np.dtype(t)
        assert (x + 1j).dtype == np.complex64
    else:
        assert (x * 1.5).dtype == np.result_type(np.int8, 1.5) == np.float64
    assert (x + np.float32(1)).dtype == np.result_type(t, np.float32)


# ------------------------------------------------ the rule, from value sets

_VS = {}


def vals(name):
    if name not in _VS:
        if name in R.FLOAT_DEFS:
            # exact: every value is a float64 (and float hashes/compares with Fraction)
            s = {("nan" if v != v else float(v)) for v in R.fmt(name).decode_f64().tolist()}
        elif name in R.INT_DEFS:
            bits, signed = R.INT_DEFS[name]
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            s = {Fraction(i) for i in range(lo, hi + 1)}
        elif name == "float16":
            h = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
            s = {("nan" if v != v else v) for v in h.tolist()}
        else:
            info = np.iinfo(name)
            s = ("range", info.min, info.max)
        _VS[name] = s
    return _VS[name]


def holds(big, small):
    """every value of `small` is a value of `big`"""
    vb, vs = vals(big), vals(small)
    if isinstance(vs, tuple):          # a wide NumPy integer type
        if isinstance(vb, tuple):
            return vb[1] <= vs[1] and vs[2] <= vb[2]
        if big == "float16":
            return False
        return all(Fraction(i) in vb for i in (vs[1], vs[2])) and \
            all(Fraction(i) in vb for i in range(vs[1], min(vs[2], 300) + 1))
    if isinstance(vb, tuple):
        return all(isinstance(v, Fraction) and v.denominator == 1 and vb[1] <= v <= vb[2] for v in vs)
    return vs <= vb


FLOAT_CHAIN = ["bfloat16", "float16", "float32", "float64"]


def expected_float_promotion(a, b):
    """docs/design.md: the first of A, B, bfloat16, float16, float32, float64
    that holds every value of both exactly (for pairs involving a float format)."""
    for c in [a, b] + FLOAT_CHAIN:
        if c in ("float32", "float64"):
            return c     # every format and every 16-bit-or-smaller integer fits float32
        if holds(c, a) and holds(c, b):
            return c
    raise AssertionError


@pytest.mark.parametrize("a", [n for n in R.FLOAT_NAMES])
def test_float_promotion_rule(a):
    for b in ALL + ["int8", "uint8", "int16", "uint16", "float16"]:
        want = expected_float_promotion(a, b)
        tb = mf_type(b) if b in ALL else np.dtype(b)
        assert str(np.result_type(mf_type(a), tb)) == want, (a, b)
        assert str(np.result_type(tb, mf_type(a))) == want, (b, a)
    # wider NumPy types: float32 for 16-bit integers and float32, float64 beyond
    for b, want in (("int32", "float64"), ("uint32", "float64"), ("int64", "float64"),
                    ("uint64", "float64"), ("float32", "float32"), ("float64", "float64"),
                    ("complex64", "complex64"), ("complex128", "complex128")):
        assert str(np.result_type(mf_type(a), np.dtype(b))) == want, (a, b)


@pytest.mark.parametrize("a", ALL)
def test_bool_promotes_to_a_type_holding_false_and_true(a):
    rt = np.result_type(mf_type(a), np.bool_)
    x = np.array([False, True]).astype(rt)
    np.testing.assert_array_equal(x.astype(np.float64), [0.0, 1.0])


def expected_int_promotion(a, b):
    """integer formats among themselves and with NumPy integers: NumPy's rule
    (the smallest signed/unsigned integer type holding both), over the chain
    of widths 1, 2, 4, 8, 16, 32, 64."""
    def rng(n):
        if n in R.INT_DEFS:
            bits, signed = R.INT_DEFS[n]
            return bits, signed
        d = np.dtype(n)
        return d.itemsize * 8, d.kind == "i"
    (ba, sa), (bb, sb) = rng(a), rng(b)
    signed = sa or sb
    need = max(ba + (1 if signed and not sa else 0), bb + (1 if signed and not sb else 0))
    for w in (1, 2, 4, 8, 16, 32, 64):
        if w >= need:
            if w <= 4:
                return ("int" if signed else "uint") + str(w)
            return str(np.dtype(("i" if signed else "u") + str(w // 8)))
    return "float64"        # int64 with uint64


@pytest.mark.parametrize("a", R.INT_NAMES)
def test_integer_promotion_rule(a):
    for b in R.INT_NAMES + ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]:
        tb = mf_type(b) if b in R.INT_DEFS else np.dtype(b)
        want = expected_int_promotion(a, b)
        assert str(np.result_type(mf_type(a), tb)) == want, (a, b)
        assert str(np.result_type(tb, mf_type(a))) == want, (b, a)


# -------------------------------------- values of mixed-format arithmetic

MIXED = [(a, b) for a in R.FLOAT_NAMES for b in R.FLOAT_NAMES + R.INT_NAMES if a != b]


@pytest.mark.parametrize("a,b", MIXED, ids=[f"{a}+{b}" for a, b in MIXED])
def test_mixed_arithmetic_rounds_once_in_the_common_type(a, b):
    """a (op) b for two different formats: both operands are exact in the
    common type, the operation is done in float32 and rounded once to it."""
    rng = np.random.default_rng(len(a) * 31 + len(b))
    ca = rng.integers(0, R.ncodes(a), 3000).astype(R.code_dtype(a))
    cb = rng.integers(0, R.ncodes(b), 3000).astype(R.code_dtype(b))
    x, y = ca.view(mf_type(a)), cb.view(mf_type(b))
    rt = np.result_type(x, y)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    with np.errstate(all="ignore"):
        for uf in (np.add, np.subtract, np.multiply, np.divide):
            got = uf(x, y)
            assert got.dtype == rt
            ref32 = uf(x32, y32)
            if str(rt) in R.FLOAT_DEFS:
                want = R.fmt(str(rt)).encode(ref32.astype(np.float64))
                gc, wc = got.view(R.code_dtype(str(rt))), want.astype(R.code_dtype(str(rt)))
                if not R.X86:
                    # which NaN (its sign): NumPy's float32 loop's CPU-dependent
                    # choice; the result is the code of a NaN of either sign (a
                    # format without NaN has its own codes for them)
                    nan = np.isnan(ref32)
                    either = R.fmt(str(rt)).encode(np.array([np.nan, -np.nan])).astype(gc.dtype)
                    assert np.isin(gc[nan], either).all(), uf.__name__
                    gc, wc = gc[~nan], wc[~nan]
                np.testing.assert_array_equal(gc, wc, err_msg=uf.__name__)
            else:
                # float32 / float64 results: the exact float32 operation, widened
                np.testing.assert_array_equal(got.astype(np.float64),
                                              uf(x.astype(rt), y.astype(rt)).astype(np.float64))
