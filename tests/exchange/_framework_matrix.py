"""The framework matrix: run in a subprocess, one framework per process.

    python tests/_framework_matrix.py FRAMEWORK     # torch, jax, mlx, tensorflow, paddle

prints one JSON list of cells.  A cell is one (dtype, direction, layout, route):

- direction "import": a framework tensor becomes an ndarray; "export": an ndarray
  (64-byte aligned, writeable) becomes a framework tensor.
- layout "contiguous" (8 x 8) or "strided" (every other column: ``t[:, ::2]``);
- route "minifloat": ``minifloat.from_dlpack(t)`` / the framework's DLPack import
  of ``minifloat.dlpack(a)``; route "numpy" (NumPy >= 2.5 only, the array
  itself): ``np.from_dlpack(t)`` / the framework's import of ``a``.

The result is "zero-copy" (a write through one side was read on the other, or for
read-only imports two imports share memory), "copy", or "refused: <error>".  The
values are compared bit for bit (through float32, which holds every value of
these formats exactly) in every cell; a mismatch is "WRONG: ...", which
tests/test_framework_matrix.py fails on.  The frameworks are imported only here:
TensorFlow and Paddle crash when both are loaded in one process.
"""
import importlib.machinery
import json
import sys

import numpy as np

import minifloat as mf
from minifloat import _core

FORMATS = {f["name"]: f for f in _core.formats()}
NUMPY_REGISTRY = hasattr(np.dtypes, "register_dlpack_dtype")


def aligned(a, alignment=64):
    """A copy of `a` whose data is `alignment`-byte aligned (TensorFlow aborts on
    anything else, JAX copies)."""
    buf = np.empty(a.nbytes + alignment, np.uint8)
    off = (-buf.ctypes.data) % alignment
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def values(name, n=64):
    """n finite values of the format, as float32 (exact), zeros of both signs and
    the largest and smallest included where the format has them."""
    f = FORMATS[name]
    codes = np.arange(1 << f["bits"], dtype=np.uint32).astype(f"u{f['itemsize']}")
    v = codes.view(f["dtype"]).astype(np.float32)
    v = v[np.isfinite(v)]
    idx = np.linspace(0, len(v) - 1, n).round().astype(int)
    return v[idx].reshape(8, n // 8)


def short(err):
    line = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {line[:160]}"


# --------------------------------------------------------------- frameworks

class Torch:
    def __init__(self):
        import torch
        self.m = torch
        self.version = torch.__version__

    def dtypes(self):
        return [n for n in FORMATS if FORMATS[n]["kind"] == "float"
                and isinstance(getattr(self.m, n, None), self.m.dtype)]

    def from_f32(self, f, name):
        return self.m.from_numpy(np.ascontiguousarray(f)).to(getattr(self.m, name))

    def to_f32(self, t):
        return t.float().numpy()

    def fw_import(self, x):
        return self.m.from_dlpack(x)

    def producer(self, t):
        return t


class Jax:
    def __init__(self):
        import jax
        import jax.dlpack
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
        self.m, self.jnp = jax, jnp
        self.version = jax.__version__

    def dtypes(self):
        out = []
        for n in FORMATS:
            t = getattr(self.jnp, n, None)
            if FORMATS[n]["kind"] == "float" and t is not None:
                try:
                    self.jnp.zeros(2, t)
                except Exception:
                    continue
                out.append(n)
        return out

    def from_f32(self, f, name):
        return self.jnp.asarray(f).astype(getattr(self.jnp, name))

    def to_f32(self, t):
        return np.asarray(t.astype(self.jnp.float32))

    def fw_import(self, x):
        return self.m.dlpack.from_dlpack(x)

    def producer(self, t):
        return t


class Mlx:
    def __init__(self):
        import mlx.core as mx
        self.m = mx
        import mlx
        self.version = getattr(mlx.core, "__version__", "?")

    def dtypes(self):
        return [n for n in FORMATS if FORMATS[n]["kind"] == "float"
                and isinstance(getattr(self.m, n, None), self.m.Dtype)]

    def from_f32(self, f, name):
        return self.m.array(f).astype(getattr(self.m, name))

    def to_f32(self, t):
        return np.array(t.astype(self.m.float32))

    def fw_import(self, x):
        return self.m.from_dlpack(x) if hasattr(self.m, "from_dlpack") else self.m.array(x)

    def producer(self, t):
        return t


class TensorFlow:
    def __init__(self):
        import tensorflow as tf
        self.m = tf
        self.version = tf.__version__

    def dtypes(self):
        return [n for n in FORMATS if FORMATS[n]["kind"] == "float"
                and isinstance(getattr(self.m, n, None), self.m.DType)]

    def from_f32(self, f, name):
        return self.m.cast(self.m.constant(f), getattr(self.m, name))

    def to_f32(self, t):
        return self.m.cast(t, self.m.float32).numpy()

    def fw_import(self, x):
        # TensorFlow takes a capsule, not an object with __dlpack__
        return self.m.experimental.dlpack.from_dlpack(x.__dlpack__())

    def producer(self, t):
        return self.m.experimental.dlpack.to_dlpack(t)   # a capsule


class Paddle:
    def __init__(self):
        import paddle
        paddle.set_device("cpu")
        self.m = paddle
        self.version = paddle.__version__

    def dtypes(self):
        return [n for n in FORMATS if FORMATS[n]["kind"] == "float"
                and getattr(self.m, n, None) is not None]

    def from_f32(self, f, name):
        return self.m.to_tensor(np.ascontiguousarray(f)).astype(name)

    def to_f32(self, t):
        return t.astype("float32").numpy()

    def fw_import(self, x):
        return self.m.utils.dlpack.from_dlpack(x)

    def producer(self, t):
        return t


FRAMEWORKS = {"torch": Torch, "jax": Jax, "mlx": Mlx, "tensorflow": TensorFlow,
              "paddle": Paddle}


# -------------------------------------------------------------------- cells

def same(got, want):
    got = np.asarray(got, np.float32)
    return got.shape == want.shape and got.tobytes() == want.tobytes()


def other_value(v, f32):
    """A value of the format different from v (for the write-through check)."""
    for c in f32.ravel():
        if c != v:
            return c
    raise AssertionError("no second value")


def import_cell(fw, name, layout, route):
    want = values(name)
    t = fw.from_f32(want, name)
    if layout == "strided":
        t = t[:, ::2]
        want = np.ascontiguousarray(want[:, ::2])
    imp = (lambda: mf.from_dlpack(fw.producer(t))) if route == "minifloat" else \
          (lambda: np.from_dlpack(t))
    try:
        a = imp()
    except Exception as err:
        return "refused: " + short(err)
    if a.dtype != FORMATS[name]["dtype"]:
        if not (route == "numpy" and type(a.dtype).__module__.startswith("ml_dtypes")
                and a.dtype.type.__name__ == name):
            return f"WRONG: dtype {a.dtype}"
        # ml_dtypes (0.7, imported by JAX) registered the code with NumPy
        # first: its array of the same format, viewed as minifloat's
        a = a.view(FORMATS[name]["dtype"])
    if not same(a.astype(np.float32), want):
        return "WRONG: values differ"
    if a.flags.writeable:
        new = other_value(want[0, 0], want)
        a[0, 0] = new
        got = fw.to_f32(t)
        if got[0, 0] == new:
            return "zero-copy"
        if got[0, 0] == want[0, 0]:
            return "copy"
        return "WRONG: write-through read back neither value"
    if route == "minifloat" and fw.producer(t) is not t:
        # a capsule is consumed once: ask for another one
        b = mf.from_dlpack(fw.producer(t))
    else:
        b = imp()
    return "zero-copy (read-only)" if np.shares_memory(a, b) else "copy (read-only)"


def export_cell(fw, name, layout, route):
    f = FORMATS[name]
    want = values(name)
    a = aligned(want.astype(f["dtype"]))
    if layout == "strided":
        a = a[:, ::2]
        want = np.ascontiguousarray(want[:, ::2])
    src = mf.dlpack(a) if route == "minifloat" else a
    try:
        t = fw.fw_import(src)
        got = fw.to_f32(t)
    except Exception as err:
        return "refused: " + short(err)
    if not same(got, want):
        return "WRONG: values differ"
    new = other_value(want[0, 0], want)
    a[0, 0] = new
    got = fw.to_f32(t)
    if got[0, 0] == new:
        return "zero-copy"
    if got[0, 0] == want[0, 0]:
        return "copy"
    return "WRONG: write-through read back neither value"


def tensorflow_extra(fw):
    """minifloat.to_tensorflow: zero-copy when 64-byte aligned, an aligned copy
    otherwise (TensorFlow would abort), BufferError with copy=False."""
    tf = fw.m
    out = {}
    want = values("bfloat16")
    a = aligned(want.astype(mf.bfloat16))
    t = mf.to_tensorflow(a)
    a[0, 0] = want[0, 1]
    out["aligned"] = "zero-copy" if fw.to_f32(t)[0, 0] == want[0, 1] else "copy"
    buf = aligned(np.zeros(want.size + 1, mf.bfloat16))
    u = buf[1:].reshape(want.shape)            # 2 bytes past a 64-byte boundary
    u[...] = want.astype(mf.bfloat16)
    t = mf.to_tensorflow(u)                    # TensorFlow would abort on u itself
    if not same(fw.to_f32(t), want):
        out["unaligned"] = "WRONG: values differ"
    else:
        u[0, 0] = want[0, 1]
        out["unaligned"] = "copy" if fw.to_f32(t)[0, 0] == want[0, 0] else "zero-copy"
    try:
        mf.to_tensorflow(u, copy=False)
        out["unaligned copy=False"] = "WRONG: no error"
    except BufferError as err:
        out["unaligned copy=False"] = "refused: " + short(err)
    t = mf.to_tensorflow(aligned(want.astype(mf.bfloat16))[:, ::2])
    out["strided"] = "copy" if same(fw.to_f32(t), np.ascontiguousarray(want[:, ::2])) \
        else "WRONG: values differ"
    # the copy minifloat makes for export is 64-byte aligned (TF would abort otherwise)
    cap = _core._dlpack_export(u, None, None, None, True)
    t = tf.experimental.dlpack.from_dlpack(cap)
    out["dlpack copy=True of unaligned"] = "copy" if same(fw.to_f32(t), u.astype(np.float32)) \
        else "WRONG: values differ"
    for n in ("float8_e4m3fn", "float8_e5m2"):
        if n in fw.dtypes():
            w = values(n)
            out[f"{n} aligned"] = "zero-copy" if same(
                fw.to_f32(mf.to_tensorflow(aligned(w.astype(FORMATS[n]["dtype"])))), w) \
                else "WRONG: values differ"
    return out


EXTRA = {"tensorflow": tensorflow_extra}


def run(name):
    fw = FRAMEWORKS[name]()
    # NumPy's own route (np.from_dlpack, ndarray.__dlpack__) knows the formats
    # once minifloat registered them: at its import, or, where ml_dtypes is
    # installed, after ml_dtypes' import (which some frameworks do: TF, JAX)
    ml_installed = importlib.machinery.PathFinder.find_spec("ml_dtypes") is not None
    numpy_route = NUMPY_REGISTRY and bool(mf.exchange.numpy_registration)
    routes = ["minifloat"] + (["numpy"] if numpy_route else [])
    cells = []
    for dt in fw.dtypes():
        for direction, cell in (("import", import_cell), ("export", export_cell)):
            for layout in ("contiguous", "strided"):
                for route in routes:
                    if route == "numpy" and FORMATS[dt]["dlpack_bits"] != 8 * FORMATS[dt]["itemsize"]:
                        continue   # sub-byte formats are not in NumPy's registry
                    try:
                        res = cell(fw, dt, layout, route)
                    except Exception as err:   # the test itself failed: report it
                        res = "WRONG: " + short(err)
                    cells.append({"framework": name, "dtype": dt, "direction": direction,
                                  "layout": layout, "route": route, "result": res})
    extra = {}
    if name in EXTRA:
        try:
            extra = EXTRA[name](fw)
        except Exception as err:
            extra = {"error": "WRONG: " + short(err)}
    return {"framework": name, "version": fw.version, "numpy": np.__version__,
            "python": sys.version.split()[0], "cells": cells, "extra": extra,
            "numpy_route": numpy_route, "ml_dtypes_installed": ml_installed,
            "ml_dtypes_imported": "ml_dtypes" in sys.modules}


SHORT = {"zero-copy": "view", "zero-copy (read-only)": "view (ro)", "copy": "copy",
         "copy (read-only)": "copy (ro)"}


def markdown(results):
    """The docs' table (docs/exchange.md) from run() results: one row per
    framework and format, one column per direction, layout and route."""
    notes, lines = [], []
    routes = ["minifloat", "numpy"] if any(c["route"] == "numpy" for r in results
                                           for c in r["cells"]) else ["minifloat"]
    cols = [(d, lay, r) for r in routes for d in ("import", "export")
            for lay in ("contiguous", "strided")]
    head = {"import": "fw → NumPy", "export": "NumPy → fw"}
    rname = {"minifloat": "mf", "numpy": "np"}
    lines.append("| framework | format | " + " | ".join(
        f"{head[d]} {'contig' if lay == 'contiguous' else 'strided'} ({rname[r]})"
        for d, lay, r in cols) + " |")
    lines.append("|---|---|" + "---|" * len(cols))
    for res in results:
        by = {}
        for c in res["cells"]:
            by.setdefault(c["dtype"], {})[(c["direction"], c["layout"], c["route"])] = c["result"]
        for dt, row in by.items():
            cells = []
            for key in cols:
                v = row.get(key)
                if v is None:
                    cells.append("–")
                elif v in SHORT:
                    cells.append(SHORT[v])
                else:
                    if v not in notes:
                        notes.append(v)
                    cells.append(f"refused [{notes.index(v) + 1}]" if v.startswith("refused")
                                 else f"{v} [{notes.index(v) + 1}]")
            lines.append(f"| {res['framework']} {res['version']} | {dt} | " + " | ".join(cells)
                         + " |")
    env = sorted({(r["python"], r["numpy"]) for r in results})
    lines.append("")
    lines.append("Python/NumPy: " + ", ".join(f"{p} / {n}" for p, n in env) + ".")
    for i, n in enumerate(notes, 1):
        lines.append(f"[{i}] {n.replace('|', '/')}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1] == "--markdown":   # --markdown RESULT.json ...
        print(markdown([json.load(open(p)) for p in sys.argv[2:]]))
    else:
        print(json.dumps(run(sys.argv[1])))
