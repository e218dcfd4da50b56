"""Family conformance (issue 3): ufuncs of every float format.

The contract (docs/design.md): a ufunc decodes its operands to float32, runs
NumPy's float32 loop, and rounds the result once.  So for every format, every
unary ufunc on every code and every binary ufunc on every pair of codes (a
random sample for bfloat16) must equal "decode to float32, NumPy's float32
ufunc, exact single rounding" -- and be identical at every kernel level.
nextafter and spacing work on the format's own grid.
"""
import numpy as np
import pytest

import minifloat

import _family_refs as R
from conftest import LEVELS, kernel_level, mf_type

ml_dtypes = pytest.importorskip("ml_dtypes")

UNARY = ["negative", "positive", "absolute", "fabs", "sign", "sqrt", "cbrt", "square",
         "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
         "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh", "deg2rad", "rad2deg", "degrees", "radians", "floor", "ceil", "trunc", "rint",
         "conjugate"]
UNARY_BOOL = ["isnan", "isinf", "isfinite", "signbit", "logical_not"]
BINARY = ["add", "subtract", "multiply", "divide", "power", "remainder", "fmod", "floor_divide",
          "copysign", "hypot", "arctan2", "logaddexp", "logaddexp2", "heaviside", "maximum",
          "minimum", "fmax", "fmin"]
BINARY_BOOL = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
               "logical_and", "logical_or", "logical_xor"]
KERNEL_OPS = ["add", "subtract", "multiply", "divide"]     # the ops with SIMD kernels


def codes_of(arr, name):
    return np.ascontiguousarray(arr).view(R.code_dtype(name))


def round_ref(name, f32):
    return R.fmt(name).encode(np.asarray(f32, np.float32).astype(np.float64)).astype(R.code_dtype(name))


def check_codes(got, want, what, a=None, b=None, name=None):
    diff = got != want
    if name is not None and not R.X86 and diff.any():
        # which NaN a NaN operand gives is NumPy's float32 loop's choice,
        # CPU-dependent (_refs.X86): off x86, any NaN for a NaN
        table = R.fmt(name).decode_f64()
        diff &= ~(np.isnan(table[got.astype(np.int64)]) & np.isnan(table[want.astype(np.int64)]))
    bad = np.nonzero(diff)[0]
    if len(bad):
        show = [(None if a is None else float(a[i]), None if b is None else float(b[i]),
                 hex(int(got[i])), hex(int(want[i]))) for i in bad[:6]]
        raise AssertionError(f"{what}: {len(bad)} results differ (a, b, got, want): {show}")


def pairs(name):
    n = R.ncodes(name)
    if n <= 256:
        c = R.all_codes(name)
        return np.repeat(c, n), np.tile(c, n)
    rng = np.random.default_rng(7)
    a = rng.integers(0, n, 1 << 17).astype(R.code_dtype(name))
    b = rng.integers(0, n, 1 << 17).astype(R.code_dtype(name))
    # plus every special code against a few values
    specials = np.array([0, R.fmt(name).sbit, R.fmt(name).inf_code(False), R.fmt(name).inf_code(True),
                         R.fmt(name).nan_code(False), R.fmt(name).nan_code(True), 0x3F80, 0x0001],
                        R.code_dtype(name))
    sa, sb = np.repeat(specials, len(specials)), np.tile(specials, len(specials))
    return np.concatenate([a, sa]), np.concatenate([b, sb])


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_unary_ufuncs_every_code(name):
    codes = R.all_codes(name)
    x = codes.view(mf_type(name))
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        for u in UNARY:
            uf = getattr(np, u)
            got = uf(x)
            assert got.dtype == x.dtype, u
            if u in R.SIGN_UFUNCS and R.fmt(name).signed:
                want = R.sign_ref(name, u, codes)
            else:
                want = round_ref(name, uf(x32))
            check_codes(codes_of(got, name), want, f"{u}({name})", x)
            # strided input and output
            out = np.zeros(2 * len(x), x.dtype)
            uf(np.repeat(x, 2)[::2], out=out[::2])
            check_codes(codes_of(out, name)[::2], codes_of(got, name), f"strided {u}({name})", x)
        for u in UNARY_BOOL:
            uf = getattr(np, u)
            got = uf(x)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, uf(x32), err_msg=u)


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_binary_ufuncs_every_pair(name):
    ca, cb = pairs(name)
    a, b = ca.view(mf_type(name)), cb.view(mf_type(name))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    results = {}
    with np.errstate(all="ignore"):
        for u in BINARY:
            uf = getattr(np, u)
            got = codes_of(uf(a, b), name)
            if u in R.SIGN_UFUNCS and R.fmt(name).signed:
                want = R.sign_ref(name, u, ca, cb)
            else:
                want = round_ref(name, uf(a32, b32))
            check_codes(got, want, f"{u}({name})", a32, b32, name=name)
            results[u] = got
        for u in BINARY_BOOL:
            uf = getattr(np, u)
            got = uf(a, b)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got, uf(a32, b32), err_msg=u)
        # the SIMD kernels (contiguous add/sub/mul/div, also with odd offsets)
        # are identical to serial at every level
        for level in LEVELS:
            with kernel_level(level):
                for u in KERNEL_OPS:
                    uf = getattr(np, u)
                    check_codes(codes_of(uf(a, b), name), results[u], f"{u}({name}) at {level}", a32, b32)
                    check_codes(codes_of(uf(a[5:-3], b[2:-6]), name),
                                round_ref(name, uf(a32[5:-3], b32[2:-6])),
                                f"{u}({name}) offset operands at {level}", name=name)
                    out = np.empty(len(a) - 1, a.dtype)
                    uf(a[1:], b[:-1], out=out)
                    check_codes(codes_of(out, name), round_ref(name, uf(a32[1:], b32[:-1])),
                                f"{u}({name}, out=) at {level}", name=name)
                    # in place
                    c = a.copy()
                    uf(c, b, out=c)
                    check_codes(codes_of(c, name), results[u], f"{u}({name}) in place at {level}")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_multi_output_and_mixed_ufuncs(name):
    codes = R.all_codes(name)
    x = codes.view(mf_type(name))
    x32 = x.astype(np.float32)
    rng = np.random.default_rng(3)
    y = rng.permutation(codes).view(mf_type(name))
    y32 = y.astype(np.float32)
    with np.errstate(all="ignore"):
        q, r = np.divmod(x, y)
        q32, r32 = np.divmod(x32, y32)
        check_codes(codes_of(q, name), round_ref(name, q32), f"divmod[0]({name})")
        check_codes(codes_of(r, name), round_ref(name, r32), f"divmod[1]({name})")
        fr, ip = np.modf(x)
        fr32, ip32 = np.modf(x32)
        check_codes(codes_of(fr, name), round_ref(name, fr32), f"modf[0]({name})")
        check_codes(codes_of(ip, name), round_ref(name, ip32), f"modf[1]({name})")
        m, e = np.frexp(x)
        m32, e32 = np.frexp(x32)
        check_codes(codes_of(m, name), round_ref(name, m32), f"frexp[0]({name})")
        fin = np.isfinite(x32)
        np.testing.assert_array_equal(e[fin], e32[fin])
        for k in (np.int32(-3), np.int64(2), np.arange(len(x), dtype=np.int32) % 7 - 3):
            got = np.ldexp(x, k)
            check_codes(codes_of(got, name), round_ref(name, np.ldexp(x32, k)), f"ldexp({name})")
        lo = np.array(-1.5).astype(mf_type(name))
        hi = np.array(3.0).astype(mf_type(name))
        got = np.clip(x, lo, hi)
        assert got.dtype == x.dtype
        check_codes(codes_of(got, name), round_ref(name, np.clip(x32, np.float32(lo), np.float32(hi))),
                    f"clip({name})")


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_scalar_operations_match_arrays(name):
    t = mf_type(name)
    rng = np.random.default_rng(11)
    ca = rng.integers(0, R.ncodes(name), 200).astype(R.code_dtype(name))
    cb = rng.integers(0, R.ncodes(name), 200).astype(R.code_dtype(name))
    a, b = ca.view(t), cb.view(t)
    with np.errstate(all="ignore"):
        for op in ("__add__", "__sub__", "__mul__", "__truediv__", "__pow__", "__mod__",
                   "__floordiv__"):
            arr = getattr(a, op)(b)
            for i in range(len(a)):
                s = getattr(a[i], op)(b[i])
                assert type(s) is t, op
                assert codes_of(np.array([s], t), name)[0] == codes_of(arr, name)[i], (op, a[i], b[i])
        for i in range(len(a)):
            assert (a[i] < b[i]) == (a.astype(np.float32)[i] < b.astype(np.float32)[i])
            assert (a[i] == b[i]) == (a.astype(np.float32)[i] == b.astype(np.float32)[i])
            assert type(-a[i]) is t and type(abs(a[i])) is t


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_python_scalar_operands(name):
    """weak Python scalars are rounded into the format first (NEP 50), then
    the operation rounds once"""
    t = mf_type(name)
    x = R.all_codes(name).view(t)
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        for s in (1, 2, 0.5, 3.0, 0.1, -1.75):
            s_in_fmt = np.float32(np.array(s).astype(t))
            for got, ref in ((x + s, x32 + s_in_fmt), (s * x, s_in_fmt * x32),
                             (x / s, x32 / s_in_fmt), (s - x, s_in_fmt - x32)):
                assert got.dtype == x.dtype
                check_codes(codes_of(got, name), round_ref(name, ref), f"{name} with {s}")


# ------------------------------------------------------- nextafter / spacing

def grid_values(name):
    """sorted distinct values of the format (zero once), with +-inf if any"""
    v = R.fmt(name).decode_f64()
    v = np.unique(v[~np.isnan(v)])
    return v


def nextafter_ref(name, x, t):
    g = grid_values(name)
    out = np.empty(len(x))
    for i, (xi, ti) in enumerate(zip(x, t)):
        if np.isnan(xi) or np.isnan(ti):
            out[i] = np.nan
        elif xi == ti:
            out[i] = ti
        elif ti > xi:
            j = np.searchsorted(g, xi, side="right")
            out[i] = g[j] if j < len(g) else np.nan
        else:
            j = np.searchsorted(g, xi, side="left") - 1
            out[i] = g[j] if j >= 0 else np.nan
        if out[i] == 0 and xi != ti:
            # stepping onto zero keeps x's sign (formats without -0: +0)
            out[i] = np.copysign(0.0, xi) if R.fmt(name).has_negzero else 0.0
    return out


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_nextafter_on_the_grid(name):
    f = R.fmt(name)
    t = mf_type(name)
    codes = R.all_codes(name)
    if len(codes) > 256:
        codes = codes[::53]
    x = codes.view(t)
    x64 = x.astype(np.float64)
    big = np.inf if f.has_inf else float(f.max)
    targets = [big, -big if f.signed else float(f.smallest_subnormal), 1.0]
    if f.has_zero:
        targets.append(0.0)
    for tgt in targets:
        tt = np.array(tgt).astype(t)
        with np.errstate(all="ignore"):
            got = np.nextafter(x, tt)
            ml = np.nextafter(codes.view(R.ml_type(name)), np.array(tgt).astype(R.ml_type(name)))
        assert got.dtype == x.dtype
        g64 = got.astype(np.float64)
        want = nextafter_ref(name, x64, np.full(len(x), float(tt)))
        # the reference has no sign for zero results of x == t; compare values, NaN-ness,
        # and the sign of every non-NaN result
        np.testing.assert_array_equal(g64, want, err_msg=f"nextafter({name}, {tgt})")
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(g64[ok]), np.signbit(want[ok]))
        # ml_dtypes agrees on values (it returns a canonical NaN where we keep x's NaN)
        np.testing.assert_array_equal(g64, ml.astype(np.float64))


@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_spacing_on_the_grid(name):
    f = R.fmt(name)
    t = mf_type(name)
    codes = R.all_codes(name)
    x = codes.view(t)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        got = np.spacing(x).astype(np.float64)
        ml = np.spacing(codes.view(R.ml_type(name))).astype(np.float64)
    np.testing.assert_array_equal(got, ml)
    g = grid_values(name)
    fin = np.isfinite(x64) & (np.abs(x64) < float(f.max))
    for xi, si in zip(x64[fin], got[fin]):
        if xi == 0:
            # NumPy: spacing(+-0) = +-smallest subnormal (fnuz: zero is unsigned)
            assert si == np.copysign(float(f.smallest_subnormal), xi), (name, xi, si)
        elif xi > 0 or not f.signed:
            j = np.searchsorted(g, xi, side="right")
            assert si == g[j] - xi, (name, xi, si)
        else:
            j = np.searchsorted(g, xi, side="left") - 1
            assert si == g[j] - xi, (name, xi, si)
    if f.has_zero:
        assert np.spacing(np.array(0.0).astype(t)) == float(f.smallest_subnormal)


# ---------------------------------------------------------- matmul family

@pytest.mark.parametrize("name", R.FLOAT_NAMES)
def test_matmul_dot_vecdot_einsum_round_once(name):
    """float32 accumulation, one rounding: with operands whose products and
    partial sums are exact in float32, the result is the exact product rounded
    once, at every kernel level"""
    t = mf_type(name)
    f = R.fmt(name)
    v = f.decode_f64()
    ok = np.isfinite(v) & (np.abs(v) <= 4) & (v * 64 == np.round(v * 64))
    pool = R.all_codes(name)[ok]
    rng = np.random.default_rng(21)
    a = rng.choice(pool, (17, 33)).view(t)
    b = rng.choice(pool, (33, 9)).view(t)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    want = f.encode(exact.reshape(-1)).reshape(exact.shape).astype(R.code_dtype(name))
    wv = f.encode(np.array([a[0].astype(np.float64) @ a[1].astype(np.float64)]))[0]
    for level in LEVELS:
        with kernel_level(level), np.errstate(all="ignore"):
            for got in (a @ b, np.matmul(a, b), np.dot(a, b), np.einsum("ij,jk->ik", a, b),
                        np.tensordot(a, b, axes=1)):
                assert got.dtype == np.dtype(t)
                np.testing.assert_array_equal(codes_of(got, name), want, err_msg=level)
            for got in (np.vdot(a[0], a[1]), np.inner(a[0], a[1]), np.vecdot(a[0], a[1])):
                assert codes_of(np.array([got], t), name)[0] == wv, level
