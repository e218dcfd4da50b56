"""scipy.special's unary ufuncs on the float formats: the loops minifloat adds
once scipy.special is imported give what NumPy's route gives a float16 array
(the values widened to the type of the first loop they cast to safely, scipy's
loop, a result of that type: float64 with scipy 1.17, float32 with 1.18) bit
for bit, on every code, by table and directly, on 1-3 threads; scipy's error
handling (scipy.special.errstate) stays scipy's."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import minifloat
from minifloat import _core

from conftest import FLOAT_FORMATS, mf_type

sp = pytest.importorskip("scipy.special")

UFUNCS = ["erf", "erfc", "expit", "logit", "gammaln", "ndtr", "log_ndtr", "i0e", "gamma"]


def every_code(name):
    """Every stored byte pattern of the format (sub-byte formats: high bits set too)."""
    itemsize = np.dtype(mf_type(name)).itemsize
    raw = np.arange(1 << (8 * itemsize), dtype=np.uint16 if itemsize == 2 else np.uint8)
    return raw.view(mf_type(name))


def route_type(f, dtype):
    """The loop NumPy's legacy resolver runs for `dtype` (as for float16): the
    first whose input the format casts to safely (scipy 1.17 lists `d->d`
    first, 1.18 `f->f`)."""
    for t in f.types:
        if np.can_cast(dtype, np.dtype(t[0]), "safe"):
            return np.dtype(t[-1])
    raise AssertionError(f"no loop of {f.__name__} takes {dtype}")


def oracle(f, x):
    """float16's route: the values widened to the loop's type, scipy's loop."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # signalling NaNs in the cast
        return f(x.astype(route_type(f, x.dtype)))


def same_bits(got, want):
    assert got.dtype == want.dtype and want.dtype in (np.float32, np.float64)
    u = np.uint64 if want.dtype == np.float64 else np.uint32
    np.testing.assert_array_equal(got.view(u), want.view(u))


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_every_code_as_float16s_route(name, threads):
    """Small calls (scipy's loop on this thread) and large ones (at least four
    elements a code: the table, made by the first one) give float16's route's
    float64 bits for every code, NaN payloads included."""
    x = every_code(name)
    big = np.tile(x, 4)[::-1].copy()            # the table's size, codes in another order
    for uname in UFUNCS:
        f = getattr(sp, uname)
        want, want_big = oracle(f, x), oracle(f, big)
        for nt in (1, 2, 3):
            threads(nt)
            same_bits(f(x), want)
            same_bits(f(big), want_big)
            same_bits(f(big), want_big)       # the table made: looked up


def test_loops_are_there_in_either_import_order():
    """Imported before or after minifloat, scipy.special's unary ufuncs get the
    loops (all but those whose first loop is complex); minifloat itself never
    imports scipy."""
    code = ("import sys\n"
            "{first}\n{second}\n"
            "import numpy as np\n"
            "from minifloat import _core\n"
            "got = set(_core._special_ufuncs())\n"
            "unary = [u for u in vars(sp).values() if isinstance(u, np.ufunc)"
            " and u.nin == 1 and u.nout == 1]\n"
            "real = [u for u in unary if u.types[0][0] in 'fd']\n"
            "assert sp.erf in got and sp.expit in got, got\n"
            "assert set(real) <= got, set(real) - got\n"
            "print(len(got))\n")
    mf, spi = "import minifloat", "import scipy.special as sp"
    for first, second in ((mf, spi), (spi, mf)):
        r = subprocess.run([sys.executable, "-c", code.format(first=first, second=second)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert int(r.stdout) > 50
    r = subprocess.run([sys.executable, "-c",
                        "import sys, minifloat\nassert 'scipy' not in sys.modules"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_errstate_stays_scipys():
    """With scipy.special.errstate asking for errors, the loop runs as NumPy's
    route runs it (on this thread, scipy's loop on every element): the same
    SpecialFunctionError and SpecialFunctionWarning as for float16, for small
    and large calls, before and after the table exists."""
    for t in (np.float16, minifloat.bfloat16):
        small = np.array([-1.0, 0.5], t)
        large = np.tile(small, 1 << 17)       # 2^18 elements: the table's size
        sp.gamma(large)                         # makes the table (errors ignored)
        for arr in (small, large):
            with sp.errstate(all="raise"):
                with pytest.raises(sp.SpecialFunctionError, match="singularity"):
                    sp.gamma(arr)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with sp.errstate(singular="warn"):
                    r = sp.gamma(arr)
            assert any(issubclass(x.category, sp.SpecialFunctionWarning) for x in w)
            assert np.isnan(r[0]) and r[1] == sp.gamma(np.array([0.5], np.float16))[0]


def test_layouts_out_and_where(threads):
    """Strided and reversed operands, out= of another type (NumPy casts the
    result), out= of the route's type with where=, dtype=float64, byte-swapped
    codes and a scalar: as float16's route (the values in the route's type
    first)."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(1 << 19) * 3).astype(np.float32).astype(minifloat.bfloat16)
    rt = route_type(sp.erf, x.dtype)
    xw = x.astype(rt)                             # the values in the route's type
    for nt in (1, 2):
        threads(nt)
        same_bits(sp.erf(x[::3]), sp.erf(xw[::3]))
        same_bits(sp.erf(x[::-1]), sp.erf(xw[::-1]))
        same_bits(sp.erf(x.reshape(512, -1).T), sp.erf(xw.reshape(512, -1).T))
        o = np.empty(x.shape, minifloat.bfloat16)
        assert sp.erf(x, out=o) is o
        np.testing.assert_array_equal(o.view(np.uint16),
                                      sp.erf(xw).astype(minifloat.bfloat16).view(np.uint16))
        ow = np.full(x.shape, 7.0, rt)
        mask = rng.random(x.shape) < 0.5
        sp.erf(x, out=ow, where=mask)
        same_bits(ow, np.where(mask, sp.erf(xw), rt.type(7.0)))
        r64 = sp.erf(x, dtype=np.float64)
        assert r64.dtype == np.float64
        same_bits(r64, sp.erf(x.astype(np.float64)))
    sw = x.astype(x.dtype.newbyteorder())        # byte-swapped codes
    assert not sw.dtype.isnative
    same_bits(sp.erf(sw), sp.erf(xw))
    s = sp.erf(minifloat.bfloat16(0.5))
    assert type(s) is rt.type and s == sp.erf(np.float16(0.5))
    assert sp.erf(np.zeros(0, minifloat.bfloat16)).dtype == rt
