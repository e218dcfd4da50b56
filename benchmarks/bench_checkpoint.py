"""Timings for docs/safetensors.md: a ~1 GiB bf16 checkpoint loaded with
minifloat.io.safetensors (mmap and not) against safetensors.numpy/torch, the
statistics of `minifloat inspect` against the same statistics in torch (one
thread), and `minifloat convert` bf16 -> float8_e4m3fn against torch's
.to() plus safetensors.torch.save_file.

    python benchmarks/bench_checkpoint.py [--gib 1] [--dir /tmp] [--repeat 3]

The file is read once before timing, so every run reads from the page cache
(the numbers are the libraries' costs, not the disk's).  Best of --repeat.
"""
import argparse
import gc
import os
import platform
import tempfile
import time

import numpy as np


def best(fn, repeat):
    ts = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        r = fn()
        ts.append(time.perf_counter() - t0)
        del r
    return min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import torch
    import safetensors
    import safetensors.numpy as snp
    import safetensors.torch as storch

    import minifloat as mf
    import minifloat.io.safetensors as mst
    from minifloat.io import checkpoint

    torch.set_num_threads(1)
    n_tensors = 8
    per = int(args.gib * 2**30 / 2 / n_tensors)
    rows = 4096
    per -= per % rows
    g = torch.Generator().manual_seed(0)
    t = {f"layers.{i}.weight": (torch.randn(rows, per // rows, generator=g) * 0.02).bfloat16()
         for i in range(n_tensors)}
    path = os.path.join(args.dir, "minifloat-bench-ckpt.safetensors")
    out = os.path.join(args.dir, "minifloat-bench-out.safetensors")
    storch.save_file(t, path)
    del t
    size = os.path.getsize(path)
    with open(path, "rb") as f:                     # into the page cache
        while f.read(1 << 24):
            pass
    gb = size / 1e9
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
          f"{torch.__version__} (1 thread), safetensors {safetensors.__version__}, "
          f"minifloat {mf.__version__} (kernel level {mf._core.get_kernel_level()})")
    print(f"checkpoint: {n_tensors} bf16 tensors, {size / 2**30:.2f} GiB, page cache warm")
    res = {}

    def touch_all(d):
        return sum(float(v.reshape(-1)[-1].astype(np.float32)) if hasattr(v, "reshape") else 0
                   for v in d.values())

    res["minifloat load (mmap)"] = best(lambda: mst.load(path), args.repeat)
    res["minifloat load (mmap=False)"] = best(lambda: mst.load(path, mmap=False), args.repeat)
    try:
        res["safetensors.numpy.load_file"] = best(lambda: snp.load_file(path), args.repeat)
    except Exception as e:                              # noqa: BLE001
        res["safetensors.numpy.load_file"] = f"fails: {type(e).__name__}: {e}"
    res["safetensors.torch.load_file"] = best(lambda: storch.load_file(path), args.repeat)

    res["inspect (minifloat, stats)"] = best(lambda: checkpoint.inspect_file(path), args.repeat)
    res["inspect --target float8_e4m3fn"] = best(
        lambda: checkpoint.inspect_file(path, "float8_e4m3fn"), args.repeat)
    loaded = storch.load_file(path)

    loaded = {k: v.clone() for k, v in loaded.items()}     # in memory, not the mapping

    def torch_stats():
        # the statistics inspect shows, in float32 (float64 is 5-10x slower in
        # torch); count_nonzero is faster than .sum() of a bool tensor
        r = []
        for v in loaded.values():
            x = v.float()
            r.append((float(x.min()), float(x.max()), float(x.mean()), float(x.std()),
                      int(torch.count_nonzero(x.isnan())), int(torch.count_nonzero(x.isinf()))))
        return r

    views = [v.view(np.uint16) for v in mst.load(path).values()]
    res["numpy uint16 .sum() of the same bytes (memory speed)"] = best(
        lambda: [v.sum() for v in views], args.repeat)

    res["same statistics in torch (loaded)"] = best(torch_stats, args.repeat)

    res["convert bf16 -> float8_e4m3fn (minifloat)"] = best(
        lambda: checkpoint.convert_file(path, out, "float8_e4m3fn"), args.repeat)

    def torch_convert():
        d = storch.load_file(path)
        storch.save_file({k: v.to(torch.float8_e4m3fn) for k, v in d.items()}, out)

    res["torch .to(float8_e4m3fn) + save_file"] = best(torch_convert, args.repeat)

    for k, v in res.items():
        if isinstance(v, str):
            print(f"{k:<44} {v}")
        else:
            print(f"{k:<44} {v * 1e3:10.2f} ms   {gb / v:8.2f} GB/s")
    os.unlink(path)
    if os.path.exists(out):
        os.unlink(out)


if __name__ == "__main__":
    main()
