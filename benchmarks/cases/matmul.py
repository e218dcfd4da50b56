"""Matmul cases: bf16 matmul at two sizes, and the matmul of block-scaled operands."""
import numpy as np

import minifloat as mf

from ..harness import Plan, Run
from .blocks import BLOCK_BENCH


def build_matmul(m, env):
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


def _peer_runs(env, a, b, a32, b32, torch_call, numpy_what, names="a @ b"):
    """ml_dtypes' `a @ b`, torch's `torch_call` (a name in torch, or a
    (what, fn(ta, tb)) pair) and NumPy's float32 `a @ b`, for the products
    of bf16 arrays a and b (`names`: how the rows show a @ b)."""
    runs = []
    if env.ml is not None:
        am, bm = env.as_ml(a), env.as_ml(b)
        runs.append(Run("ml_dtypes", f"{names} (float32 result)", lambda: am @ bm))
    if env.torch is not None:
        ta, tb = env.as_torch(a), env.as_torch(b)
        if isinstance(torch_call, str):
            fn = getattr(env.torch, torch_call)
            torch_call = (f"torch.{torch_call}(a, b)", fn)
        what, fn = torch_call
        runs.append(Run("torch", what, lambda: fn(ta, tb)))
    runs.append(Run("numpy", f"float32 {names} ({numpy_what})", lambda: a32 @ b32))
    return runs


def build_thin(m, cols, env):
    """(m, m) @ (m,) or (m, m) @ (m, cols): a model's decode step (batch 1 to
    16), where the matrix is read once and the work is memory-bound."""
    a = env.coded("tA", m * m, "bfloat16").reshape(m, m)
    b = env.coded("tB", m * max(cols, 1), "bfloat16")
    b = b.reshape(m, cols) if cols else b.reshape(m)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = a32 @ b32
    runs = [Run("minifloat", "a @ b", lambda: a @ b)]
    runs += _peer_runs(env, a, b, a32, b32, "mm" if cols else "mv",
                       f"{'sgemm' if cols else 'sgemv'}, BLAS threads")
    return Plan(runs, expected=ref, flops=2.0 * m * m * max(cols, 1), family="matmul")


def build_linear(m, rows, env):
    """x @ W.T: a linear layer's weight W (m, m) stored C-ordered as the
    checkpoints hold it, `rows` rows of activations (a decode step)."""
    w = env.coded("tA", m * m, "bfloat16").reshape(m, m)
    x = env.coded("tB", m * rows, "bfloat16").reshape(rows, m)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    runs = [Run("minifloat", "x @ W.T", lambda: x @ w.T)]
    if env.ml is not None:
        xm, wm = env.as_ml(x), env.as_ml(w)
        runs.append(Run("ml_dtypes", "x @ W.T (float32 result)", lambda: xm @ wm.T))
    if env.torch is not None:
        tx, tw = env.as_torch(x), env.as_torch(w)
        runs.append(Run("torch", "x @ W.T", lambda: tx @ tw.T))
    runs.append(Run("numpy", "float32 x @ W.T (sgemm, BLAS threads)", lambda: x32 @ w32.T))
    return Plan(runs, expected=x32 @ w32.T, flops=2.0 * m * m * rows, family="matmul")


def build_vecmat(m, env, matmul):
    """A vector times an (m, m) matrix: np.vecmat (np.vecdot's order per
    column) or v @ a (matmul's chains), the matrix's columns read across its
    rows; memory-bound like build_thin."""
    a = env.coded("tA", m * m, "bfloat16").reshape(m, m)
    v = env.coded("tB", m, "bfloat16")
    a32, v32 = a.astype(np.float32), v.astype(np.float32)
    ref = v32 @ a32
    if matmul:
        runs = [Run("minifloat", "v @ a", lambda: v @ a)]
    else:
        runs = [Run("minifloat", "np.vecmat(v, a)", lambda: np.vecmat(v, a))]
    mv = env.torch.mv if env.torch is not None else None
    runs += _peer_runs(env, v, a, v32, a32, ("torch.mv(a.T, v)", lambda tv, ta: mv(ta.T, tv)),
                       "sgemv, BLAS threads", names="v @ a")
    return Plan(runs, expected=ref, flops=2.0 * m * m, family="matmul")


def build_stack(env):
    """A stack of 64 products of (128, 256) @ (256, 128): attention-sized
    pieces, each too small to be worth threads of its own."""
    a = env.coded("mA", 64 * 128 * 256, "bfloat16").reshape(64, 128, 256)
    b = env.coded("mB", 64 * 256 * 128, "bfloat16").reshape(64, 256, 128)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = a32 @ b32
    runs = [Run("minifloat", "a @ b", lambda: a @ b)]
    runs += _peer_runs(env, a, b, a32, b32, "bmm", "BLAS threads")
    return Plan(runs, expected=ref, flops=2.0 * 64 * 128 * 256 * 128, family="matmul")


def build_block_matmul(m, env):
    """block_matmul of MXFP8 / MXFP4 / NVFP4 operands (a along K, b quantized
    with axis=0) next to minifloat's bfloat16 matmul and NumPy's float32 sgemm
    of the same data; err is against the float32 product of the unquantized
    data, so it shows each format's quantization error."""
    a32 = env.f32("mA", m * m).reshape(m, m)
    b32 = env.f32("mB", m * m).reshape(m, m)
    ref = a32 @ b32
    runs = []
    for name in BLOCK_BENCH:
        fmt = BLOCK_BENCH[name][0]
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
