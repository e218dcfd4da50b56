"""The benchmark: minifloat against numpy float32, ml_dtypes, torch and numkong.

It times the installed minifloat (`pip install .` first); run it from the
checkout root:

    python -m benchmarks                     the default run (N = 2^24, under ~2 minutes)
    python -m benchmarks --quick             tiny sizes and few repeats (tests, CI)
    python -m benchmarks --cases sum         only the cases whose name contains "sum"
    python -m benchmarks --levels            minifloat rows under every kernel level too
    python -m benchmarks --markdown          the tables as Markdown
    python -m benchmarks --write-docs        also put the tables into docs/benchmarks.md
    python -m benchmarks --numpy-overhead    plain NumPy float32 calls with and without
                                             `import minifloat` (fresh processes)

`python benchmarks/run.py` takes the same options, from any folder.

Each case is one operation done by every library that can do it, on the same
values.  A time is the minimum over repeats of the mean of a batch of calls;
"speed-up" is the row's time divided by minifloat's time in the same run, so
above 1 means minifloat is faster.  Compare ratios from one run, never
absolute times across runs.

Adding a case: see benchmarks/harness.py and benchmarks/cases/.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:
    # `python benchmarks/run.py`: import this folder as the package `benchmarks`
    # from the checkout root; the package's __init__ takes the root off
    # sys.path again before anything imports minifloat (the root's minifloat/
    # is the unbuilt source)
    import os as _os
    import sys as _sys

    _sys.path[0] = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    from benchmarks.run import main as _main

    _sys.exit(_main())

import argparse
import contextlib
import datetime
import gc
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

import minifloat as mf
from minifloat import _core

from . import cases, report
from . import numpy_overhead as overhead
from .harness import PEERS, Case, Env, join_notes


# --------------------------------------------------------------------------- timing

class Timer:
    """Times one row: a warm-up call, then batches of calls, each at least min_time long.

    The rows of a case take turns batch by batch (see run_case), so background load on a
    shared machine hits them alike and their ratios stay meaningful; the time kept is the
    minimum over batches of the mean call time."""

    def __init__(self, fn, context, settle=False):
        self.fn, self.context = fn, context        # context: a factory of a context manager
        self.settle = settle       # an untimed call after entering the context (torch threads)
        self.first = self.best = float("inf")
        self.number, self.batches, self.wall, self.cpu = 1, 0, 0.0, 0.0

    def warm_up(self, min_time, budget=float("inf")):
        """One call (pages, caches), and a second one unless the first took a tenth of
        the row's budget; sizes the batches by the faster; returns the first's result.
        The first call of a preallocated output faults its pages in (39 ms instead of
        0.95 for 32 MiB): batches sized by it were of one call, each paying for what the
        rows before it left in the caches (writing back their dirty lines)."""
        with self.context():
            t0 = time.perf_counter()
            result = self.fn()
            self.first = time.perf_counter() - t0
            if self.first < budget / 10:
                t0 = time.perf_counter()
                self.fn()
                self.first = min(self.first, time.perf_counter() - t0)
        self.number = max(1, math.ceil(min_time / max(self.first, 1e-9)))
        return result

    def wants_more(self, budget):
        return self.first < budget and (
            self.batches == 0 or self.wall + self.first * self.number <= budget)

    def batch(self):
        with self.context():
            if self.settle:
                self.fn()
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(self.number):
                self.fn()
            dt = time.perf_counter() - t0
            self.cpu += time.process_time() - c0
        self.wall += dt
        self.batches += 1
        self.best = min(self.best, dt / self.number)

    def seconds(self):
        return self.best if self.batches else self.first

    def calls(self):
        return self.batches * self.number or 1

    def cores(self):
        return self.cpu / self.wall if self.wall > 0 else float("nan")


@contextlib.contextmanager
def gc_disabled():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def kernel_level(name):
    prev = _core.set_kernel_level(name)
    try:
        yield
    finally:
        _core.set_kernel_level(prev)


@contextlib.contextmanager
def mf_threads(n):
    prev = mf.set_num_threads(n)
    try:
        yield
    finally:
        mf.set_num_threads(prev)


@contextlib.contextmanager
def torch_threads(torch, n):
    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


# --------------------------------------------------------------------------- running

@dataclass
class Row:
    """One line of the detailed table."""
    case: Case
    who: str                 # "minifloat", "minifloat [avx2]", "torch 1t", ...
    column: str              # summary column: "minifloat", "ml_dtypes", "torch 1t", ...
    how: str
    seconds: Optional[float] = None   # None: n/a, not installed or error
    calls: int = 0
    cpu: float = float("nan")
    value: Optional[float] = None     # scalar result, when shown
    err: Optional[float] = None       # relative error against the exact result
    wrong: bool = False
    note: str = ""
    rate: str = ""                    # GF/s or GB/s
    estimated: bool = False           # not run: seconds estimated (--max-call)
    level: Optional[str] = None       # minifloat kernel level of a --levels row


@dataclass
class Report:
    opts: argparse.Namespace
    env: Env
    rows: list = field(default_factory=list)
    skipped: list = field(default_factory=list)   # (case, why)
    exact: dict = field(default_factory=dict)     # case -> exact scalar result, when shown
    started: str = ""
    load: tuple = ()


def _to_f64(r):
    """A result of any library as float64 numpy (scalar or array)."""
    if hasattr(r, "detach"):                                  # torch
        return r.detach().float().numpy().astype(np.float64)
    if type(r).__module__.startswith("numkong"):
        if getattr(r, "dtype", "float32") not in ("float32", "float64"):
            r = r.astype("float32")
        return np.asarray(r).astype(np.float64)
    return np.asarray(r).astype(np.float64)


def _judge(row, plan, result):
    """Compare a run's result with the case's exact one; keep scalar results to show."""
    if plan.expected is None:
        return
    try:
        got = _to_f64(result)
        exp = np.asarray(plan.expected, np.float64)
        scale = float(np.max(np.abs(exp))) or 1.0
        row.err = float(np.max(np.abs(got.reshape(exp.shape) - exp))) / scale
        row.wrong = not row.err <= plan.tol
        if plan.show_value and got.size == 1:
            row.value = float(got.reshape(()))
    except Exception as e:          # an odd result type: say so, don't stop
        row.note = join_notes(row.note, f"result unreadable ({type(e).__name__})")


def _variants(run, env, opts, first_mf):
    """(who, column, level, context factory, settle) for each way a run is timed.

    Changing torch's thread count costs its next call a thread-pool start: those rows
    make an untimed call first (settle)."""
    if run.who == "minifloat":
        yield "minifloat", "minifloat", None, contextlib.nullcontext, False
        if first_mf and mf.get_num_threads() > 1:
            yield "minifloat 1t", "minifloat 1t", None, lambda: mf_threads(1), False
        if opts.levels and first_mf:
            for lv in _core.kernel_levels():
                yield f"  [{lv}]", None, lv, lambda lv=lv: kernel_level(lv), False
    elif run.who == "torch" and env.torch is not None:
        for n in sorted({1, opts.torch_threads}):
            yield (f"torch {n}t", "torch 1t" if n == 1 else "torch Nt", None,
                   lambda n=n: torch_threads(env.torch, n), True)
    else:
        yield ({"numpy": "numpy f32"}.get(run.who, run.who), run.who, None,
               contextlib.nullcontext, False)


def run_case(case, env, opts, exact=None):
    """Time every run of a case; returns its rows (exact[case] gets a shown exact value)."""
    try:
        plan = case.build(env)
    except Exception as e:           # a broken setup costs the case, not the run
        return [Row(case, "minifloat", "minifloat", "(setting up the case)",
                    note=f"fails: {type(e).__name__}: {e}"[:60])]
    if plan.show_value and exact is not None and np.size(plan.expected) == 1:
        exact[case] = float(np.asarray(plan.expected))
    rows, timed = [], []
    with gc_disabled():
        for i, run in enumerate(plan.runs):           # warm-up calls, results checked
            first_mf = run.who == "minifloat" and all(r.who != "minifloat" for r in plan.runs[:i])
            for who, column, level, context, settle in _variants(run, env, opts, first_mf):
                row = Row(case, who, column, run.how, note=run.note, level=level)
                rows.append(row)
                if run.fn is None:
                    row.note = join_notes("n/a", row.note)
                    continue
                if _too_slow(row, plan, env, opts):
                    continue
                # minifloat's matmul rows: an untimed call before each batch, so
                # that the BLAS threads NumPy's sgemm row leaves spinning
                # (OpenBLAS's thread timeout) do not land in minifloat's time
                timer = Timer(run.fn, context,
                              settle or (plan.flops > 0 and who.startswith("minifloat")))
                try:
                    result = timer.warm_up(opts.min_time, opts.budget)
                except Exception as e:
                    row.note = join_notes(f"fails: {type(e).__name__}", row.note)
                    continue
                _judge(row, plan, result)
                del result
                timed.append((row, timer))
        failed = set()
        for _ in range(opts.repeat):                   # the rows take turns, batch by batch
            for k, (row, timer) in enumerate(timed):
                if k not in failed and timer.wants_more(opts.budget):
                    try:
                        timer.batch()
                    except Exception as e:             # failed after the warm-up: drop it
                        row.note = join_notes(f"fails: {type(e).__name__}", row.note)
                        failed.add(k)
    for k, (row, timer) in enumerate(timed):
        if k not in failed:
            row.seconds, row.calls, row.cpu = timer.seconds(), timer.calls(), timer.cores()
            row.rate = _rate(plan, row.seconds)
            if plan.family and plan.flops:
                key = (row.who, plan.family)
                env.gflops[key] = max(env.gflops.get(key, 0), plan.flops / row.seconds)
    # peers without a run get a line saying why: not installed, or no such operation
    present = {r.who for r in plan.runs}
    imported = {"ml_dtypes": env.ml, "torch": env.torch, "numkong": env.nk, "numpy": np}
    for peer in PEERS:
        if peer not in present:
            col = "torch 1t" if peer == "torch" else peer
            why = "not installed" if imported.get(peer) is None else "no such operation"
            rows.append(Row(case, peer, col, "", note=why))
    return rows


def _too_slow(row, plan, env, opts):
    """Estimate a call from the best rate this library reached on the case's family (the
    smaller matmul) in this run; beyond --max-call seconds, record the estimate instead."""
    rate = env.gflops.get((row.who, plan.family))
    if not (plan.family and plan.flops and rate and opts.max_call):
        return False
    est = plan.flops / rate
    if est <= opts.max_call:
        return False
    row.seconds, row.estimated = est, True
    row.note = join_notes(f"not run: est. at {rate / 1e9:.3g} GF/s", row.note)
    return True


def _rate(plan, seconds):
    if plan.flops:
        return f"{plan.flops / seconds / 1e9:.3g} GF/s"
    if plan.nbytes:
        return f"{plan.nbytes / seconds / 1e9:.3g} GB/s"
    return ""




def run(opts, progress=None):
    """Run the selected cases; returns a Report (the benchmark as a library call)."""
    env = Env(opts.n, opts.mm_sizes)
    if env.torch is not None and opts.torch_threads is None:
        opts.torch_threads = env.torch.get_num_threads()
    opts.torch_threads = opts.torch_threads or 1
    rep = Report(opts, env, started=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                 load=_loadavg())
    for case in cases.select_cases(opts.cases):
        if not case.available():
            rep.skipped.append((case, "feature not in this build"))
            continue
        if progress:
            progress(case)
        rep.rows += run_case(case, env, opts, rep.exact)
    rep.load = rep.load + _loadavg()
    return rep


def _loadavg():
    try:
        return (os.getloadavg()[0],)
    except OSError:
        return ()

# --------------------------------------------------------------------------- command line

def _sizes(s):
    v = tuple(int(x) for x in s.split(","))
    if len(v) != 2 or min(v) < 1:
        raise argparse.ArgumentTypeError("two sizes, like 512,2048")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small sizes and few repeats (seconds; for tests and CI)")
    p.add_argument("--n", type=lambda s: int(float(s)), default=None,
                   help="elements of the big arrays (default 2^24; --quick 2^14); dot uses n/16")
    p.add_argument("--matmul", dest="mm_sizes", type=_sizes, default=None, metavar="S,L",
                   help="the small and large matmul sizes (default 512,2048; --quick 32,64)")
    p.add_argument("--repeat", type=int, default=None,
                   help="max repeats per timing (default 5, --quick 2); the minimum is kept")
    p.add_argument("--cases", default=None, metavar="SUBSTR[,SUBSTR]",
                   help="only cases whose name contains one of these (see --list)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--levels", action="store_true",
                   help="also time minifloat under every available kernel level")
    p.add_argument("--max-call", type=float, default=10.0, metavar="SECONDS",
                   help="a matmul call estimated (from this run's rates) to take longer is not "
                        "run; its time is shown as ~estimate (default 10; 0: run everything)")
    p.add_argument("--torch-threads", type=int, default=None, metavar="T",
                   help="torch's multi-threaded rows (default: torch's default thread count)")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.add_argument("--numpy-overhead", action="store_true",
                   help="time plain NumPy float32 calls (np.sum, np.dot, np.mean, np.einsum, ...) "
                        "in fresh processes with and without `import minifloat`, and exit")
    p.add_argument("--write-docs", nargs="?", const=str(report.DOCS_PATH), default=None, metavar="PATH",
                   help="write the Markdown tables into docs/benchmarks.md (or PATH)")
    o = p.parse_args(argv)
    quick = o.quick
    o.n = o.n or (2**14 if quick else 2**24)
    o.mm_sizes = o.mm_sizes or ((32, 64) if quick else (512, 2048))
    o.repeat = max(1, o.repeat or (2 if quick else 5))
    o.min_time = 0.001 if quick else 0.01       # seconds per batch of calls
    o.budget = 0.02 if quick else 1.0           # seconds per row, beyond the warm-up call
    return o


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = parse_args(argv)
    if opts.numpy_overhead:
        print(overhead.render_overhead(overhead.numpy_overhead(opts.quick), opts.markdown))
        return 0
    if opts.list:
        for c in cases.CASES:
            print(f"{c.name:<24} {c.title}" + ("" if c.available() else "  [not available]"))
        return 0
    if not cases.select_cases(opts.cases):
        print(f"no case matches {opts.cases!r}; see --list", file=sys.stderr)
        return 2

    def progress(case):
        print(f"  ... {case.name}", file=sys.stderr, flush=True)

    rep = run(opts, progress if sys.stderr.isatty() else None)
    md = report.render_markdown(rep) if (opts.markdown or opts.write_docs) else None
    print(md if opts.markdown else report.render_text(rep))
    if opts.write_docs:
        report.write_docs(opts.write_docs, md, report.machine_kind())
        print(f"wrote {opts.write_docs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
