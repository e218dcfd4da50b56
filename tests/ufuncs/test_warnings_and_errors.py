"""Warnings and errors follow NumPy.  Reference: what
NumPy does for float32 (or float16) in the same situation."""
import warnings

import numpy as np
import pytest

from minifloat import bfloat16 as bf16

import _refs as R

BF = np.dtype(bf16)


def _messages(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as e:          # noqa: BLE001 - reported to the caller
            return [f"raised {type(e).__name__}"]
    return sorted({str(x.message) for x in w if issubclass(x.category, RuntimeWarning)})


# --------------------------------------------------------------------------
# overflow in casts from NumPy arrays
# --------------------------------------------------------------------------
@pytest.mark.parametrize("src", [
    lambda: np.array([3.4e38], np.float32),
    lambda: np.array([-3.4e38], np.float32),
    lambda: np.array([1e300]),
    lambda: np.array([1e300], np.longdouble),
    lambda: np.array([3.3895313892515355e38 + 2.0 ** 119]),   # the tie above max: to inf
], ids=["f32", "-f32", "f64", "longdouble", "f64-boundary"])
def test_cast_overflow_warns_and_raises(src):
    a = src()
    with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
        r = a.astype(bf16)
    assert np.isinf(r.astype(np.float32)).all()
    with np.errstate(over="raise"), pytest.raises(FloatingPointError,
                                                  match="overflow encountered in cast"):
        a.astype(bf16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="ignore"):
            a.astype(bf16)


def test_cast_no_warning_for_inf_nan_and_max():
    src = np.array([np.inf, -np.inf, np.nan, 3.3895313892515355e38, 3.39e38,
                    (3.3895313892515355e38 + 2.0 ** 119) * (1 - 2.0 ** -50)], np.float64)
    assert (src.astype(bf16)[3:].astype(np.float64) == 3.3895313892515355e38).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        src.astype(bf16)
        src[:5].astype(np.float32).astype(bf16)
        R.as_bf16(R.ALL_CODES).astype(np.float32)
        R.as_bf16(R.ALL_CODES).astype(np.float64)


def test_cast_overflow_to_float16_like_float32():
    src = R.as_bf16(np.array([0x7F7F, 0x4780, 0x3F80], np.uint16))   # max, 65536, 1
    assert _messages(lambda: src.astype(np.float16)) == \
        _messages(lambda: src.astype(np.float32).astype(np.float16))


def test_float_to_int_out_of_range_warns_like_float32():
    src = np.array([1e10, -1e10, 3e38], np.float32)
    assert _messages(lambda: src.astype(bf16).astype(np.int32)) == \
        _messages(lambda: src.astype(np.int32)) == ["invalid value encountered in cast"]


def test_float_to_int_nan_warns_like_float32():
    src = np.array([np.nan, np.inf], np.float32)
    assert _messages(lambda: src.astype(bf16).astype(np.int32)) == \
        _messages(lambda: src.astype(np.int32))


# --------------------------------------------------------------------------
# overflow converting Python numbers / strings / objects
# --------------------------------------------------------------------------
PY_OVERFLOW = {
    "scalar ctor": (lambda t: t(1e39)),
    "scalar ctor neg": (lambda t: t(-1e39)),
    "setitem": (lambda t: np.zeros(2, t).__setitem__(0, 1e39)),
    "np.array(list)": (lambda t: np.array([1e39, 1.0], dtype=t)),
    "np.full": (lambda t: np.full(2, 1e39, t)),
    "weak scalar in ufunc": (lambda t: np.ones(2, t) + (1e39 if t is bf16 else 1e39)),
    "object array cast": (lambda t: np.array([1e39, 1], dtype=object).astype(t)),
    "string cast": (lambda t: np.array(["1e39"]).astype(t)),
}


@pytest.mark.parametrize("name", list(PY_OVERFLOW))
def test_python_value_overflow_reference_float32_warns(name):
    # the reference behaviour: float32 warns "overflow encountered in cast"
    assert any("overflow" in m for m in _messages(lambda: PY_OVERFLOW[name](np.float32)))


@pytest.mark.parametrize("name", list(PY_OVERFLOW))
def test_python_value_overflow_warns(name):
    msgs = _messages(lambda: PY_OVERFLOW[name](bf16))
    assert any("overflow" in m for m in msgs), msgs
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        PY_OVERFLOW[name](bf16)


def test_python_value_overflow_result_is_inf():
    with np.errstate(over="ignore"):
        assert bf16(1e39) == np.inf and bf16(-1e39) == -np.inf
        assert bf16(2 ** 200) == np.inf
        a = np.zeros(1, bf16)
        a[0] = 1e39
        assert a[0] == np.inf


# --------------------------------------------------------------------------
# invalid, divide, underflow in ufuncs
# --------------------------------------------------------------------------
@pytest.mark.parametrize("expr, kind", [
    (lambda: np.sqrt(np.array([-1.0], bf16)), "invalid"),
    (lambda: np.log(np.array([-1.0], bf16)), "invalid"),
    (lambda: np.array([np.inf], bf16) - np.array([np.inf], bf16), "invalid"),
    (lambda: np.array([0.0], bf16) / np.array([0.0], bf16), "invalid"),
    (lambda: np.array([1.0], bf16) / np.array([0.0], bf16), "divide"),
    (lambda: np.log(np.array([0.0], bf16)), "divide"),
    (lambda: bf16(1) / bf16(0), "divide"),
    (lambda: np.array([3e38], bf16) * np.array([10], bf16), "over"),
    (lambda: np.exp(np.array([100], bf16)), "over"),
])
def test_ufunc_fp_errors(expr, kind):
    with pytest.warns(RuntimeWarning):
        expr()
    with np.errstate(**{kind: "raise"}), pytest.raises(FloatingPointError):
        expr()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        expr()


@pytest.mark.xfail(strict=True, reason="KNOWN GAP (docs/design.md): underflow is never reported for bfloat16: "
                   "errstate(under='raise') does not raise for bf16(1e-38) * bf16(0.3) (inexact "
                   "subnormal) nor for np.array([1e-45]).astype(bf16); float16/float32 raise")
def test_underflow_reported_like_float16():
    with np.errstate(under="raise"):
        with pytest.raises(FloatingPointError):
            np.array([1e-4], np.float16) * np.array([1e-3], np.float16)
        with pytest.raises(FloatingPointError):
            np.array([1e-38], bf16) * np.array([0.3], bf16)
        with pytest.raises(FloatingPointError):
            np.array([1e-45]).astype(bf16)


def test_underflow_silent_by_default():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.array([1e-38], bf16) * np.array([1e-5], bf16)
        np.array([1e-45]).astype(bf16)


def test_warning_names_the_operation():
    with pytest.warns(RuntimeWarning, match="overflow encountered in multiply"):
        np.array([3e38], bf16) * np.array([2], bf16)
    with pytest.warns(RuntimeWarning, match="overflow encountered in reduce"):
        np.array([3e38, 3e38], bf16).sum()
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in divide"):
        np.array([1], bf16) / np.array([0], bf16)


# --------------------------------------------------------------------------
# TypeError / ValueError
# --------------------------------------------------------------------------
@pytest.mark.parametrize("expr", [
    lambda: bf16(None),
    lambda: np.zeros(2, bf16).__setitem__(0, None),
    lambda: np.zeros(2, bf16).__setitem__(slice(None), [1.0, None]),
    lambda: np.array([None], dtype=bf16),
    lambda: np.array(None, dtype=bf16),
    lambda: np.array([1.5, None], dtype=object).astype(bf16),
    lambda: np.full(2, None, bf16),
], ids=["ctor", "setitem", "setitem-slice", "array-list", "array-0d", "object-cast", "full"])
def test_none_is_a_type_error(expr):
    # float32 turns None into NaN; minifloat refuses it
    with pytest.raises(TypeError, match="None"):
        expr()


@pytest.mark.parametrize("expr, exc", [
    (lambda: bf16("abc"), ValueError),
    (lambda: np.zeros(1, bf16).__setitem__(0, "abc"), ValueError),
    (lambda: np.array(["1.5", "abc"]).astype(bf16), ValueError),
    (lambda: np.array([b"x"]).astype(bf16), ValueError),
    (lambda: bf16(1 + 2j), TypeError),
    (lambda: np.zeros(1, bf16).__setitem__(0, 1 + 2j), TypeError),
    (lambda: np.zeros(1, bf16).__setitem__(0, [1, 2]), (TypeError, ValueError)),
    (lambda: np.zeros(1, bf16).__setitem__(0, object()), TypeError),
    (lambda: np.zeros(1, bf16).__setitem__(0, np.datetime64("2020")), TypeError),
    (lambda: np.zeros(1, bf16).__setitem__(0, 10 ** 400), OverflowError),
    (lambda: np.ones(2, bf16) + "a", TypeError),
    (lambda: np.bitwise_and(np.ones(2, bf16), np.ones(2, bf16)), TypeError),
    (lambda: np.ones(2, bf16).astype(np.float32, casting="no"), TypeError),
    (lambda: np.ones(2, np.float64).astype(bf16, casting="safe"), TypeError),
    (lambda: np.add(np.ones(2, bf16), 1, out=np.empty(2, np.int16)), TypeError),
    (lambda: np.ones(2, bf16).reshape(3), ValueError),
])
def test_errors_match_float32_kind(expr, exc):
    with pytest.raises(exc):
        expr()


def test_error_types_same_as_float32():
    for bad in ("abc", 1 + 2j, object(), 10 ** 400):
        try:
            np.float32(bad)
        except Exception as e:          # noqa: BLE001
            want = type(e)
        else:
            want = None
        if want is None:
            continue
        with pytest.raises(want):
            bf16(bad)


def test_complex_assignment_warns_like_float32():
    with pytest.warns(np.exceptions.ComplexWarning):
        np.zeros(1, bf16)[0] = np.complex64(1 + 1j)
    with pytest.warns(np.exceptions.ComplexWarning):
        np.zeros(1, np.float32)[0] = np.complex64(1 + 1j)
