"""Many Python threads calling minifloat at once (issue 13): the matmul
worker pool (one call owns it, the others start threads of their own), the
dispatch table, the casts, reductions and DLPack give every thread the
single-threaded answer.  The whole suite also runs under pytest-run-parallel
(docs/hardening.md)."""
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import minifloat as mf

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
