"""The work-arounds for NumPy's holes for new-style dtypes (docs/design.md)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minifloat as mf
from conftest import NUMPY_DOT_USES_DOTFUNC, NUMPY_PRINTS_ELEMENTS_WITH_STR, NUMPY_VERSION

BF = mf.bfloat16


def f32_reference(func, *arrays):
    """Compute on the float32 values (float64 accumulation is tighter than
    needed; the point is a value to round once)."""
    return func(*[a.astype(np.float64) for a in arrays])


def rounded(x, dtype=BF):
    return np.asarray(x, np.float64).astype(dtype)


@pytest.fixture
def mats():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(BF)
    b = rng.standard_normal((7, 3)).astype(BF)
    v = rng.standard_normal(7).astype(BF)
    return a, b, v


def close_to_reference(got, ref, dtype=BF):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype)
    # float32 accumulation then one rounding: within one ulp of the exact result
    eps = float(mf.finfo(dtype).eps)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2 * eps, atol=1e-6)


def test_dot_matrix_vector_and_scalar(mats):
    a, b, v = mats
    close_to_reference(np.dot(a, b), f32_reference(np.dot, a, b))
    close_to_reference(np.dot(a, v), f32_reference(np.dot, a, v))
    close_to_reference(np.dot(v, v), f32_reference(np.dot, v, v))
    # a Python float becomes a float64 array in np.dot, as for float32 arrays
    assert np.dot(a, 2.0).dtype == np.dot(np.ones(2, np.float32), 2.0).dtype
    assert np.dot(a, BF(2.0)).dtype == np.dtype(BF)
    # N-D . M-D is np.dot's contraction, not matmul's broadcasting
    c = np.arange(24, dtype=BF).reshape(2, 3, 4)
    d = np.arange(40, dtype=BF).reshape(2, 4, 5)
    got = np.dot(c, d)
    assert got.shape == (2, 3, 2, 5)
    exact = np.dot(c.astype(np.float64), d.astype(np.float64))   # integers, exact in float32
    np.testing.assert_array_equal(got.view(np.uint16), rounded(exact).view(np.uint16))


def test_dot_mixed_with_float32_gives_float32(mats):
    a, b, _ = mats
    r = np.dot(a, b.astype(np.float32))
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, np.dot(a.astype(np.float32), b.astype(np.float32)))


def test_dot_out_and_errors(mats):
    a, b, _ = mats
    out = np.empty((5, 3), BF)
    assert np.dot(a, b, out=out) is out
    with pytest.raises(ValueError, match="not aligned"):
        np.dot(a, a)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_dot_of_matrices_is_matmul(name):
    """np.dot of two matrices, or of a matrix and a vector, of one float
    format is np.matmul's product (patch "fast_dot"): a @ b bit for bit,
    for C-ordered, transposed and column-sliced operands (NumPy's own np.dot
    walks b's columns with the dotfunc, one call per output element), and
    np.tensordot, which calls np.dot, with it."""
    t = getattr(mf, name)
    rng = np.random.default_rng(3)
    big = rng.standard_normal((70, 90)).astype(np.float32).astype(t)
    a, w = big[:20, :33], big[:33]
    for b in (w[:, :17], w[:, :17].copy(), big[:17, :33].T, np.asfortranarray(w[:, :5])):
        got = np.dot(a, b)
        assert got.dtype == np.dtype(t) and got.shape == (20, b.shape[1])
        assert np.array_equal(got.view(np.uint8), np.matmul(a, b).view(np.uint8))
    vec = big[40, :33]
    for x, y in ((a, vec), (vec, w[:, :17]), (a[::2], vec[::-1])):
        assert np.array_equal(np.dot(x, y).view(np.uint8), np.matmul(x, y).view(np.uint8))
    td = np.tensordot(big[:8, :33], big[8:20, :33], axes=([1], [1]))
    assert np.array_equal(td.view(np.uint8), (big[:8, :33] @ big[8:20, :33].T).view(np.uint8))
    # integer-valued products are exact in float32: against float64
    ia = rng.integers(-4, 5, (9, 11)).astype(np.float32)
    ib = rng.integers(-4, 5, (11, 6)).astype(np.float32)
    np.testing.assert_array_equal(np.dot(ia.astype(t), ib.astype(t)).astype(np.float64),
                                  np.dot(ia.astype(t).astype(np.float64),
                                         ib.astype(t).astype(np.float64)).astype(t).astype(np.float64))


def test_dot_front_leaves_the_rest_to_numpy():
    # plain NumPy arrays reach NumPy's np.dot itself; what the front does not
    # take (shape errors, out=, vectors, mixed types, integer formats) is
    # NumPy's np.dot's, errors and all
    assert type(np.dot).__name__ == "FastPath"
    assert np.dot.__wrapped__ is not np.dot and np.dot == np.dot.__wrapped__
    f = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.dot(f, f.T), np.dot.__wrapped__(f, f.T))
    a = np.ones((3, 4), BF)
    with pytest.raises(ValueError, match="not aligned"):
        np.dot(a, a)
    out = np.empty((3, 3), BF)
    assert np.dot(a, a.T, out=out) is out and float(out[0, 0]) == 4.0
    assert np.dot(a, a.T.astype(np.float32)).dtype == np.float32
    i4 = np.full((2, 5), 3, mf.int4)
    assert int(np.dot(i4, i4.T)[0, 0]) == -3          # 45 wraps in 4 bits, as int8's dot in 8
    assert float(np.dot(np.ones(300, BF), np.ones(300, BF))) == 300.0
    # another array type's __array_function__ gets the call as it was made
    # (no out= added: dask's dot has none)

    class Other:
        def __array_function__(self, func, types, args, kwargs):
            return func.__name__, len(args), sorted(kwargs)

    assert np.dot(Other(), a) == ("dot", 2, [])
    assert np.dot(a, Other()) == ("dot", 2, [])
    assert np.dot(Other(), a, out=out) == ("dot", 2, ["out"])


def test_vdot_inner_tensordot(mats):
    a, b, v = mats
    close_to_reference(np.vdot(a, a), f32_reference(np.vdot, a, a))
    close_to_reference(np.inner(a, a), f32_reference(np.inner, a, a))
    close_to_reference(np.inner(v, v), f32_reference(np.inner, v, v))
    close_to_reference(np.tensordot(a, b, axes=1), f32_reference(lambda x, y: np.tensordot(x, y, axes=1), a, b))


def test_einsum_accumulates_in_float32_not_zeros():
    ones = np.ones((3, 3), BF)
    r = np.einsum("ij->j", ones)
    assert r.dtype == np.dtype(BF)
    np.testing.assert_array_equal(r.astype(np.float32), [3, 3, 3])
    # 4096 ones along one axis: a bfloat16 accumulator would stop at 256
    big = np.ones((4096, 2), BF)
    np.testing.assert_array_equal(np.einsum("ij->j", big).astype(np.float32), [4096, 4096])
    a = np.arange(6, dtype=BF).reshape(2, 3)
    np.testing.assert_array_equal(np.einsum("ij,kj->ik", a, a).astype(np.float32),
                                  (a.astype(np.float32) @ a.astype(np.float32).T))
    # interleaved operand form and a scalar result
    assert float(np.einsum(a, [0, 1], a, [0, 1])) == float((a.astype(np.float32) ** 2).sum())
    assert np.einsum("ij,ij", a, a).dtype == np.dtype(BF)


def test_einsum_mixed_and_integer_formats():
    a = np.arange(6, dtype=BF).reshape(2, 3)
    assert np.einsum("ij->", a.astype(np.float32)).dtype == np.float32
    assert np.einsum("ij,ij->i", a, np.ones((2, 3), np.float32)).dtype == np.float32
    i4 = np.array([7, 7, 7], mf.int4)
    assert np.einsum("i->", i4) == 21          # int64 arithmetic, no wrap-around


def test_array_printing_uses_the_formats_digits():
    a = np.array([0.1, 1.5, -2.0], BF)
    e4 = np.array([1, 2, 448], mf.float8_e4m3fn)
    if NUMPY_PRINTS_ELEMENTS_WITH_STR:
        # NumPy >= 2.5: str() of each element (numpy#30798), the scalars' rule
        assert repr(a) == "array([0.1, 1.5, -2.0], dtype=bfloat16)"
        assert str(a) == "[0.1 1.5 -2.0]"
        assert repr(e4) == "array([1.0, 2.0, 448.0], dtype=float8_e4m3fn)"
    else:
        # older NumPy: its float layout, as float32 lays out the same values
        # (not from 10**precision on, as for float16), with the digits the
        # patched Dragon4 gets
        assert repr(a) == "array([ 0.1,  1.5, -2. ], dtype=bfloat16)"
        assert str(a) == "[ 0.1  1.5 -2. ]"
        assert repr(e4) == "array([  1.,   2., 448.], dtype=float8_e4m3fn)"
    assert "dtype=int4" in repr(np.array([1], mf.int4))
    assert np.format_float_positional(BF(0.1)) == "0.1"
    assert np.format_float_positional(mf.float8_e4m3fn(448)) == "448."
    assert np.format_float_scientific(BF(2.0**24)) == "1.68e+07"
    assert np.format_float_positional(BF(0.1), unique=False, precision=12) == "0.100097656250"


def test_patches_are_applied_only_where_numpy_has_the_hole():
    # (patch, target): one target may carry two patches (_wrapreduction: the
    # integer formats' hole, not needed, and fast_reductions, always applied)
    assert not set(mf._numpy_patches.applied) & set(mf._numpy_patches.not_needed)
    applied = {t for _, t in mf._numpy_patches.applied}
    not_needed = {t for _, t in mf._numpy_patches.not_needed}
    # holes every NumPy so far has: printing of user floats by np.format_float_*,
    # einsum (numpy#32671), np.iinfo of int4
    for target in ("numpy._core.arrayprint.dragon4_positional",
                   "numpy._core.einsumfunc.c_einsum", "numpy.iinfo.__init__"):
        assert target in applied, target
    # NumPy's own dot/vdot/inner work through the formats' dotfunc, and the
    # integer formats' sums and products take int64 through a promoter
    assert {"numpy.dot", "numpy.vdot", "numpy.inner",
            "numpy._core.fromnumeric._wrapreduction"} <= not_needed
    a = np.full(2, 7, mf.int4)
    assert np.dot(a, a).dtype == a.dtype and int(np.dot(a, a)) == 98 - 96   # NumPy's wrap


def test_numpy_dot_of_float_formats_needs_no_patch():
    code = ("import numpy as np, minifloat as mf\n"
            "a = np.arange(6, dtype=mf.float8_e4m3fn).reshape(2, 3)\n"
            "print(np.dot(a, a.T).astype(float).tolist(), np.linalg.norm(np.array([3, 4], "
            "mf.bfloat16)))\n")
    env = dict(os.environ, MINIFLOAT_NO_NUMPY_PATCHES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[[5.0,", "14.0],", "[14.0,", "48.0]]", "5.0"]


def test_mean_var_std_round_once():
    x = np.arange(100, dtype=BF)
    ref = np.arange(100, dtype=np.float64)
    for name in ("mean", "var", "std"):
        got = getattr(np, name)(x)
        assert type(got) is BF
        # float32 computation rounded once: the correctly rounded result here
        assert got == BF(getattr(np, name)(ref)), name
        assert getattr(x, name)() == got
    m = np.arange(12, dtype=BF).reshape(3, 4)
    np.testing.assert_array_equal(m.mean(axis=0).astype(np.float64), rounded(np.arange(12.).reshape(3, 4).mean(axis=0)).astype(np.float64))
    assert m.mean(axis=0).dtype == np.dtype(BF)


def test_reductions_accept_dtype_instances_scalar_types_and_names():
    a = np.ones(1000, BF)
    # the name "bfloat16" is ml_dtypes' once ml_dtypes is imported (this session
    # imports it): tests/numpy_compat/test_neighbours.py checks the name in a fresh process
    names = ["bfloat16"] if np.dtype("bfloat16").type is BF else []
    for spec in [a.dtype, BF, mf.dtypes.BFloat16DType] + names:
        assert a.sum(dtype=spec) == 1000
        assert np.sum(a, dtype=spec) == 1000
        assert np.prod(a, dtype=spec) == 1
    assert np.mean(a, dtype=a.dtype) == 1
    # NumPy's own ufunc machinery takes the instance (legacy-compatible DType)
    assert np.add(a, a, dtype=a.dtype).dtype == np.dtype(BF)
    assert np.add(a, a, dtype=mf.dtypes.BFloat16DType).dtype == np.dtype(BF)


def test_integer_format_sums_default_to_int64():
    a = np.array([7, 7, 7], mf.int4)
    assert a.sum() == 21 and a.sum().dtype == np.int64
    assert np.prod(a) == 343
    assert np.array([15, 15], mf.uint4).sum().dtype == np.uint64
    # explicit dtype keeps the format's wrap-around
    assert a.sum(dtype=mf.int4) == 5


def test_patches_can_be_switched_off():
    # all but iinfo, without which numpy.ma (imported by np.unique of any
    # array) fails to import once the integer formats are in np.sctypeDict
    code = ("import numpy as np, minifloat as mf\n"
            "assert [p for p, _ in mf._numpy_patches.applied] == ['iinfo']\n"
            "assert np.unique(np.array([2.0, 1.0, 2.0])).tolist() == [1.0, 2.0]\n"
            "assert np.ma.masked_equal(np.arange(3), 1).sum() == 2\n"
            "a = np.ones((2, 2), mf.bfloat16)\n"
            "try:\n    np.einsum('ij->j', a)\nexcept TypeError:\n    print('hole')\n")
    env = dict(os.environ, MINIFLOAT_NO_NUMPY_PATCHES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hole"


# ---- the functions that test dtype.kind == 'f' (the kind_f patches) --------

FLOAT_TYPES = [f["type"] for f in mf._core.formats() if f["kind"] == "float"]


def _holds(t, v):
    """Does format t hold the float32 value v exactly (NaN as NaN)?"""
    with np.errstate(all="ignore"):
        back = np.float32(v).astype(t).astype(np.float32)
    return bool(np.isnan(back)) if np.isnan(v) else back == v and np.signbit(back) == np.signbit(v)


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=lambda t: t.__name__)
def test_unique_collapses_nans_as_for_float16(t):
    # NumPy's float16 (the oracle) on the values both hold: one NaN, its
    # first index, every NaN's inverse pointing at it, the NaNs counted
    rng = np.random.default_rng(3)
    pool = [v for v in (-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan)
            if _holds(t, np.float32(v))]
    for n in (0, 1, 2, 7, 40):
        x = rng.choice(np.array(pool, np.float32), n)
        if n >= 2 and np.nan in pool:
            x[:2] = np.nan
        for flags in [(False, False, False), (True, True, True), (False, False, True),
                      (True, False, False), (False, True, False)]:
            for equal_nan in (True, False):
                kw = dict(zip(("return_index", "return_inverse", "return_counts"), flags))
                want = np.unique(x.astype(np.float16), equal_nan=equal_nan, **kw)
                got = np.unique(x.astype(t), equal_nan=equal_nan, **kw)
                want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
                assert got[0].dtype == t
                np.testing.assert_array_equal(got[0].astype(np.float32),
                                              want[0].astype(np.float32))
                for what, g, w in zip([k for k, v in kw.items() if v], got[1:], want[1:]):
                    if what == "return_inverse":
                        # each element's own value (which of several NaNs
                        # kept apart it points at follows the sort's order)
                        np.testing.assert_array_equal(got[0][g].astype(np.float32), x)
                        if not equal_nan:
                            continue
                    np.testing.assert_array_equal(g, w)


def test_unique_nan_payloads_are_one_nan():
    codes = np.array([0x7FC1, 0x3F80, 0xFFC0, 0x7FC0, 0x7F81], np.uint16)   # NaNs, 1.0
    vals, inv, cnt = np.unique(codes.view(BF), return_inverse=True, return_counts=True)
    assert vals.size == 2 and np.isnan(vals[1].astype(np.float32))
    np.testing.assert_array_equal(inv, [1, 0, 1, 1, 1])
    np.testing.assert_array_equal(cnt, [1, 4])
    # the array API's unique_* keep NaNs apart, as for float16
    assert np.unique_values(codes.view(BF)).size == 5


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=lambda t: t.__name__)
def test_sinc_of_zero_is_one(t):
    if not _holds(t, np.float32(0)):
        pytest.skip("no zero")
    x = np.array([0.0, -0.0, 0.5, 1.0, 2.0], np.float32).astype(t)
    with np.errstate(all="ignore"):
        got = np.sinc(x)
        px = np.pi * x
        rest = np.sin(px[2:]) / px[2:]     # NumPy's formula where x is not 0
    assert got.dtype == t
    np.testing.assert_array_equal(got[:2].astype(np.float32), [1, 1])
    np.testing.assert_array_equal(got[2:].view(np.uint8 if t(0).itemsize == 1 else np.uint16),
                                  rest.view(np.uint8 if t(0).itemsize == 1 else np.uint16))
    assert np.sinc(np.float32(0)) == 1 and np.sinc([0.0, 0.5]).dtype == np.float64


@pytest.mark.parametrize("t", FLOAT_TYPES, ids=lambda t: t.__name__)
def test_asarray_chkfinite_refuses_nan_and_inf(t):
    a = np.array([0.5, 1.0, 2.0], np.float32).astype(t)
    assert np.shares_memory(np.asarray_chkfinite(a), a)
    for v in (np.nan, np.inf, -np.inf):
        with np.errstate(all="ignore"):
            b = np.array([1.0, v], np.float32).astype(t)
        if np.isfinite(b.astype(np.float32)).all():
            continue                       # no NaN or inf in this format
        with pytest.raises(ValueError, match="infs or NaNs"):
            np.asarray_chkfinite(b)
    with pytest.raises(ValueError, match="infs or NaNs"):
        np.asarray_chkfinite(np.array([np.nan], np.float32))   # NumPy's own, as before
    # a NumPy array cast to the format on the way (the C front sends dtype= to the check)
    with np.errstate(all="ignore"):
        big = np.array([1.0, np.inf], np.float64)
        if not np.isfinite(big.astype(t).astype(np.float32)).all():
            with pytest.raises(ValueError, match="infs or NaNs"):
                np.asarray_chkfinite(big, dtype=t)
            with pytest.raises(ValueError, match="infs or NaNs"):
                np.asarray_chkfinite(big, t)
    assert np.asarray_chkfinite(np.array([1.0, 2.0]), dtype=t).dtype == t


def test_fronts_read_as_numpys_functions():
    """A patched function's FastPath front answers __doc__, __name__ and
    __module__ as NumPy's function does (help(np.sinc) is NumPy's help),
    pickles as NumPy's function does (by reference), and is equal to it."""
    import importlib
    import pickle
    fronts = 0
    for _, target in mf._numpy_patches.applied:
        mod, _, name = target.rpartition(".")
        try:
            obj = getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError):
            continue                    # a method target (numpy.iinfo.__init__)
        if type(obj).__name__ != "FastPath":
            continue
        fronts += 1
        orig = obj.__wrapped__
        assert obj.__doc__ == orig.__doc__, target
        assert obj.__name__ == orig.__name__, target
        # pickled by reference (dask.distributed pickles np.cumsum into its
        # graphs); a front away from its function's module as NumPy's function
        assert pickle.loads(pickle.dumps(obj)) in (obj, orig), target
    assert fronts >= 5
    for f in (np.sinc, np.asarray_chkfinite):
        assert pickle.loads(pickle.dumps(f)) is f
        # a table keyed by the front (a library imported after minifloat)
        # finds NumPy's function, which NumPy's __array_function__ hands over
        assert f == f.__wrapped__ and f.__wrapped__ == f and hash(f) == hash(f.__wrapped__)
        assert f.__wrapped__ in {f: 1} and f in {f.__wrapped__}
        assert f != np.cos
    # np.cumsum/np.cumprod stay NumPy's objects (the front is fromnumeric._wrapfunc)
    assert type(np.cumsum).__name__ != "FastPath" and type(np.cumprod).__name__ != "FastPath"
    assert np.sinc.__doc__.lstrip().startswith("Return the normalized sinc function")
    import inspect
    import pydoc
    assert inspect.isroutine(np.sinc)
    text = pydoc.render_doc(np.sinc, renderer=pydoc.plaintext)
    assert "Return the normalized sinc function" in text and "calls orig" not in text
