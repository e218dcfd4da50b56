"""`minifloat convert` on the model hubs' quantized layouts, against the
I/O limit and the reference libraries, on synthetic model folders of about
--gib GiB of stored bytes (docs/benchmarks.md, "Checkpoint layouts: speed
and memory").

    python benchmarks/bench_layouts.py [--gib 1] [--repeat 2] [--dir D]
                                       [--layouts fp8-block ...] [--markdown]

Cases (--layouts; the default is every one but the last two):

  fp8-block          DeepSeek FP8 (128x128 block scales) -> bf16: 18432x7168
                     and 7168x18432 weights (DeepSeek-V3's dense MLP)
  gpt-oss-mxfp4      gpt-oss MoE experts (*_blocks [32, 5760, 90, 16] +
                     *_scales) -> bf16
  ct-nvfp4           compressed-tensors nvfp4-pack-quantized -> bf16:
                     14336x4096 and 4096x14336 weights (Llama-3-8B's MLP)
  to-deepseek-fp8    a bf16 model -> deepseek-fp8 (DeepSeek-V3 shapes)
  to-modelopt-nvfp4  a bf16 model -> modelopt-nvfp4 (Llama-3-8B shapes)
  to-ct-nvfp4        a bf16 model -> compressed-tensors-nvfp4
  ct-int4            compressed-tensors pack-quantized int4 (W4A16) -> bf16
  modelopt-nvfp4     ModelOpt NVFP4 -> bf16 (minifloat and the I/O limit)

Every run is a fresh subprocess (this script with --worker), folder to
folder: the input is read once before the case (the page cache is warm),
the output folder is deleted before each run, and the runs of a case are
interleaved (run 1 of every method, then run 2, ...), best of --repeat.
"work s" is the time the subprocess measures around the conversion (its
imports -- torch, transformers -- excluded); "process s" the whole
subprocess, interpreter start and imports included.  torch and minifloat
use every CPU this process may run on.

What each method runs:

  minifloat          minifloat.cli.main(["convert", IN, OUT, "--to", T]) --
                     the `minifloat convert` command; "--jobs 2": two
                     shards at once
  I/O limit          no computation: each input shard read in 16 MiB
                     chunks (readinto) and the output's bytes (the same
                     count as minifloat's output shard) written from those
                     chunks through minifloat.io.safetensors.write (the
                     writer minifloat convert uses: a nameless temporary
                     file, then a rename) -- one shard at a time, and with
                     one thread per CPU (the shards at once)
  ct convert_checkpoint   compressed_tensors.entrypoints.convert.
                     convert_checkpoint(IN, OUT, converter, device="cpu")
                     with FP8BlockDequantizer.from_pretrained(IN) (fp8) or
                     CompressedTensorsDequantizer(IN) (ct-nvfp4, ct-int4):
                     its compressors' decompress per module, save_file per
                     shard
  transformers       safetensors.torch.load_file per shard, per tensor
                     transformers' dequantizer, safetensors.torch.save_file:
                     Fp8Dequantize._dequantize_one (what from_pretrained(
                     dequantize=True) runs: float32 product, then bf16),
                     _dequantize_fp8_weight (its backward pass's: bf16
                     arithmetic), convert_moe_packed_tensors (gpt-oss)
  ct compressors     (quantizing; compressed-tensors has no converter that
                     quantizes a bf16 checkpoint) load_file per shard, per
                     weight llm-compressor's min-max qparams
                     (calculate_qparams; generate_gparam for NVFP4) and the
                     compressor's compress (FloatQuantizationCompressor,
                     preset FP8_BLOCK; NVFP4PackedCompressor, preset
                     NVFP4A16 -- for modelopt-nvfp4 too: the same NVFP4
                     arithmetic under compressed-tensors' names), save_file
  transformers Fp8Quantize   (to-deepseek-fp8) Fp8Quantize._quantize_one
                     per weight, save_file

The quantized weights are the same set for every method (the MLP
projections); norms stay bf16.  --check keeps one output of each method
and compares its tensors with minifloat's (the dequantizers must agree bit
for bit where they compute in float32; the bf16-arithmetic one and the
quantizers are compared within a tolerance and the differing fraction is
printed).
"""
import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

GIB = 1 << 30
CHUNK = 1 << 24                  # 16 MiB: the I/O limit's and the generators' chunk
POOL = 3 * CHUNK                 # random bytes, sliced at varying offsets

# a case: the stored layout of the input (None: bf16), the target, the
# modules of one layer with their logical shapes, the model's hidden size
_DEEPSEEK = [("mlp.gate_proj", (18432, 7168)), ("mlp.up_proj", (18432, 7168)),
             ("mlp.down_proj", (7168, 18432))]
_LLAMA = [("mlp.gate_proj", (14336, 4096)), ("mlp.up_proj", (14336, 4096)),
          ("mlp.down_proj", (4096, 14336))]
_GPT_OSS = [("mlp.experts.gate_up_proj", (32, 2880, 5760)),
            ("mlp.experts.down_proj", (32, 2880, 2880))]
CASES = {
    "fp8-block": dict(src="deepseek-fp8", to="bfloat16", mods=_DEEPSEEK, hidden=7168,
                      model_type="deepseek_v3"),
    "gpt-oss-mxfp4": dict(src="gpt-oss-mxfp4", to="bfloat16", mods=_GPT_OSS, hidden=2880,
                          model_type="gpt_oss"),
    "ct-nvfp4": dict(src="compressed-tensors-nvfp4", to="bfloat16", mods=_LLAMA, hidden=4096,
                     model_type="llama"),
    "to-deepseek-fp8": dict(src=None, to="deepseek-fp8", mods=_DEEPSEEK, hidden=7168,
                            model_type="deepseek_v3"),
    "to-modelopt-nvfp4": dict(src=None, to="modelopt-nvfp4", mods=_LLAMA, hidden=4096,
                              model_type="llama"),
    "to-ct-nvfp4": dict(src=None, to="compressed-tensors-nvfp4", mods=_LLAMA, hidden=4096,
                        model_type="llama"),
    "ct-int4": dict(src="compressed-tensors-w4a16", to="bfloat16", mods=_LLAMA, hidden=4096,
                    model_type="llama"),
    "modelopt-nvfp4": dict(src="modelopt-nvfp4", to="bfloat16", mods=_LLAMA, hidden=4096,
                           model_type="llama"),
}
DEFAULT_CASES = list(CASES)[:6]

# the reference methods of each case (besides minifloat and the I/O limit)
REFERENCES = {
    "fp8-block": ["ct-fp8block", "tf-fp8-dequant", "tf-fp8-backward"],
    "gpt-oss-mxfp4": ["tf-mxfp4"],
    "ct-nvfp4": ["ct-dequant"],
    "ct-int4": ["ct-dequant"],
    "modelopt-nvfp4": [],
    "to-deepseek-fp8": ["ct-fp8block-compress", "tf-fp8-quantize"],
    "to-modelopt-nvfp4": ["ct-nvfp4-compress"],
    "to-ct-nvfp4": ["ct-nvfp4-compress"],
}
LABELS = {
    "mf": "minifloat convert",
    "mf2": "minifloat convert --jobs 2",
    "io": "I/O limit (1 thread)",
    "ioN": "I/O limit (shards at once)",
    "ct-fp8block": "compressed-tensors convert_checkpoint(FP8BlockDequantizer)",
    "ct-dequant": "compressed-tensors convert_checkpoint(CompressedTensorsDequantizer)",
    "tf-fp8-dequant": "transformers Fp8Dequantize._dequantize_one + save_file",
    "tf-fp8-backward": "transformers _dequantize_fp8_weight (bf16 math) + save_file",
    "tf-mxfp4": "transformers convert_moe_packed_tensors + save_file",
    "ct-fp8block-compress": "compressed-tensors FP8_BLOCK qparams + compress + save_file",
    "ct-nvfp4-compress": "compressed-tensors NVFP4A16 qparams + compress + save_file",
    "tf-fp8-quantize": "transformers Fp8Quantize._quantize_one + save_file",
}


def ncpu():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or platform.machine()


# --------------------------------------------------------------------------- synthetic models

class _Pool:
    """Random bytes to slice chunks from: writing a GiB takes the time of
    the disk, not of a random generator.  Each code kind gets its bytes
    made valid once (no NaN code in F8_E4M3; bf16 weights ~ N(0, 0.02))."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self._pools = {}

    def pool(self, kind):
        if kind not in self._pools:
            self._pools[kind] = self._make(kind)
        return self._pools[kind]

    def _make(self, kind):
        if kind == "BF16":
            import minifloat as mf
            x = (self.rng.standard_normal(POOL // 2, np.float32) * np.float32(0.02))
            return np.ascontiguousarray(x.astype(mf.bfloat16)).view(np.uint8)
        p = self.rng.integers(0, 256, POOL, dtype=np.uint8)
        if kind == "F8_E4M3":
            p[(p & 0x7F) == 0x7F] -= 1          # +-NaN -> +-448
        return p

    def chunks(self, kind, nbytes):
        p = self.pool(kind)
        for i, off in enumerate(range(0, nbytes, CHUNK)):
            size = min(CHUNK, nbytes - off)
            start = (i * 7919 * 64) % (POOL - CHUNK)
            yield memoryview(p[start:start + size])


def _nbytes(code, shape):
    bits = {"F8_E4M3": 8, "U8": 8, "I32": 32, "I64": 64, "F32": 32, "BF16": 16}[code]
    return math.prod(shape) * bits // 8


def _e4m3_codes(rng, shape, lo=0x38, hi=0x7E):
    """Positive e4m3 scales: codes lo..hi (1.0 .. 448 by default)."""
    return rng.integers(lo, hi + 1, shape, dtype=np.uint8)


def _small(rng, layout, sname, code, shape):
    """A scale-like stored tensor's bytes: valid and plausible values."""
    if code == "I64":                                           # weight_shape
        raise AssertionError("weight_shape is filled by the caller")
    if layout == "deepseek-fp8":
        a = rng.uniform(2e-5, 4e-4, shape).astype(np.float32)   # weight_scale_inv
    elif layout == "gpt-oss-mxfp4":
        a = rng.integers(116, 124, shape, dtype=np.uint8)       # e8m0: 2**-11 .. 2**-4
    elif sname.endswith("_global_scale"):
        a = np.full(shape, 2688.0 / 0.1, np.float32)            # 448 * 6 / amax
    elif sname.endswith("_scale_2"):
        a = np.full(shape, 0.1 / 2688.0, np.float32)
    elif code == "F8_E4M3":
        a = _e4m3_codes(rng, shape)
    elif code == "BF16":                                        # W4A16's group scales
        f = rng.uniform(1e-3, 5e-3, shape).astype(np.float32)
        a = (f.view(np.uint32) >> 16).astype(np.uint16)
    else:
        raise AssertionError(f"no filler for {layout} {sname} {code}")
    return np.ascontiguousarray(a)


def _plan(case, gib):
    """[(logical weight name, shape)] for about `gib` GiB of stored bytes
    (whole weights; the first axis shrunk when one weight is too big)."""
    c = CASES[case]
    budget = gib * GIB
    stored = _stored_fn(c["src"])
    per = [sum(_nbytes(code, shp) for _, code, shp in stored("x.weight", s))
           for _, s in c["mods"]]
    avg = sum(per) / len(per)
    mods = list(c["mods"])
    if avg > budget:                      # shrink the first axis (rows, or experts)
        f = budget / avg
        mods = []
        for m, s in c["mods"]:
            if len(s) == 3:
                s = (max(1, int(s[0] * f)),) + s[1:]
            else:
                s = (max(128, int(s[0] * f) // 128 * 128), s[1])
            mods.append((m, s))
        per = [sum(_nbytes(code, shp) for _, code, shp in stored("x.weight", s))
               for _, s in mods]
        avg = sum(per) / len(per)
    n = max(1, round(budget / avg))
    out = []
    for j in range(n):
        m, s = mods[j % len(mods)]
        layer = j // len(mods)
        name = f"model.layers.{layer}.{m}" + ("" if len(s) == 3 else ".weight")
        out.append((name, s))
    return out


def _stored_fn(src):
    """(name, logical shape) -> [(stored name, code, shape)] of the input."""
    if src is None:
        return lambda name, shape: [(name, "BF16", tuple(shape))]
    from minifloat.io import requantize
    return requantize.quantizer(src).stored


def _out_stored(case, name, shape):
    """What the converted output stores for a logical weight."""
    c = CASES[case]
    if c["to"] == "bfloat16":
        return [(name, "BF16", tuple(shape))]
    from minifloat.io import requantize
    return requantize.quantizer(c["to"]).stored(name, shape)


def build(case, folder, gib, seed=0):
    """Write a synthetic model folder for `case` into `folder` (created):
    shards, the index, config.json (and ModelOpt's hf_quant_config.json).
    Returns the manifest: {"shards": [{"file", "in_bytes", "out_bytes"}],
    "in_bytes", "out_bytes", "weights": [[name, shape, shard]]}."""
    import minifloat.io.safetensors as mst
    from minifloat.io import requantize
    c = CASES[case]
    plan = _plan(case, gib)
    stored = _stored_fn(c["src"])
    pool = _Pool(seed)
    rng = np.random.default_rng(seed + 1)
    nshards = 4 if len(plan) >= 8 else 2 if len(plan) >= 2 else 1
    groups = [plan[i * len(plan) // nshards:(i + 1) * len(plan) // nshards]
              for i in range(nshards)]
    os.makedirs(folder, exist_ok=True)
    manifest = {"case": case, "shards": [], "weights": []}
    weight_map = {}
    layers_seen = set()
    for i, group in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{nshards:05d}.safetensors"
        specs, in_b, out_b = [], 0, 0
        for name, shape in group:
            for sname, code, shp in stored(name, shape):
                if code == "I64":
                    a = np.array([shape[0], shape[1]], np.int64)
                    ch = [memoryview(a.view(np.uint8))]
                elif sname == stored(name, shape)[0][0]:       # the codes (or bf16 weight)
                    ch = pool.chunks(code if code in ("BF16", "F8_E4M3") else "U8",
                                     _nbytes(code, shp))
                else:
                    ch = [memoryview(_small(rng, c["src"], sname, code, shp).reshape(-1)
                                     .view(np.uint8))]
                specs.append((sname, code, shp, ch))
                in_b += _nbytes(code, shp)
            out_b += sum(_nbytes(code, shp) for _, code, shp in _out_stored(case, name, shape))
            manifest["weights"].append([name, list(shape), fname])
            layer = name.split(".")[2]
            extra = []
            if layer not in layers_seen:                      # a norm per layer, kept bf16
                layers_seen.add(layer)
                extra.append((f"model.layers.{layer}.post_attention_layernorm.weight",
                              (c["hidden"],)))
            if len(shape) == 3:                               # gpt-oss expert biases
                extra.append((name + "_bias", (shape[0], shape[2])))
            for xname, xshape in extra:
                a = np.ascontiguousarray(pool.pool("BF16")[:_nbytes("BF16", xshape)])
                specs.append((xname, "BF16", xshape, [memoryview(a)]))
                in_b += a.size
                out_b += a.size
        mst.write(os.path.join(folder, fname), specs, {"format": "pt"})
        for s in specs:
            weight_map[s[0]] = fname
        manifest["shards"].append({"file": fname, "in_bytes": in_b, "out_bytes": out_b})
    manifest["in_bytes"] = sum(s["in_bytes"] for s in manifest["shards"])
    manifest["out_bytes"] = sum(s["out_bytes"] for s in manifest["shards"])
    mst.save_index(os.path.join(folder, "model.safetensors.index.json"), weight_map,
                   {"total_size": manifest["in_bytes"]})
    nlayers = len(layers_seen)
    cfg = {"architectures": [{"deepseek_v3": "DeepseekV3ForCausalLM", "llama": "LlamaForCausalLM",
                              "gpt_oss": "GptOssForCausalLM"}[c["model_type"]]],
           "model_type": c["model_type"], "hidden_size": c["hidden"],
           "num_hidden_layers": nlayers, "torch_dtype": "bfloat16"}
    if c["src"] is not None:
        qc = requantize.quantization_config(c["src"])
        if requantize.config_file(c["src"]) == "config.json":
            cfg["quantization_config"] = qc
        else:
            with open(os.path.join(folder, "hf_quant_config.json"), "w") as fh:
                json.dump(qc, fh, indent=2)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    return manifest


def warm(folder):
    """Read every file of `folder` once (into the page cache)."""
    buf = bytearray(CHUNK)
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass


# --------------------------------------------------------------------------- the workers

def _shard_files(src):
    with open(os.path.join(src, "model.safetensors.index.json")) as fh:
        return sorted(set(json.load(fh)["weight_map"].values()))


def _finish_folder(src, dst, weight_map, drop_quant):
    """What every reference does besides the shards: the index and the
    folder's other files (config.json without its quantization config once
    dequantized), as minifloat convert writes them."""
    total = sum(os.path.getsize(os.path.join(dst, f)) for f in set(weight_map.values()))
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, fh, indent=2)
    for name in os.listdir(src):
        if name.endswith(".safetensors") or name == "model.safetensors.index.json":
            continue
        if name == "config.json" and drop_quant:
            with open(os.path.join(src, name)) as fh:
                cfg = json.load(fh)
            cfg.pop("quantization_config", None)
            with open(os.path.join(dst, name), "w") as fh:
                json.dump(cfg, fh, indent=2)
        elif not (name == "hf_quant_config.json" and drop_quant):
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))


def _io_limit(src, dst, manifest, threads):
    import minifloat.io.safetensors as mst

    def one(shard):
        in_b = os.path.getsize(os.path.join(src, shard["file"]))
        out_b = shard["out_bytes"]

        def gen():
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            done_in = done_out = 0
            with open(os.path.join(src, shard["file"]), "rb", buffering=0) as fh:
                while True:
                    k = fh.readinto(buf)
                    if not k:
                        break
                    done_in += k
                    want = out_b * done_in // in_b - done_out
                    while want > 0:
                        m = min(want, k)
                        yield view[:m]
                        want -= m
                        done_out += m
        mst.write(os.path.join(dst, shard["file"]), [("x", "U8", (out_b,), gen())])

    os.makedirs(dst)
    if threads == 1:
        for s in manifest["shards"]:
            one(s)
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(one, manifest["shards"]))


def _per_tensor(src, dst, fn, drop_quant):
    """load_file per shard, fn(dict) -> dict of the output tensors,
    save_file per shard."""
    import safetensors.torch as storch
    os.makedirs(dst)
    weight_map = {}
    for shard in _shard_files(src):
        d = storch.load_file(os.path.join(src, shard))
        out = {k: v.contiguous() for k, v in fn(d).items()}
        storch.save_file(out, os.path.join(dst, shard), metadata={"format": "pt"})
        weight_map.update({k: shard for k in out})
        del d, out
    _finish_folder(src, dst, weight_map, drop_quant)


def _tf_fp8(d, backward=False):
    import torch
    from transformers.integrations import finegrained_fp8 as fp8
    op = fp8.Fp8Dequantize(None)
    out = {}
    for name, t in d.items():
        if name.endswith(".weight_scale_inv"):
            continue
        s = d.get(name[:-len("weight")] + "weight_scale_inv") if name.endswith(".weight") \
            else None
        if s is None:
            out[name] = t
        elif backward:
            out[name] = fp8._dequantize_fp8_weight(t, s, [128, 128], torch.bfloat16)
        else:
            out[name] = op._dequantize_one(t, s, torch.bfloat16)
    return out


def _tf_mxfp4(d):
    import torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    out = {}
    for name, t in d.items():
        if name.endswith("_scales"):
            continue
        if name.endswith("_blocks"):
            base = name[:-len("_blocks")]
            out[base] = convert_moe_packed_tensors(t, d[base + "_scales"], dtype=torch.bfloat16)
        else:
            out[name] = t
    return out


def _quantized_names(d, layout):
    from minifloat.io import requantize
    return [n for n, t in d.items()
            if requantize.should_quantize(n, tuple(t.shape), layout)]


def _ct_compress(d, layout):
    import torch
    from compressed_tensors.quantization import preset_name_to_scheme
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
    out = dict(d)
    if layout == "deepseek-fp8":
        from compressed_tensors.compressors.naive_quantized.base import \
            FloatQuantizationCompressor as comp
        scheme = preset_name_to_scheme("FP8_BLOCK", ["Linear"])
    else:
        from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor as comp
        scheme = preset_name_to_scheme("NVFP4A16", ["Linear"])
    for name in _quantized_names(d, layout):
        w = out.pop(name)
        mod = name[:-len(".weight")]
        n, k = w.shape
        state = {"weight": w}
        if layout == "deepseek-fp8":
            x = w.reshape(n // 128, 128, k // 128, 128)
            s, _ = calculate_qparams(x.amin(dim=(1, 3)), x.amax(dim=(1, 3)), scheme.weights)
        else:
            mn, mx = torch.aminmax(w)
            gs = generate_gparam(mn, mx)
            x = w.unflatten(-1, (-1, 16))
            s, _ = calculate_qparams(x.amin(-1), x.amax(-1), scheme.weights, global_scale=gs)
            state["weight_global_scale"] = gs
        state["weight_scale"] = s.to(w.dtype)
        for k2, v in comp.compress(state, scheme).items():
            out[f"{mod}.{k2}"] = v
    return out


def _tf_fp8_quantize(d):
    import types
    from transformers.integrations import finegrained_fp8 as fp8
    cfg = types.SimpleNamespace(weight_block_size=[128, 128], scale_fmt=None)
    op = fp8.Fp8Quantize(types.SimpleNamespace(quantization_config=cfg))
    out = dict(d)
    for name in _quantized_names(d, "deepseek-fp8"):
        out.update(op._quantize_one(name, out.pop(name)))
    return out


def worker(method, case, src, dst, manifest_path):
    """One timed run (in a fresh process): prints `RESULT {"work": s}`."""
    c = CASES[case]
    with open(manifest_path) as fh:
        manifest = json.load(fh)
    n = ncpu()
    if method not in ("mf", "mf2", "io", "ioN"):
        import torch
        torch.set_num_threads(n)
    if method in ("ct-fp8block", "ct-dequant"):
        from compressed_tensors.entrypoints.convert import (
            CompressedTensorsDequantizer, FP8BlockDequantizer, convert_checkpoint)
    if method.startswith("tf-fp8"):
        from transformers.integrations import finegrained_fp8  # noqa: F401
    if method == "tf-mxfp4":
        from transformers.integrations import mxfp4  # noqa: F401
    if method.startswith("ct-") and method.endswith("compress"):
        from compressed_tensors.compressors import nvfp4  # noqa: F401
    if method in ("mf", "mf2"):
        import contextlib
        from minifloat import cli
    import safetensors.torch  # noqa: F401  (imported by every reference: not timed)

    t0 = time.perf_counter()
    if method in ("mf", "mf2"):
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            rc = cli.main(["convert", src, dst, "--to", c["to"],
                           "--jobs", "2" if method == "mf2" else "1"])
        if rc:
            raise SystemExit(f"minifloat convert failed: {rc}")
    elif method == "io":
        _io_limit(src, dst, manifest, 1)
    elif method == "ioN":
        _io_limit(src, dst, manifest, min(n, len(manifest["shards"])))
    elif method == "ct-fp8block":
        convert_checkpoint(src, dst, FP8BlockDequantizer.from_pretrained(src), device="cpu")
    elif method == "ct-dequant":
        convert_checkpoint(src, dst, CompressedTensorsDequantizer(src), device="cpu")
    elif method == "tf-fp8-dequant":
        _per_tensor(src, dst, _tf_fp8, True)
    elif method == "tf-fp8-backward":
        _per_tensor(src, dst, lambda d: _tf_fp8(d, backward=True), True)
    elif method == "tf-mxfp4":
        _per_tensor(src, dst, _tf_mxfp4, True)
    elif method == "ct-fp8block-compress":
        _per_tensor(src, dst, lambda d: _ct_compress(d, "deepseek-fp8"), False)
    elif method == "ct-nvfp4-compress":
        _per_tensor(src, dst, lambda d: _ct_compress(d, c["to"]), False)
    elif method == "tf-fp8-quantize":
        _per_tensor(src, dst, _tf_fp8_quantize, False)
    else:
        raise SystemExit(f"unknown method {method}")
    print("RESULT " + json.dumps({"work": time.perf_counter() - t0}), flush=True)


# --------------------------------------------------------------------------- the driver

def run_one(method, case, src, dst, manifest_path, cwd):
    shutil.rmtree(dst, ignore_errors=True)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, "--case", case,
           src, dst, manifest_path]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t0
    res = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not res:
        tail = (p.stdout + p.stderr).strip().splitlines()[-15:]
        return {"error": f"rc {p.returncode}: " + " | ".join(tail)}
    return {"work": json.loads(res[-1][7:])["work"], "process": wall}


def _compare(mine, other):
    """Compare each tensor of `other` with minifloat's output of the same
    name: the values (a quantized layout's decoded by minifloat), or where
    minifloat does not decode the other's layout (compressed-tensors' FP8
    block) the stored tensors of the same name; a one-line summary."""
    try:
        return _compare_open(mine, other, True)
    except ValueError as e:
        if "does not decode" not in str(e):
            raise
        return "(stored tensors: values not decodable) " + _compare_open(mine, other, False)


def _compare_open(mine, other, dequantize):
    import minifloat.io.safetensors as mst
    with mst.open(mine, dequantize=dequantize) as a, \
            mst.open(other, dequantize=dequantize) as b:
        names = sorted(set(a.keys()) & set(b.keys()))
        miss = sorted(set(a.keys()) ^ set(b.keys()))
        same = diff = 0
        worst = 0.0
        for n in names:
            x, y = a.get_tensor(n), b.get_tensor(n)
            if tuple(x.shape) != tuple(y.shape):
                return f"{n}: shape {x.shape} vs {y.shape}"
            xf = np.asarray(x, np.float32)
            yf = np.asarray(y, np.float32)
            eq = (xf == yf) | (np.isnan(xf) & np.isnan(yf))
            same += int(eq.sum())
            diff += int(eq.size - eq.sum())
            if not eq.all():
                scale = float(np.abs(xf).max()) or 1.0
                worst = max(worst, float(np.nanmax(np.abs(xf - yf))) / scale)
    s = f"{len(names)} tensors compared"
    if miss:
        s += f", {len(miss)} names differ (e.g. {miss[0]})"
    if diff == 0:
        return s + ": identical values"
    return s + f": {diff / (same + diff):.3%} of values differ, max |diff| / amax {worst:.3g}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.0, help="stored bytes of each input")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--layouts", nargs="+", default=DEFAULT_CASES, choices=list(CASES),
                    metavar="CASE", help=" ".join(CASES))
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table at the end")
    ap.add_argument("--check", action="store_true",
                    help="compare every method's output with minifloat's")
    ap.add_argument("--only", nargs="+", metavar="METHOD",
                    help="run only these methods (mf mf2 io ioN and the references' ids)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.case, *args.paths)

    import minifloat as mf
    import torch
    cpu = cpu_name()
    versions = [f"minifloat {mf.__version__} (kernel level {mf._core.get_kernel_level()}, "
                f"{mf.get_num_threads()} threads)", f"torch {torch.__version__} ({ncpu()} threads)"]
    for mod in ("safetensors", "transformers", "compressed_tensors"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            versions.append(f"{mod} absent")
    try:
        load = "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = ""
    print(f"# CPU: {cpu}, {ncpu()} CPUs; {load}")
    print("# " + ", ".join(versions))
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, --gib {args.gib}, best of {args.repeat}, "
          f"page cache warm, each run a fresh process")
    base = tempfile.mkdtemp(prefix="minifloat-bench-layouts.", dir=args.dir)
    results = []
    try:
        for case in args.layouts:
            src = os.path.join(base, case)
            t0 = time.perf_counter()
            manifest = build(case, src, args.gib)
            mpath = os.path.join(base, case + ".manifest.json")
            with open(mpath, "w") as fh:
                json.dump(manifest, fh)
            shapes = sorted({tuple(w[1]) for w in manifest["weights"]})
            print(f"\n## {case}: {CASES[case]['src'] or 'bf16'} -> {CASES[case]['to']}, "
                  f"{len(manifest['weights'])} weights {shapes} in "
                  f"{len(manifest['shards'])} shards, {manifest['in_bytes'] / GIB:.2f} GiB in, "
                  f"{manifest['out_bytes'] / GIB:.2f} GiB out (written in "
                  f"{time.perf_counter() - t0:.1f} s)", flush=True)
            methods = ["mf", "mf2", "io", "ioN"] + REFERENCES[case]
            if args.only:
                methods = [m for m in methods if m in args.only]
            warm(src)
            best = {m: None for m in methods}
            for _ in range(args.repeat):
                for m in methods:
                    r = run_one(m, case, src, os.path.join(base, "out"), mpath, base)
                    if "error" in r:
                        best[m] = r
                        print(f"  {m}: {r['error'][:400]}", flush=True)
                    elif best[m] is None or ("work" in best[m] and r["work"] < best[m]["work"]):
                        best[m] = r
            if args.check and "mf" in methods:
                mine = os.path.join(base, "out-mf")
                shutil.rmtree(mine, ignore_errors=True)
                run_one("mf", case, src, mine, mpath, base)
                for m in methods:
                    if m in ("mf", "mf2", "io", "ioN") or "error" in (best[m] or {}):
                        continue
                    o = os.path.join(base, "out")
                    r = run_one(m, case, src, o, mpath, base)
                    if "error" not in r:
                        print(f"  check {m}: {_compare(mine, o)}", flush=True)
                r = run_one("mf2", case, src, os.path.join(base, "out"), mpath, base)
                print("  check mf2: " + _compare(mine, os.path.join(base, "out")))
                shutil.rmtree(mine, ignore_errors=True)
            shutil.rmtree(os.path.join(base, "out"), ignore_errors=True)
            gib_in = manifest["in_bytes"] / GIB
            io_t = (best.get("io") or {}).get("work")
            mf_t = (best.get("mf") or {}).get("work")
            for m in methods:
                r = best[m]
                row = {"case": case, "method": m, "label": LABELS[m], "gib_in": gib_in}
                if r and "work" in r:
                    row.update(work=r["work"], process=r["process"], gibs=gib_in / r["work"],
                               vs_io=r["work"] / io_t if io_t else None,
                               mf_speedup=r["work"] / mf_t if mf_t else None)
                else:
                    row["error"] = (r or {}).get("error", "not run")
                results.append(row)
                if "work" in row:
                    print(f"  {LABELS[m]:<70} {row['work']:8.2f} s  (process "
                          f"{row['process']:6.2f} s)  {row['gibs']:6.2f} GiB/s in  "
                          f"{_x(row['vs_io'])} I/O limit  minifloat {_x(row['mf_speedup'])}",
                          flush=True)
            shutil.rmtree(src, ignore_errors=True)
            os.unlink(mpath)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.markdown:
        print()
        print(markdown(results, cpu, versions, args))
    return 0


def _x(v):
    return f"{v:5.2f}x" if v is not None else "   - "


def markdown(results, cpu, versions, args):
    lines = [f"CPU: {cpu}, {ncpu()} CPUs; {', '.join(versions)}; {time.strftime('%Y-%m-%d')}; "
             f"inputs of about {args.gib:g} GiB, page cache warm, best of {args.repeat}, "
             f"each run a fresh process (work s: imports excluded).",
             "",
             "| case | method | work s | process s | GiB/s in | time / I/O limit | "
             "minifloat speed-up |",
             "|---|---|---|---|---|---|---|"]
    last = None
    for r in results:
        case = r["case"] if r["case"] != last else ""
        last = r["case"]
        if "work" in r:
            lines.append(f"| {case} | {r['label']} | {r['work']:.2f} | {r['process']:.2f} | "
                         f"{r['gibs']:.2f} | {_x(r['vs_io']).strip()} | "
                         f"{'' if r['method'] == 'mf' else _x(r['mf_speedup']).strip()} |")
        else:
            lines.append(f"| {case} | {r['label']} | fails | | | | {r['error'][:80]} |")
    lines += ["", "minifloat speed-up: that method's time / `minifloat convert`'s (1 job); "
              "above 1, minifloat is faster.  time / I/O limit: against the 1-thread I/O "
              "limit (read the input, write the output's bytes, no computation)."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
