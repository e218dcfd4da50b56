"""Threads: minifloat.set_num_threads / get_num_threads, MINIFLOAT_NUM_THREADS,
and large elementwise ops, casts, sums and matmul split across the worker
pool with results bit-identical to one thread (and to the serial oracle).

The arrays are above the sizes from which work is split (512 KiB of output,
1 MiB of input for sums: MF_PAR_MIN_BYTES and MF_PAR_MIN_REDUCE_BYTES in
src/kernels/parallel.h), with a tail
that is not a whole task and values that overflow, NaNs and infinities
spread over the array, so every thread meets them.  No timing is asserted.

Then many Python threads calling minifloat at once: the matmul
worker pool (one call owns it, the others start threads of their own), the
dispatch table, the casts, reductions and DLPack give every thread the
single-threaded answer.  The whole suite also runs under pytest-run-parallel
(docs/hardening.md).
"""
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import minifloat as mf
from minifloat import _core

from conftest import kernel_level

# the inputs overflow on purpose; the tests that care check the flags with
# np.errstate(call=...)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MIN_BYTES = 1 << 20
# a few formats of each kind of SIMD path: bfloat16, IEEE-like, fn, fnuz, e8m0
FORMATS = ["bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu",
           "float6_e2m3fn", "float4_e2m1fn"]
OPS = [np.add, np.subtract, np.multiply, np.true_divide]
MANY = 4           # more threads than this machine may have: still bit-identical


def n_for(name, extra=777):
    """Elements for 2 MiB of the format (plus a ragged tail)."""
    return 2 * MIN_BYTES // np.dtype(getattr(mf, name)).itemsize + extra


def values(n, seed=0):
    """float32 inputs: normal values over a wide range, with specials mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32) * np.float32(4.0) ** rng.integers(
        -8, 8, n).astype(np.float32)
    k = max(n // 1000, 1)
    idx = rng.choice(n, 5 * k, replace=False)
    x[idx[:k]] = np.nan
    x[idx[k:2 * k]] = -np.nan
    x[idx[2 * k:3 * k]] = np.inf
    x[idx[3 * k:4 * k]] = -np.inf
    x[idx[4 * k:]] = 3.4e38                     # overflows every format but e8m0
    x[-1] = 3.4e38                              # in the last task
    return x


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def run_flags(fn):
    """fn() and the set of NumPy FP errors it reported."""
    seen = set()
    with np.errstate(all="call", call=lambda kind, flag: seen.add(kind)):
        out = fn()
    return out, frozenset(seen)


def at_threads(set_threads, n, fn):
    set_threads(n)
    return run_flags(fn)


# ------------------------------------------------------------------ the API

def test_get_set_num_threads(threads):
    default = _core.default_num_threads()
    assert default >= 1
    assert mf.get_num_threads() == default
    assert mf.set_num_threads(3) == default
    assert mf.get_num_threads() == 3
    assert mf.set_num_threads(1) == 3
    assert mf.get_num_threads() == 1
    assert mf.set_num_threads(None) == 1
    assert mf.get_num_threads() == default
    assert mf.set_num_threads(np.int64(2)) == default
    assert mf.get_num_threads() == 2
    mf.set_num_threads(10**30)                   # capped, like huge counts elsewhere
    assert 1 <= mf.get_num_threads() <= 64
    assert "set_num_threads" in mf.__all__ and "get_num_threads" in mf.__all__


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError),
                                      ("2", TypeError), (True, TypeError)])
def test_set_num_threads_rejects(threads, bad, exc):
    mf.set_num_threads(2)
    with pytest.raises(exc, match="set_num_threads"):
        mf.set_num_threads(bad)
    assert mf.get_num_threads() == 2             # unchanged


@pytest.mark.parametrize("env, want", [("3", 3), ("1", 1), ("0", None), ("junk", None)])
def test_environment_variable(env, want):
    code = ("import minifloat as mf, minifloat._core as c; "
            "print(mf.get_num_threads(), c.default_num_threads(), len(__import__('os')."
            "sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "MINIFLOAT_NUM_THREADS": env}, check=True)
    got, default, cpus = map(int, out.stdout.split())
    assert got == default == (want if want is not None else min(cpus, 64))


# ------------------------------------------------------------------ bit-identical results

@pytest.mark.parametrize("name", FORMATS)
def test_casts_same_bits_any_thread_count(threads, name):
    dt = np.dtype(getattr(mf, name))
    x = values(n_for(name))
    enc1, fl1 = at_threads(threads, 1, lambda: x.astype(dt))
    encN, flN = at_threads(threads, MANY, lambda: x.astype(dt))
    assert np.array_equal(bits(enc1), bits(encN))
    assert fl1 == flN
    if name != "float8_e8m0fnu":
        assert "overflow" in flN                 # raised in whichever thread met it
    # float32 <- format, and into a preallocated array
    dec1, _ = at_threads(threads, 1, lambda: enc1.astype(np.float32))
    out = np.empty(enc1.shape, np.float32)
    decN, _ = at_threads(threads, MANY, lambda: np.copyto(out, encN, casting="unsafe"))
    assert np.array_equal(bits(dec1), bits(out))
    # and the serial oracle, on one thread
    with kernel_level("serial"):
        ref, fl_ref = at_threads(threads, 1, lambda: x.astype(dt))
    assert np.array_equal(bits(ref), bits(encN))
    assert fl_ref == flN


@pytest.mark.parametrize("a,b", [("bfloat16", "float8_e4m3fn"), ("float8_e5m2", "bfloat16"),
                                 ("bfloat16", "float4_e2m1fn"), ("float8_e4m3fn", "float8_e5m2")])
def test_format_to_format_casts_any_thread_count(threads, a, b):
    """A cast between two formats (decode and encode block by block) splits
    between threads when large: the same bits and flags as one thread and
    as the serial level; the overflow in the last task reaches the caller.
    Lengths under and over 8 MiB of bfloat16 output (the threads' stores are
    streamed from there)."""
    x = values(4 * MIN_BYTES + 777).astype(getattr(mf, a))
    dt = np.dtype(getattr(mf, b))
    for n in (x.size // 2, x.size):               # under and over 8 MiB of output at bf16
        y = x[:n]
        r1, fl1 = at_threads(threads, 1, lambda: y.astype(dt))
        out = np.empty(n, dt)
        rN, flN = at_threads(threads, MANY, lambda: np.copyto(out, y, casting="unsafe"))
        assert np.array_equal(bits(r1), bits(out)), n
        assert fl1 == flN
        with kernel_level("serial"):
            ref, fl_ref = at_threads(threads, 1, lambda: y.astype(dt))
        assert np.array_equal(bits(ref), bits(out)), n
        assert fl_ref == flN
    big = np.ones(3 * MIN_BYTES, getattr(mf, a))
    big[-3] = np.float32(448.0 if a == "float8_e4m3fn" else 3e38)
    threads(MANY)
    if b != "bfloat16" and not (a == "float8_e4m3fn" and b == "float8_e5m2"):
        with np.errstate(over="raise"):
            with pytest.raises(FloatingPointError, match="overflow"):
                big.astype(dt)
    with np.errstate(over="raise"):
        big[:-5].astype(dt)                        # no overflow: no error


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.__name__)
def test_binary_same_bits_any_thread_count(threads, name, op):
    dt = np.dtype(getattr(mf, name))
    n = n_for(name)
    a, b = values(n, 1).astype(dt), values(n, 2).astype(dt)
    r1, fl1 = at_threads(threads, 1, lambda: op(a, b))
    o = np.empty_like(a)
    rN, flN = at_threads(threads, MANY, lambda: op(a, b, out=o))
    assert rN is o
    assert np.array_equal(bits(r1), bits(o))
    assert fl1 == flN
    with kernel_level("serial"):
        ref, fl_ref = at_threads(threads, 1, lambda: op(a, b))
    assert np.array_equal(bits(ref), bits(o))
    assert fl_ref == flN


def test_binary_overflow_in_one_task_only(threads):
    """The only overflow is in the last task: its flag reaches the caller
    whichever thread ran it."""
    n = n_for("bfloat16")
    a = np.ones(n, mf.bfloat16)
    a[-3] = mf.bfloat16(3e38)
    threads(MANY)
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError, match="overflow"):
            np.multiply(a, a)
        np.multiply(a[:-5], a[:-5])               # no overflow: no error


def test_large_streamed_output(threads):
    """8 MiB and more of output: the threads' pieces use streaming stores;
    an output not aligned to 64 bytes too."""
    n = (8 << 20) // 2 + 333
    a, b = values(n, 3).astype(mf.bfloat16), values(n, 4).astype(mf.bfloat16)
    buf = np.empty(n + 7, mf.bfloat16)
    o = buf[3:3 + n]
    r1, _ = at_threads(threads, 1, lambda: np.add(a, b))
    at_threads(threads, MANY, lambda: np.add(a, b, out=o))
    assert np.array_equal(bits(r1), bits(o))


@pytest.mark.parametrize("nthreads", [2, MANY])
@pytest.mark.parametrize("start", [0, 1, 12345])
def test_tasks_of_whole_huge_pages(threads, nthreads, start):
    """Outputs large enough for tasks of 2 MiB: the first task runs up to the
    output's first 2 MiB boundary (wherever the array starts), the others
    are whole huge pages; every element is still computed once, with the
    same bits, for casts both ways and a binary op."""
    n = (2 << 20) * 4 * nthreads // 2 + 4099          # bfloat16 output, >= 2 MiB per task
    x = values(n + start, 5).astype(np.float32)[start:]
    enc1, _ = at_threads(threads, 1, lambda: x.astype(mf.bfloat16))
    buf = np.empty(n + start, mf.bfloat16)
    o = buf[start:]
    at_threads(threads, nthreads, lambda: np.copyto(o, x, casting="unsafe"))
    assert np.array_equal(bits(enc1), bits(o))
    encN, _ = at_threads(threads, nthreads, lambda: x.astype(mf.bfloat16))   # a new array
    assert np.array_equal(bits(enc1), bits(encN))
    f32 = np.empty(n + start, np.float32)[start:]
    at_threads(threads, nthreads, lambda: np.copyto(f32, o, casting="unsafe"))
    assert np.array_equal(f32.view(np.uint32), enc1.astype(np.float32).view(np.uint32))
    r1, _ = at_threads(threads, 1, lambda: np.multiply(enc1, o))
    rN, _ = at_threads(threads, nthreads, lambda: np.multiply(enc1, o, out=buf[start:]))
    assert np.array_equal(bits(r1), bits(rN))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_sum_same_bits_any_thread_count(threads, name):
    dt = np.dtype(getattr(mf, name))
    rng = np.random.default_rng(5)
    n = n_for(name, extra=4096 * 3 + 5)
    a = rng.random(n, np.float32).astype(dt)        # float32 blocks visibly rounded
    s1 = at_threads(threads, 1, lambda: a.sum())[0]
    for t in (2, 3, MANY):
        sN = at_threads(threads, t, lambda: a.sum())[0]
        assert bits(np.asarray(sN)) == bits(np.asarray(s1))
    with kernel_level("serial"):
        ref = at_threads(threads, 1, lambda: a.sum())[0]
    assert bits(np.asarray(ref)) == bits(np.asarray(s1))
    # float32 result: the float64 total rounded once, more bits to compare
    s1 = at_threads(threads, 1, lambda: a.sum(dtype=np.float32))[0]
    sN = at_threads(threads, MANY, lambda: a.sum(dtype=np.float32))[0]
    assert np.array_equal(bits(s1), bits(sN), equal_nan=False)


def test_sum_nans_of_both_signs(threads):
    """NaNs of either sign in different blocks: the block results are added
    in index order, so the first NaN's sign wins, as on one thread."""
    n = n_for("bfloat16")
    a = np.ones(n, mf.bfloat16)
    a[n // 2] = mf.bfloat16(-np.nan)
    a[n - 10] = mf.bfloat16(np.nan)
    r1 = at_threads(threads, 1, lambda: a.sum())
    rN = at_threads(threads, MANY, lambda: a.sum())
    assert bits(np.asarray(r1[0])) == bits(np.asarray(rN[0]))
    assert r1[1] == rN[1]


def test_dot_same_bits_any_thread_count(threads):
    n = n_for("bfloat16")
    a, b = values(n, 6), values(n, 7)
    a[np.isinf(a) | np.isnan(a) | (a > 1e30)] = 1
    b[np.isinf(b) | np.isnan(b) | (b > 1e30)] = 1
    a, b = a.astype(mf.bfloat16), b.astype(mf.bfloat16)
    r1 = at_threads(threads, 1, lambda: np.vecdot(a, b))[0]
    rN = at_threads(threads, MANY, lambda: np.vecdot(a, b))[0]
    assert bits(np.asarray(r1)) == bits(np.asarray(rN))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float6_e2m3fn"])
def test_row_dots_same_bits_any_thread_count(threads, name):
    """np.vecdot of two matrices and a stack of vector @ vector products: the
    rows (short, each below the split of one dot) go to the threads; every
    row's bits and the flags are one thread's and the serial level's, with
    NaNs, infinities and rows whose dot overflows the format."""
    dt = np.dtype(getattr(mf, name))
    rows, k = 2 * MIN_BYTES // dt.itemsize // 300 + 3, 300
    rng = np.random.default_rng(14)
    a = rng.standard_normal((rows, k)).astype(np.float32).astype(dt)
    b = rng.standard_normal((rows, k)).astype(np.float32).astype(dt)
    big = np.float32(mf.finfo(dt).max).astype(dt)
    for r in (rows // 3, rows - 1):              # dots that overflow the format
        a[r], b[r] = big, big
    for j, v in enumerate((np.nan, np.inf)):
        c = np.float32(v).astype(dt)
        if not np.isfinite(c.astype(np.float32)):     # the format has it
            a[rows // 2 + j, 7] = c
    for fn in (lambda: np.vecdot(a, b), lambda: np.matmul(a[:, None, :], b[:, :, None])):
        with kernel_level("serial"):
            want, want_flags = at_threads(threads, 1, fn)
        assert "overflow" in want_flags
        for t in (1, 2, 3):
            got, got_flags = at_threads(threads, t, fn)
            np.testing.assert_array_equal(bits(got), bits(want))
            assert got_flags == want_flags, t
    # the output row stride is not the itemsize (an out= view)
    out = np.zeros(2 * rows, dtype=dt)[::2]
    threads(2)
    np.vecdot(a, b, out=out)
    np.testing.assert_array_equal(bits(out), bits(want.reshape(-1)))


def test_matmul_same_bits_any_thread_count(threads):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((300, 257)).astype(mf.bfloat16)
    b = rng.standard_normal((257, 190)).astype(mf.bfloat16)
    r1 = at_threads(threads, 1, lambda: a @ b)[0]
    rN = at_threads(threads, MANY, lambda: a @ b)[0]
    assert np.array_equal(bits(r1), bits(rN))


def test_between_the_thresholds(threads):
    """600 KiB: split for elementwise work and casts (from 512 KiB of output),
    not for sums (from 1 MiB of input); the same bits either way."""
    n = (600 << 10) // 2 + 13
    a, b = values(n, 11).astype(mf.bfloat16), values(n, 12).astype(mf.bfloat16)
    r1, _ = at_threads(threads, 1, lambda: np.multiply(a, b))
    rN, _ = at_threads(threads, MANY, lambda: np.multiply(a, b))
    assert np.array_equal(bits(r1), bits(rN))
    x = values(n, 13)
    c1, _ = at_threads(threads, 1, lambda: x.astype(mf.bfloat16))
    cN, _ = at_threads(threads, MANY, lambda: x.astype(mf.bfloat16))
    assert np.array_equal(bits(c1), bits(cN))
    s1, _ = at_threads(threads, 1, lambda: np.sum(a))
    sN, _ = at_threads(threads, MANY, lambda: np.sum(a))
    assert np.array_equal(bits(s1), bits(sN), equal_nan=False)


def test_below_threshold_and_strided(threads):
    """Small and strided arrays take the one-thread paths: same answers."""
    threads(MANY)
    x = values(1000, 9)
    a = x.astype(mf.bfloat16)
    assert np.array_equal(bits(a), bits(np.array([mf.bfloat16(v) for v in x])))
    big = values(n_for("bfloat16") * 2, 10).astype(mf.bfloat16)
    s = big[::2]
    assert np.array_equal(bits(np.add(s, s)), bits(np.add(s.copy(), s.copy())))


def test_concurrent_callers(threads):
    """Python threads calling at once: one holds the pool, the others work
    alone; every result is right."""
    threads(MANY)
    n = n_for("bfloat16")
    a, b = values(n, 11).astype(mf.bfloat16), values(n, 12).astype(mf.bfloat16)
    want = np.add(a, b)
    x32 = values(n, 13)
    want_cast = x32.astype(mf.bfloat16)
    errors = []

    def work():
        try:
            for _ in range(5):
                with np.errstate(all="ignore"):
                    assert np.array_equal(bits(np.add(a, b)), bits(want))
                    assert np.array_equal(bits(x32.astype(mf.bfloat16)), bits(want_cast))
        except Exception as e:       # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_after_fork(threads):
    """A child of fork() starts its own workers (the parent's are not there)."""
    threads(MANY)
    n = n_for("bfloat16")
    a = values(n, 14).astype(mf.bfloat16)
    with np.errstate(all="ignore"):
        want = np.multiply(a, a)                 # the pool has started
    pid = os.fork()
    if pid == 0:                                 # the child: no pytest from here on
        ok = False
        try:
            with np.errstate(all="ignore"):
                ok = np.array_equal(bits(np.multiply(a, a)), bits(want))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# ==========================================================================
# Many Python threads calling minifloat at once
# ==========================================================================
N_THREADS = 8


def _work(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((96, 80), np.float32).astype(mf.bfloat16)
    b = rng.standard_normal((80, 72), np.float32).astype(mf.bfloat16)
    c = a @ b                                   # the gemm pool
    s = a.sum(axis=0)                           # reductions
    e = a.astype(mf.float8_e4m3fn).astype(np.float32)          # casts
    d = mf.from_dlpack(mf.dlpack(c))                            # DLPack both ways
    assert np.shares_memory(d, c)
    return c.view(np.uint16).tobytes(), s.view(np.uint16).tobytes(), e.tobytes()


def test_many_threads_get_the_single_threaded_answer():
    seeds = list(range(24))
    ref = [_work(s) for s in seeds]
    barrier = threading.Barrier(N_THREADS)

    def run(s):
        if s < N_THREADS:
            barrier.wait()                       # start the first calls together
        return _work(s)

    with ThreadPoolExecutor(N_THREADS) as ex:
        got = list(ex.map(run, seeds))
    assert got == ref


def test_large_matmuls_from_many_threads():
    # products big enough to use the pool (and, in the threads that find it
    # busy, threads of their own)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 256), np.float32).astype(mf.bfloat16)
    ref = (a @ a).view(np.uint16).copy()
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: (a @ a).view(np.uint16), range(8)))
    for o in outs:
        np.testing.assert_array_equal(o, ref)


def test_first_use_from_many_threads_in_a_fresh_process():
    # the lazy parts (import, ml_dtypes linking, the first kernel call) raced
    code = textwrap.dedent("""
        import threading
        out, errs = [], []
        barrier = threading.Barrier(8)
        def first():
            try:
                barrier.wait()
                import numpy as np, minifloat as mf
                x = np.arange(64, dtype=np.float32).astype(mf.bfloat16)
                out.append(float((x @ x).astype(np.float32)) + float(x.sum()))
                try:
                    import ml_dtypes
                    out.append(float(np.asarray(x.astype(ml_dtypes.bfloat16)).astype(np.float32).sum()))
                except ImportError:
                    out.append(2016.0)
            except BaseException as e:
                errs.append(repr(e))
        ts = [threading.Thread(target=first) for _ in range(8)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(errs, sorted(set(out)))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    x = np.arange(64, dtype=np.float32).astype(mf.bfloat16)
    want = sorted({float((x @ x).astype(np.float32)) + float(x.sum()), 2016.0})
    assert res.stdout.strip() == f"[] {want}", res.stdout + res.stderr
