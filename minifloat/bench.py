"""minifloat bench: minifloat against numpy float32, ml_dtypes, torch and numkong.

    minifloat bench                     the default run (N = 2^24, under ~2 minutes)
    minifloat bench --quick             tiny sizes and few repeats (tests, CI)
    minifloat bench --cases sum         only the cases whose name contains "sum"
    minifloat bench --levels            minifloat rows under every kernel level too
    minifloat bench --markdown          the tables as Markdown
    minifloat bench --write-docs        also put the tables into docs/benchmarks.md
    minifloat bench --numpy-overhead    plain NumPy float32 calls with and without
                                        `import minifloat` (fresh processes)

Each case is one operation done by every library that can do it, on the same
values.  A time is the minimum over repeats of the mean of a batch of calls;
"speed-up" is the row's time divided by minifloat's time in the same run, so
above 1 means minifloat is faster.  Compare ratios from one run, never
absolute times across runs.

Adding a case: write a builder ``env -> Plan`` listing one ``Run`` per library
(see the builders below) and register it with ``_register``; a builder leaves
out what is not installed (the table then says "not installed") and lists a
``Run`` with ``fn=None`` for what a library cannot do ("n/a").
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib
import math
import os
import platform
import re
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

import minifloat as mf
from minifloat import _core

WIDTH = 100                       # the text output fits this many columns
PEERS = ("ml_dtypes", "torch", "numpy", "numkong")
DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
DOCS_BEGIN = "<!-- minifloat bench: begin generated -->"
DOCS_END = "<!-- minifloat bench: end generated -->"


# --------------------------------------------------------------------------- cases

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
    size: Callable = lambda env: f"N = {_n(env.n)}"   # shown in the titles

    def label(self, env):
        """The name in the summary, with the size when it is not N."""
        s = self.size(env)
        return self.name if not s or s.startswith("N =") else f"{self.name} {s}"


CASES: list = []


def _register(name, title, build, available=None, size=None):
    assert all(c.name != name for c in CASES), name
    case = Case(name, title, build)
    if available:
        case.available = available
    if size:
        case.size = size
    CASES.append(case)


# Formats the cast cases use: the minifloat/ml_dtypes, torch and numkong names.
FORMATS = {
    "bf16": ("bfloat16", "bfloat16", "bf16"),
    "e4m3fn": ("float8_e4m3fn", "float8_e4m3fn", "e4m3"),
    "e5m2": ("float8_e5m2", "float8_e5m2", "e5m2"),
}


def _build_cast(fmt, to_fmt, astype, env):
    """f32 -> fmt (to_fmt) or fmt -> f32; astype (allocating) or into `out`."""
    mf_name, torch_name, nk_name = FORMATS[fmt]
    n = env.n
    x32 = env.f32("x", n)
    code = env.coded("x", n, mf_name)          # the same values in fmt
    src, dst_mf = (x32, getattr(mf, mf_name)) if to_fmt else (code, np.float32)

    def np_runs(who, src, dst):
        if astype:
            return Run(who, f"x.astype({_dtname(dst)})", lambda: src.astype(dst))
        out = np.empty(src.shape, dst)
        return Run(who, "copyto(out, x, casting='unsafe')",
                   lambda: np.copyto(out, src, casting="unsafe"))

    runs = [np_runs("minifloat", src, dst_mf)]
    if env.ml is not None:
        ml_t = getattr(env.ml, mf_name)
        ml_src, ml_dst = (x32, ml_t) if to_fmt else (env.as_ml(code), np.float32)
        runs.append(np_runs("ml_dtypes", ml_src, ml_dst))
    if env.torch is not None:
        torch = env.torch
        t_fmt = getattr(torch, torch_name)
        ts = torch.from_numpy(x32) if to_fmt else env.as_torch(code)
        t_dst = t_fmt if to_fmt else torch.float32
        if astype:
            runs.append(Run("torch", f"x.to({_dtname(t_dst)})", lambda: ts.to(t_dst)))
        else:
            tout = torch.empty(n, dtype=t_dst)
            runs.append(Run("torch", "out.copy_(x)", lambda: tout.copy_(ts)))
    out32 = np.empty_like(x32)
    runs.append(Run("numpy", "f32 memcpy: np.copyto(y32, x32)",
                    lambda: np.copyto(out32, x32), note="reference"))
    if env.nk is not None:
        nk = env.nk
        ns = x32 if to_fmt else env.as_nk(code, nk_name)
        n_dst = nk_name if to_fmt else "float32"
        if astype:
            runs.append(Run("numkong", f"nk.astype(x, '{n_dst}')", lambda: nk.astype(ns, n_dst)))
        else:
            nout = env.as_nk(np.empty(n, dst_mf), nk_name) if to_fmt else np.empty(n, np.float32)
            runs.append(Run("numkong", f"nk.astype(x, '{n_dst}', out=out)",
                            lambda: nk.astype(ns, n_dst, out=nout)))
    return Plan(runs, nbytes=n * (4 + code.itemsize))


def _dtname(t):
    return getattr(t, "__name__", None) or str(t)


def _build_binary(op_name, env):
    n = env.n
    a, b = env.coded("x", n, "bfloat16"), env.coded("y", n, "bfloat16")
    ufunc = getattr(np, op_name)
    how = f"np.{op_name}(a, b, out=o)"
    o = np.empty_like(a)
    runs = [Run("minifloat", how, lambda: ufunc(a, b, out=o))]
    if env.ml is not None:
        am, bm = env.as_ml(a), env.as_ml(b)
        om = np.empty_like(am)
        runs.append(Run("ml_dtypes", how, lambda: ufunc(am, bm, out=om)))
    if env.torch is not None:
        torch = env.torch
        ta, tb = env.as_torch(a), env.as_torch(b)
        to = torch.empty_like(ta)
        top = getattr(torch, "add" if op_name == "add" else "mul")
        runs.append(Run("torch", f"torch.{top.__name__}(a, b, out=o)",
                        lambda: top(ta, tb, out=to)))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    o32 = np.empty_like(a32)
    runs.append(Run("numpy", f"float32 {how}", lambda: ufunc(a32, b32, out=o32)))
    # the memory limit: the same bytes through NumPy's uint16 add
    au, bu, ou = a.view(np.uint16), b.view(np.uint16), np.empty(n, np.uint16)
    runs.append(Run("numpy u16", "uint16 np.add(a, b, out=o)", lambda: np.add(au, bu, out=ou),
                    note="same bytes: the memory limit"))
    if env.nk is not None:
        nk = env.nk
        na, nb, no = env.as_nk(a, "bf16"), env.as_nk(b, "bf16"), env.as_nk(o.copy(), "bf16")
        nop = getattr(nk, op_name)
        runs.append(Run("numkong", f"nk.{op_name}(a, b, out=o)", lambda: nop(na, nb, out=no)))
    return Plan(runs, nbytes=n * 6)


def _build_sum(axis0, env):
    """Sum of uniform [0, 1) values: bfloat16 accumulation goes visibly wrong."""
    n = env.n
    a = env.coded("u", n, "bfloat16")
    if axis0:
        cols = 256 if n >= 4096 * 256 else 8
        a = a[: n - n % cols].reshape(-1, cols)
    exact = a.astype(np.float64).sum(axis=0 if axis0 else None)
    ax = dict(axis=0) if axis0 else {}
    how = "a.sum(axis=0)" if axis0 else "a.sum()"
    runs = [Run("minifloat", how, lambda: a.sum(**ax))]
    if env.ml is not None:
        am = env.as_ml(a)
        runs.append(Run("ml_dtypes", how, lambda: am.sum(**ax)))
    if env.torch is not None:
        ta = env.as_torch(a)
        tax = dict(dim=0) if axis0 else {}
        runs.append(Run("torch", "a.sum(dim=0)" if axis0 else "a.sum()", lambda: ta.sum(**tax)))
    a32 = a.astype(np.float32)
    runs.append(Run("numpy", f"float32 {how}", lambda: a32.sum(**ax)))
    if env.nk is not None:
        na = env.as_nk(a, "bf16")
        runs.append(Run("numkong", f"nk.sum(a{', axis=0' if axis0 else ''})",
                        lambda: env.nk.sum(na, **ax)))
    return Plan(runs, expected=exact, show_value=not axis0, nbytes=a.size * 2)


def _build_dot(env):
    n = env.n_dot
    a, b = env.coded("x", n, "bfloat16"), env.coded("y", n, "bfloat16")
    exact = float(np.dot(a.astype(np.float64), b.astype(np.float64)))
    runs = [Run("minifloat", "np.vecdot(a, b)", lambda: np.vecdot(a, b)),
            Run("minifloat", "a @ b", lambda: a @ b),
            Run("minifloat", "np.dot(a, b)", lambda: np.dot(a, b))]
    if env.ml is not None:
        am, bm = env.as_ml(a), env.as_ml(b)
        runs += [Run("ml_dtypes", "a @ b (float32 result)", lambda: am @ bm),
                 Run("ml_dtypes", "np.dot(a, b) (bf16 result)", lambda: np.dot(am, bm))]
    if env.torch is not None:
        ta, tb = env.as_torch(a), env.as_torch(b)
        runs.append(Run("torch", "torch.dot(a, b)", lambda: env.torch.dot(ta, tb)))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    runs.append(Run("numpy", "float32 np.dot(a, b)", lambda: np.dot(a32, b32)))
    if env.nk is not None:
        na, nb = env.as_nk(a, "bf16"), env.as_nk(b, "bf16")
        runs.append(Run("numkong", "nk.dot(a, b)", lambda: env.nk.dot(na, nb)))
    return Plan(runs, expected=exact, show_value=True, flops=2.0 * n, nbytes=4.0 * n)


def _build_matmul(m, env):
    a = env.coded("mA", m * m, "bfloat16").reshape(m, m)
    b = env.coded("mB", m * m, "bfloat16").reshape(m, m)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = a32 @ b32
    runs = [Run("minifloat", "a @ b", lambda: a @ b)]
    if env.ml is not None:
        am, bm = env.as_ml(a), env.as_ml(b)
        runs.append(Run("ml_dtypes", "a @ b (float32 result)", lambda: am @ bm))
        if m <= 512:
            runs.append(Run("ml_dtypes", "np.dot(a, b) (bf16 result)", lambda: np.dot(am, bm)))
    if env.torch is not None:
        ta, tb = env.as_torch(a), env.as_torch(b)
        runs.append(Run("torch", "torch.mm(a, b)", lambda: env.torch.mm(ta, tb)))
    runs.append(Run("numpy", "float32 a @ b (BLAS threads)", lambda: a32 @ b32))
    if env.nk is not None:
        nk = env.nk
        na, nbt = env.as_nk(a, "bf16"), env.as_nk(np.ascontiguousarray(b.T), "bf16")
        runs.append(Run("numkong", "dots_packed(a, dots_pack(b.T))",
                        lambda: nk.dots_packed(na, nk.dots_pack(nbt))))
    return Plan(runs, expected=ref, flops=2.0 * m ** 3, family="matmul")


def _build_exp(env):
    n = env.n
    a = env.coded("x", n, "bfloat16")
    o = np.empty_like(a)
    runs = [Run("minifloat", "np.exp(a, out=o)", lambda: np.exp(a, out=o))]
    if env.ml is not None:
        am = env.as_ml(a)
        om = np.empty_like(am)
        runs.append(Run("ml_dtypes", "np.exp(a, out=o)", lambda: np.exp(am, out=om)))
    if env.torch is not None:
        ta = env.as_torch(a)
        to = env.torch.empty_like(ta)
        runs.append(Run("torch", "torch.exp(a, out=o)", lambda: env.torch.exp(ta, out=to)))
    a32 = a.astype(np.float32)
    o32 = np.empty_like(a32)
    runs.append(Run("numpy", "float32 np.exp(a, out=o)", lambda: np.exp(a32, out=o32)))
    if env.nk is not None:
        runs.append(Run("numkong", "no exp", None))
    return Plan(runs, nbytes=n * 4)


def _dlpack_producer():
    """The DLPack case needs a producer of bf16 tensors: torch or JAX."""
    import importlib.util
    return hasattr(mf, "from_dlpack") and any(
        importlib.util.find_spec(m) is not None for m in ("torch", "jax"))


def _build_dlpack(env):
    n = 1024
    runs = []
    if env.torch is not None:
        torch = env.torch
        t16 = torch.from_numpy(env.f32("x", n)).to(torch.bfloat16)
        t32 = t16.float()
        runs.append(Run("minifloat", "minifloat.from_dlpack(t)", lambda: mf.from_dlpack(t16)))
        runs.append(Run("ml_dtypes", "no bf16 DLPack import", None))
        runs.append(Run("torch", "the producer: makes the tensor", None))
        runs.append(Run("numpy", "np.from_dlpack(float32 t)", lambda: np.from_dlpack(t32)))
        if env.nk is not None:
            runs.append(Run("numkong", "nk.from_dlpack(t)", lambda: env.nk.from_dlpack(t16),
                            note="into nk.Tensor"))
    elif (jax := _import_peer("jax")) is not None:
        # no torch (e.g. a Python torch has no wheel for): JAX makes the tensor
        jnp = jax.numpy
        t32 = jnp.asarray(env.f32("x", n))
        t16 = t32.astype(jnp.bfloat16)
        runs.append(Run("minifloat", "minifloat.from_dlpack(t)", lambda: mf.from_dlpack(t16),
                        note="t from JAX"))
        runs.append(Run("ml_dtypes", "no bf16 DLPack import", None))
        runs.append(Run("numpy", "np.from_dlpack(float32 t)", lambda: np.from_dlpack(t32)))
        if env.nk is not None:
            runs.append(Run("numkong", "nk.from_dlpack(t)", lambda: env.nk.from_dlpack(t16),
                            note="into nk.Tensor"))
    return Plan(runs)


# ---- block-scaled formats: the spec in vectorized NumPy (any element cast) and
# torchao's eager torch code, next to minifloat.quantize

_BLOCK_BENCH = {   # name: (format, element name (minifloat/ml_dtypes, torch), emax, max)
    "mxfp8": ("mxfp8_e4m3", "float8_e4m3fn", 8, 448.0),
    "mxfp4": ("mxfp4", "float4_e2m1fn", 2, 6.0),
    "nvfp4": ("nvfp4", "float4_e2m1fn", 2, 6.0),
}


def _np_pack4(c):
    c = c.reshape(-1, 2)
    return c[:, 0] | (c[:, 1] << 4)


def _np_unpack4(b):
    out = np.empty((b.size, 2), np.uint8)
    out[:, 0] = b & 0xF
    out[:, 1] = b >> 4
    return out.reshape(-1)


def np_block_quantize(x, fmt, elem_dtype, emax, max_pos, e4m3_dtype=None):
    """The obvious vectorized NumPy code (x: float32, size a multiple of the
    block): OCP MX floor scales / TransformerEngine's NVFP4 scales (cast to
    e4m3_dtype), the elements cast to elem_dtype (minifloat's or ml_dtypes')."""
    f32 = np.float32
    if fmt == "nvfp4":
        xb = x.reshape(-1, 16)
        amax = np.max(np.abs(xb), axis=1)
        s_enc = f32(448 * 6) / np.max(amax)
        sdb = np.minimum(amax * (s_enc * f32(1 / 6)), f32(448))
        scales = sdb.astype(e4m3_dtype)
        with np.errstate(divide="ignore"):
            rcp = np.minimum(f32(1) / (scales.astype(f32) * (f32(1) / s_enc)),
                             np.finfo(f32).max)
        v = np.clip(xb * rcp[:, None], -max_pos, max_pos)
        return _np_pack4(v.astype(elem_dtype).view(np.uint8)), scales, f32(1) / s_enc
    xb = x.reshape(-1, 32)
    amax = np.max(np.abs(xb), axis=1)
    e = np.clip(((amax.view(np.int32) >> 23) & 0xFF) - 127 - emax, -127, 127)
    scale = np.ldexp(f32(1), e).astype(f32)
    v = np.clip(xb / scale[:, None], -max_pos, max_pos)
    codes = v.astype(elem_dtype).view(np.uint8)
    if np.dtype(elem_dtype).itemsize == 1 and max_pos == 6.0:
        codes = _np_pack4(codes)
    return codes, (e + 127).astype(np.uint8), None


def np_block_dequantize(codes, scales, fmt, elem_dtype, tensor_scale):
    f32 = np.float32
    if fmt in ("mxfp4", "nvfp4"):
        codes = _np_unpack4(codes)
    vals = codes.view(elem_dtype).astype(f32)
    if fmt == "nvfp4":
        return ((vals.reshape(-1, 16) * scales.astype(f32)[:, None]) * tensor_scale).reshape(-1)
    s = np.ldexp(f32(1), scales.astype(np.int32) - 127).astype(f32)
    return (vals.reshape(-1, 32) * s[:, None]).reshape(-1)



def _torch_block_quantize(torch, x, fmt, tdt, emax, max_pos):
    """torchao-style eager torch (FLOOR scales; float4 elements have no torch cast:
    the scaled values are what the kernel would round)"""
    if fmt == "nvfp4":
        xb = x.reshape(-1, 16)
        amax = xb.abs().amax(1)
        s_enc = 448.0 * 6.0 / amax.max()
        scales = torch.clamp(amax * (s_enc / 6.0), max=448.0).to(torch.float8_e4m3fn)
        rcp = 1.0 / (scales.float() / s_enc)
        return torch.clamp(xb * rcp[:, None], -max_pos, max_pos), scales
    xb = x.reshape(-1, 32)
    amax = xb.abs().amax(1)
    e = torch.clamp(((amax.view(torch.int32) >> 23) & 0xFF) - 127 - emax, -127, 127)
    scale = torch.exp2(e.float())
    v = torch.clamp(xb / scale[:, None], -max_pos, max_pos)
    if tdt is not None:
        v = v.to(tdt)
    return v, scale.to(torch.float8_e8m0fnu)


def _build_block(name, dequant, env):
    fmt, elem, emax, max_pos = _BLOCK_BENCH[name]
    n = env.n - env.n % 32
    x = env.f32("x", n)[:n]
    x2 = x.reshape(-1, 4096) if n % 4096 == 0 else x.reshape(1, -1)
    q = mf.quantize(x2, fmt)
    runs = []
    if dequant:
        runs.append(Run("minifloat", "q.dequantize()", q.dequantize))
    else:
        runs.append(Run("minifloat", f"minifloat.quantize(x, '{fmt}')",
                        lambda: mf.quantize(x2, fmt)))

    def np_run(who, lib, note):
        edt, sdt = getattr(lib, elem), lib.float8_e4m3fn
        if dequant:
            codes, scales, ts = np_block_quantize(x, fmt, edt, emax, max_pos, sdt)
            return Run(who, "NumPy spec code, element cast",
                       lambda: np_block_dequantize(codes, scales, fmt, edt, ts), note=note)
        return Run(who, "NumPy spec code, element cast",
                   lambda: np_block_quantize(x, fmt, edt, emax, max_pos, sdt), note=note)

    if env.ml is not None:
        runs.append(np_run("ml_dtypes", env.ml, "ml_dtypes casts"))
    if env.torch is not None:
        torch = env.torch
        tx = torch.from_numpy(x)
        tdt = getattr(torch, elem, None) if elem != "float4_e2m1fn" else None
        if dequant:
            v, sc = _torch_block_quantize(torch, tx, fmt, tdt, emax, max_pos)
            if fmt == "nvfp4":
                runs.append(Run("torch", "(v.float() * scale.float()) * ts",
                                lambda: (v.float() * sc.float()[:, None]) * 0.5))
            else:
                runs.append(Run("torch", "v.float() * scale.float()",
                                lambda: v.float() * sc.float()[:, None]))
        else:
            runs.append(Run("torch", "torchao-style eager code",
                            lambda: _torch_block_quantize(torch, tx, fmt, tdt, emax, max_pos),
                            note="" if tdt is not None else "no fp4 cast: ends scaled"))
    runs.append(np_run("numpy", mf, "minifloat casts"))
    if env.nk is not None:
        runs.append(Run("numkong", "no block-scaled formats", None))
    return Plan(runs, nbytes=n * 4 + n * (1 if name == "mxfp8" else 0.5))


def _build_block_matmul(m, env):
    """block_matmul of MXFP8 / MXFP4 / NVFP4 operands (a along K, b quantized
    with axis=0) next to minifloat's bfloat16 matmul and NumPy's float32 sgemm
    of the same data; err is against the float32 product of the unquantized
    data, so it shows each format's quantization error."""
    a32 = env.f32("mA", m * m).reshape(m, m)
    b32 = env.f32("mB", m * m).reshape(m, m)
    ref = a32 @ b32
    runs = []
    for name in _BLOCK_BENCH:
        fmt = _BLOCK_BENCH[name][0]
        qa, qb = mf.quantize(a32, fmt), mf.quantize(b32, fmt, axis=0)
        runs.append(Run("minifloat", f"qa @ qb, {fmt}",
                        lambda qa=qa, qb=qb: qa @ qb))
    a, b = env.coded("mA", m * m, "bfloat16").reshape(m, m), env.coded("mB", m * m,
                                                                        "bfloat16").reshape(m, m)
    runs.append(Run("minifloat", "bf16 a @ b", lambda: a @ b))
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no block-scaled formats", None))
    if env.torch is not None:
        # torch 2.13's _scaled_mm on the CPU takes tensor-wise or row-wise
        # float32 scales only (MX / NVFP4 block scales: "Invalid scaling
        # configuration"); its CPU bf16 mm is in the "matmul bf16" cases
        runs.append(Run("torch", "_scaled_mm: no block scales on CPU", None))
    runs.append(Run("numpy", "float32 a @ b (BLAS threads)", lambda: a32 @ b32))
    if env.nk is not None:
        runs.append(Run("numkong", "no block-scaled formats", None))
    return Plan(runs, expected=ref, tol=0.5, flops=2.0 * m ** 3)

# ---- checkpoints (issue 8): a bf16 safetensors file of N values in 4 tensors,
# written once per run into a temporary folder (page cache warm)

def _ckpt(env):
    k = ("ckpt", env.n)
    if k not in env._cache:
        import tempfile

        from .io import safetensors as mst
        d = tempfile.TemporaryDirectory(prefix="minifloat-bench-")
        x = env.coded("x", env.n - env.n % 4, "bfloat16").reshape(4, -1)
        path = os.path.join(d.name, "model.safetensors")
        mst.save(path, {f"layers.{i}.weight": x[i] for i in range(4)}, metadata={"format": "pt"})
        env._cache[k] = (d, path)            # the folder lives as long as the Env
    return env._cache[k][1]


def _st_peer(env, sub):
    """safetensors.numpy / safetensors.torch, or None."""
    try:
        return importlib.import_module(f"safetensors.{sub}")
    except Exception:
        return None


def _build_ckpt_load(env):
    from .io import safetensors as mst
    path = _ckpt(env)
    runs = [Run("minifloat", "minifloat.safetensors.load(p) (mmap)", lambda: mst.load(path),
                note="views of the mapping")]
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no checkpoint reader", None))
    snp = _st_peer(env, "numpy")
    if snp is not None:
        runs.append(Run("numpy", "safetensors.numpy.load_file(p)", lambda: snp.load_file(path),
                        note="copies"))
    stt = _st_peer(env, "torch") if env.torch is not None else None
    if stt is not None:
        runs.append(Run("torch", "safetensors.torch.load_file(p)", lambda: stt.load_file(path)))
    return Plan(runs, nbytes=os.path.getsize(path))


def _torch_loaded(env, path):
    """The checkpoint as torch tensors in memory (not views of a mapping)."""
    stt = _st_peer(env, "torch")
    return {k: v.clone() for k, v in stt.load_file(path).items()}


def _build_ckpt_inspect(target, env):
    from .io import checkpoint
    from .io import safetensors as mst
    path = _ckpt(env)
    how = "checkpoint.inspect_file(p" + (f", {target!r})" if target else ")")
    runs = [Run("minifloat", how, lambda: checkpoint.inspect_file(path, target),
                note="reads the file")]
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no checkpoint statistics", None))
    runs.append(Run("numpy", "no bf16 dtype", None))
    if env.torch is not None and _st_peer(env, "torch") is not None:
        torch = env.torch
        loaded = _torch_loaded(env, path)
        f8 = torch.float8_e4m3fn
        r = 2.0 ** -2                                   # 2^(-p/2), p = 4

        def torch_stats():
            out = []
            for x in loaded.values():
                xf = x.float()                  # count_nonzero: faster than .sum() of a bool
                row = [xf.min(), xf.max(), xf.mean(), xf.std(),
                       torch.count_nonzero(xf.isnan()), torch.count_nonzero(xf.isinf())]
                if target:
                    y = x.to(f8).float()
                    fin = y.isfinite()
                    e = torch.where(fin, y - xf, 0.0)
                    ftz = torch.count_nonzero((y == 0) & (xf != 0))
                    row += [torch.count_nonzero(~fin), ftz,
                            torch.count_nonzero(e.abs() > r * xf.abs()) - ftz,
                            (e * e).sum(dtype=torch.float64),
                            (torch.where(fin, xf, 0.0) ** 2).sum(dtype=torch.float64)]
                out.append([float(v) for v in row])
            return out

        runs.append(Run("torch", "the same statistics on the loaded tensors",
                        torch_stats, note="in memory, float32"))
    # the memory yardstick: NumPy reading the same bytes once
    views = [v.view(np.uint16) for v in mst.load(path).values()]
    runs.append(Run("numpy u16", "uint16 .sum() of the same bytes", lambda: [v.sum() for v in
                                                                            views],
                    note="reading the bytes: memory speed"))
    return Plan(runs, nbytes=os.path.getsize(path))


def _build_ckpt_inspect_block(fmt, env):
    from .io import checkpoint
    from .io import safetensors as mst
    path = _ckpt(env)
    runs = [Run("minifloat", f"checkpoint.inspect_file(p, {fmt!r})",
                lambda: checkpoint.inspect_file(path, fmt), note="reads the file")]
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no block-scaled formats", None))
    runs.append(Run("numpy", "no bf16 dtype", None))
    views = [v.view(np.uint16) for v in mst.load(path).values()]
    runs.append(Run("numpy u16", "uint16 .sum() of the same bytes", lambda: [v.sum() for v in
                                                                            views],
                    note="reading the bytes: memory speed"))
    return Plan(runs, nbytes=os.path.getsize(path))


def _build_ckpt_convert(env):
    from .io import checkpoint
    path = _ckpt(env)
    out = os.path.join(os.path.dirname(path), "out-mf.safetensors")
    runs = [Run("minifloat", "checkpoint.convert_file(p, o, 'float8_e4m3fn')",
                lambda: checkpoint.convert_file(path, out, "float8_e4m3fn"),
                note="+ RMS error")]
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no checkpoint writer", None))
    stt = _st_peer(env, "torch") if env.torch is not None else None
    if stt is not None:
        torch = env.torch
        out_t = os.path.join(os.path.dirname(path), "out-torch.safetensors")

        def torch_convert():
            d = stt.load_file(path)
            stt.save_file({k: v.to(torch.float8_e4m3fn) for k, v in d.items()}, out_t,
                          metadata={"format": "pt"})

        runs.append(Run("torch", ".to(float8_e4m3fn) + safetensors.torch.save_file",
                        torch_convert))
    return Plan(runs, nbytes=os.path.getsize(path))


def _register_all():
    for fmt, modes in (("bf16", (True, False)), ("e4m3fn", (True, False)),
                       ("e5m2", (True, False))):
        for to_fmt in (True, False):
            for astype in modes:
                a, b = ("f32", fmt) if to_fmt else (fmt, "f32")
                kind = "astype" if astype else "out"
                title = (f"cast {a} -> {b}, " +
                         ("astype (allocates)" if astype else "into a preallocated array"))
                _register(f"cast {a}->{b} {kind}", title,
                          lambda env, f=fmt, t=to_fmt, s=astype: _build_cast(f, t, s, env))
    _register("add bf16", "elementwise add of two bf16 arrays",
              lambda env: _build_binary("add", env))
    _register("multiply bf16", "elementwise multiply of two bf16 arrays",
              lambda env: _build_binary("multiply", env))
    _register("sum bf16", "sum of a bf16 array (values in [0, 1)); result shown",
              lambda env: _build_sum(False, env))
    _register("sum bf16 axis=0", "sum along axis 0 of a 2-D bf16 array (values in [0, 1))",
              lambda env: _build_sum(True, env))
    _register("dot bf16", "dot product of two bf16 vectors; result shown", _build_dot,
              size=lambda env: f"n={_n(env.n_dot)}")
    _register("matmul bf16 small", "matmul of two square bf16 matrices",
              lambda env: _build_matmul(env.mm_sizes[0], env),
              size=lambda env: f"{env.mm_sizes[0]}^3")
    _register("matmul bf16 large", "matmul of two square bf16 matrices",
              lambda env: _build_matmul(env.mm_sizes[1], env),
              size=lambda env: f"{env.mm_sizes[1]}^3")
    _register("exp bf16", "exp of a bf16 array into a preallocated array", _build_exp)
    _register("dlpack import bf16", "DLPack import of a 1024-element bf16 tensor (torch's, "
              "else JAX's)",
              _build_dlpack, available=_dlpack_producer, size=lambda env: "")
    for name in _BLOCK_BENCH:
        for dequant in (False, True):
            verb = "dequantize" if dequant else "quantize"
            _register(f"{verb} {name}", f"{verb} {_BLOCK_BENCH[name][0]} (float32 "
                      f"{'<-' if dequant else '->'} block-scaled), rows of 4096",
                      lambda env, nm=name, d=dequant: _build_block(nm, d, env),
                      available=lambda: hasattr(mf, "quantize"))
    _register("block matmul", "matmul of two block-scaled square matrices (float32 result) "
              "vs bf16 and float32 matmul", lambda env: _build_block_matmul(env.mm_sizes[1], env),
              available=lambda: hasattr(mf, "block_matmul"),
              size=lambda env: f"{env.mm_sizes[1]}^3")
    _register("ckpt load bf16", "load a bf16 safetensors checkpoint (4 tensors, N values)",
              _build_ckpt_load)
    _register("ckpt inspect bf16", "`minifloat inspect` statistics of that checkpoint "
              "(min, max, mean, std, NaN, inf)", lambda env: _build_ckpt_inspect(None, env))
    _register("ckpt inspect bf16 fp8", "the same with --target float8_e4m3fn (overflow, "
              "flush, precision loss, RMS error)",
              lambda env: _build_ckpt_inspect("float8_e4m3fn", env))
    _register("ckpt convert bf16->fp8", "`minifloat convert --to float8_e4m3fn` of that "
              "checkpoint (file to file)", _build_ckpt_convert)
    _register("ckpt inspect bf16 mxfp4", "the same with --target mxfp4 (quantize, dequantize "
              "and the error, in whole-block chunks)",
              lambda env: _build_ckpt_inspect_block("mxfp4", env))


_register_all()


# --------------------------------------------------------------------------- environment

def _import_peer(name):
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
        self.ml = _import_peer("ml_dtypes")
        self.torch = _import_peer("torch")
        self.nk = _import_peer("numkong")
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

    def warm_up(self, min_time):
        """One call (pages, caches); sizes the batches; returns the call's result."""
        with self.context():
            t0 = time.perf_counter()
            result = self.fn()
            self.first = time.perf_counter() - t0
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
        row.note = _join(row.note, f"result unreadable ({type(e).__name__})")


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
                    row.note = _join("n/a", row.note)
                    continue
                if _too_slow(row, plan, env, opts):
                    continue
                # minifloat's matmul rows: an untimed call before each batch, so
                # that the BLAS threads NumPy's sgemm row leaves spinning
                # (OpenBLAS's thread timeout) do not land in minifloat's time
                timer = Timer(run.fn, context,
                              settle or (plan.flops > 0 and who.startswith("minifloat")))
                try:
                    result = timer.warm_up(opts.min_time)
                except Exception as e:
                    row.note = _join(f"fails: {type(e).__name__}", row.note)
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
                        row.note = _join(f"fails: {type(e).__name__}", row.note)
                        failed.add(k)
    for k, (row, timer) in enumerate(timed):
        if k not in failed:
            row.seconds, row.calls, row.cpu = timer.seconds(), timer.calls(), timer.cores()
            row.rate = _rate(plan, row.seconds)
            if plan.family and plan.flops:
                key = (row.who, plan.family)
                env.gflops[key] = max(env.gflops.get(key, 0), plan.flops / row.seconds)
    # peers that did not import get a line saying so
    present = {r.who for r in plan.runs}
    for peer in PEERS:
        if peer not in present:
            col = "torch 1t" if peer == "torch" else peer
            rows.append(Row(case, peer, col, "", note="not installed"))
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
    row.note = _join(f"not run: est. at {rate / 1e9:.3g} GF/s", row.note)
    return True


def _rate(plan, seconds):
    if plan.flops:
        return f"{plan.flops / seconds / 1e9:.3g} GF/s"
    if plan.nbytes:
        return f"{plan.nbytes / seconds / 1e9:.3g} GB/s"
    return ""


def _join(*parts):
    """Comma-join the non-empty parts."""
    return ", ".join(p for p in parts if p)


def select_cases(pattern):
    pats = [p.strip().lower() for p in (pattern or "").split(",") if p.strip()]
    return [c for c in CASES if not pats or any(p in c.name.lower() for p in pats)]


def run(opts, progress=None):
    """Run the selected cases; returns a Report (the benchmark as a library call)."""
    env = Env(opts.n, opts.mm_sizes)
    if env.torch is not None and opts.torch_threads is None:
        opts.torch_threads = env.torch.get_num_threads()
    opts.torch_threads = opts.torch_threads or 1
    rep = Report(opts, env, started=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                 load=_loadavg())
    for case in select_cases(opts.cases):
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


# --------------------------------------------------------------------------- formatting

def _ms(s, estimated=False):
    if s is None:
        return "-"
    if estimated:
        return "~" + _ms(s)
    ms = s * 1e3
    for limit, fmt in ((100, "{:.0f}"), (10, "{:.1f}"), (1, "{:.2f}"), (0.01, "{:.3f}")):
        if ms >= limit:
            return fmt.format(ms)
    return f"{ms:.2g}"


def _ratio(r):
    if r is None or not math.isfinite(r):
        return "-"
    for limit, fmt in ((100, "{:.0f}x"), (10, "{:.1f}x"), (0.1, "{:.2f}x"), (0.001, "{:.3f}x")):
        if r >= limit:
            return fmt.format(r)
    return f"{r:.0e}x"


def _base(rows, case):
    """minifloat's row of a case (its first row at the default level)."""
    for r in rows:
        if r.case is case and r.column == "minifloat":
            return r
    return None


def _speedup(row, base):
    if row.seconds is None or base is None or base.seconds is None:
        return None
    return row.seconds / base.seconds


def _speedup_cell(row, base):
    """The speed-up as printed: "~" when a time in it is an estimate."""
    text = _ratio(_speedup(row, base))
    return "~" + text if text != "-" and (row.estimated or base.estimated) else text


def _cases_of(rows):
    seen = []
    for r in rows:
        if r.case not in seen:
            seen.append(r.case)
    return seen


def _detail_note(row):
    bits = []
    if row.value is not None:
        bits.append(f"= {row.value:.6g}")
    elif row.err is not None:
        bits.append(f"err {row.err:.1g}")
    if row.wrong:
        bits.append("WRONG")
    if row.calls == 1:
        bits.append("1 call")
    return _join(*bits, row.rate, row.note)


def _summary_columns(rep):
    cols = ["ml_dtypes", "torch 1t"]
    if rep.opts.torch_threads > 1:
        cols.append("torch Nt")
    cols += ["numpy", "numkong"]
    # the columns only some cases have, last (uint16: the memory limit of add and
    # multiply; minifloat on one thread: what its threads bring)
    return cols + [c for c in ("numpy u16", "minifloat 1t") if any(r.column == c
                                                                    for r in rep.rows)]


def _col_title(rep, col):
    return {"torch Nt": f"torch {rep.opts.torch_threads}t", "numpy": "np f32",
            "minifloat 1t": "mf 1t", "numpy u16": "u16"}.get(col, col)


def _summary_cell(rep, case, col):
    rows = [r for r in rep.rows if r.case is case and r.column == col]
    if not rows:
        return "-"
    r = rows[0]                                   # the first listed way is the canonical one
    if r.seconds is None:
        return "n/a" if "not installed" not in r.note else "absent"
    return _speedup_cell(r, _base(rep.rows, case)) + ("!" if r.wrong else "")


def _title(rep, case):
    size = case.size(rep.env)
    return f"{case.title}" + (f" ({size})" if size else "")


def _n(n):
    p = int(math.log2(n)) if n > 0 else 0
    return f"2^{p}" if 2 ** p == n else f"{n:,}"


def header_lines(rep):
    """The run's context, one fact a line (wrapped to WIDTH in the text output)."""
    o, env = rep.opts, rep.env
    cpu, ncpu = _cpu_model(), os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = ncpu
    vers = dict(env.versions())
    lines = [
        f"minifloat bench, {rep.started}: N = {_n(o.n)}, dot n = {_n(env.n_dot)}, matmul "
        f"{o.mm_sizes[0]}^3 and {o.mm_sizes[1]}^3; min of up to {o.repeat} repeats",
        f"machine: {cpu}, {ncpu} logical CPUs ({usable} usable), {platform.system()} "
        f"{platform.release().split('-')[0]}, Python {platform.python_version()}",
        f"load average at start/end: {' / '.join(f'{x:.2f}' for x in rep.load) or '?'}"
        " (other work on the machine adds noise)",
        f"minifloat {vers['minifloat']} kernel level {_core.get_kernel_level()} (of "
        f"{', '.join(_core.kernel_levels())}); numpy {vers['numpy']}",
        f"ml_dtypes {vers['ml_dtypes']}, torch {vers['torch']}, numkong {vers['numkong']}",
        f"threads: minifloat rows at its {mf.get_num_threads()} (minifloat.get_num_threads(); "
        f"mf 1t: at 1); torch rows at 1 and {o.torch_threads} threads; numpy f32 matmul uses "
        "its BLAS's default threads; numkong calls run on one",
        "cores busy (CPU time / wall time over the timed calls): " + _cores_busy(rep),
    ]
    return lines


def _cores_busy(rep):
    out = []
    for col in ["minifloat"] + _summary_columns(rep):
        v = [r.cpu * r.seconds for r in rep.rows if r.column == col and math.isfinite(r.cpu)]
        w = [r.seconds for r in rep.rows if r.column == col and math.isfinite(r.cpu)]
        if w:
            out.append(f"{_col_title(rep, col)} {sum(v) / sum(w):.1f}")
    return ", ".join(out) or "?"


def _cpu_model():
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
    except OSError:
        pass
    return model + flags


def _detail_table(rep):
    """The detailed table: (title, None) per case, then (row, cells) per library and way."""
    out = []
    for case in _cases_of(rep.rows):
        base = _base(rep.rows, case)
        out.append((_title(rep, case), None))
        first = True
        for r in (r for r in rep.rows if r.case is case):
            is_base = first and r.column == "minifloat"
            first = False
            out.append((r, (r.who, r.how, _ms(r.seconds, r.estimated),
                            "" if is_base else _speedup_cell(r, base), _detail_note(r))))
    return out


def _level_table(rep):
    levels = _core.kernel_levels()
    rows = []
    for case in _cases_of(rep.rows):
        t = {r.level: r for r in rep.rows if r.case is case and r.level}
        rows.append([case.label(rep.env)] + [_ms(t[lv].seconds, t[lv].estimated) if lv in t
                                             else "-" for lv in levels])
    return ["case"] + list(levels), rows


def _summary_table(rep):
    cols = _summary_columns(rep)
    head = ["case", "minifloat ms"] + [_col_title(rep, c) for c in cols]
    rows = []
    for case in _cases_of(rep.rows):
        base = _base(rep.rows, case)
        rows.append([case.label(rep.env), _ms(base.seconds, base.estimated) if base else "-"] +
                    [_summary_cell(rep, case, c) for c in cols])
    return head, rows


def _result_lines(rep):
    """The scalar results next to each other, for the cases that show them."""
    out = []
    for case, exact in rep.exact.items():
        firsts = {}                           # the first row of each library
        for r in rep.rows:
            if r.case is case and r.column and r.column != "torch Nt":
                firsts.setdefault(r.column, r)
        got = [f"{r.who} {r.value:.6g}" + (" (WRONG)" if r.wrong else "")
               for r in firsts.values() if r.value is not None]
        out.append(f"{case.name} results: exact {exact:.6g}; " + ", ".join(got))
    return out


LEGEND = [
    "speed-up = that library's time / minifloat's time in this run (above 1: minifloat faster).",
    "n/a: the library cannot do it; absent: not installed; !: wrong result (see details).",
    "For casts the np f32 column is a plain float32 copy (memcpy), the physical reference.",
    "u16: NumPy's uint16 add (add, multiply) or .sum() (ckpt inspect) of the same bytes: memory speed.",
    "mf 1t: minifloat on one thread (minifloat.set_num_threads(1)).",
]
ESTIMATE_LEGEND = "~: not run, estimated from the library's best GF/s in this run (--max-call)."
LEVELS_LEGEND = "Kernel-level rows: speed-up = that level's time / the default level's time."


def _legend(rep):
    return (LEGEND + [ESTIMATE_LEGEND] * any(r.estimated for r in rep.rows)
            + [LEVELS_LEGEND] * bool(rep.opts.levels))


def _fmt_cols(head, rows, align):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    # two spaces between columns, one where that would pass WIDTH (wide cells)
    sep = "  " if sum(widths) + 2 * (len(widths) - 1) <= WIDTH else " "

    def line(vals):
        return sep.join(str(v).ljust(w) if a == "<" else str(v).rjust(w)
                         for v, w, a in zip(vals, widths, align)).rstrip()
    return [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]


def render_text(rep):
    out = [w for line in header_lines(rep)
           for w in textwrap.wrap(line, WIDTH, subsequent_indent="    ")] + [""]
    head, rows = _summary_table(rep)
    out.append("minifloat speed-up vs each library (one run)")
    out += _fmt_cols(head, rows, "<" + ">" * (len(head) - 1))
    out += _legend(rep)
    out += [w for line in _result_lines(rep)
            for w in textwrap.wrap(line, WIDTH, subsequent_indent="    ")] + [""]
    if rep.opts.levels:
        head, rows = _level_table(rep)
        out.append("minifloat ms at each kernel level")
        out += _fmt_cols(head, rows, "<" + ">" * (len(head) - 1)) + [""]
    out.append("details: who, what is timed, ms (min), speed-up of minifloat, result / notes")
    for row, vals in _detail_table(rep):
        if vals is None:
            out.append(row[:WIDTH])
            continue
        who, how, ms, ratio, note = vals
        line = f"  {who:<14.14} {how:<32.32} {ms:>8} {ratio:>7}  {note}"
        out.append(line if len(line) <= WIDTH else line[:WIDTH - 1] + "~")
    for case, why in rep.skipped:
        out.append(f"skipped: {case.name} ({why})")
    return "\n".join(out)


def _md_table(head, rows):
    esc = [[str(x).replace("|", "\\|") for x in r] for r in [head] + rows]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in esc[1:]]


def render_markdown(rep):
    out = [f"- {line}" for line in header_lines(rep)] + [""]
    head, rows = _summary_table(rep)
    out += _md_table(head, rows) + [""]
    out += [f"{line}  " for line in _legend(rep) + _result_lines(rep)] + [""]
    if rep.opts.levels:
        out += ["minifloat ms at each kernel level:", ""]
        out += _md_table(*_level_table(rep)) + [""]
    drows, last = [], None
    for row, vals in _detail_table(rep):
        if vals is None:
            continue
        label = row.case.label(rep.env)
        who = f"minifloat {vals[0].strip()}" if row.level else vals[0]
        drows.append([label if label != last else "", who] + list(vals[1:]))
        last = label
    out += ["<details><summary>Details: every way each library was timed, with results</summary>",
            ""]
    out += _md_table(["case", "who", "what is timed", "ms", "speed-up", "result / notes"], drows)
    out += ["", "</details>"]
    for case, why in rep.skipped:
        out.append(f"\nskipped: {case.name} ({why})")
    return "\n".join(out)


# The kinds of CPU docs/benchmarks.md keeps a table for, by best kernel level
MACHINE_KINDS = {
    "serial": "a CPU without a SIMD level",
    "avx2": "x86 with AVX2 and without AVX-512 (e.g. AMD Zen 3)",
    "avx512": "x86 with AVX-512 and without AVX-512 BF16",
    "avx512bf16": "x86 with AVX-512 BF16 (e.g. AMD Zen 4, Intel Sapphire Rapids)",
}


def machine_kind():
    """The best kernel level this CPU and build run: the key of its table in the docs."""
    return _core.kernel_levels()[-1]


def _markers(key):
    return (f"<!-- minifloat bench: begin generated, {key} -->",
            f"<!-- minifloat bench: end generated, {key} -->")


def write_docs(path, markdown, key=None):
    """Put a run's Markdown into the docs, between the markers of its kind of CPU
    (`key`, see MACHINE_KINDS) so that each kind keeps its own table; a file with
    only the older unkeyed markers has that block replaced; a kind not there yet
    gets a section of its own at the end.  Written atomically."""
    path = Path(path)
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    begin, end = _markers(key) if key else (DOCS_BEGIN, DOCS_END)
    if begin not in text and DOCS_BEGIN in text and DOCS_END in text:
        pre, rest = text.split(DOCS_BEGIN, 1)
        text = pre + begin + rest.split(DOCS_END, 1)[0] + end + rest.split(DOCS_END, 1)[1]
    block = f"{begin}\n{markdown}\n{end}"
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        post = rest.split(end, 1)[1]
        text = pre + block + post
    else:
        title = MACHINE_KINDS.get(key, f"kernel level {key}") if key else "this machine"
        text = text.rstrip("\n") + f"\n\n### Latest run on {title}\n\n" + block + "\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- command line

def _sizes(s):
    v = tuple(int(x) for x in s.split(","))
    if len(v) != 2 or min(v) < 1:
        raise argparse.ArgumentTypeError("two sizes, like 512,2048")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(prog="minifloat bench", description=__doc__,
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
    p.add_argument("--write-docs", nargs="?", const=str(DOCS_PATH), default=None, metavar="PATH",
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
    if argv[:1] == ["--"]:        # "minifloat bench -- --quick": the CLI passes the "--" on
        argv = argv[1:]
    opts = parse_args(argv)
    if opts.numpy_overhead:
        print(render_overhead(numpy_overhead(opts.quick), opts.markdown))
        return 0
    if opts.list:
        for c in CASES:
            print(f"{c.name:<24} {c.title}" + ("" if c.available() else "  [not available]"))
        return 0
    if not select_cases(opts.cases):
        print(f"no case matches {opts.cases!r}; see --list", file=sys.stderr)
        return 2

    def progress(case):
        print(f"  ... {case.name}", file=sys.stderr, flush=True)

    rep = run(opts, progress if sys.stderr.isatty() else None)
    md = render_markdown(rep) if (opts.markdown or opts.write_docs) else None
    print(md if opts.markdown else render_text(rep))
    if opts.write_docs:
        write_docs(opts.write_docs, md, machine_kind())
        print(f"wrote {opts.write_docs}", file=sys.stderr)
    return 0



# ------------------------------------------- what importing minifloat costs NumPy

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
             f"(NumPy {np.__version__}, {_cpu_model()}; ratio = with / without)"]
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|---|---|---|---|"]
        lines += ["| `" + r[0] + "` | " + " | ".join(r[1:]) + " |" for r in rows]
    else:
        w = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
        fmt = "  ".join(f"{{:<{x}}}" for x in w)
        lines += [fmt.format(*head)] + [fmt.format(*r) for r in rows]
    return "\n".join(lines)

if __name__ == "__main__":
    sys.exit(main())
