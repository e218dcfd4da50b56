"""What importing a tensor costs: minifloat.from_dlpack against NumPy's
np.from_dlpack, for a small and a large tensor, with and without the producer's
C exchange API (docs/exchange.md, "Cost of an import").

    python benchmarks/dlpack_import.py [--number 20000] [--repeat 7]

It times the installed minifloat; torch, when installed, makes the tensors.
"""
import argparse
import sys
import timeit

import numpy as np

from minifloat import _core, from_dlpack


def import_cost(number=20000, repeat=7, small=16, large=1 << 22):
    """Per-call cost in ns of importing a tensor: minifloat's from_dlpack against
    NumPy's np.from_dlpack of a float32 tensor, for a small and a large tensor,
    with and without the producer's C exchange API.  The candidates are timed in
    interleaved rounds (best of `repeat`), so a ratio taken from one result is
    fair on a shared machine.  Uses torch if it is installed."""
    cases = {}
    a_small = np.zeros(small, np.float32)
    cases["np.from_dlpack(ndarray f32)"] = (lambda: np.from_dlpack(a_small), None)
    cases["mf.from_dlpack(ndarray f32)"] = (lambda: from_dlpack(a_small), None)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tensors = {
            "f32 small": torch.zeros(small, dtype=torch.float32),
            "bf16 small": torch.zeros(small, dtype=torch.bfloat16),
            "f32 large": torch.zeros(large, dtype=torch.float32),
            "bf16 large": torch.zeros(large, dtype=torch.bfloat16),
        }
        for key in ("f32 small", "f32 large"):
            t = tensors[key]
            cases[f"np.from_dlpack(torch {key})"] = ((lambda t=t: np.from_dlpack(t)), None)
        for key, t in tensors.items():
            cases[f"mf.from_dlpack(torch {key}) C API"] = ((lambda t=t: from_dlpack(t)), True)
            cases[f"mf.from_dlpack(torch {key}) __dlpack__"] = ((lambda t=t: from_dlpack(t)),
                                                                 False)
    best = dict.fromkeys(cases, float("inf"))
    prev = _core._set_exchange_api(True)
    try:
        for _ in range(repeat):
            for name, (fn, api) in cases.items():
                if api is not None:
                    _core._set_exchange_api(api)
                t = timeit.timeit(fn, number=number) / number * 1e9
                best[name] = min(best[name], t)
    finally:
        _core._set_exchange_api(prev)
    if torch is not None:
        base = best["np.from_dlpack(torch f32 small)"]
        for key in ("bf16 small", "bf16 large"):
            for path in ("C API", "__dlpack__"):
                best[f"ratio mf {key} {path} / np f32 small"] = (
                    best[f"mf.from_dlpack(torch {key}) {path}"] / base)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--number", type=int, default=20000, help="calls per round")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved rounds; the best is kept")
    args = ap.parse_args(argv)
    for name, v in import_cost(number=args.number, repeat=args.repeat).items():
        print(f"{name:<48} {v:10.2f}" + ("" if name.startswith("ratio") else " ns"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
