"""Sorting, searching, set operations and NaN-aware helpers: bfloat16
, then every float format of the family.

Reference: the same NumPy function on the decoded float32 values (exact), so
NaN goes last and -0.0 == 0.0, as NumPy orders floats.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minifloat as mf
from minifloat import bfloat16 as bf16

import _refs as R
import _family_refs as FR
from conftest import LEVELS, NUMPY_KNOWS_USER_NUMERIC, kernel_level, mf_type

BF = np.dtype(bf16)
KINDS = [None, "quicksort", "mergesort", "heapsort", "stable"]


def _data(n, seed, with_specials=True):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 1 << 16, n).astype(np.uint16)
    if with_specials and n >= 40:
        specials = np.array([0x0000, 0x8000, 0x7FC0, 0xFFC0, 0x7F80, 0xFF80, 0x7F81, 0x0001,
                             0x3F80, 0x3F80, 0x3F80, 0xBF80], np.uint16)
        codes[rng.choice(n, specials.size, replace=False)] = specials
    # plenty of duplicates
    q = n // 4
    codes[:q] = codes[q:2 * q]
    rng.shuffle(codes)
    return codes


def _vals(b):
    return np.asarray(b).astype(np.float32)


# Sorting all 65536 codes (or any n >= 32768 with many distinct negative
# values) takes seconds: see the report (counting-sort path insertion-sorts
# the distinct codes).  Two kinds only, to keep the suite fast.
@pytest.mark.parametrize("kind", [None, "stable"])
def test_sort_all_codes_shuffled(kind):
    codes = np.random.default_rng(0).permutation(R.ALL_CODES)
    got = np.sort(R.as_bf16(codes), kind=kind)
    assert got.dtype == BF
    want = np.sort(R.decode_f32(codes), kind=kind)
    assert np.array_equal(_vals(got), want, equal_nan=True)
    # NaN last, and exactly the NaN codes are at the end
    assert R.is_nan_code(R.bits(got)[-254:]).all() and not R.is_nan_code(R.bits(got)[:-254]).any()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 100, 1000, 30_000])
def test_sort_random(kind, n):
    codes = _data(n, n)
    got = np.sort(R.as_bf16(codes), kind=kind)
    assert np.array_equal(_vals(got), np.sort(R.decode_f32(codes), kind=kind), equal_nan=True)


@pytest.mark.parametrize("n", [2, 17, 1000, 4096, 32_767])
def test_sort_radix_path_keeps_the_codes_in_stable_order(n):
    # below 32768 values the sort is a stable radix sort: the codes come out
    # exactly as NumPy's stable float32 sort orders them, so -0/+0 and every
    # NaN code (sign, payload) keep their input order; whole rows of a 2-D
    # array too
    rng = np.random.default_rng(n)
    codes = _data(n, n + 1)
    k = min(n, 64)
    codes[rng.choice(n, k, replace=False)] = rng.choice(
        np.array([0x0000, 0x8000, 0x7FC0, 0xFFC0, 0x7F81, 0xFFA5], np.uint16), k)
    want = codes[np.argsort(R.decode_f32(codes), kind="stable")]
    assert np.array_equal(R.bits(np.sort(R.as_bf16(codes))), want)
    rows = np.stack([codes, codes[::-1]])
    order = np.argsort(R.decode_f32(rows), axis=1, kind="stable")
    assert np.array_equal(R.bits(np.sort(R.as_bf16(rows), axis=1)),
                          np.take_along_axis(rows, order, 1))
    # argsort (every kind is the stable radix sort): NumPy's stable indices
    for kind in (None, "stable"):
        assert np.array_equal(np.argsort(R.as_bf16(rows), axis=1, kind=kind), order)
        assert np.array_equal(np.argsort(R.as_bf16(rows[0]), kind=kind), order[0])


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float4_e2m1fn", "int4"])
@pytest.mark.parametrize("n", [3, 4096, 300_000])
def test_argsort_of_byte_formats_is_numpys_stable_order(name, n):
    # every byte pattern, NaNs of both signs and -0 among them, in rows and
    # flat: the indices of NumPy's stable sort of the values (float64: exact)
    dt = np.dtype(mf_type(name))
    rng = np.random.default_rng(n)
    raw = rng.integers(0, 256, n).astype(np.uint8).view(dt)
    vals = raw.astype(np.float64)
    assert np.array_equal(np.argsort(raw, kind="stable"), np.argsort(vals, kind="stable"))
    assert np.array_equal(np.argsort(raw), np.argsort(vals, kind="stable"))
    if n >= 4096:
        r2, v2 = raw[:4096 * (n // 4096)].reshape(-1, 4096), vals[:4096 * (n // 4096)].reshape(-1, 4096)
        assert np.array_equal(np.argsort(r2, axis=1), np.argsort(v2, axis=1, kind="stable"))
        assert np.array_equal(np.argsort(r2, axis=0), np.argsort(v2, axis=0, kind="stable"))


@pytest.mark.parametrize("kind", ["quicksort", "stable"])
def test_sort_large_counting_path(kind):
    # n >= 32768 takes the counting-sort path; positive-heavy data keeps it fast
    rng = np.random.default_rng(21)
    codes = rng.integers(0, 0x7F80, 100_000).astype(np.uint16)
    codes[rng.choice(codes.size, 3000, replace=False)] |= 0x8000
    codes[:5] = [0x7FC0, 0xFFC0, 0x8000, 0x0000, 0xFF80]
    got = np.sort(R.as_bf16(codes), kind=kind)
    assert np.array_equal(_vals(got), np.sort(R.decode_f32(codes), kind=kind), equal_nan=True)


@pytest.mark.parametrize("n", [0, 1, 17, 1000, 100_000])
def test_argsort_stable_identical_to_float32(n):
    # comparisons are identical, so a stable sort gives the same permutation
    codes = _data(n, n + 1)
    for kind in ("stable", "mergesort"):
        got = np.argsort(R.as_bf16(codes), kind=kind)
        want = np.argsort(R.decode_f32(codes), kind=kind)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("kind", [None, "quicksort", "heapsort"])
def test_argsort_unstable_sorts(kind):
    codes = _data(10_000, 5)
    idx = np.argsort(R.as_bf16(codes), kind=kind)
    assert np.array_equal(np.sort(idx), np.arange(codes.size))
    v = R.decode_f32(codes)[idx]
    assert np.array_equal(v, np.sort(R.decode_f32(codes)), equal_nan=True)


@pytest.mark.parametrize("shape", [(30, 40), (5, 6, 7), (1, 1000)])
def test_sort_along_axes_and_views(shape):
    codes = _data(int(np.prod(shape)), 9).reshape(shape)
    x = R.as_bf16(codes)
    f = R.decode_f32(codes)
    for ax in list(range(len(shape))) + [-1, None]:
        assert np.array_equal(_vals(np.sort(x, axis=ax)), np.sort(f, axis=ax), equal_nan=True)
        assert np.array_equal(np.argsort(x, axis=ax, kind="stable"),
                              np.argsort(f, axis=ax, kind="stable"))
    # non-contiguous inputs
    assert np.array_equal(_vals(np.sort(x.T, axis=0)), np.sort(f.T, axis=0), equal_nan=True)
    assert np.array_equal(_vals(np.sort(x[..., ::-2])), np.sort(f[..., ::-2]), equal_nan=True)


def test_inplace_sort():
    codes = _data(5000, 3)
    x = R.as_bf16(codes)
    x.sort()
    assert np.array_equal(_vals(x), np.sort(R.decode_f32(codes)), equal_nan=True)
    y = R.as_bf16(_data(3000, 4).reshape(30, 100))
    f = _vals(y)
    y[:, ::2].sort(axis=0)
    f[:, ::2].sort(axis=0)
    assert np.array_equal(_vals(y), f, equal_nan=True)


def test_sort_named():
    x = np.array([3, np.nan, 1, -0.0, 0.0, -np.inf, np.inf, -np.nan, 2], bf16)
    s = np.sort(x)
    assert _vals(s)[:7].tolist() == [-np.inf, 0, 0, 1, 2, 3, np.inf]
    assert np.isnan(_vals(s)[7:]).all()
    # ml_dtypes 0.6 sorts [3, nan, 1] as [3, nan, 1]
    assert _vals(np.sort(np.array([3, np.nan, 1], bf16)))[:2].tolist() == [1, 3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 0xFFFF), max_size=60))
def test_sort_property(codes):
    c = np.array(codes, np.uint16)
    got = np.sort(R.as_bf16(c))
    assert np.array_equal(_vals(got), np.sort(R.decode_f32(c)), equal_nan=True)
    assert np.array_equal(np.argsort(R.as_bf16(c), kind="stable"),
                          np.argsort(R.decode_f32(c), kind="stable"))


# --------------------------------------------------------------------------
# partition, searchsorted, lexsort
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kth", [0, 1, 500, 998, 999, [3, 100, 700]])
def test_partition(kth):
    codes = _data(1000, 12)
    x = R.as_bf16(codes)
    ref = np.sort(R.decode_f32(codes))
    p = np.partition(x, kth)
    ip = np.argpartition(x, kth)
    assert p.dtype == BF
    for k in np.atleast_1d(kth):
        assert np.array_equal(_vals(p)[k], ref[k], equal_nan=True)
        assert np.array_equal(R.decode_f32(codes)[ip[k]], ref[k], equal_nan=True)
        left, right = _vals(p)[:k], _vals(p)[k + 1:]
        if not np.isnan(ref[k]):
            assert (left <= ref[k]).all()
            assert ((right >= ref[k]) | np.isnan(right)).all()
    assert np.array_equal(np.sort(_vals(p)), ref, equal_nan=True)


def test_partition_2d():
    codes = _data(40 * 50, 13).reshape(40, 50)
    x = R.as_bf16(codes)
    f = R.decode_f32(codes)
    for ax in (0, 1):
        p = np.partition(x, 7, axis=ax)
        ref = np.sort(f, axis=ax)
        assert np.array_equal(np.take(_vals(p), 7, axis=ax), np.take(ref, 7, axis=ax),
                              equal_nan=True)


def _random_codes(name, shape, seed):
    """every byte pattern equally likely: the type, dtype, raw codes, array"""
    t = mf_type(name)
    dt = np.dtype(t)
    raw = np.random.default_rng(seed).integers(0, 1 << (8 * dt.itemsize), shape).astype(
        np.uint16 if dt.itemsize == 2 else np.uint8)
    return t, dt, raw, raw.view(t)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                                  "float8_e8m0fnu", "int4"])
def test_partition_by_sorting(name):
    """np.partition and np.argpartition of a format sort (patch
    "fast_partition": a sorted array is one of partition's answers; NumPy's
    own route calls the compare function per comparison): the kth elements
    are NumPy's route's (ndarray.partition, C), the rest sorted around them,
    along any axis and flattened, with NaNs last."""
    t, dt, raw, x = _random_codes(name, (37, 61), 21)
    f = x.astype(np.float64)
    for axis, kths in ((-1, [0, 5, 60, [2, 30, 59], -1]), (0, [0, 36, [1, 18]]),
                       (None, [0, 1000, [10, 2000], -5])):
        for kth in kths:
            p = np.partition(x, kth, axis=axis)
            ip = np.argpartition(x, kth, axis=axis)
            route = x.flatten() if axis is None else x.copy()
            route.partition(kth, axis=-1 if axis is None else axis)
            ax = -1 if axis is None else axis
            want = np.sort(f, axis=axis)
            got_f = p.astype(np.float64)
            assert p.dtype == dt and p.shape == want.shape
            np.testing.assert_array_equal(got_f, want)          # NaNs last, as NumPy
            for k in np.atleast_1d(kth):
                np.testing.assert_array_equal(np.take(got_f, k, axis=ax),
                                              np.take(route.astype(np.float64), k, axis=ax))
            src = f.reshape(-1) if axis is None else f
            np.testing.assert_array_equal(np.take_along_axis(src, ip, axis=ax), want)
    assert not np.shares_memory(np.partition(x, 3), x)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn", "int4"])
def test_partition_rows_on_the_threads(threads, name):
    """np.partition along the last axis of a C-contiguous array sorts the
    rows on the threads (_core._sort_rows): the same codes as ndarray.sort
    of each row (every byte pattern, NaNs of both signs, -0), at 1-3
    threads, large enough to be split; a copy; other layouts NumPy's.
    np.argpartition the same way (_core._argsort_rows): ndarray.argsort's
    stable indices."""
    t, dt, raw, x = _random_codes(name, (300, 4099), 5)
    want = x.copy()
    want.sort(axis=-1)
    bits = np.uint16 if dt.itemsize == 2 else np.uint8
    for n in (1, 2, 3):
        threads(n)
        for axis in (-1, 1):
            p = np.partition(x, 7, axis=axis)
            assert np.array_equal(p.view(bits), want.view(bits)), (n, axis)
            assert not np.shares_memory(p, x)
        # np.median sorts through the same front: the middle of each row
        fin = x.astype(np.float64)
        fin[~np.isfinite(fin)] = 0
        y = fin.astype(t)
        assert np.array_equal(np.median(y, axis=1).astype(np.float64),
                              np.sort(fin, axis=1)[:, 2049])
        r = mf._core._sort_rows(x.reshape(3, 100, 4099))
        assert np.array_equal(r.reshape(300, 4099).view(bits), want.view(bits))
        # np.sort along the last axis (patch "fast_sort"): the same codes, any kind
        for kind in (None, "quicksort", "mergesort", "heapsort", "stable"):
            assert np.array_equal(np.sort(x, axis=-1, kind=kind).view(bits), want.view(bits))
        assert np.array_equal(np.sort(x, axis=1, stable=True).view(bits), want.view(bits))
        # np.argpartition: the stable argsort of the rows, on the threads
        ip = np.argpartition(x, 7, axis=-1)
        assert np.array_equal(ip, x.argsort(axis=-1, kind="stable")), n
        for kind in (None, "quicksort", "stable"):            # and np.argsort's front
            assert np.array_equal(np.argsort(x, axis=1, kind=kind), ip), (n, kind)
        assert np.array_equal(mf._core._argsort_rows(x.reshape(3, 100, 4099)).reshape(300, 4099), ip)
    assert np.array_equal(raw.view(t).view(bits), raw)           # the input untouched
    for other in (x[:, ::2], x.T, x.astype(x.dtype.newbyteorder()) if dt.itemsize == 2 else x[::2, ::3]):
        assert mf._core._sort_rows(other) is NotImplemented
    assert mf._core._sort_rows(np.zeros(3)) is NotImplemented
    assert mf._core._argsort_rows(x[:, ::2]) is NotImplemented
    assert mf._core._argsort_rows(x[:0]).shape == (0, 4099)
    # a single row, and rows of one element
    assert np.array_equal(mf._core._sort_rows(x[0]).view(bits), want[0].view(bits))
    one = x[:, :1].copy()
    assert np.array_equal(mf._core._sort_rows(one).view(bits), one.view(bits))


def test_sort_front_errors_and_other_calls_are_numpys():
    # np.sort's front: NumPy's errors and messages (as for float16), other
    # axes, views, subclasses and order= are NumPy's route; a copy
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::-1].astype(bf16)
    h = x.astype(np.float16)
    for kw in ({"kind": "nope"}, {"kind": "quicksort", "stable": True}, {"axis": 2},
               {"axis": 1.0}, {"order": "a"}, {"axis": -3}):
        with pytest.raises(Exception) as want:
            np.sort(h, **kw)
        with pytest.raises(type(want.value)) as got:
            np.sort(x, **kw)
        assert str(got.value) == str(want.value), kw
    for a, kw in ((x, {"axis": 0}), (x, {"axis": None}), (x[:, ::2], {}),
                  (x.view(np.matrix), {}), (x, {"kind": "s"})):
        got = np.sort(a, **kw)
        assert type(got) is type(a)
        want = np.sort(np.asarray(a).astype(np.float32), **kw)
        assert np.array_equal(np.asarray(got).astype(np.float32), want), kw
    for kw in ({"kind": "nope"}, {"kind": "quicksort", "stable": True}, {"axis": 2}):
        with pytest.raises(Exception) as want:
            np.argsort(h, **kw)
        with pytest.raises(type(want.value)) as got:
            np.argsort(x, **kw)
        assert str(got.value) == str(want.value), kw
    assert np.array_equal(np.argsort(x, axis=0), np.argsort(h, axis=0, kind="stable"))
    assert np.array_equal(np.argsort(x[:, ::2]), np.argsort(h[:, ::2], kind="stable"))
    s = np.sort(x)
    assert not np.shares_memory(s, x) and s.flags.c_contiguous
    assert type(np.sort).__name__ == "FastPath" and np.sort is np._core.numeric.sort


def test_partition_errors_and_other_kinds_are_numpys():
    # the checks of kth and axis are NumPy's own, with its messages; kind=
    # and order= other than the default, and views, are NumPy's route
    x = np.arange(24, dtype=np.float32).reshape(4, 6).astype(bf16)
    h = x.astype(np.float16)
    for kth, axis in ((6, -1), (-7, -1), (1.5, -1), ([[1]], -1), ([1, 9], -1), (1, 2),
                      (True, -1), (30, None)):
        for fn in (np.partition, np.argpartition):
            with pytest.raises(Exception) as want:
                fn(h, kth, axis=axis)
            with pytest.raises(type(want.value)) as got:
                fn(x, kth, axis=axis)
            assert str(got.value) == str(want.value), (fn, kth, axis)
    p = np.partition(x[:, ::-1], 2, axis=1)
    assert np.array_equal(p[:, 2].astype(np.float32), np.arange(2, 24, 6, dtype=np.float32))
    with pytest.raises(ValueError, match="not a valid partition kind|kind"):
        np.partition(x, 1, kind="nope")
    assert type(np.partition).__name__ == "FastPath"


def test_median_by_sorting_is_the_routes():
    # np.median calls np.partition: the middle elements are the same, so the
    # median's bits are the ones NumPy's route (sorting by compare) gives
    rng = np.random.default_rng(22)
    for shape, axis in (((31, 64), 1), ((31, 64), 0), ((1001,), None), ((6, 7, 8), (0, 2))):
        x = rng.standard_normal(shape).astype(np.float32).astype(bf16)
        x.flat[3] = np.nan if shape == (31, 64) else x.flat[3]
        got = np.median(x, axis=axis)
        orig = np.partition.__wrapped__
        import numpy.lib._function_base_impl as fb
        fb.partition = orig
        try:
            want = np.median(x, axis=axis)
        finally:
            fb.partition = np.partition
        assert np.array_equal(np.asarray(got).view(np.uint16), np.asarray(want).view(np.uint16))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side):
    hay_codes = np.sort(_data(5000, 14))     # uint16 sort is not the float order...
    hay = np.sort(R.as_bf16(hay_codes))      # ...so sort as bfloat16
    hf = _vals(hay)
    needles = R.as_bf16(_data(2000, 15))
    got = np.searchsorted(hay, needles, side=side)
    want = np.searchsorted(hf, _vals(needles), side=side)
    assert np.array_equal(got, want)
    # Python and NumPy scalar needles
    for v in (1.5, -0.0, np.inf, np.nan):
        assert np.searchsorted(hay, v, side=side) == np.searchsorted(hf, np.float32(bf16(v)),
                                                                     side=side)
    # sorter=
    perm = np.random.default_rng(1).permutation(hay.size)
    shuffled = hay[perm]
    sorter = np.argsort(shuffled, kind="stable")
    assert np.array_equal(np.searchsorted(shuffled, needles, side=side, sorter=sorter), got)


def test_lexsort_and_sort_by_key():
    a = np.array([1, 1, 0, np.nan, 0], bf16)
    b = np.array([2, 1, 1, 0, np.nan], bf16)
    assert np.array_equal(np.lexsort((a, b)), np.lexsort((_vals(a), _vals(b))))
    assert np.array_equal(np.lexsort((b, a)), np.lexsort((_vals(b), _vals(a))))


# --------------------------------------------------------------------------
# unique and set operations
# --------------------------------------------------------------------------
def test_unique_all_outputs():
    codes = _data(5000, 16)
    x = R.as_bf16(codes)
    f = R.decode_f32(codes)
    u, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    fu, fidx, finv, fcnt = np.unique(f, return_index=True, return_inverse=True,
                                     return_counts=True)
    assert u.dtype == BF
    assert np.array_equal(_vals(u), fu, equal_nan=True)
    assert np.array_equal(cnt, fcnt)
    assert np.array_equal(_vals(u)[inv], f, equal_nan=True) or \
        np.array_equal(_vals(u[inv]), fu[finv], equal_nan=True)
    assert np.array_equal(np.isnan(_vals(x[idx])), np.isnan(fu))
    # equal_nan=False keeps every NaN
    u2 = np.unique(x, equal_nan=False)
    assert np.array_equal(_vals(u2), np.unique(f, equal_nan=False), equal_nan=True)


def test_unique_named():
    x = np.array([3, np.nan, 1, -0.0, 0.0, -np.inf, np.inf, -np.nan, 2, 1], bf16)
    u = np.unique(x)
    assert _vals(u)[:-1].tolist() == [-np.inf, 0, 1, 2, 3, np.inf]
    assert np.isnan(_vals(u)[-1])
    assert np.unique(x, return_counts=True)[1].tolist() == [1, 2, 2, 1, 1, 1, 2]


def test_unique_axis():
    x = np.array([[1, 2], [1, 2], [3, 4]], bf16)
    assert np.unique(x, axis=0).tolist() == [[1, 2], [3, 4]]


def test_set_operations():
    a = np.array([1, 2, 3, np.nan, 5], bf16)
    b = np.array([2, 5, 7], bf16)
    assert _vals(np.intersect1d(a, b)).tolist() == [2, 5]
    assert np.isin(a, b).tolist() == [False, True, False, False, True]
    assert _vals(np.setdiff1d(a, b))[:2].tolist() == [1, 3]
    assert np.isnan(_vals(np.setdiff1d(a, b))[-1])
    assert _vals(np.union1d(a, b))[:5].tolist() == [1, 2, 3, 5, 7]
    assert np.intersect1d(a, b).dtype == BF


# --------------------------------------------------------------------------
# NaN-aware helpers
# --------------------------------------------------------------------------
def test_nan_to_num():
    x = np.array([1, np.nan, np.inf, -np.inf, -np.nan, -0.0], bf16)
    r = np.nan_to_num(x)
    assert r.dtype == BF
    big = float(R.decode_f32(np.uint16(R.MAX_CODE)))
    assert _vals(r).tolist() == [1, 0, big, -big, 0, 0]
    assert np.signbit(_vals(r)[5])
    r = np.nan_to_num(x, nan=5, posinf=7, neginf=-7)
    assert _vals(r).tolist() == [1, 5, 7, -7, 5, 0]
    y = x.copy()
    assert np.nan_to_num(y, copy=False) is y
    assert not np.isnan(y).any()


def test_isclose_allclose():
    a = np.array([1.0, np.nan, np.inf, 1e-40, 0.0, 100], bf16)
    b = np.array([1.0078125, np.nan, np.inf, 0.0, -0.0, 101], bf16)
    for kw in ({}, {"equal_nan": True}, {"rtol": 1e-2}, {"atol": 1e-39}, {"rtol": 0, "atol": 0}):
        got = np.isclose(a, b, **kw)
        want = np.isclose(_vals(a), _vals(b), **kw)
        assert np.array_equal(got, want), kw
        assert np.allclose(a, b, **kw) == np.allclose(_vals(a), _vals(b), **kw)
    assert np.allclose(a, a, equal_nan=True)
    assert not np.allclose(a, a)
    assert np.isclose(np.array([1.0], bf16), 1.0078125, rtol=0.01)[0]
    assert np.array_equal(a, a, equal_nan=True) and not np.array_equal(a, a)


@pytest.mark.skipif(not NUMPY_KNOWS_USER_NUMERIC, reason="NumPy < 2.4 limitation: numpy.testing "
                    "treats dtypes outside its own type characters as non-numeric, so NaN "
                    "positions are compared as values")
def test_testing_helpers_pass_with_nan():
    a = np.array([1.5, np.nan, -np.inf, 0.0], bf16)
    np.testing.assert_array_equal(a, a.copy())
    np.testing.assert_array_equal(a, a.astype(np.float32))
    np.testing.assert_allclose(a, a.copy())
    np.testing.assert_allclose(a, a.astype(np.float64), rtol=0)
    np.testing.assert_array_almost_equal(a, a.copy())
    np.testing.assert_equal(a, a.copy())
    np.testing.assert_allclose(np.array([1.0], bf16), 1.0078125, rtol=1e-2)


@pytest.mark.parametrize("fn", [np.testing.assert_array_equal, np.testing.assert_allclose,
                                np.testing.assert_array_almost_equal, np.testing.assert_equal])
def test_testing_helpers_detect_differences(fn):
    a = np.array([1.0, np.nan], bf16)
    for b in (np.array([1.0078125, np.nan], bf16), np.array([1.0, 1.0], bf16),
              np.array([np.nan, np.nan], bf16)):
        with pytest.raises(AssertionError):
            fn(a, b)
    with pytest.raises(AssertionError):
        fn(a, np.array([1.0, np.nan, 2.0], bf16))


# ==========================================================================
# Every float format of the family (bfloat16 included)
# ==========================================================================
def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_sort_argsort_nan_last(name):
    t = mf_type(name)
    rng = np.random.default_rng(1)
    codes = rng.permutation(np.concatenate([FR.all_codes(name)] * max(2, 8000 // FR.ncodes(name))))
    if len(codes) > 40000:
        codes = codes[:40000]
    a = codes.view(t)
    a32 = a.astype(np.float32)
    s = np.sort(a)
    assert s.dtype == a.dtype
    np.testing.assert_array_equal(s.astype(np.float32), np.sort(a32))      # NaN last
    # sorting permutes: every code (NaN payloads, both zeros) survives
    np.testing.assert_array_equal(np.sort(codes_of(s, name)), np.sort(codes))
    np.testing.assert_array_equal(np.argsort(a, kind="stable"), np.argsort(a32, kind="stable"))
    # default argsort sorts too
    np.testing.assert_array_equal(a32[np.argsort(a)], np.sort(a32))
    # in place, along an axis, descending via [::-1]
    b = a[:4000].reshape(40, 100).copy()
    b.sort(axis=0)
    np.testing.assert_array_equal(b.astype(np.float32), np.sort(a32[:4000].reshape(40, 100), axis=0))
    b = a[:4000].reshape(40, 100).copy()
    b.sort(axis=1)
    np.testing.assert_array_equal(b.astype(np.float32), np.sort(a32[:4000].reshape(40, 100), axis=1))


# np.unique makes the NaNs one (float32's result) also for the formats with
# several NaN codes (NumPy tests the kind, 'V' here: patch "kind_f")
@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_unique_searchsorted_partition(name):
    t = mf_type(name)
    codes = FR.all_codes(name)
    if len(codes) > 4096:
        codes = codes[::17]
    rng = np.random.default_rng(5)
    a = rng.permutation(np.concatenate([codes, codes[:50]])).view(t)
    a32 = a.astype(np.float32)
    u = np.unique(a)
    assert u.dtype == a.dtype
    np.testing.assert_array_equal(u.astype(np.float32), np.unique(a32))
    s = np.sort(a)
    q = rng.permutation(codes)[:100].view(t)
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.searchsorted(s, q, side=side),
                                      np.searchsorted(np.sort(a32), q.astype(np.float32), side=side))
    k = len(a) // 3
    p = np.partition(a, k)
    p32 = p.astype(np.float32)
    want = np.sort(a32)[k]
    assert (p32[k] == want) or (np.isnan(p32[k]) and np.isnan(want))
    fin = ~np.isnan(want)
    if fin:
        assert (p32[:k] <= want).all()


@pytest.mark.parametrize("name", FR.FLOAT_NAMES + FR.INT_NAMES)
def test_compare_and_nonzero_every_code(name):
    """The format's compare and nonzero functions, which NumPy calls an
    element (or a pair) at a time: np.partition (a generic quicksort for a
    dtype without a partition function), searchsorted; count_nonzero,
    nonzero, argwhere.  Every code, against the same functions of the
    float64 values: NaN last, -0 == +0, NaN nonzero."""
    t = mf_type(name)
    codes = FR.all_codes(name)
    rng = np.random.default_rng(11)
    a = rng.permutation(np.concatenate([codes, codes[: len(codes) // 3]])).view(t)
    with np.errstate(invalid="ignore"):
        v = a.astype(np.float64)
    assert np.count_nonzero(a) == np.count_nonzero(v)
    np.testing.assert_array_equal(np.flatnonzero(a), np.flatnonzero(v))
    m = a[: len(a) // 4 * 4].reshape(4, -1)
    np.testing.assert_array_equal(np.argwhere(m), np.argwhere(m.astype(np.float64)))
    for k in (0, len(a) // 2, len(a) - 1):
        p = np.partition(a, k).astype(np.float64)
        w = np.partition(v, k)
        np.testing.assert_array_equal(p[k], w[k])
        np.testing.assert_array_equal(np.sort(p[:k]), np.sort(w[:k]))
    s = np.sort(a)
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.searchsorted(s, a, side=side),
                                      np.searchsorted(np.sort(v), v, side=side))


# ==========================================================================
# argmax / argmin: keys scanned in blocks (src/numpy/sort.c; the formats
# whose codes order as sign and magnitude: the level's kernel,
# src/kernels/stream/argext.h, checked at every level)
# ==========================================================================
def _isnan_codes(name, codes):
    with np.errstate(invalid="ignore"):
        return np.isnan(codes.view(mf_type(name)).astype(np.float32))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES + FR.INT_NAMES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_argmax_argmin_like_float32(name, data):
    """The first NaN, else the first extreme, as NumPy's float32 argmax/argmin
    (the decoded values are exact), across blocks: NaN or not, the extreme
    repeated in later blocks, a NaN after it."""
    n = data.draw(st.integers(1, 7000), label="n")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    pool = FR.all_codes(name)
    if not data.draw(st.booleans(), label="nan"):
        pool = pool[~_isnan_codes(name, pool)]
    codes = rng.choice(pool, n)
    # a few copies of one code (the extreme, often) at random places
    codes[rng.integers(0, n, 4)] = data.draw(st.sampled_from(list(pool)), label="repeated")
    if data.draw(st.booleans(), label="one sign"):     # the extreme may be -0 or +0
        sign = pool.dtype.type(0x8000 if pool.dtype.itemsize == 2 else 0x80)   # the top bit
        codes = codes | sign if data.draw(st.booleans(), label="negative") else codes & ~sign
        codes[rng.integers(0, n, 3)] ^= sign                 # a few of the other sign
    a = codes.view(mf_type(name))
    ref = a.astype(np.float32)
    with np.errstate(invalid="ignore"):
        want_max, want_min = np.argmax(ref), np.argmin(ref)
        for level in LEVELS:
            with kernel_level(level):
                assert np.argmax(a) == want_max, level
                assert np.argmin(a) == want_min, level
        if n % 4 == 0:
            np.testing.assert_array_equal(a.reshape(4, -1).argmax(axis=1),
                                          ref.reshape(4, -1).argmax(axis=1))
            np.testing.assert_array_equal(a.reshape(4, -1).argmin(axis=0),
                                          ref.reshape(4, -1).argmin(axis=0))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3",
                                  "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn", "int4"])
def test_argmax_argmin_along_leading_axes(name, threads):
    """np.argmax / np.argmin along an axis that is not the last (a row of
    columns at a time for the sign-magnitude formats; NumPy scans a
    transposed copy): NumPy's indices (the ndarray methods, its route) for
    every code, ties (the first), NaNs (the first wins), -0 == +0, columns
    below, at and past a block, 1-3 threads."""
    t = mf_type(name)
    dt = np.dtype(t)
    rng = np.random.default_rng(31)
    nbits = 8 * dt.itemsize
    for shape in ((2, 3), (300, 7), (9, 512), (40, 1100), (3, 60, 9), (5, 4, 3, 70)):
        raw = rng.integers(0, 1 << nbits, shape).astype(np.uint16 if nbits == 16 else np.uint8)
        raw[: shape[0] // 2] = raw[shape[0] // 2: 2 * (shape[0] // 2)]    # equal keys in a column
        x = raw.view(t)
        for nt in (1, 2, 3):
            threads(nt)
            for ax in range(-len(shape), len(shape) - 1):
                for fn in ("argmax", "argmin"):
                    got = getattr(np, fn)(x, axis=ax)
                    want = getattr(x, fn)(axis=ax)
                    assert got.dtype == want.dtype and got.shape == want.shape
                    np.testing.assert_array_equal(got, want, err_msg=f"{fn} {shape} {ax}")
    # big enough for the threads, with NaN columns and signed zeros
    if name in ("bfloat16", "float8_e4m3fn"):
        f = rng.standard_normal((700, 1500)).astype(np.float32)
        f[rng.random(f.shape) < 0.001] = np.nan
        f[rng.random(f.shape) < 0.01] = -0.0
        x = f.astype(t)
        for nt in (1, 2, 3):
            threads(nt)
            for fn in ("argmax", "argmin"):
                np.testing.assert_array_equal(getattr(np, fn)(x, axis=0), getattr(x, fn)(axis=0))
    # what the path leaves to NumPy: out=, keepdims=, views, axis errors
    x = np.arange(24, dtype=np.float32).reshape(4, 6).astype(t) if name != "int4" else \
        np.arange(-8, 4, dtype=np.int8).reshape(4, 3).astype(t)
    o = np.empty(x.shape[1], np.intp)
    assert np.argmax(x, axis=0, out=o) is o
    assert np.argmax(x, axis=0, keepdims=True).shape == (1, x.shape[1])
    np.testing.assert_array_equal(np.argmin(x[::-1], axis=0), x[::-1].argmin(axis=0))
    with pytest.raises(np.exceptions.AxisError):
        np.argmax(x, axis=2)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu", "int4"])
def test_argmax_ties_across_blocks(name):
    t = mf_type(name)
    a = np.ones(6000, np.float32)
    a[[2047, 2048, 4100]] = 2.0          # the first of equal extremes, across a block edge
    a[[10, 5000]] = 0.0 if name != "float8_e8m0fnu" else 0.5
    x = a.astype(t)
    assert np.argmax(x) == 2047 and np.argmin(x) == 10
    if name in FR.FLOAT_NAMES and name != "float8_e8m0fnu":
        b = x.copy()
        b[2060] = b[4090] = np.float32("nan")     # a NaN wins both, the first one
        assert np.argmax(b) == 2060 and np.argmin(b) == 2060
        c = x.copy()
        c[1000] = -0.0
        c[10] = 0.0
        assert np.argmin(c) == 10                # -0 == +0: the first
