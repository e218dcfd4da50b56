"""What every case is made of: Run / Plan / Case, and the Env that holds the sizes,
the peers that imported and the input data (made once, shared by the cases).

Adding a case: write a builder ``env -> Plan`` listing one ``Run`` per library
(see benchmarks/cases/) and register it in benchmarks/cases/__init__.py; a builder
leaves out what is not installed (the table then says "not installed") and lists a
``Run`` with ``fn=None`` for what a library cannot do ("n/a").
"""
from __future__ import annotations

import importlib
import math
import platform
import re
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

import minifloat as mf

PEERS = ("ml_dtypes", "torch", "numpy", "numkong")


@dataclass
class Run:
    """One library's way of doing a case."""
    who: str                          # "minifloat" or one of PEERS
    how: str                          # what is timed, short
    fn: Optional[Callable[[], object]]  # None: the library cannot do it (how says why)
    note: str = ""


@dataclass
class Plan:
    """What a case builder returns: the runs, and how to judge their results."""
    runs: list
    expected: object = None           # exact result (scalar or array), None: no check
    tol: float = 1e-2                 # max |result - expected| / max |expected|
    show_value: bool = False          # print scalar results next to the times
    flops: float = 0.0                # per call, for GF/s
    nbytes: float = 0.0               # memory traffic per call, for GB/s
    family: str = ""                  # cases of one family (sizes) share flop-rate estimates


@dataclass(eq=False)
class Case:
    name: str                         # short and unique; --cases matches it
    title: str                        # one line, for the detailed table
    build: Callable                   # Env -> Plan
    available: Callable = lambda: True  # False: the feature is not there yet
    size: Callable = lambda env: f"N = {n_text(env.n)}"   # shown in the titles

    def label(self, env):
        """The name in the summary, with the size when it is not N."""
        s = self.size(env)
        return self.name if not s or s.startswith("N =") else f"{self.name} {s}"


def n_text(n):
    """2^k when n is a power of two, else n with thousands separators."""
    p = int(math.log2(n)) if n > 0 else 0
    return f"2^{p}" if 2 ** p == n else f"{n:,}"


def join_notes(*parts):
    """Comma-join the non-empty parts."""
    return ", ".join(p for p in parts if p)


def import_peer(name):
    """A peer library's module, or None (the tests replace this to run without peers)."""
    try:
        return importlib.import_module(name)
    except Exception:          # absent, or broken: either way the peer is "not installed"
        return None


class Env:
    """Sizes, the peers that imported, and the input data (made once, shared)."""

    def __init__(self, n, mm_sizes):
        self.n = n
        self.n_dot = max(n // 16, 16)
        self.mm_sizes = mm_sizes
        self.ml = import_peer("ml_dtypes")
        self.torch = import_peer("torch")
        self.nk = import_peer("numkong")
        self._cache = {}
        self.gflops = {}           # (who, family) -> best flop rate so far (for --max-call)

    def f32(self, key, n):
        """float32 data: "u" is uniform in [0, 1), the rest standard normal."""
        k = ("f32", key, n)
        if k not in self._cache:
            rng = np.random.default_rng(sum(map(ord, key)))      # fixed seed per key
            x = rng.random(n, np.float32) if key == "u" else rng.standard_normal(n, np.float32)
            self._cache[k] = x
        return self._cache[k]

    def coded(self, key, n, fmt):
        """The data of `f32(key, n)` in a minifloat format (minifloat's cast)."""
        k = (fmt, key, n)
        if k not in self._cache:
            self._cache[k] = self.f32(key, n).astype(getattr(mf, fmt))
        return self._cache[k]

    # Views of a minifloat array's codes in the peers' types (same bits, no copy).
    @staticmethod
    def _bits(a):
        return a.view(np.uint16 if a.itemsize == 2 else np.uint8)

    def as_ml(self, a):
        return self._bits(a).view(getattr(self.ml, a.dtype.type.__name__))

    def as_torch(self, a):
        dtype = getattr(self.torch, a.dtype.type.__name__)
        try:
            return self.torch.from_numpy(self._bits(a)).view(dtype)
        except Exception:        # an older torch without uint16: go through float32
            return self.torch.from_numpy(a.astype(np.float32)).to(dtype)

    def as_nk(self, a, nk_name):
        return self.nk.from_pointer(a.ctypes.data, a.shape, nk_name, owner=a)

    def versions(self):
        out = [("minifloat", mf.__version__), ("numpy", np.__version__)]
        for name, mod in (("ml_dtypes", self.ml), ("torch", self.torch), ("numkong", self.nk)):
            out.append((name, _version(name, mod)))
        return out


def _version(name, mod):
    if mod is None:
        return "not installed"
    v = getattr(mod, "__version__", None)
    if v is None:
        try:
            from importlib.metadata import version
            v = version(name)
        except Exception:
            v = "?"
    return str(v)


def cpu_model():
    """The CPU's model name and its SIMD extensions that matter here."""
    model = platform.processor() or platform.machine()
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        m = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        model = m.group(1).strip() if m else model
        fl = re.search(r"^flags\s*:\s*(.+)$", info, re.M)
        have = set(fl.group(1).split()) if fl else set()
        isa = [n for n, f in (("AVX2", "avx2"), ("AVX-512", "avx512f"),
                              ("AVX-512 BF16", "avx512_bf16"), ("AMX", "amx_bf16")) if f in have]
        flags = f" ({', '.join(isa)})" if isa else ""
        fam = re.search(r"^cpu family\s*:\s*(\d+)$", info, re.M)
        if "AuthenticAMD" in info and fam:
            # AMD's marketing names share "AMD EPYC": the family tells the core
            core = {25: "Zen 4" if "avx512f" in have else "Zen 3", 26: "Zen 5"}.get(
                int(fam.group(1)), f"family {fam.group(1)}")
            model += f" {core}"
    except OSError:
        pass
    return model + flags

