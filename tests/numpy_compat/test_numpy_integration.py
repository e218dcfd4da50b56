"""NumPy and SciPy calls that work on np.float16 work on minifloat's formats.

Each of these failed before minifloat's DTypes became legacy-compatible
(docs/design.md, "Registration: new-style DTypes that are also legacy"): the
C paths behind them accept only dtypes with a type number, byte order and
ArrFuncs.  Results are compared with the same call on float32 data (what
NumPy computes for float16) or with the oracle minifloat already tests.
"""
import io

import numpy as np
import pytest

import minifloat as mf

FORMATS = [mf.bfloat16, mf.float8_e4m3fn]
ids = [np.dtype(t).name for t in FORMATS]

scipy = pytest.importorskip("scipy")
import scipy.fft  # noqa: E402
import scipy.signal  # noqa: E402
import scipy.special  # noqa: E402
import scipy.stats  # noqa: E402


def signal(t, n=64):
    """A sine in the format (its values exactly representable)."""
    return np.sin(np.linspace(0, 20, n)).astype(np.float32).astype(t)


def ints(t, n):
    """Small integers, exact in every float format here, so sums of
    products are exact and any summation order gives the same bits."""
    return (np.arange(n) % 5 - 2).astype(np.float32).astype(t)


def bits(a):
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_array_equal(bits(a), bits(b))


# ------------------------------------------------------------------ fft

INVERSE_FFT = pytest.mark.xfail(
    strict=True, raises=TypeError,
    reason="KNOWN GAP (docs/design.md): np.fft's inverse transforms call "
           "np.reciprocal(n, dtype=<format>); a promoter for a dtype= fixed only on the "
           "output would take over NumPy's own calls.  Use np.fft.ifft(x.astype(np.float32))")


@pytest.mark.parametrize("t", FORMATS, ids=ids)
@pytest.mark.parametrize("fn", [np.fft.fft, np.fft.rfft, scipy.fft.rfft, scipy.fft.fft,
                                scipy.fft.dct, scipy.fft.ifft,
                                pytest.param(np.fft.ifft, marks=INVERSE_FFT),
                                pytest.param(np.fft.irfft, marks=INVERSE_FFT)])
def test_fft_computes_as_float32_input(t, fn):
    x = signal(t)
    got = fn(x)
    # NumPy's fft computes in float32 (complex64) as for float16; scipy.fft
    # takes float64 for a dtype it does not know: never less than float32
    assert np.dtype(got.dtype).itemsize >= (8 if got.dtype.kind == "c" else 4)
    real = np.float64 if got.dtype in (np.float64, np.complex128) else np.float32
    want = fn(x.astype(real))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------- dot and its users

@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_dot_forms_accumulate_like_vecdot(t):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(300).astype(np.float32).astype(t)
    b = rng.standard_normal(300).astype(np.float32).astype(t)
    ref = np.vecdot(a, b)        # float32 accumulation, rounded once
    same_bits(np.dot(a, b), ref)
    same_bits(a.dot(b), ref)
    same_bits(np.vdot(a, b), ref)
    same_bits(np.inner(a, b), ref)


@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_norm_of_vector(t):
    x = signal(t)
    got = np.linalg.norm(x)
    assert got.dtype == np.dtype(t)
    same_bits(got, np.sqrt(np.vecdot(x, x)))


@pytest.mark.parametrize("t", FORMATS, ids=ids)
@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_correlate_exact_on_integers(t, fn, mode):
    a, v = ints(t, 20), ints(t, 5)[::-1].copy()
    got = fn(a, v, mode)
    assert got.dtype == np.dtype(t)
    want = fn(a.astype(np.float64), v.astype(np.float64), mode)
    np.testing.assert_array_equal(got.astype(np.float64), want)


def test_dot_of_integer_formats():
    a = np.array([7, 7, 7], mf.int4)
    # NumPy's C dot (ndarray.dot, convolve) writes the operands' type: 147
    # wraps to 147 - 9*16 = 3 in int4, as np.int8's dot wraps in int8
    assert a.dot(a).dtype == a.dtype and int(a.dot(a)) == 3
    # np.dot is NumPy's own for them, so it agrees with ndarray.dot
    assert np.dot(a, a).dtype == a.dtype and int(np.dot(a, a)) == 3
    # matmul's rule for the integer formats is int64, exact
    assert int(a @ a) == 147


# ----------------------------------------------------------------- linalg

def matrix(t):
    a = np.eye(4) * 2 + np.arange(16).reshape(4, 4) / 16
    return a.astype(np.float32).astype(t)


@pytest.mark.parametrize("t", FORMATS, ids=ids)
@pytest.mark.parametrize("name", ["inv", "det", "svd", "qr", "eigvals", "pinv", "slogdet"])
def test_linalg_computes_as_float32_input(t, name):
    a = matrix(t)
    fn = getattr(np.linalg, name)
    got, want = fn(a), fn(a.astype(np.float32))
    for g, w in zip(np.atleast_1d(*[got]) if not isinstance(got, tuple) else got,
                    np.atleast_1d(*[want]) if not isinstance(want, tuple) else want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_solve_and_polyfit(t):
    a, b = matrix(t), signal(t, 4)
    np.testing.assert_array_equal(np.linalg.solve(a, b),
                                  np.linalg.solve(a.astype(np.float32), b.astype(np.float32)))
    x, y = signal(t, 16), ints(t, 16)
    np.testing.assert_array_equal(np.polyfit(x, y, 2),
                                  np.polyfit(x.astype(np.float32), y.astype(np.float32), 2))


# ------------------------------------------------------- scipy.special

@pytest.mark.parametrize("t", FORMATS, ids=ids)
@pytest.mark.parametrize("fn", [scipy.special.erf, scipy.special.gamma, scipy.special.expit])
def test_scipy_special_computes_as_float16_does(t, fn):
    # NumPy's type resolver picks the ufunc's first loop the input casts to
    # safely, for float16 and for the formats alike
    x = signal(t)
    got = fn(x)
    assert got.dtype == fn(x.astype(np.float16)).dtype
    np.testing.assert_array_equal(got, fn(x.astype(got.dtype)))


@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_scipy_through_isdtype(t):
    x = signal(t)
    x32 = x.astype(np.float32)      # the same values
    eps = float(mf.finfo(t).eps)
    np.testing.assert_allclose(scipy.signal.resample(x, 32), scipy.signal.resample(x32, 32),
                               rtol=1e-5, atol=1e-6)
    # scipy rounds its filter to the input's type, for float16 too
    np.testing.assert_allclose(scipy.signal.resample_poly(x, 2, 3),
                               scipy.signal.resample_poly(x32, 2, 3), atol=eps)
    d, d32 = scipy.stats.describe(x), scipy.stats.describe(x32)
    assert d.nobs == d32.nobs
    np.testing.assert_allclose(float(d.mean), float(d32.mean), atol=eps)
    z = scipy.stats.zscore(x)           # in the input's type, as for float16
    assert z.dtype == x.dtype
    np.testing.assert_allclose(z.astype(np.float64), scipy.stats.zscore(x32), rtol=eps, atol=eps)
    np.testing.assert_allclose(float(scipy.special.logsumexp(x)),
                               float(scipy.special.logsumexp(x32)), rtol=eps)


# ---------------------------------------------------------- np.isdtype

@pytest.mark.parametrize("t", FORMATS + [mf.float8_e8m0fnu, mf.float4_e2m1fn], ids=str)
def test_isdtype_float_formats(t):
    dt = np.dtype(t)
    assert np.isdtype(dt, "real floating")
    assert np.isdtype(dt, "numeric")
    assert np.isdtype(dt, ("real floating", "complex floating"))
    assert not np.isdtype(dt, "complex floating")
    assert not np.isdtype(dt, "integral")
    assert np.isdtype(dt, dt)
    assert not np.isdtype(dt, np.float32)


def test_isdtype_integer_formats():
    assert np.isdtype(np.dtype(mf.int4), "signed integer")
    assert np.isdtype(np.dtype(mf.uint4), "unsigned integer")
    assert np.isdtype(np.dtype(mf.int2), "integral")
    assert not np.isdtype(np.dtype(mf.int4), "real floating")
    # NumPy's own answers unchanged
    assert np.isdtype(np.float16, "real floating")
    assert not np.isdtype(np.int8, "real floating")


# ------------------------------------------------- dtype=<instance>

@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_ufunc_dtype_instance(t):
    a, b = signal(t), signal(t)[::-1].copy()
    same_bits(np.add(a, b, dtype=a.dtype), a + b)
    same_bits(np.multiply(a, b, dtype=np.dtype(t)), a * b)
    same_bits(np.add(a, b, signature=(a.dtype, a.dtype, a.dtype)), a + b)


@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_cumsum_and_average_with_instances(t):
    x = ints(t, 10)
    got = np.cumsum(x, dtype=x.dtype)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float64), np.cumsum(x.astype(np.float64)))
    w = np.abs(ints(t, 10)) + np.float32(1).astype(t)
    avg = np.average(x, weights=w)
    want = np.average(x.astype(np.float64), weights=w.astype(np.float64))
    np.testing.assert_allclose(float(avg), want, rtol=float(mf.finfo(t).eps))


# ---------------------------------------------------------- np.save

@pytest.mark.parametrize("t", [f["type"] for f in mf._core.formats()], ids=str)
def test_np_save_load_without_pickle(t, tmp_path):
    info = mf.finfo(t) if np.dtype(t).name.startswith(("b", "f")) else mf.iinfo(t)
    a = np.array([0, 1, info.max], dtype=np.float64).astype(t)
    buf = io.BytesIO()
    np.save(buf, a)
    buf.seek(0)
    b = np.load(buf)               # allow_pickle=False, NumPy's default
    # the header names the format; np.dtype() resolves the name to whoever
    # holds it (ml_dtypes' type of the same codes, when it is imported)
    assert b.dtype == np.dtype(a.dtype.name) and b.dtype.name == a.dtype.name
    np.testing.assert_array_equal(bits(b), bits(a))
    path = tmp_path / "a.npy"
    np.save(path, a)
    m = np.load(path, mmap_mode="r")
    assert isinstance(m, np.memmap) and m.dtype == b.dtype
    np.testing.assert_array_equal(bits(m), bits(a))


def test_dtype_str_round_trips():
    for f in mf._core.formats():
        dt = np.dtype(f["type"])
        assert dt.str == f["name"]
        # minifloat's type, or ml_dtypes' of the same name when it holds it
        assert np.dtype(dt.str).name == dt.name


# ---------------------------------------------------- other byte order

def test_swapped_byte_order_is_read_as_values():
    a = signal(mf.bfloat16)
    sw = a.dtype.newbyteorder(">")
    assert sw != a.dtype and sw.byteorder == ">"
    b = a.astype(sw)
    assert b.dtype == sw
    np.testing.assert_array_equal(b.view(np.uint16), a.view(np.uint16).byteswap())
    np.testing.assert_array_equal(b.astype(np.float32), a.astype(np.float32))
    same_bits(b + b, a + a)
    same_bits(b.astype(a.dtype), a)
    same_bits(np.sort(b).astype(a.dtype), np.sort(a))
    assert float(b[3]) == float(a[3])
    with pytest.raises(BufferError, match="byte order"):
        mf.dlpack(b).__dlpack__()


def test_one_byte_formats_have_no_byte_order():
    dt = np.dtype(mf.float8_e4m3fn)
    assert dt.newbyteorder(">") == dt


@pytest.mark.parametrize("t", FORMATS, ids=ids)
def test_histogram_without_a_patch(t):
    # np.histogram calls np.subtract(..., dtype=<instance>): NumPy's own path
    x = ints(t, 50)
    counts, edges = np.histogram(x, bins=5)
    want_counts, want_edges = np.histogram(x.astype(np.float32), bins=5)
    np.testing.assert_array_equal(counts, want_counts)
    assert edges.dtype == x.dtype      # as float16's edges are float16
    np.testing.assert_allclose(edges.astype(np.float32), want_edges, atol=float(mf.finfo(t).eps) * 2)
    assert not any(label == "histogram" for label, _ in mf._numpy_patches.applied)
