"""What importing minifloat costs NumPy: plain NumPy float32 calls on small arrays,
timed in fresh processes with and without `import minifloat`
(`python -m benchmarks --numpy-overhead`)."""
import os
import sys

import numpy as np

from .harness import cpu_model


_OVERHEAD_CHILD = r"""
import json, sys, time
import numpy as np
if sys.argv[1] == "1":
    import minifloat
rng = np.random.default_rng(0)
out = {}
for n in (16, 1024):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    m = rng.standard_normal((8, n // 8)).astype(np.float32)
    calls = {
        "np.sum(a)": lambda: np.sum(a),
        "a.sum()": lambda: a.sum(),
        "np.mean(a)": lambda: np.mean(a),
        "np.dot(a, b)": lambda: np.dot(a, b),
        "np.dot(m, m.T)": lambda: np.dot(m, m.T),
        "np.einsum('i,i->', a, b)": lambda: np.einsum("i,i->", a, b),
        "a + b": lambda: a + b,
        "np.max(a)": lambda: np.max(a),
    }
    reps = int(sys.argv[2])
    for name, fn in calls.items():
        best = float("inf")
        for _ in range(reps):
            k = 2000
            t = time.perf_counter()
            for _ in range(k):
                fn()
            best = min(best, (time.perf_counter() - t) / k)
        out[f"{name} [n={n}]"] = best
print(json.dumps(out))
"""


def numpy_overhead(quick=False, rounds=None):
    """Times of plain NumPy float32 calls on small arrays in fresh processes,
    without and with `import minifloat` (alternating, the minimum of each):
    {call: (seconds without, seconds with)}."""
    import json
    import subprocess

    rounds = rounds or (1 if quick else 8)
    reps = "2" if quick else "7"
    best = {}
    for _ in range(rounds):
        for with_mf in ("0", "1"):
            res = subprocess.run([sys.executable, "-c", _OVERHEAD_CHILD, with_mf, reps],
                                 capture_output=True, text=True, check=True, cwd=os.path.expanduser("~"))
            for k, v in json.loads(res.stdout).items():
                pair = best.setdefault(k, [float("inf"), float("inf")])
                pair[int(with_mf)] = min(pair[int(with_mf)], v)
    return {k: tuple(v) for k, v in best.items()}


def render_overhead(times, markdown=False):
    head = ("call (float32)", "without minifloat", "with minifloat", "ratio")
    rows = [(k, f"{a * 1e9:.0f} ns", f"{b * 1e9:.0f} ns", f"{b / a:.2f}") for k, (a, b) in times.items()]
    lines = [f"# plain NumPy calls with and without `import minifloat` "
             f"(NumPy {np.__version__}, {cpu_model()}; ratio = with / without)"]
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|---|---|---|---|"]
        lines += ["| `" + r[0] + "` | " + " | ".join(r[1:]) + " |" for r in rows]
    else:
        w = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
        fmt = "  ".join(f"{{:<{x}}}" for x in w)
        lines += [fmt.format(*head)] + [fmt.format(*r) for r in rows]
    return "\n".join(lines)
