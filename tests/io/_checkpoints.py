"""Test helpers for checkpoint files (not shipped): writing a checkpoint
with its folder's config files, opening one with its layouts detected, and
comparing float32 values bit for bit."""
import json

import numpy as np

import minifloat.io.safetensors as mst
from minifloat.io import layouts


def write_checkpoint(folder, tensors, config=None, hf_quant=None, name="model.safetensors"):
    """Write `tensors` (name -> array, or (safetensors code, shape) for
    zeros of that dtype) as folder/name, with the folder's config.json and
    hf_quant_config.json where given; returns the file's path."""
    arrays = {n: (np.zeros(v[1], mst.DTYPES[v[0]]) if isinstance(v, tuple) else v)
              for n, v in tensors.items()}
    p = folder / name
    mst.save(p, arrays)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return p


def open_detected(tmp_path, arrays, qcfg):
    """Save `arrays`, detect the layouts under `qcfg`: the open file and its Layouts."""
    p = tmp_path / "model.safetensors"
    mst.save(p, arrays)
    f = mst.open(p)
    tensors = {n: (f.info(n).dtype, f.info(n).shape) for n in f.keys()}
    return f, layouts.detect(tensors, qcfg, None, f.metadata())


def bits_of(a):
    """float32 values as their bits (NaN-safe exact comparison)."""
    return np.ascontiguousarray(a, np.float32).view(np.uint32)
