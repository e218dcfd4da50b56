"""The benchmark's cases, in the order of the tables: one ``register`` call each.

The builders (``env -> Plan``, see benchmarks/harness.py) live by topic:
arrays.py (casts, elementwise, reductions, exp, DLPack import), matmul.py
(bf16 and block-scaled matmul), blocks.py (quantize / dequantize of the
block-scaled formats) and checkpoints.py (safetensors load, inspect, convert).
"""
import numpy as np

import minifloat as mf

from ..harness import Case, n_text
from . import arrays, blocks, checkpoints, matmul

CASES: list = []


def register(name, title, build, available=None, size=None):
    assert all(c.name != name for c in CASES), name
    case = Case(name, title, build)
    if available:
        case.available = available
    if size:
        case.size = size
    CASES.append(case)


def _register_all():
    for fmt, modes in (("bf16", (True, False)), ("e4m3fn", (True, False)),
                       ("e5m2", (True, False))):
        for to_fmt in (True, False):
            for astype in modes:
                a, b = ("f32", fmt) if to_fmt else (fmt, "f32")
                kind = "astype" if astype else "out"
                title = (f"cast {a} -> {b}, " +
                         ("astype (allocates)" if astype else "into a preallocated array"))
                register(f"cast {a}->{b} {kind}", title,
                         lambda env, f=fmt, t=to_fmt, s=astype: arrays.build_cast(f, t, s, env))
    register("add bf16", "elementwise add of two bf16 arrays",
             lambda env: arrays.build_binary("add", env))
    register("multiply bf16", "elementwise multiply of two bf16 arrays",
             lambda env: arrays.build_binary("multiply", env))
    register("sum bf16", "sum of a bf16 array (values in [0, 1)); result shown",
             lambda env: arrays.build_sum(False, env))
    register("sum bf16 axis=0", "sum along axis 0 of a 2-D bf16 array (values in [0, 1))",
             lambda env: arrays.build_sum(True, env))
    for op, axis in (("sum", 1), ("sum", 0), ("max", 0), ("mean", -1), ("var", -1),
                     ("argmax", -1), ("any", 0)):
        register(f"reduce bf16 {op} axis={axis}", f"{op} along axis {axis} of a 2-D bf16 array "
                 "of rows of 4096 (values in [0, 1))",
                 lambda env, o=op, ax=axis: arrays.build_reduce(o, ax, env))
    for op, title in (("cumsum", "np.cumsum along axis 1"), ("relu", "ReLU into a preallocated "
                      "array"), ("clip", "np.clip to [-1, 1] into a preallocated array"),
                      ("scale", "multiply by the scalar 2 into a preallocated array"),
                      ("prod", "prod along axis 1 (values near 1)"),
                      ("to f16", "cast to NumPy's float16"), ("from f16", "cast from float16"),
                      ("view sum", "sum along axis 0 of every other row (a view)"),
                      ("max 2 axes", "max over axes 0 and 2 of the array seen as 3-D"),
                      ("from f64", "cast from float64 (NumPy's default dtype)"),
                      ("to int32", "cast to int32"),
                      ("center", "subtract each row's max (a broadcast column)"),
                      ("masked fill", "assign 0 where a random half-True mask is set"),
                      ("cumsum0", "np.cumsum along axis 0"),
                      ("add row", "add the first row to every row (a broadcast row)"),
                      ("negative", "negate into a preallocated array"),
                      ("rint", "round to integers (half to even) into a preallocated array"),
                      ("sqrt", "square root (of |a|) into a preallocated array"),
                      ("sort", "np.sort along axis 1 (torch: sort's values and indices)"),
                      ("gram", "np.dot of 256 rows with their transpose (b given as a.T)"),
                      ("argmax0", "np.argmax along axis 0"),
                      ("clip01", "np.clip to [0, 1] of a ReLU's output (half of it zeros) "
                       "into a preallocated array"),
                      ("softplus", "softplus, np.logaddexp(a, 0.0), into a preallocated array")):
        register(f"everyday bf16 {op}", f"{title}, of a 2-D bf16 array of rows of 4096",
                 lambda env, o=op: arrays.build_everyday(o, env))
    register("dot bf16", "dot product of two bf16 vectors; result shown", arrays.build_dot,
             size=lambda env: f"n={n_text(env.n_dot)}")
    register("matmul bf16 small", "matmul of two square bf16 matrices",
             lambda env: matmul.build_matmul(env.mm_sizes[0], env),
             size=lambda env: f"{env.mm_sizes[0]}^3")
    register("matmul bf16 large", "matmul of two square bf16 matrices",
             lambda env: matmul.build_matmul(env.mm_sizes[1], env),
             size=lambda env: f"{env.mm_sizes[1]}^3")
    for cols in (0, 16):
        register("matmul bf16 x16" if cols else "matvec bf16",
                 f"(2S, 2S) bf16 matrix @ a {'(2S, 16) matrix' if cols else 'vector'} (a @ b), "
                 "S the large matmul size: a decode step",
                 lambda env, c=cols: matmul.build_thin(2 * env.mm_sizes[1], c, env),
                 size=lambda env: f"{2 * env.mm_sizes[1]}^2")
    register("linear bf16 x16", "16 rows @ the transpose of a C-ordered (2S, 2S) bf16 matrix "
             "(x @ W.T: a linear layer's decode step), S the large matmul size",
             lambda env: matmul.build_linear(2 * env.mm_sizes[1], 16, env),
             size=lambda env: f"{2 * env.mm_sizes[1]}^2")
    register("linear bf16 x64", "64 rows @ the transpose of a C-ordered (2S, 2S) bf16 matrix "
             "(x @ W.T: a linear layer's decode step for a batch of 64), S the large matmul size",
             lambda env: matmul.build_linear(2 * env.mm_sizes[1], 64, env),
             size=lambda env: f"{2 * env.mm_sizes[1]}^2")
    register("linear bf16 x512", "512 rows @ the transpose of a C-ordered (2S, 2S) bf16 "
             "matrix (x @ W.T: a linear layer's prefill of 512 tokens), S the large matmul size",
             lambda env: matmul.build_linear(2 * env.mm_sizes[1], 512, env),
             size=lambda env: f"{2 * env.mm_sizes[1]}^2")
    for mm in (False, True):
        register("v @ a bf16" if mm else "vecmat bf16",
                 f"a bf16 vector times a (2S, 2S) matrix ({'v @ a' if mm else 'np.vecmat'}), "
                 "S the large matmul size",
                 lambda env, m=mm: matmul.build_vecmat(2 * env.mm_sizes[1], env, m),
                 available=(lambda: True) if mm else (lambda: hasattr(np, "vecmat")),
                 size=lambda env: f"{2 * env.mm_sizes[1]}^2")
    register("matmul bf16 stack", "a stack of 64 bf16 products (128, 256) @ (256, 128)",
             matmul.build_stack, size=lambda env: "64x128x256")
    register("exp bf16", "exp of a bf16 array into a preallocated array", arrays.build_exp)
    register("log bf16", "log of a bf16 array (|x|) into a preallocated array",
             lambda env: arrays.build_unary("log", env))
    register("tanh bf16", "tanh of a bf16 array into a preallocated array",
             lambda env: arrays.build_unary("tanh", env))
    register("erf bf16", "scipy.special.erf of a bf16 array (float16's result type)",
             arrays.build_special_erf)
    register("dlpack import bf16", "DLPack import of a 1024-element bf16 tensor (torch's, "
             "else JAX's)",
             arrays.build_dlpack, available=arrays.dlpack_producer, size=lambda env: "")
    for name in blocks.BLOCK_BENCH:
        for dequant in (False, True):
            verb = "dequantize" if dequant else "quantize"
            register(f"{verb} {name}", f"{verb} {blocks.BLOCK_BENCH[name][0]} (float32 "
                     f"{'<-' if dequant else '->'} block-scaled), rows of 4096",
                     lambda env, nm=name, d=dequant: blocks.build_block(nm, d, env),
                     available=lambda: hasattr(mf, "quantize"))
    register("block matmul", "matmul of two block-scaled square matrices (float32 result) "
             "vs bf16 and float32 matmul",
             lambda env: matmul.build_block_matmul(env.mm_sizes[1], env),
             available=lambda: hasattr(mf, "block_matmul"),
             size=lambda env: f"{env.mm_sizes[1]}^3")
    register("ckpt load bf16", "load a bf16 safetensors checkpoint (4 tensors, N values)",
             checkpoints.build_load)
    register("ckpt inspect bf16", "`minifloat inspect` statistics of that checkpoint "
             "(min, max, mean, std, NaN, inf)", lambda env: checkpoints.build_inspect(None, env))
    register("ckpt inspect bf16 fp8", "the same with --target float8_e4m3fn (overflow, "
             "flush, precision loss, RMS error)",
             lambda env: checkpoints.build_inspect("float8_e4m3fn", env))
    register("ckpt convert bf16->fp8", "`minifloat convert --to float8_e4m3fn` of that "
             "checkpoint (file to file)", checkpoints.build_convert)
    register("ckpt inspect bf16 mxfp4", "the same with --target mxfp4 (quantize, dequantize "
             "and the error, in whole-block chunks)",
             lambda env: checkpoints.build_inspect_block("mxfp4", env))
    register("ckpt inspect bf16 nvfp4", "the same with --target nvfp4 (the tensor's amax "
             "first, then quantize, dequantize and the error)",
             lambda env: checkpoints.build_inspect_block("nvfp4", env))


_register_all()


def select_cases(pattern):
    """The cases whose name contains one of the comma-separated substrings (all: None)."""
    pats = [p.strip().lower() for p in (pattern or "").split(",") if p.strip()]
    return [c for c in CASES if not pats or any(p in c.name.lower() for p in pats)]
