"""Ufuncs computed through NumPy's float32 loops, split between threads.

Large calls (from 512 KiB of float32 operands: MF_PAR_MIN_BYTES in
src/kernels/parallel.h) are computed block by block on every thread of the
pool; each element is computed on its own, so the result is the same bits
whatever the thread count, and the same as "decode to float32, NumPy's
float32 loop on a contiguous array, round once" (the contract of
docs/design.md, which the single-threaded path has always met).
Floating-point errors met by the workers reach np.errstate on the calling
thread.  Strided, offset, overlapping and masked (where=) operands, out=,
in-place calls, several outputs and Python threads calling at once are
covered.  No timing is asserted.
"""
import ctypes
import platform
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minifloat as mf
from minifloat import _core

from conftest import LEVELS, kernel_level

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FORMATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"]
UNARY = ["exp", "log", "tanh", "sin", "sqrt"]
BINARY = ["power", "arctan2"]
# above the threshold for 3 threads (at least 64 Ki elements each), with a
# tail that is not a whole block
N = 3 * (1 << 17) + 777
COUNTS = (2, 3)


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def values(n, seed):
    """float32 values over a wide range with NaN, +-inf, +-0, subnormals of
    float32 and of the formats, and values past every format's range,
    spread over the array and at both ends (so every thread meets some)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32) * np.float32(2.0) ** rng.integers(
        -12, 8, n).astype(np.float32)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40,
                        9.2e-41, 2.0 ** -133, 2.0 ** -10, -(2.0 ** -9), 2.0 ** -17,
                        3.4e38, -3.4e38, 100.0, -100.0, 1.0, -1.0], np.float32)
    if n < 100 * special.size:
        x[: min(n, special.size)] = special[:n]
        return x
    idx = rng.choice(n, 40 * special.size, replace=False)
    x[idx] = np.tile(special, 40)
    x[:special.size] = special
    x[-special.size:] = special
    return x


def run_flags(fn):
    """fn() and the set of NumPy FP errors it reported."""
    seen = set()
    with np.errstate(all="call", call=lambda kind, flag: seen.add(kind)):
        out = fn()
    return out, frozenset(seen)


def operands(name, nin, n=N):
    dt = np.dtype(getattr(mf, name))
    return [values(n, seed).astype(dt) for seed in range(nin)]


def reference(ufunc, args):
    """Today's contract: NumPy's float32 loop on the decoded values, rounded once."""
    return ufunc(*[a.astype(np.float32) for a in args]).astype(args[0].dtype)


# ------------------------------------------------------------------ same bits

@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("uname", UNARY + BINARY)
def test_same_bits_any_thread_count(threads, name, uname):
    ufunc = getattr(np, uname)
    args = operands(name, ufunc.nin)
    threads(1)
    r1, fl1 = run_flags(lambda: ufunc(*args))
    assert np.array_equal(bits(r1), bits(reference(ufunc, args)))
    for t in COUNTS:
        threads(t)
        o = np.empty_like(args[0])
        rt, flt = run_flags(lambda: ufunc(*args, out=o))
        assert rt is o
        assert np.array_equal(bits(r1), bits(o)), t
        assert fl1 == flt, t


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("uname", ["exp", "power"])
def test_same_bits_every_level(threads, level, uname):
    ufunc = getattr(np, uname)
    for name in ("bfloat16", "float8_e4m3fn"):
        args = operands(name, ufunc.nin)
        threads(1)
        with kernel_level("serial"):
            ref, fl_ref = run_flags(lambda: ufunc(*args))
        threads(3)
        with kernel_level(level):
            r, fl = run_flags(lambda: ufunc(*args))
        assert np.array_equal(bits(ref), bits(r)), name
        assert fl_ref == fl, name


@pytest.mark.parametrize("n", [1, 2047, 2048, 2049, (1 << 17) - 1, 1 << 17, (1 << 17) + 1])
def test_sizes_around_block_and_threshold(threads, n):
    args = operands("bfloat16", 1, n)
    threads(1)
    r1 = np.tanh(*args)
    threads(2)
    assert np.array_equal(bits(r1), bits(np.tanh(*args)))
    assert np.array_equal(bits(r1), bits(reference(np.tanh, args)))


# ------------------------------------------------------------------ layouts

@pytest.mark.parametrize("name", ["bfloat16", "float8_e5m2"])
@pytest.mark.parametrize("uname", ["exp", "arctan2"])
def test_strided_and_offset_views(threads, name, uname):
    ufunc = getattr(np, uname)
    dt = np.dtype(getattr(mf, name))
    big = [values(3 * N, seed).astype(dt) for seed in range(ufunc.nin)]
    views = [big[0][1::3], big[1][::-3] if ufunc.nin == 2 else None][:ufunc.nin]
    assert views[0].size == N
    contiguous = [v.copy() for v in views]
    threads(1)
    want = ufunc(*contiguous)
    for t in (1,) + COUNTS:
        threads(t)
        assert np.array_equal(bits(ufunc(*views)), bits(want)), t
        out = np.zeros(2 * views[0].size + 1, dt)
        ufunc(*views, out=out[1::2])
        assert np.array_equal(bits(out[1::2]), bits(want)), t
        assert not bits(out[::2]).any(), t
    # an unaligned bfloat16 view (odd byte offset)
    if dt.itemsize == 2:
        raw = np.zeros(N * 2 + 1, np.uint8)
        un = raw[1:].view(dt)
        un[...] = contiguous[0]
        threads(3)
        assert np.array_equal(bits(ufunc(un, *contiguous[1:])), bits(want))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn"])
def test_two_dimensional_and_broadcast(threads, name):
    dt = np.dtype(getattr(mf, name))
    # rows of N elements: NumPy calls the loop once per row (strided rows)
    a = values(4 * N, 0).astype(dt).reshape(2, 2 * N)[:, ::2]
    col = values(2, 1).astype(dt)[:, None]
    threads(1)
    want_t, want_p = np.exp(a.T.copy()), np.power(a.copy(), col)
    threads(3)
    assert np.array_equal(bits(np.exp(a.T)), bits(want_t))
    assert np.array_equal(bits(np.power(a, col)), bits(want_p))
    assert np.array_equal(bits(np.power(a, dt.type(1.5))),
                          bits(reference(np.power, [a, np.full_like(a, 1.5)])))


def test_in_place_and_overlapping(threads):
    x = values(N + 1, 0).astype(mf.bfloat16)
    threads(1)
    want = np.sin(x)
    want_shift = np.sin(x[:-1])
    threads(3)
    y = x.copy()
    np.sin(y, out=y)
    assert np.array_equal(bits(y), bits(want))
    # partial overlap: NumPy computes as if from a copy of the input
    y = x.copy()
    np.sin(y[:-1], out=y[1:])
    assert np.array_equal(bits(y[1:]), bits(want_shift))
    y = x.copy()
    np.arctan2(y[1:], y[:-1], out=y[:-1])
    threads(1)
    assert np.array_equal(bits(y[:-1]), bits(np.arctan2(x[1:], x[:-1])))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("uname", ["log", "power"])
def test_where(threads, name, uname):
    ufunc = getattr(np, uname)
    args = operands(name, ufunc.nin)
    rng = np.random.default_rng(5)
    # long runs of True (large inner calls) and scattered ones
    mask = np.zeros(N, bool)
    mask[1000:N // 2 + 3] = True
    mask[N // 2 + 3:] = rng.random(N - N // 2 - 3) < 0.5
    fill = np.full(N, 7.0, np.float32).astype(args[0].dtype)
    threads(1)
    want = ufunc(*args, out=fill.copy(), where=mask)
    for t in COUNTS:
        threads(t)
        got = ufunc(*args, out=fill.copy(), where=mask)
        assert np.array_equal(bits(got), bits(want)), t
        assert np.array_equal(bits(got[~mask]), bits(fill[~mask])), t
        assert np.array_equal(bits(got[mask]), bits(reference(ufunc, [a[mask] for a in args])))


@pytest.mark.parametrize("uname", ["modf", "frexp", "divmod", "ldexp", "isnan", "less",
                                   "maximum", "clip", "logaddexp"])
def test_other_signatures(threads, uname):
    """Several outputs, bool and int operands: same bits on 1 and 3 threads."""
    ufunc = getattr(np, uname)
    a, b, c = operands("bfloat16", 3)
    args = {"ldexp": (a, np.arange(N, dtype=np.int32) % 40 - 20), "clip": (a, b, c),
            "modf": (a,), "frexp": (a,), "isnan": (a,)}.get(uname, (a, b))
    threads(1)
    r1, fl1 = run_flags(lambda: ufunc(*args))
    threads(3)
    r3, fl3 = run_flags(lambda: ufunc(*args))
    for x, y in zip(r1 if isinstance(r1, tuple) else (r1,), r3 if isinstance(r3, tuple) else (r3,)):
        assert x.dtype == y.dtype
        assert np.array_equal(bits(x), bits(y))
    assert fl1 == fl3


def test_python_threads_at_once(threads):
    """Several Python threads calling at once (one owns the pool, the others
    compute on their own thread): every result is the one-thread result."""
    xs = operands("bfloat16", 4)
    threads(1)
    want = [np.exp(x) for x in xs]
    threads(2)
    got = [None] * 4
    errors = []

    def work(i):
        try:
            for _ in range(3):
                got[i] = np.exp(xs[i])
                assert np.array_equal(bits(got[i]), bits(want[i]))
        except Exception as e:       # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


# ------------------------------------------------------------------ FP errors

def _at(n, positions, value, fill=0.5, dtype=mf.bfloat16):
    x = np.full(n, fill, np.float32)
    x[positions] = value
    return x.astype(dtype)


@pytest.mark.parametrize("t", (1,) + COUNTS)
def test_errstate_over_raise(threads, t):
    threads(t)
    for pos in (0, N // 2, N - 1):                # whichever thread meets it
        x = _at(N, [pos], 100.0)
        with np.errstate(over="raise"):
            with pytest.raises(FloatingPointError, match="overflow encountered in exp"):
                np.exp(x)
    with np.errstate(over="raise"):
        np.exp(_at(N, [], 0.0))                  # none: no error
    # the float32 result is finite but past the format's range: the rounding
    # overflows (float8_e5m2's largest is 57344)
    x = _at(N, [N - 1], 11.0, dtype=mf.float8_e5m2)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError, match="overflow"):
            np.exp(x)


@pytest.mark.parametrize("t", (1,) + COUNTS)
def test_errstate_divide_and_invalid_warn(threads, t):
    threads(t)
    x = _at(N, [N - 3], 0.0)
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in log"):
        r = np.log(x)
    assert np.isneginf(r[N - 3].astype(np.float32))
    with np.errstate(divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        np.log(x)
    x = _at(N, [N // 3], -1.0)
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError, match="invalid value encountered in log"):
            np.log(x)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError, match="divide by zero encountered in power"):
            np.power(_at(N, [N - 1], 0.0), _at(N, [], 0.0, fill=-1.0))


# ------------------------------------------------------------------ tables

TABLE_UNARY = ["exp", "log", "sqrt", "tanh", "sin", "arccos", "reciprocal", "rint", "sign",
               "log1p", "cosh"]


def _direct(ufunc, x, chunk=1000):
    """ufunc on pieces too small for the table (or threads): the direct path."""
    out = np.empty_like(x)
    seen = set()
    with np.errstate(all="call", call=lambda kind, flag: seen.add(kind)):
        for i in range(0, x.size, chunk):
            ufunc(x[i:i + chunk], out=out[i:i + chunk])
    return out, frozenset(seen)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2fnuz",
                                  "float8_e8m0fnu", "float4_e2m1fn"])
@pytest.mark.parametrize("uname", TABLE_UNARY)
def test_every_code_by_table(threads, name, uname):
    """Every stored code (signalling NaNs, and for the formats of under 8
    bits bytes with bits above the code set), repeated past the size from
    which large unary calls use a table of the results of every code, before
    and after the table is made: the bits and the FP errors of the direct
    path, on 1 and 3 threads."""
    dt = np.dtype(getattr(mf, name))
    raw = np.arange(256 ** dt.itemsize, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    reps = -(-(1 << 20) // raw.size) + 1
    x = np.tile(raw, reps)[5:].view(dt)
    ufunc = getattr(np, uname)
    threads(1)
    want, fl_want = _direct(ufunc, x)
    # the table is made once the large calls of a ufunc and format have
    # brought 256 elements per code: call until then, and after
    calls = -(-256 * raw.size // x.size) + 1
    for i in range(calls):
        threads(3 if i % 2 else 1)
        got, fl = run_flags(lambda: ufunc(x))
        assert np.array_equal(bits(got), bits(want)), i
        assert fl == fl_want, i
    for t in (1, 3):
        threads(t)
        # in place, and strided
        y = x.copy()
        ufunc(y, out=y)
        assert np.array_equal(bits(y), bits(want)), t
        z = np.zeros(2 * x.size, dt)
        ufunc(x, out=z[::2])
        assert np.array_equal(bits(z[::2]), bits(want)), t
    # errors by kind, from whichever thread met them
    if uname == "log" and name != "float8_e8m0fnu":
        threads(3)
        with np.errstate(invalid="raise"):
            with pytest.raises(FloatingPointError, match="invalid value encountered in log"):
                ufunc(x)
        with pytest.warns(RuntimeWarning, match="divide by zero encountered in log"):
            ufunc(x)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("uname", ["exp", "log"])
def test_byte_table_each_level(threads, name, uname, each_level):
    # 8-bit codes go through the table by the level's byte look-up (lut8: a
    # permute of 32 or 64 codes at a time): every byte value at every
    # position and length past the table's size, odd offsets and lengths
    # (the kernel's tails), bits and flags of the direct path
    dt = np.dtype(getattr(mf, name))
    raw = np.arange(256, dtype=np.uint8)
    x = np.tile(raw, 4200)[3:].view(dt)
    ufunc = getattr(np, uname)
    threads(1)
    want, fl_want = _direct(ufunc, x)
    for _ in range(3):          # the table is made once 256 elements per code came
        ufunc(x)
    for t in (1, 2):
        threads(t)
        for lo, hi in ((0, x.size), (1, x.size - 7), (31, 31 + 8192 * 3 + 33)):
            got, fl = run_flags(lambda: ufunc(x[lo:hi]))
            assert np.array_equal(bits(got), bits(want[lo:hi])), (t, lo, hi)
            _, fl_part = _direct(ufunc, x[lo:hi])
            assert fl == fl_part, (t, lo, hi)
        s = dt.type(0.5)
        got, fl = run_flags(lambda: np.power(x, s))
        full, fl_full = run_flags(lambda: np.power(x, np.full(x.size, s, dt)))
        assert np.array_equal(bits(got), bits(full)) and fl == fl_full, t


CHEAP_UNARY = ["floor", "ceil", "trunc", "rint", "sqrt", "reciprocal", "square"]


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e5m2fnuz",
                                  "float8_e8m0fnu", "float4_e2m1fn", "float6_e3m2fn"])
@pytest.mark.parametrize("uname", CHEAP_UNARY)
def test_cheap_unary_fused(threads, name, uname, each_level):
    """The ufuncs whose float32 loop is one instruction run the fused kernels
    (decode, the instruction, the rounding in registers) on contiguous
    operands: every stored code (signalling NaNs included), at every kernel
    level and 1-3 threads, in place, against the general path (the same
    values strided, in pieces too small for the table: each element decoded,
    NumPy's float32 loop, one rounding), bits and floating-point errors, and
    against the float32 contract."""
    dt = np.dtype(getattr(mf, name))
    raw = np.arange(256 ** dt.itemsize, dtype=np.uint16 if dt.itemsize == 2 else np.uint8)
    x = np.tile(raw, -(-(1 << 20) // raw.size) + 1)[3:].view(dt)
    ufunc = getattr(np, uname)
    threads(1)
    strided = np.repeat(x, 2)[::2]
    want = np.empty_like(x)
    seen = set()
    with np.errstate(all="call", call=lambda kind, flag: seen.add(kind)):
        for i in range(0, x.size, 999):
            ufunc(strided[i:i + 999], out=want[i:i + 999])
    with np.errstate(all="ignore"):
        contract = ufunc(x.astype(np.float32)).astype(dt)
    assert np.array_equal(bits(want), bits(contract))
    for t in (1, 2, 3):
        threads(t)
        got, fl = run_flags(lambda: ufunc(x))
        assert np.array_equal(bits(got), bits(want)), t
        assert fl == frozenset(seen), t
        y = x.copy()
        with np.errstate(all="ignore"):
            ufunc(y, out=y)
        assert np.array_equal(bits(y), bits(want)), (t, "in place")


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.machine() == "x86_64"),
                    reason="fesetround through glibc's libm with x86's FE_UPWARD")
@pytest.mark.parametrize("uname", CHEAP_UNARY)
def test_cheap_unary_in_another_rounding_mode(threads, uname):
    """Under FE_UPWARD the fused kernels still give the general path's codes
    (decode, NumPy's float32 loop in that mode, one rounding), for every
    bfloat16 code, on 1 and 2 threads (the workers run in the caller's
    mode)."""
    libm = ctypes.CDLL("libm.so.6")
    fe_upward, fe_tonearest = 0x800, 0
    raw = np.tile(np.arange(1 << 16, dtype=np.uint16), 9)
    x = raw.view(mf.bfloat16)
    strided = np.repeat(x, 2)[::2]
    ufunc = getattr(np, uname)
    assert libm.fesetround(fe_upward) == 0
    try:
        assert np.rint(np.float32(2.5)) == 2.0 and np.sqrt(np.float32(2)).view(np.uint32) == 0x3FB504F4
        with np.errstate(all="ignore"):
            want = np.empty_like(x)
            for i in range(0, x.size, 999):
                ufunc(strided[i:i + 999], out=want[i:i + 999])
            for t in (1, 2):
                threads(t)
                assert np.array_equal(bits(ufunc(x)), bits(want)), t
    finally:
        libm.fesetround(fe_tonearest)


# --------------------------------------------- maximum, minimum, clip by codes

def _zeros_and_ties(n, seed):
    """values with many zeros of both signs and equal pairs: a block without
    NaN or zero ties is chosen by the codes, one with them by NumPy's loop"""
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal(n).astype(np.float32) * 4) / 4
    x[rng.random(n) < 0.2] = -0.0
    return x


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"])
@pytest.mark.parametrize("uname", ["maximum", "minimum", "fmax", "fmin", "clip"])
def test_extrema_by_codes(threads, name, uname, each_level):
    # the result is one operand's code, picked by the codes' order; NumPy's
    # float32 loop rounded once is the reference (NaN payloads, which zero)
    dt = np.dtype(getattr(mf, name))
    ufunc = getattr(np, uname)
    nin = 3 if uname == "clip" else ufunc.nin
    plain = [np.abs(values(N, s)).astype(dt) for s in range(3)]
    spec = [values(N, s).astype(dt) for s in range(3)]
    ties = [_zeros_and_ties(N, s).astype(dt) for s in range(3)]
    for t in (1,) + COUNTS:
        threads(t)
        for args in (plain, spec, ties):
            ops = args[:nin]
            want = reference(ufunc, ops)
            assert np.array_equal(bits(ufunc(*ops)), bits(want)), (t, uname)
            # a scalar operand (ReLU: np.maximum(x, 0)), strided and reversed views
            for other in (dt.type(0), dt.type(-0.0), dt.type(1.5)):
                more = [other] * (nin - 1)
                got = ufunc(ops[0], *more)
                ref = reference(ufunc, [ops[0]] + [np.full(N, other, dt)] * (nin - 1))
                assert np.array_equal(bits(got), bits(ref)), (t, uname, float(other))
            views = [a[::-2] for a in ops]
            assert np.array_equal(bits(ufunc(*views)), bits(reference(ufunc, views)))
            # in place: the inputs a block's fallback reads must be intact
            o = ops[0].copy()
            ufunc(o, *ops[1:], out=o)
            assert np.array_equal(bits(o), bits(want)), (t, uname, "in place")
            # the output is another operand (not written directly), or a
            # preallocated array of garbage (written directly, a flagged
            # block then recomputed over it)
            for k in range(1, nin):
                o = ops[k].copy()
                ufunc(*ops[:k], o, *ops[k + 1:], out=o)
                assert np.array_equal(bits(o), bits(want)), (t, uname, "aliases operand", k)
            o = np.full(N, np.nan, dt)
            ufunc(*ops, out=o)
            assert np.array_equal(bits(o), bits(want)), (t, uname, "preallocated")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 5000), start=st.integers(0, 3),
       picks=st.lists(st.integers(0, 7), min_size=3, max_size=3),
       name=st.sampled_from(["bfloat16", "float8_e4m3fn"]),
       uname=st.sampled_from(["maximum", "minimum", "clip"]),
       t=st.sampled_from([1, 2]))
def test_extrema_zero_ties_property(threads, n, start, picks, name, uname, t):
    # zeros of both signs everywhere (ReLU of ReLU, clip of images with
    # zeros): the codes choose the second of two equal zeros where NumPy's
    # loop was seen to, block by block at any length and offset; the bits
    # are NumPy's float32 loop's on the whole array
    dt = np.dtype(getattr(mf, name))
    ufunc = getattr(np, uname)
    alphabet = np.array([-0.0, 0.0, -0.0, 0.0, 1.0, -1.0, 0.5, np.nan], np.float32)
    rng = np.random.default_rng(picks)
    nin = 3 if uname == "clip" else 2
    weights = [np.r_[np.full(4, 0.24), 0.01, 0.01, 0.01, 0.01 * (p == 7)] for p in picks]
    ops = [alphabet[rng.choice(8, n + start, p=w / w.sum())].astype(dt)[start:]
           for w in weights[:nin]]
    threads(t)
    assert np.array_equal(bits(ufunc(*ops)), bits(reference(ufunc, ops)))
    for other in (dt.type(0.0), dt.type(-0.0)):
        more = [other] * (nin - 1)
        ref = reference(ufunc, [ops[0]] + [np.full(n, other, dt)] * (nin - 1))
        assert np.array_equal(bits(ufunc(ops[0], *more)), bits(ref)), float(other)


def _same_as_broadcast(ufunc, a, s, full, tag, strided=False):
    """ufunc of an array and the scalar s, s on either side (and with
    strided, of a reversed strided view), and in place: the bits and the
    flags of the same call with s broadcast to the whole array `full`"""
    pairs = [(lambda: ufunc(a, s), lambda: ufunc(a, full)),
             (lambda: ufunc(s, a), lambda: ufunc(full, a))]
    if strided:
        pairs.append((lambda: ufunc(a[::-3], s), lambda: ufunc(a[::-3], full[::3])))
    for got_fn, want_fn in pairs:
        got, fl_got = run_flags(got_fn)
        want, fl_want = run_flags(want_fn)
        assert np.array_equal(bits(got), bits(want)), tag
        assert fl_got == fl_want, tag
    o = a.copy()
    ufunc(o, s, out=o)
    assert np.array_equal(bits(o), bits(ufunc(a, full))), tag + ("in place",)


def _every_code_shuffled(dt, repeats, seed):
    """every code of dt `repeats` times, in random order"""
    u = {1: np.uint8, 2: np.uint16}[dt.itemsize]
    codes = np.tile(np.arange(1 << (8 * dt.itemsize), dtype=np.int64).astype(u), repeats)
    np.random.default_rng(seed).shuffle(codes)
    return codes.view(dt)


SCALAR_TABLE_UFUNCS = ["power", "fmod", "logaddexp", "hypot", "arctan2", "copysign",
                       "nextafter", "remainder", "floor_divide", "logaddexp2"]


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float6_e2m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("uname", SCALAR_TABLE_UFUNCS)
def test_binary_with_a_scalar_by_table(threads, name, uname):
    # an array of every code (with NaNs, infs, zeros) and a scalar: the call's
    # table gives the bits and the flags of the same call with the scalar
    # broadcast to a whole array (the float32 route), scalar on either side,
    # strided, in place and into out=
    dt = np.dtype(getattr(mf, name))
    ufunc = getattr(np, uname)
    a = _every_code_shuffled(dt, 128, 1)
    for t in (1,) + COUNTS:
        threads(t)
        for v in (2.2, -1.5, 3.0, 0.0, -0.0, np.nan, np.inf, 1e30, 0.7):
            s = dt.type(v)
            full = np.full(a.size, s, dt)
            _same_as_broadcast(ufunc, a, s, full, (t, v), strided=True)
            o = np.full(a.size, np.nan, dt)
            ufunc(s, a, out=o)
            assert np.array_equal(bits(o), bits(ufunc(full, a))), (t, v, "out=")


@pytest.mark.parametrize("uname,v", [("power", 2.2), ("fmod", 0.7), ("logaddexp", 0.0),
                                     ("copysign", -1.0)])
def test_binary_with_a_scalar_by_table_bfloat16(threads, uname, v):
    # 2^24 bfloat16 elements (every code 256 times) and a scalar: the table of
    # 65536 codes, the flags of the codes that raise found as they are met
    # (x ** 2.2: every negative code "invalid"); the route's bits and flags
    dt = np.dtype(mf.bfloat16)
    ufunc = getattr(np, uname)
    a = _every_code_shuffled(dt, 256, 2)
    s = dt.type(v)
    full = np.full(a.size, s, dt)
    want, fl_want = run_flags(lambda: ufunc(a, full))
    for t in (1, 2):
        threads(t)
        got, fl_got = run_flags(lambda: ufunc(a, s))
        assert np.array_equal(bits(got), bits(want)), t
        assert fl_got == fl_want, t
    # only positive codes: the flags of the codes met, not of every code
    pos = a[(a.view(np.uint16) < 0x7F80)]
    pos = pos[: 1 << 24] if pos.size >= 1 << 24 else np.resize(pos, 1 << 24)
    got, fl_got = run_flags(lambda: ufunc(pos, s))
    want, fl_want = run_flags(lambda: ufunc(pos, np.full(pos.size, s, dt)))
    assert np.array_equal(bits(got), bits(want))
    assert fl_got == fl_want


@pytest.mark.parametrize("name", FORMATS + ["float8_e8m0fnu"])
@pytest.mark.parametrize("uname", ["add", "subtract", "multiply", "divide"])
def test_arithmetic_with_a_scalar(threads, name, uname):
    # an array and a scalar go to the fused kernel with the scalar's code
    # repeated: the bits and the reported errors of the same call with the
    # scalar broadcast to a whole array, scalar on either side, in place
    dt = np.dtype(getattr(mf, name))
    ufunc = getattr(np, uname)
    a = values(N, 4).astype(dt)
    for t in (1,) + COUNTS:
        threads(t)
        for v in (2.0, -0.375, 0.0, np.nan, 1e30):
            s = dt.type(v)
            full = np.full(N, s, dt)
            _same_as_broadcast(ufunc, a, s, full, (t, v))


# ------------------------------------------- sign operations, broadcast rows

@pytest.mark.parametrize("name", FORMATS + ["float8_e8m0fnu", "float6_e2m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("uname", ["negative", "absolute", "positive", "copysign"])
def test_sign_operations_split_between_threads(threads, name, uname):
    # contiguous sign operations of large calls are split between the
    # threads: the same bits as the element-by-element (strided) loop, at
    # every thread count, also in place, and no floating-point flag
    dt = np.dtype(getattr(mf, name))
    ufunc = getattr(np, uname)
    nin = 2 if uname == "copysign" else 1
    args = [np.arange(N, dtype=np.int64).astype(np.uint8).view(dt) if dt.itemsize == 1
            else np.arange(N, dtype=np.int64).astype(np.uint16).view(dt)]
    if nin == 2:
        args.append(args[0][::-1].copy())
    threads(1)
    # the strided loop, each element on its own
    want = ufunc(*[np.repeat(a, 2)[::2] for a in args])
    for t in (1,) + COUNTS:
        threads(t)
        got, flags = run_flags(lambda: ufunc(*args))
        assert np.array_equal(bits(got), bits(want)), t
        assert flags == frozenset(), t
        o = args[0].copy()
        ufunc(o, *args[1:], out=o)
        assert np.array_equal(bits(o), bits(want)), (t, "in place")


def test_sign_operations_bits_of_bfloat16(threads):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    x = np.tile(x, 8).view(mf.bfloat16)
    for t in (1,) + COUNTS:
        threads(t)
        assert np.array_equal(bits(np.negative(x)), bits(x) ^ np.uint16(0x8000))
        assert np.array_equal(bits(np.absolute(x)), bits(x) & np.uint16(0x7FFF))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("uname", ["add", "subtract", "multiply", "divide"])
def test_broadcast_rows_of_a_large_output(threads, name, uname):
    # NumPy calls the loop row after row when an operand is a broadcast row
    # or column; once those rows pass 8 MiB of output the rest is written
    # with streaming stores: the same bits as NumPy's float32 loop rounded once
    dt = np.dtype(getattr(mf, name))
    ufunc = getattr(np, uname)
    rows, cols = (9 << 20) // (dt.itemsize * 4096) + 3, 4096
    a = values(rows * cols, 5).astype(dt).reshape(rows, cols)
    row = values(cols, 6).astype(dt)[None, :]
    col = values(rows, 7).astype(dt)[:, None]
    f32 = [v.astype(np.float32) for v in (a, row, col)]
    want_row = ufunc(f32[0], f32[1]).astype(dt)
    want_col = ufunc(f32[2], f32[0]).astype(dt)
    for t in (1,) + COUNTS:
        threads(t)
        for _ in range(2):        # a second call continues no run of the first
            assert np.array_equal(bits(ufunc(a, row)), bits(want_row)), t
            assert np.array_equal(bits(ufunc(col, a)), bits(want_col)), t
        o = np.empty_like(a)
        ufunc(a, row, out=o)
        assert np.array_equal(bits(o), bits(want_row)), (t, "out=")
        o = a.copy()
        ufunc(o, row, out=o)
        assert np.array_equal(bits(o), bits(want_row)), (t, "in place")
