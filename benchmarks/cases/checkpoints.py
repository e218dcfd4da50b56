"""Checkpoint cases: load, inspect and convert a bf16 safetensors file against
safetensors.numpy / safetensors.torch and the same statistics computed in torch.

minifloat's checkpoint modules are imported by the builders: a failing import
costs these cases, not the run."""
import importlib
import os

import numpy as np

from ..harness import Plan, Run


# ---- a bf16 safetensors file of N values in 4 tensors,
# written once per run into a temporary folder (page cache warm)

def _ckpt(env):
    k = ("ckpt", env.n)
    if k not in env._cache:
        import tempfile

        from minifloat.io import safetensors as mst
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


def build_load(env):
    from minifloat.io import safetensors as mst
    path = _ckpt(env)
    runs = [Run("minifloat", "minifloat.io.safetensors.load(p) (mmap)", lambda: mst.load(path),
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


def build_inspect(target, env):
    from minifloat.io import checkpoint
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
    runs.append(_u16_run(path))
    return Plan(runs, nbytes=os.path.getsize(path))


def _u16_run(path):
    """The memory yardstick: NumPy reading the file's bytes once (a uint16
    .sum() of the mapped tensors)."""
    from minifloat.io import safetensors as mst
    views = [v.view(np.uint16) for v in mst.load(path).values()]
    return Run("numpy u16", "uint16 .sum() of the same bytes", lambda: [v.sum() for v in views],
               note="reading the bytes: memory speed")


def _torch_convert_run(env, path, what=""):
    """torch's convert: load_file, .to(float8_e4m3fn), save_file (timed at 1
    and at all threads by the harness), or None without torch."""
    stt = _st_peer(env, "torch") if env.torch is not None else None
    if stt is None:
        return None
    torch = env.torch
    out_t = os.path.join(os.path.dirname(path), "out-torch.safetensors")

    def torch_convert():
        d = stt.load_file(path)
        stt.save_file({k: v.to(torch.float8_e4m3fn) for k, v in d.items()}, out_t,
                      metadata={"format": "pt"})

    return Run("torch", what + ".to(float8_e4m3fn) + safetensors.torch.save_file",
               torch_convert)


def build_inspect_block(fmt, env):
    from minifloat.io import checkpoint
    path = _ckpt(env)
    runs = [Run("minifloat", f"checkpoint.inspect_file(p, {fmt!r})",
                lambda: checkpoint.inspect_file(path, fmt), note="reads the file")]
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no block-scaled formats", None))
    runs.append(Run("numpy", "no bf16 dtype", None))
    # torch has no block-scaled cast: its element convert of the same file
    # is the yardstick of a pass over it that casts and writes
    t = _torch_convert_run(env, path, "no block formats; yardstick: ")
    if t is not None:
        runs.append(t)
    runs.append(_u16_run(path))
    return Plan(runs, nbytes=os.path.getsize(path))


def build_convert(env):
    from minifloat.io import checkpoint
    path = _ckpt(env)
    out = os.path.join(os.path.dirname(path), "out-mf.safetensors")
    runs = [Run("minifloat", "checkpoint.convert_file(p, o, 'float8_e4m3fn')",
                lambda: checkpoint.convert_file(path, out, "float8_e4m3fn"),
                note="+ RMS error")]
    if env.ml is not None:
        runs.append(Run("ml_dtypes", "no checkpoint writer", None))
    t = _torch_convert_run(env, path)
    if t is not None:
        runs.append(t)
    runs.append(_u16_run(path))
    return Plan(runs, nbytes=os.path.getsize(path))

