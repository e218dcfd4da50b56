"""np.nan_to_num of the float formats in one pass (patch "fast_nan_to_num").

Reference: NumPy's own np.nan_to_num (the function the front stands for,
np.nan_to_num.__wrapped__): isnan / isposinf / isneginf and three masked
copyto's.  Every stored byte pattern (bfloat16: every code), the default and
given replacement values (values that overflow the format, that are NaN or
inf themselves, integers), copy=False, at 1-3 threads: the same bits, the
same warnings and errors.  No timing is asserted.
"""
import warnings

import numpy as np
import pytest

import minifloat as mf
from minifloat import _core

FLOATS = [f["name"] for f in _core.formats() if f["kind"] == "float"]
REPLACEMENTS = [{}, {"nan": 5, "posinf": 7, "neginf": -7.5}, {"nan": np.inf},
                {"posinf": np.nan, "neginf": 0}, {"nan": 1e300, "posinf": -1e300},
                {"nan": np.float32(0.5), "neginf": np.float64(-2.0)}, {"nan": True}]


def bits(a):
    return np.asarray(a).view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


def every_code(dt, n):
    raw = np.arange(256 ** dt.itemsize, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    return np.tile(raw, -(-n // raw.size))[:n].view(dt)


def run(fn, *a, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(*a, **kw)
        except Exception as e:          # noqa: BLE001 - compared with NumPy's below
            return ("error", type(e), str(e)), []
    return r, sorted(str(x.message) for x in w)


@pytest.mark.parametrize("name", FLOATS)
def test_nan_to_num_is_numpys_route(threads, name):
    dt = np.dtype(getattr(mf, name))
    x = every_code(dt, 3 * (1 << 17) + 777)   # large enough to be split between threads
    orig = np.nan_to_num.__wrapped__
    for kw in REPLACEMENTS:
        want, wwant = run(orig, x, **kw)
        for t in (1, 2, 3):
            threads(t)
            got, wgot = run(np.nan_to_num, x, **kw)
            if isinstance(want, tuple):
                assert got == want, (kw, t)
                continue
            assert got.dtype == dt and got.shape == x.shape
            assert np.array_equal(bits(got), bits(want)), (kw, t)
            assert wgot == wwant, (kw, t)
            assert not np.shares_memory(got, x)
        # copy=False: in place, the same array back
        y, z = x.copy(), x.copy()
        r = np.nan_to_num(y, copy=False, **kw)
        if not isinstance(want, tuple):
            assert r is y and np.array_equal(bits(y), bits(want)), kw
            orig(z, copy=False, **kw)
            assert np.array_equal(bits(y), bits(z))


def test_nan_to_num_other_calls_are_numpys():
    x = np.array([[np.nan, np.inf], [-np.inf, 1.5]], np.float32).astype(mf.bfloat16)
    orig = np.nan_to_num.__wrapped__
    # views, 0-d arrays, scalars, subclasses, arrays of replacement values,
    # integer formats: NumPy's route, the same results
    for a, kw in ((x[:, ::-1], {}), (x.T, {"nan": 3}), (x[0, 0], {}), (np.asarray(x[1, 1]), {}),
                  (x.view(np.matrix), {}), (x, {"posinf": np.array([1, 2])}),
                  (np.array([1, 2], mf.int4), {}), (x.tolist(), {})):
        got, want = np.nan_to_num(a, **kw), orig(a, **kw)
        assert type(got) is type(want)
        assert np.array_equal(np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64),
                              equal_nan=True), (a, kw)
    with pytest.raises(TypeError) as want:
        orig(x, nan=1j)
    with pytest.raises(TypeError) as got:
        np.nan_to_num(x, nan=1j)
    assert str(got.value) == str(want.value)
    ro = x.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        np.nan_to_num(ro, copy=False)
    assert type(np.nan_to_num).__name__ == "FastPath" and np.nan_to_num.__wrapped__ is orig
