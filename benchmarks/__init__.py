"""minifloat's benchmarks.  Not part of the package: they live in the checkout and
time the *installed* minifloat (`pip install .` first).

    python -m benchmarks [--quick] [--cases ...] [--markdown] [--write-docs] ...
                                        the benchmark (run.py; also python benchmarks/run.py)
    python benchmarks/dlpack_import.py  the cost of importing a tensor (docs/exchange.md)
    python benchmarks/bench_checkpoint.py   a 1 GiB checkpoint (docs/safetensors.md)
    python benchmarks/boundary_survey.py    bf16 arrays fed to other libraries (docs/exchange.md)
    python benchmarks/thread_threshold.py   where two threads start to pay (docs/design.md)

`python -m benchmarks` runs from the checkout root, whose minifloat/ is the
source package without its compiled core: importing this package takes the
root off sys.path first, so that `import minifloat` finds the installed one.
"""
import os
import sys

# OpenBLAS's worker threads spin for a while after each call (NumPy's float32
# matmul rows): in a side-by-side run they take the second core from the row
# timed next (minifloat's 16-column matmul ran at one thread's speed, torch's
# at 2 threads 1.6x slower).  Put them to sleep soon after a call, before
# NumPy loads OpenBLAS; the float32 rows themselves barely change.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
# torch's OpenMP (GNU libgomp) threads do the same: 300,000 spins by default,
# about 5 ms on a Zen 5, in which minifloat's next two calls of a 32 MiB
# multiply took 3.4 and 2.9 ms instead of 1.0 (its second thread waiting for
# the core).  10,000 spins (about 0.2 ms; minifloat's own pool spins 0.1 ms)
# left torch's rows as they were.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _import_installed_minifloat():
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _ROOT]
    try:
        import minifloat  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"the benchmarks time the installed minifloat, and this Python ({sys.executable}) "
            f"has none that imports ({e}). Install the checkout first: "
            f"pip install --no-build-isolation {_ROOT}") from None


_import_installed_minifloat()
