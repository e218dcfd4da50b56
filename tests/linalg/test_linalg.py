"""Linear algebra on bfloat16: bfloat16 results computed
with float32 accumulation.

Exactness strategy as for reductions: integer entries in [-4, 4] make every
product and partial sum (K <= 4096) an integer below 2**24, so float32
accumulation is exact in any order and the result must be round_bf16(exact).
For real data the tolerance is the float32 accumulation bound
K * 2**-24 * (|A| @ |B|) plus one bfloat16 ulp for the final rounding.

The last test runs every float format of the family the same way:
operands whose products and partial sums are exact in float32, a result
rounded once (tests/_family_refs.py).
"""
import numpy as np
import pytest

import minifloat
from minifloat import bfloat16 as bf16

import _refs as R
import _family_refs as FR
from conftest import LEVELS, NUMPY_DOT_USES_DOTFUNC, kernel_level, mf_type

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs)

BF = np.dtype(bf16)

MATMUL_SHAPES = [(1, 1, 1), (1, 7, 1), (3, 4, 2), (7, 13, 5), (16, 16, 16), (17, 33, 9),
                 (64, 64, 64), (1, 4096, 1), (5, 4096, 3), (128, 300, 96), (2, 1, 2),
                 (0, 3, 2), (2, 0, 3)]


def _ints(shape, seed):
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float32)


def _exact_codes(a64, b64):
    return R.bf16_codes_from_f64(np.matmul(a64, b64))


def _check_within_bound(got_bf, A, B):
    """|got - exact| <= K * 2**-24 * (|A| @ |B|) + one ulp of got."""
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    exact = A64 @ B64
    K = A.shape[-1]
    bound = K * 2.0 ** -24 * (np.abs(A64) @ np.abs(B64)) + R.ulp_f64(R.bits(got_bf))
    got = np.asarray(got_bf).astype(np.float64)
    assert (np.abs(got - exact) <= bound).all()


# --------------------------------------------------------------------------
# matmul / @
# --------------------------------------------------------------------------
@pytest.mark.parametrize("mkn", MATMUL_SHAPES, ids=str)
def test_matmul_exact_integer_data(mkn, each_level):
    m, k, n = mkn
    A, B = _ints((m, k), m + k), _ints((k, n), k + n + 1)
    got = A.astype(bf16) @ B.astype(bf16)
    assert got.dtype == BF and got.shape == (m, n)
    assert np.array_equal(R.bits(got), _exact_codes(A.astype(np.float64), B.astype(np.float64)))
    got2 = np.matmul(A.astype(bf16), B.astype(bf16))
    assert np.array_equal(R.bits(got2), R.bits(got))


def test_matmul_accumulates_in_float32(each_level):
    # bfloat16 accumulation would stop at 256
    r = np.ones((1, 4096), bf16) @ np.ones((4096, 1), bf16)
    assert float(r[0, 0]) == 4096.0
    r = np.ones((3, 5000), bf16) @ np.ones((5000, 2), bf16)
    assert (r.astype(np.float32) == float(bf16(5000))).all()
    v = np.ones(4096, bf16)
    assert float(v @ v) == 4096.0
    assert type(v @ v) is bf16


@pytest.mark.parametrize("layout", ["AT", "BT", "both_T", "strided", "F_order", "negative"])
def test_matmul_layouts_exact(layout, each_level):
    A, B = _ints((40, 70), 1), _ints((70, 30), 2)
    a, b = A.astype(bf16), B.astype(bf16)
    if layout == "AT":
        a, A = np.ascontiguousarray(a.T).T, A
    elif layout == "BT":
        b = np.ascontiguousarray(b.T).T
    elif layout == "both_T":
        a, b, A, B = b.T, a.T, B.T, A.T
    elif layout == "strided":
        big_a = np.zeros((80, 140), bf16)
        big_a[::2, ::2] = a
        a = big_a[::2, ::2]
    elif layout == "F_order":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    else:
        a, A = a[::-1, ::-1], A[::-1, ::-1]
        b, B = b[::-1], B[::-1]
    got = a @ b
    assert np.array_equal(R.bits(got), _exact_codes(A.astype(np.float64), B.astype(np.float64)))


def test_matmul_vector_and_batched_cases(each_level):
    A, B = _ints((6, 5, 7), 3), _ints((6, 7, 4), 4)
    got = A.astype(bf16) @ B.astype(bf16)
    assert got.shape == (6, 5, 4)
    assert np.array_equal(R.bits(got), _exact_codes(A.astype(np.float64), B.astype(np.float64)))
    # broadcasting batch dimensions
    C = _ints((7, 3), 5)
    got = A.astype(bf16) @ C.astype(bf16)
    assert np.array_equal(R.bits(got), _exact_codes(A.astype(np.float64), C.astype(np.float64)))
    # matrix @ vector, vector @ matrix, vector @ vector
    v, w = _ints((7,), 6), _ints((5,), 7)
    assert np.array_equal(R.bits(A[0].astype(bf16) @ v.astype(bf16)),
                          R.bf16_codes_from_f64(A[0].astype(np.float64) @ v))
    assert np.array_equal(R.bits(w.astype(bf16) @ A[0].astype(bf16)),
                          R.bf16_codes_from_f64(w.astype(np.float64) @ A[0]))
    assert R.bits(v.astype(bf16) @ v.astype(bf16)) == R.bf16_codes_from_f64(v.astype(np.float64) @ v)


def test_matmul_out_argument(each_level):
    A, B = _ints((9, 11), 8), _ints((11, 6), 9)
    want = _exact_codes(A.astype(np.float64), B.astype(np.float64))
    out = np.full((9, 6), 99, bf16)
    r = np.matmul(A.astype(bf16), B.astype(bf16), out=out)
    assert r is out and np.array_equal(R.bits(out), want)
    out32 = np.empty((9, 6), np.float32)
    np.matmul(A.astype(bf16), B.astype(bf16), out=out32)
    assert np.array_equal(out32, R.decode_f32(want))


@pytest.mark.parametrize("mkn", [(64, 64, 64), (33, 257, 65), (128, 1024, 96), (1, 4096, 1)],
                         ids=str)
def test_matmul_random_real_within_bound(mkn, each_level):
    m, k, n = mkn
    rng = np.random.default_rng(k)
    A = rng.standard_normal((m, k)).astype(np.float32).astype(bf16)
    B = rng.standard_normal((k, n)).astype(np.float32).astype(bf16)
    got = A @ B
    _check_within_bound(got, A.astype(np.float32), B.astype(np.float32))
    exact = R.bf16_codes_from_f64(A.astype(np.float64) @ B.astype(np.float64))
    assert (R.bits(got) == exact).mean() > 0.99


def test_matmul_identical_at_every_level():
    rng = np.random.default_rng(99)
    A = rng.standard_normal((70, 513)).astype(np.float32).astype(bf16)
    B = rng.standard_normal((513, 45)).astype(np.float32).astype(bf16)
    from conftest import LEVELS, kernel_level

    results = []
    for lvl in LEVELS:
        with kernel_level(lvl):
            results.append(R.bits(A @ B).copy())
    for r in results[1:]:
        assert np.array_equal(r, results[0])


def test_matmul_vs_torch(each_level):
    torch = R.torch_or_skip()

    rng = np.random.default_rng(5)
    A = rng.standard_normal((96, 640)).astype(np.float32).astype(bf16)
    B = rng.standard_normal((640, 80)).astype(np.float32).astype(bf16)
    got = R.bits(A @ B)
    tw = R.torch_codes(torch.matmul(R.torch_bf16(R.bits(A)).reshape(96, 640),
                                    R.torch_bf16(R.bits(B)).reshape(640, 80)))
    assert (R.ulps_apart(got, tw) <= 2).all()
    assert (got == tw).mean() > 0.95


def test_matmul_special_values():
    a = np.array([[np.nan, 1], [np.inf, 1], [1, 1]], bf16)
    b = np.array([[1], [1]], bf16)
    r = (a @ b).astype(np.float32)
    assert np.isnan(r[0, 0]) and r[1, 0] == np.inf and r[2, 0] == 2
    with np.errstate(over="ignore"):
        big = np.full((1, 4), 3e38, bf16) @ np.ones((4, 1), bf16)
    assert big[0, 0] == np.inf


@pytest.mark.parametrize("other, want", [(np.float32, np.float32), (np.float64, np.float64),
                                         (np.int8, BF), (np.int16, np.float32)],
                         ids=["f32", "f64", "i8", "i16"])
def test_matmul_mixed_types(other, want):
    A = _ints((3, 4), 10)
    B = _ints((4, 2), 11)
    r = A.astype(bf16) @ B.astype(other)
    assert r.dtype == want
    assert np.array_equal(np.asarray(r).astype(np.float64), A.astype(np.float64) @ B)


# --------------------------------------------------------------------------
# vecdot (a ufunc, works today)
# --------------------------------------------------------------------------
def test_vecdot(each_level):
    a, b = _ints((8, 4096), 12), _ints((8, 4096), 13)
    got = np.vecdot(a.astype(bf16), b.astype(bf16))
    assert got.dtype == BF and got.shape == (8,)
    assert np.array_equal(R.bits(got), R.bf16_codes_from_f64((a.astype(np.float64) * b).sum(-1)))
    v = np.ones(4096, bf16)
    assert float(np.vecdot(v, v)) == 4096.0
    assert np.array_equal(R.bits(np.linalg.vecdot(a.astype(bf16), b.astype(bf16))), R.bits(got))
    got = np.vecdot(a.astype(bf16), b[0].astype(bf16))      # broadcasting
    assert np.array_equal(R.bits(got), R.bf16_codes_from_f64(a.astype(np.float64) @ b[0]))


# --------------------------------------------------------------------------
# the functions NumPy 2.4 implements for legacy dtypes only: minifloat's
# work-arounds (docs/design.md); np.linalg.norm calls ndarray.dot, which
# cannot be patched
# --------------------------------------------------------------------------
def test_dot(each_level):
    A, B = _ints((5, 4096), 14), _ints((4096, 3), 15)
    got = np.dot(A.astype(bf16), B.astype(bf16))
    assert got.dtype == BF
    assert np.array_equal(R.bits(got), _exact_codes(A.astype(np.float64), B.astype(np.float64)))
    v = np.ones(4096, bf16)
    assert float(np.dot(v, v)) == 4096.0


def test_vdot():
    a, b = _ints((64, 64), 16), _ints((64, 64), 17)
    got = np.vdot(a.astype(bf16), b.astype(bf16))
    assert type(got) is bf16
    assert R.bits(got) == R.bf16_codes_from_f64((a.astype(np.float64) * b).sum())


def test_inner():
    a, b = _ints((3, 500), 18), _ints((4, 500), 19)
    got = np.inner(a.astype(bf16), b.astype(bf16))
    assert got.dtype == BF
    assert np.array_equal(R.bits(got), R.bf16_codes_from_f64(a.astype(np.float64) @ b.T))


def test_tensordot():
    a, b = _ints((3, 4, 50), 20), _ints((4, 50, 6), 21)
    got = np.tensordot(a.astype(bf16), b.astype(bf16), axes=([1, 2], [0, 1]))
    assert got.dtype == BF
    want = R.bf16_codes_from_f64(np.tensordot(a.astype(np.float64), b, axes=([1, 2], [0, 1])))
    assert np.array_equal(R.bits(got), want)


@pytest.mark.parametrize("spec", ["ij,jk->ik", "ij->j", "i,i", "bij,bjk->bik", "ij->"])
def test_einsum(spec):
    # NumPy's einsum returned zeros silently for another NEP 42 dtype: check values
    rng = np.random.default_rng(22)
    shapes = {"ij,jk->ik": [(5, 600), (600, 4)], "ij->j": [(4096, 8)], "i,i": [(3000,), (3000,)],
              "bij,bjk->bik": [(2, 3, 300), (2, 300, 5)], "ii->i": [(7, 7)], "ij->": [(300, 300)]}
    ops = [rng.integers(-4, 5, s).astype(np.float32) for s in shapes[spec]]
    got = np.einsum(spec, *[o.astype(bf16) for o in ops])
    assert np.asarray(got).dtype == BF
    want = R.bf16_codes_from_f64(np.einsum(spec, *[o.astype(np.float64) for o in ops]))
    assert np.array_equal(R.bits(got), want)


def test_einsum_pure_views():
    # no arithmetic: diagonal and transpose already work
    x = np.arange(9).reshape(3, 3).astype(bf16)
    assert np.einsum("ii->i", x).tolist() == [0, 4, 8]
    assert np.einsum("ij->ji", x).tolist() == x.T.tolist()


def test_linalg_norm():
    x = np.array([3, 4], bf16)
    assert float(np.linalg.norm(x)) == 5.0
    assert np.linalg.norm(x).dtype == BF


def test_ndarray_dot_through_the_dotfunc(each_level):
    """ndarray.dot (and np.dot where NumPy's own runs) calls the formats' dotfunc:
    float32 accumulation, one rounding per output element."""
    A, B = _ints((5, 4096), 23), _ints((4096, 3), 24)
    want = _exact_codes(A.astype(np.float64), B.astype(np.float64))
    for got in (A.astype(bf16).dot(B.astype(bf16)), np.dot(A.astype(bf16), B.astype(bf16)),
                A.astype(bf16)[:, ::1].dot(np.asfortranarray(B.astype(bf16)))):
        assert got.dtype == BF
        assert np.array_equal(R.bits(got), want)
    v = np.ones(8192, bf16)
    assert float(v.dot(v)) == 8192.0              # a bfloat16 accumulator stops at 256
    # strided operands
    w = np.ones(3 * 8192, bf16)[::3]
    assert float(w.dot(w)) == 8192.0


def test_linalg_decompositions_compute_as_float32():
    # NumPy's LAPACK wrappers refuse float16; bfloat16 computes like float32
    # input (in float64, float32 results): tests/numpy_compat/test_numpy_integration.py
    for fn in (np.linalg.inv, np.linalg.det, np.linalg.eigvals):
        with pytest.raises(TypeError):
            fn(np.eye(2, dtype=np.float16))
        got, want = fn(np.eye(2).astype(bf16)), fn(np.eye(2, dtype=np.float32))
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype     # float32 (eigvals: complex64 on NumPy 2.5)


def test_outer_kron_trace_cross():
    v = np.array([1, 2, 3], bf16)
    o = np.outer(v, v)
    assert o.dtype == BF and o.astype(np.float32).tolist() == [[1, 2, 3], [2, 4, 6], [3, 6, 9]]
    assert np.kron(v[:2], v[:2]).astype(np.float32).tolist() == [1, 2, 2, 4]
    assert float(np.trace(np.ones((300, 300), bf16))) == 300.0
    assert np.cross(v, np.array([0, 1, 0], bf16)).astype(np.float32).tolist() == [-3, 0, 1]


# --------------------------------------------------------------------------
# every float format of the family
# --------------------------------------------------------------------------
def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(FR.code_dtype(name))


@pytest.mark.parametrize("name", FR.FLOAT_NAMES)
def test_matmul_dot_vecdot_einsum_round_once(name):
    """float32 accumulation, one rounding: with operands whose products and
    partial sums are exact in float32, the result is the exact product rounded
    once, at every kernel level"""
    t = mf_type(name)
    f = FR.fmt(name)
    v = f.decode_f64()
    ok = np.isfinite(v) & (np.abs(v) <= 4) & (v * 64 == np.round(v * 64))
    pool = FR.all_codes(name)[ok]
    rng = np.random.default_rng(21)
    a = rng.choice(pool, (17, 33)).view(t)
    b = rng.choice(pool, (33, 9)).view(t)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    want = f.encode(exact.reshape(-1)).reshape(exact.shape).astype(FR.code_dtype(name))
    wv = f.encode(np.array([a[0].astype(np.float64) @ a[1].astype(np.float64)]))[0]
    for level in LEVELS:
        with kernel_level(level), np.errstate(all="ignore"):
            for got in (a @ b, np.matmul(a, b), np.dot(a, b), np.einsum("ij,jk->ik", a, b),
                        np.tensordot(a, b, axes=1)):
                assert got.dtype == np.dtype(t)
                np.testing.assert_array_equal(codes_of(got, name), want, err_msg=level)
            for got in (np.vdot(a[0], a[1]), np.inner(a[0], a[1]), np.vecdot(a[0], a[1])):
                assert codes_of(np.array([got], t), name)[0] == wv, level
