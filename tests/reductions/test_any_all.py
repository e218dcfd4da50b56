"""any/all and count_nonzero of the formats in one call (src/umath/truth.c,
patches "fast_reductions" and "fast_count_nonzero").

ndarray.any/all and np.any/np.all of a C-contiguous minifloat array read the
codes' truth (not zero by value: NaN True, both zeros False) along any block
of axes in one threaded call.  The references: each value decoded by
ml_dtypes (where it has the format) and by minifloat's float32 cast,
compared with 0, then NumPy's own bool any/all; and NumPy's route itself
(np.logical_or/logical_and.reduce over the cast to bool, which the patch
leaves alone).  The rest (out=, where=, views NumPy's iterator walks, empty
arrays) stays on NumPy's route with the same answers.  np.count_nonzero
without an axis counts the same truth; its references are the decodes'
counts and NumPy's own C count (numpy._core.multiarray.count_nonzero).
"""
import itertools

import numpy as np
import pytest

import minifloat
from minifloat import _core

from conftest import mf_type

FORMATS = [np.dtype(t).name for t in minifloat.scalar_types]


def codes_dtype(dt):
    return np.uint8 if dt.itemsize == 1 else np.uint16


def random_codes(shape, dt, p_zero, rng):
    """Random codes of every kind (NaN, inf, subnormal, ...), about p_zero of
    them one of the format's zeros (both signs where it has two)."""
    u = codes_dtype(dt)
    c = rng.integers(0, 1 << (8 * dt.itemsize), size=shape, dtype=np.uint32).astype(u)
    zeros = np.array([0.0, -0.0], np.float32).astype(dt).view(u)
    z = rng.random(shape) < p_zero
    c[z] = rng.choice(zeros, size=int(z.sum()))
    return c


def truth_refs(c, dt):
    """The values' truth by each reference decode available."""
    refs = [c.view(dt).astype(np.float32) != 0]
    try:
        import ml_dtypes
        mt = getattr(ml_dtypes, dt.name)
    except (ImportError, AttributeError):
        return refs
    refs.append(c.view(mt).astype(np.float32) != 0)
    return refs


def axes_of(nd):
    yield None
    yield from range(nd)
    yield -1
    for r in range(2, nd + 1):
        yield from itertools.combinations(range(nd), r)


@pytest.mark.parametrize("fmt", FORMATS)
def test_any_all_against_the_decodes(fmt):
    dt = np.dtype(mf_type(fmt))
    rng = np.random.default_rng(len(fmt))
    for shape in [(7,), (100,), (3, 130), (130, 3), (5, 6, 70), (2, 3, 4, 5), (1, 300),
                  (300, 1), (9, 4100)]:
        for p_zero in (0.0, 0.5, 0.99, 1.0):
            c = random_codes(shape, dt, p_zero, rng)
            x = c.view(dt)
            refs = truth_refs(c, dt)
            for axis in axes_of(len(shape)):
                for keepdims in (False, True):
                    for name in ("any", "all"):
                        want = [getattr(t, name)(axis=axis, keepdims=keepdims) for t in refs]
                        ufunc = np.logical_and if name == "all" else np.logical_or
                        route = ufunc.reduce(x, axis=axis, dtype=bool, keepdims=keepdims)
                        for got in (getattr(x, name)(axis=axis, keepdims=keepdims),
                                    getattr(np, name)(x, axis=axis, keepdims=keepdims)):
                            for w in want + [route]:
                                assert type(got) is type(w), (fmt, shape, axis, name)
                                assert np.shape(got) == np.shape(w)
                                assert np.array_equal(got, w), (fmt, shape, p_zero, axis, name)


def test_the_one_call_takes_every_format():
    """Every format has a truth mask (or, e8m0, every code True): none is
    left to NumPy's route by the patch."""
    for fmt in FORMATS:
        x = np.zeros((3, 4), mf_type(fmt))
        assert _core._any_all(False, x, 1, False) is not NotImplemented, fmt


@pytest.mark.parametrize("fmt", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("shape", [(2, 700001), (1, 1500000), (600000, 3), (200000, 40),
                                   (3, 5000, 37), (70, 9000), (3, 333333, 1)])
def test_long_runs_and_columns_in_pieces(fmt, shape, threads):
    """Arrays of a MiB or more: runs and columns cut into pieces between the
    threads, the one deciding code anywhere: the first or last along the
    reduced axis of every output (where a piece begins or ends), or a few
    at random."""
    dt = np.dtype(mf_type(fmt))
    u = codes_dtype(dt)
    rng = np.random.default_rng(shape[0])
    one = np.array([1.0], np.float32).astype(dt).view(u)[0]
    for nthreads in (1, 2, 3):
        threads(nthreads)
        for axis in (None, 0, 1, -1):
            for base, other in ((0, one), (one, 0)):
                for where in ("first", "last", "random", "none"):
                    c = np.full(shape, base, u)
                    if where == "random":
                        c.reshape(-1)[rng.integers(0, c.size, 3)] = other
                    elif where != "none":
                        i = 0 if where == "first" else -1
                        if axis is None:
                            c.reshape(-1)[i] = other
                        else:
                            idx = [slice(None)] * len(shape)
                            idx[axis] = i
                            c[tuple(idx)] = other
                    x, t = c.view(dt), c != 0
                    for name in ("any", "all"):
                        want = getattr(t, name)(axis=axis)
                        assert np.array_equal(getattr(x, name)(axis=axis), want), \
                            (nthreads, axis, base, where, name)


def test_nan_is_true_and_zeros_false():
    bf16 = minifloat.bfloat16
    x = np.array([[np.nan, 0.0], [-0.0, 0.0], [np.inf, -np.inf]], bf16)
    assert x.any(axis=1).tolist() == [True, False, True]
    assert x.all(axis=1).tolist() == [False, False, True]
    assert np.all(x[2]) is np.True_ and np.any(x[1]) is np.False_
    e8 = np.zeros(10, minifloat.float8_e8m0fnu)     # 2**-127: no zero in e8m0
    assert e8.all() and e8.any() and e8.reshape(2, 5).all(axis=0).all()


def test_numpys_route_for_the_rest():
    bf16 = minifloat.bfloat16
    rng = np.random.default_rng(5)
    c = random_codes((6, 8), np.dtype(bf16), 0.7, rng)
    x, t = c.view(bf16), c.view(bf16).astype(np.float32) != 0
    out = np.empty(8, bool)
    assert x.any(axis=0, out=out) is out and np.array_equal(out, t.any(axis=0))
    w = rng.random((6, 8)) < 0.5
    assert np.array_equal(x.all(axis=1, where=w), t.all(axis=1, where=w))
    assert np.array_equal(np.any(x[:, ::2], axis=0), t[:, ::2].any(axis=0))
    assert np.array_equal(np.all(np.asfortranarray(x), axis=1), t.all(axis=1))
    assert np.array_equal(x.any(axis=()), t.any(axis=()))
    assert np.array_equal(x.any(axis=(0, 1)), t.any(axis=(0, 1)))
    assert np.any(np.zeros((0, 3), bf16), axis=0).tolist() == [False] * 3
    assert np.all(np.zeros((3, 0), bf16), axis=1).tolist() == [True] * 3
    assert np.array_equal(np.any(np.array(x[0, 0])), t[0, 0])
    for bad in (2, (0, 0), 1.0):
        with pytest.raises(Exception) as mine:
            x.any(axis=bad)
        with pytest.raises(Exception) as numpys:
            x.astype(np.float32).any(axis=bad)
        assert type(mine.value) is type(numpys.value) and str(mine.value) == str(numpys.value)


def test_subclasses_and_non_arrays_keep_their_own_any():
    class Tagged(np.ndarray):
        def any(self, *args, **kwargs):
            return "tagged"

    x = np.ones(4, minifloat.bfloat16)
    assert np.any(x.view(Tagged)) == "tagged"
    assert np.any([minifloat.bfloat16(0), minifloat.bfloat16(1)])


@pytest.mark.parametrize("fmt", FORMATS)
def test_count_nonzero_against_the_decodes(fmt, threads):
    from numpy._core import multiarray
    dt = np.dtype(mf_type(fmt))
    rng = np.random.default_rng(3 + len(fmt))
    numpys_type = type(np.count_nonzero(np.ones(3, np.float32)))
    for nthreads in (1, 3):
        threads(nthreads)
        for n in (0, 1, 15, 16, 17, 4097, (1 << 20) + 7, 3 * (1 << 20) // dt.itemsize + 5):
            for p_zero in (0.0, 0.5, 1.0):
                c = random_codes((n,), dt, p_zero, rng)
                x = c.view(dt)
                want = {int(t.sum()) for t in truth_refs(c, dt)}
                want.add(int(multiarray.count_nonzero(x)))      # NumPy's own count
                assert len(want) == 1, (fmt, n)
                (w,) = want
                assert _core._count_nonzero(x) == w      # the one call, not NumPy's route
                for y in (x, x.reshape(1, -1, 1), np.asfortranarray(x.reshape(-1, 1))):
                    got = np.count_nonzero(y)
                    assert type(got) is numpys_type and got == w, (fmt, n, p_zero)


def test_count_nonzero_of_views_and_axes():
    bf16 = minifloat.bfloat16
    rng = np.random.default_rng(9)
    c = random_codes((64, 80), np.dtype(bf16), 0.5, rng)
    x, t = c.view(bf16), c.view(bf16).astype(np.float32) != 0
    assert np.count_nonzero(x[:, ::3]) == np.count_nonzero(t[:, ::3])      # NumPy's route
    assert np.count_nonzero(x[::-1]) == np.count_nonzero(t)
    assert np.array_equal(np.count_nonzero(x, axis=0), np.count_nonzero(t, axis=0))
    assert np.array_equal(np.count_nonzero(x, keepdims=True), np.count_nonzero(t, keepdims=True))
    assert np.count_nonzero(np.array([np.nan, 0.0, -0.0, 1.0], bf16)) == 2
    assert np.count_nonzero(np.zeros(5, minifloat.float8_e8m0fnu)) == 5     # no zero in e8m0
    assert np.count_nonzero([1.0, 0.0]) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_nonzero_through_the_bool_cast(fmt):
    """np.nonzero (and np.flatnonzero, np.argwhere) take NumPy's bool nonzero
    of the truth cast: the indices of the format's own nonzero method."""
    dt = np.dtype(mf_type(fmt))
    rng = np.random.default_rng(11 + len(fmt))
    for shape in [(1,), (37,), (5, 70), (3, 4, 9)]:
        c = random_codes(shape, dt, 0.5, rng)
        x = c.view(dt)
        t = c.view(dt).astype(np.float32) != 0
        got, method = np.nonzero(x), x.nonzero()          # the method is NumPy's C route
        assert len(got) == len(method) == x.ndim
        for g, m, w in zip(got, method, t.nonzero()):
            assert g.dtype == m.dtype and np.array_equal(g, m) and np.array_equal(g, w)
        assert np.array_equal(np.flatnonzero(x), np.flatnonzero(t))
        assert np.array_equal(np.argwhere(x), np.argwhere(t))
    with pytest.raises(ValueError):
        np.nonzero(np.array(1.0, dt))       # NumPy's error for a 0-d array
