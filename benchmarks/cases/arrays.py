"""Cases on arrays: casts to and from bf16/float8, elementwise add and multiply,
sums, the dot product, exp, log and tanh, and the DLPack import of a bf16 tensor."""
import numpy as np

import minifloat as mf

from .. import harness
from ..harness import Plan, Run

# Formats the cast cases use: the minifloat/ml_dtypes, torch and numkong names.
FORMATS = {
    "bf16": ("bfloat16", "bfloat16", "bf16"),
    "e4m3fn": ("float8_e4m3fn", "float8_e4m3fn", "e4m3"),
    "e5m2": ("float8_e5m2", "float8_e5m2", "e5m2"),
}


def build_cast(fmt, to_fmt, astype, env):
    """f32 -> fmt (to_fmt) or fmt -> f32; astype (allocating) or into `out`."""
    mf_name, torch_name, nk_name = FORMATS[fmt]
    n = env.n
    x32 = env.f32("x", n)
    code = env.coded("x", n, mf_name)          # the same values in fmt
    src, dst_mf = (x32, getattr(mf, mf_name)) if to_fmt else (code, np.float32)

    def np_runs(who, src, dst):
        if astype:
            return Run(who, f"x.astype({dtname(dst)})", lambda: src.astype(dst))
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
            runs.append(Run("torch", f"x.to({dtname(t_dst)})", lambda: ts.to(t_dst)))
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


def dtname(t):
    """A dtype's short name (NumPy scalar types and torch dtypes alike)."""
    return getattr(t, "__name__", None) or str(t)


def build_binary(op_name, env):
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


def build_sum(axis0, env):
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


def build_reduce(op, axis, env):
    """A reduction along one axis of a 2-D bf16 array of rows of 4096 (the
    shape of an activation or weight matrix): sum, max, mean, var (NumPy's
    ddof=0), argmax or any."""
    n = env.n
    cols = 4096 if n >= 4096 * 16 else 256
    a = env.coded("u", n, "bfloat16")
    a = a[: n - n % cols].reshape(-1, cols)
    how = f"a.{op}(axis={axis})"
    exact = getattr(a.astype(np.float64), op)(axis=axis)
    runs = [Run("minifloat", how, lambda: getattr(a, op)(axis=axis))]
    if env.ml is not None:
        am = env.as_ml(a)
        runs.append(Run("ml_dtypes", how, lambda: getattr(am, op)(axis=axis)))
    if env.torch is not None:
        ta = env.as_torch(a)
        top = {"sum": "sum", "max": "amax", "mean": "mean", "var": "var", "argmax": "argmax",
               "any": "any"}[op]
        kw = dict(correction=0) if op == "var" else {}
        runs.append(Run("torch", f"a.{top}(dim={axis}{', correction=0' if kw else ''})",
                        lambda: getattr(ta, top)(dim=axis, **kw)))
    a32 = a.astype(np.float32)
    runs.append(Run("numpy", f"float32 {how}", lambda: getattr(a32, op)(axis=axis)))
    return Plan(runs, expected=exact, show_value=False, nbytes=a.size * 2)


def build_everyday(op, env):
    """Everyday operations of a model's activations, of a 2-D bf16 array of rows
    of 4096 (standard normal values; near 1 for prod): cumsum along the rows,
    ReLU and clip into a preallocated array, multiply by a scalar, prod along
    the rows, the casts to and from NumPy's float16, the sum of every other row
    (a view) along axis 0, the max over axes 0 and 2 of the array seen as
    (rows / 16, 64, 64), the casts from float64 and to int32, each row minus
    its max (NumPy buffers the broadcast column), a masked assignment (NumPy
    calls the copy loop once a run of True), cumsum down the columns, the
    first row added to every row (a broadcast row), negation, rounding to
    integers and the square root (of |a|) into a preallocated array, np.dot
    of 256 rows with their transpose, argmax down the columns, the rows
    sorted, a ReLU's output (half of it zeros) clipped to [0, 1], and softplus
    (np.logaddexp with the scalar 0; torch's with an array of zeros)."""
    n = env.n
    cols = 4096 if n >= 4096 * 16 else 256
    bf16 = mf.bfloat16
    a = env.coded("x", n, "bfloat16")[: n - n % cols].reshape(-1, cols)
    if op == "prod":
        a = (1 + env.f32("x", n)[: a.size] / 256).astype(bf16).reshape(a.shape)
    if op == "sqrt":
        a = np.abs(a)
    if op == "clip01":
        a = np.maximum(a, 0)        # ReLU's output: half of it zeros
    a32 = a.astype(np.float32)
    o, o32 = np.empty_like(a), np.empty_like(a32)
    torch = env.torch
    ta = env.as_torch(a) if torch is not None else None
    to = torch.empty_like(ta) if torch is not None else None
    tz = torch.zeros_like(ta) if torch is not None else None
    am = env.as_ml(a) if env.ml is not None else None
    om = np.empty_like(am) if am is not None else None
    two = bf16(2)
    # op -> (how, minifloat/ml_dtypes/numpy call on (x, out), torch's how and call)
    table = {
        "cumsum": ("np.cumsum(a, axis=1)", lambda x, out: np.cumsum(x, axis=1),
                   "torch.cumsum(a, 1)", lambda: torch.cumsum(ta, 1)),
        "relu": ("np.maximum(a, 0, out=o)", lambda x, out: np.maximum(x, 0, out=out),
                 "torch.clamp_min(a, 0, out=o)", lambda: torch.clamp_min(ta, 0, out=to)),
        "clip": ("np.clip(a, -1, 1, out=o)", lambda x, out: np.clip(x, -1, 1, out=out),
                 "torch.clamp(a, -1, 1, out=o)", lambda: torch.clamp(ta, -1, 1, out=to)),
        "clip01": ("np.clip(a, 0, 1, out=o)", lambda x, out: np.clip(x, 0, 1, out=out),
                   "torch.clamp(a, 0, 1, out=o)", lambda: torch.clamp(ta, 0, 1, out=to)),
        "softplus": ("np.logaddexp(a, 0.0, out=o)",
                     lambda x, out: np.logaddexp(x, 0.0, out=out),
                     "torch.logaddexp(a, zeros, out=o)",
                     lambda: torch.logaddexp(ta, tz, out=to)),
        "scale": ("np.multiply(a, 2, out=o)", lambda x, out: np.multiply(x, two.astype(x.dtype)
                                                                          if x.dtype != np.float32
                                                                          else 2, out=out),
                  "torch.mul(a, 2, out=o)", lambda: torch.mul(ta, 2, out=to)),
        "prod": ("a.prod(axis=1)", lambda x, out: x.prod(axis=1),
                 "a.prod(dim=1)", lambda: ta.prod(dim=1)),
        "to f16": ("a.astype(np.float16)", lambda x, out: x.astype(np.float16),
                   "a.half()", lambda: ta.half()),
        "view sum": ("a[::2].sum(axis=0)", lambda x, out: x[::2].sum(axis=0),
                     "a[::2].sum(0)", lambda: ta[::2].sum(0)),
        "max 2 axes": ("a3.max(axis=(0, 2))", lambda x, out: x.reshape(-1, 64, 64).max(axis=(0, 2)),
                       "a3.amax((0, 2))", lambda: ta.reshape(-1, 64, 64).amax((0, 2))),
        "to int32": ("a.astype(np.int32)", lambda x, out: x.astype(np.int32),
                     "a.int()", lambda: ta.int()),
        "center": ("a - a.max(axis=1, keepdims=True)",
                   lambda x, out: x - x.max(axis=1, keepdims=True),
                   "a - a.amax(1, keepdim=True)", lambda: ta - ta.amax(1, keepdim=True)),
        "cumsum0": ("np.cumsum(a, axis=0)", lambda x, out: np.cumsum(x, axis=0),
                    "torch.cumsum(a, 0)", lambda: torch.cumsum(ta, 0)),
        "add row": ("np.add(a, a[:1], out=o)", lambda x, out: np.add(x, x[:1], out=out),
                    "torch.add(a, a[:1], out=o)", lambda: torch.add(ta, ta[:1], out=to)),
        "negative": ("np.negative(a, out=o)", lambda x, out: np.negative(x, out=out),
                     "torch.neg(a, out=o)", lambda: torch.neg(ta, out=to)),
        "rint": ("np.rint(a, out=o)", lambda x, out: np.rint(x, out=out),
                 "torch.round(a, out=o)", lambda: torch.round(ta, out=to)),
        "sqrt": ("np.sqrt(a, out=o)", lambda x, out: np.sqrt(x, out=out),
                 "torch.sqrt(a, out=o)", lambda: torch.sqrt(ta, out=to)),
        "argmax0": ("np.argmax(a, axis=0)", lambda x, out: np.argmax(x, axis=0),
                    "a.argmax(0)", lambda: ta.argmax(0)),
    }
    if op == "gram":
        # np.dot of two matrices: (256, cols) @ (cols, 256), b given as a.T
        # (ml_dtypes' np.dot is NumPy's per-element dotfunc loop: left out)
        r = min(256, a.shape[0])
        x, x32 = a[:r], a32[:r]
        runs = [Run("minifloat", "np.dot(x, x.T)", lambda: np.dot(x, x.T))]
        if torch is not None:
            tx = ta[:r]
            runs.append(Run("torch", "x @ x.T", lambda: tx @ tx.T))
        runs.append(Run("numpy", "float32 np.dot(x, x.T)", lambda: np.dot(x32, x32.T)))
        return Plan(runs, nbytes=x.size * 2)
    if op == "sort":
        # rows of 4096 sorted (ml_dtypes' np.sort calls a compare function a
        # comparison, seconds a call: left out)
        runs = [Run("minifloat", "np.sort(a, axis=1)", lambda: np.sort(a, axis=1))]
        if torch is not None:
            runs.append(Run("torch", "torch.sort(a, dim=1)", lambda: torch.sort(ta, dim=1)))
        runs.append(Run("numpy", "float32 np.sort(a, axis=1)", lambda: np.sort(a32, axis=1)))
        return Plan(runs, nbytes=a.size * 2)
    if op == "masked fill":
        mask = env.f32("m", a.size).reshape(a.shape) > 0
        tm = torch.from_numpy(mask) if torch is not None else None
        runs = [Run("minifloat", "o[mask] = 0", lambda: o.__setitem__(mask, 0))]
        if om is not None:
            runs.append(Run("ml_dtypes", "o[mask] = 0", lambda: om.__setitem__(mask, 0)))
        if torch is not None:
            runs.append(Run("torch", "o.masked_fill_(mask, 0)", lambda: to.masked_fill_(tm, 0)))
        runs.append(Run("numpy", "float32 o[mask] = 0", lambda: o32.__setitem__(mask, 0)))
        ou = o.view(np.uint16)
        runs.append(Run("numpy", "uint16 of the same bytes o[mask] = 0",
                        lambda: ou.__setitem__(mask, 0)))
        return Plan(runs, nbytes=a.size * 2)
    if op in ("from f16", "from f64"):
        # casts into bfloat16 from NumPy's float16 (h) or float64 (d)
        wide = op == "from f64"
        v, src = ("d", a.astype(np.float64)) if wide else ("h", a.astype(np.float16))
        runs = [Run("minifloat", f"{v}.astype(bfloat16)", lambda: src.astype(bf16))]
        if env.ml is not None:
            mlb = env.ml.bfloat16
            runs.append(Run("ml_dtypes", f"{v}.astype(bfloat16)", lambda: src.astype(mlb)))
        if torch is not None:
            ts = torch.from_numpy(src)
            runs.append(Run("torch", f"{v}.bfloat16()", lambda: ts.bfloat16()))
        runs.append(Run("numpy", f"{v}.astype(np.float32)", lambda: src.astype(np.float32)))
        return Plan(runs, nbytes=a.size * (10 if wide else 4))
    how, call, thow, tcall = table[op]
    runs = [Run("minifloat", how, lambda: call(a, o))]
    if am is not None:
        runs.append(Run("ml_dtypes", how, lambda: call(am, om)))
    if torch is not None:
        runs.append(Run("torch", thow, tcall))
    runs.append(Run("numpy", f"float32 {how}", lambda: call(a32, o32)))
    # bytes read and written per element of a
    per = {"prod": 2, "view sum": 1, "max 2 axes": 2, "to int32": 6, "argmax0": 2}.get(op, 4)
    return Plan(runs, nbytes=a.size * per)


def build_dot(env):
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


def build_unary(name, env):
    """np.<name> of a bf16 array into a preallocated array (log: of |x|)."""
    n = env.n
    a = env.coded("x", n, "bfloat16")
    if name == "log":
        a = np.abs(a)
    o = np.empty_like(a)
    f = getattr(np, name)
    runs = [Run("minifloat", f"np.{name}(a, out=o)", lambda: f(a, out=o))]
    if env.ml is not None:
        am = env.as_ml(a)
        om = np.empty_like(am)
        runs.append(Run("ml_dtypes", f"np.{name}(a, out=o)", lambda: f(am, out=om)))
    if env.torch is not None:
        ta = env.as_torch(a)
        to = env.torch.empty_like(ta)
        tf = getattr(env.torch, name)
        runs.append(Run("torch", f"torch.{name}(a, out=o)", lambda: tf(ta, out=to)))
    a32 = a.astype(np.float32)
    o32 = np.empty_like(a32)
    runs.append(Run("numpy", f"float32 np.{name}(a, out=o)", lambda: f(a32, out=o32)))
    if env.nk is not None:
        runs.append(Run("numkong", f"no {name}", None))
    return Plan(runs, nbytes=n * 4)


def build_exp(env):
    return build_unary("exp", env)


def build_special_erf(env):
    """scipy.special.erf of a bf16 array: float16's result type (float64 with
    scipy 1.17, float32 with 1.18: scipy's loop on the widened values;
    minifloat: its table of every code)."""
    try:
        import scipy.special as sp
    except ImportError:
        return Plan([Run("minifloat", "scipy is not installed", None)])
    n = env.n
    a = env.coded("x", n, "bfloat16")
    runs = [Run("minifloat", "scipy.special.erf(a)", lambda: sp.erf(a))]
    if env.ml is not None:
        am = env.as_ml(a)
        runs.append(Run("ml_dtypes", "scipy.special.erf(a)", lambda: sp.erf(am)))
    if env.torch is not None:
        ta = env.as_torch(a)
        runs.append(Run("torch", "torch.erf(a) (bf16 out)", lambda: env.torch.erf(ta)))
    a32 = a.astype(np.float32)
    runs.append(Run("numpy", "float32 scipy.special.erf(a)", lambda: sp.erf(a32)))
    if env.nk is not None:
        runs.append(Run("numkong", "no erf", None))
    return Plan(runs, nbytes=n * 10)


def dlpack_producer():
    """The DLPack case needs a producer of bf16 tensors: torch or JAX."""
    import importlib.util
    return hasattr(mf, "from_dlpack") and any(
        importlib.util.find_spec(m) is not None for m in ("torch", "jax"))


def build_dlpack(env):
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
    elif (jax := harness.import_peer("jax")) is not None:
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

