"""The values of integer weights packed into 32-bit words: compressed-tensors'
pack-quantized layout and MLX's affine quantization (minifloat.io.layouts
recognises both; this module decodes them).

    params(f, g, qcfg)        the bits / group / symmetry a logical tensor is
                              decoded with (a PackedParams), or ValueError
    ct_packed_chunks(f, g, qcfg)   its float32 values, a few rows at a time
    mlx_chunks(f, g, qcfg)         the same for an MLX weight

`f` is an open minifloat.io.safetensors file (or index), `g` the Logical of
the weight and `qcfg` config.json's quantization config.  The rules, as the
reference code computes them:

  ct_pack_quantized  (compressed-tensors, compressors/pack_quantized/
      helpers.py unpack_from_int32, quantization/lifecycle/forward_helpers.py
      _dequantize): weight_packed I32 [..., N, ceil(K bits / 32)] holds
      u = q + 2**(bits - 1) in `bits`-bit fields, field j at bits j * bits ..
      of the row's words, lowest first; weight_scale [..., N, K / group]
      ([..., N, 1] per channel, one value per tensor); asymmetric weights
      have weight_zero_point packed the same way along dim 0 ([...,
      ceil(N bits / 32), K / group]).  value = (q - zp) * s computed in the
      scale's dtype: q and zp converted to it, subtracted, multiplied, each
      operation rounded to that dtype.
  mlx  (mlx.core.dequantize, mlx/ops.cpp affine_dequantize, the CPU path):
      weight U32 [..., N, K bits / 32] (bits fields, lowest first), scales and
      biases [..., N, K / group]; value = s * u + b, the product and the sum
      each rounded to the scales' dtype (no FMA).

The float32 values yielded are those roundings widened: exactly the values
the reference produces (in bfloat16 for a bfloat16 scale, and so on).
"""
import math
import re
from dataclasses import dataclass

import numpy as np

from .. import _core

#: the scale dtypes whose arithmetic the kernel reproduces, and the name it
#: takes for them (None: float32, no rounding beyond float32's own)
_ROUND = {"F32": None, "BF16": "bfloat16", "F16": "float16"}
_INT_DTYPES = {"I8", "I16", "I32", "I64", "U8", "U16", "U32"}
_KIND_ZP, _KIND_BIAS = 0, 1


@dataclass(frozen=True)
class PackedParams:
    """How a packed integer weight is decoded: `bits` per code, `group`
    columns per scale (k for one per row), `symmetric` (no zero point),
    `strategy` ("group", "channel", "tensor"), the logical `shape` (the last
    dimension is k, the others multiply to `rows`), and `round_to`, the
    dtype the reference computes in (None: float32)."""
    layout: str
    bits: int
    group: int
    symmetric: bool
    strategy: str
    shape: tuple
    rows: int
    k: int
    round_to: str = None


def params(f, g, qcfg):
    """The PackedParams of logical tensor `g` (layout ct_pack_quantized or
    mlx) of open file `f` under config.json's quantization config `qcfg`;
    ValueError naming what is missing or what disagrees."""
    if g.layout == "ct_pack_quantized":
        return _ct_params(f, g, qcfg)
    if g.layout == "mlx":
        return _mlx_params(f, g, qcfg)
    raise ValueError(f"{g.name}: layout {g.layout!r} is not a packed integer layout")


def _info(f, g, role):
    i = f.info(g.tensors[role])
    return i.dtype, tuple(i.shape)


# --------------------------------------------------------------------------- compressed-tensors

def _ct_candidates(qcfg, module):
    """The config groups' weight arguments that may apply to `module`: every
    int one whose targets may name it (a class name such as "Linear" may:
    the module's class is not in the checkpoint; a "re:" target must match
    the name), narrowed to those whose "re:" targets match where any does;
    and the targets of the int groups left out (for the error message)."""
    out, missed = [], []
    groups = qcfg.get("config_groups") if isinstance(qcfg, dict) else None
    for grp in (groups.values() if isinstance(groups, dict) else ()):
        w = grp.get("weights") if isinstance(grp, dict) else None
        if not isinstance(w, dict) or w.get("type", "int") != "int":
            continue
        targets = grp.get("targets")
        targets = [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []
        hit = False
        for t in targets:
            if t.startswith("re:"):
                try:
                    hit = hit or re.match(t[3:], module) is not None
                except re.error as e:
                    raise ValueError(f"{module}: config group target {t!r} is not a regular "
                                     f"expression ({e})") from None
        if targets and not hit and all(t.startswith("re:") for t in targets):
            missed += targets
            continue
        out.append((w, hit))
    if any(hit for _, hit in out):
        out = [(w, hit) for w, hit in out if hit]
    return [w for w, _ in out], missed


def _ct_try(w, f, g, pshape, k_given):
    """PackedParams for weight arguments `w`, or a string saying why they do
    not fit the stored tensors."""
    bits = w.get("num_bits")
    if type(bits) is not int or not 1 <= bits <= 8:
        return f"num_bits {bits!r} is not 1 to 8"
    strategy = w.get("strategy") or "tensor"
    symmetric = w.get("symmetric", True) is not False
    lead, width = pshape[:-1], pshape[-1]
    rows = math.prod(lead)
    sdt, sshape = _info(f, g, "scale")
    if sdt not in _ROUND:
        return f"the scale's dtype {sdt} is not F32, BF16 or F16"
    if strategy == "group":
        group = w.get("group_size")
        if type(group) is not int or group < 1:
            return f"group strategy with group_size {group!r}"
        if len(sshape) != len(pshape) or sshape[:-1] != lead:
            return f"scale shape {list(sshape)} does not match the packed shape {list(pshape)}"
        k = k_given if k_given is not None else sshape[-1] * group
        if sshape[-1] != -(-k // group):
            return (f"the scale has {sshape[-1]} columns; {k} columns in groups of {group} "
                    f"need {-(-k // group)}")
    elif strategy == "channel":
        if sshape not in (lead + (1,), lead):
            return f"channel strategy, but the scale's shape is {list(sshape)}"
        if k_given is None:
            return "channel strategy without weight_shape: the packed width does not give K"
        k, group = k_given, max(k_given, 1)      # one group: the whole row (even an empty one)
    elif strategy == "tensor":
        if math.prod(sshape) != 1:
            return f"tensor strategy, but the scale's shape is {list(sshape)}"
        if k_given is None:
            return "tensor strategy without weight_shape: the packed width does not give K"
        k, group = k_given, max(k_given, 1)      # one group: the whole row (even an empty one)
    else:
        return f"strategy {strategy!r} is not group, channel or tensor"
    if width != -(-k * bits // 32):
        return (f"the packed width {width} is not ceil({k} * {bits} / 32) = "
                f"{-(-k * bits // 32)}")
    if "zero_point" in g.tensors:
        zdt, zshape = _info(f, g, "zero_point")
        groups = -(-k // group)
        packed_zp = (lead[:-1] + (-(-lead[-1] * bits // 32), groups)) if lead else None
        if zdt not in _INT_DTYPES:
            return f"the zero point's dtype {zdt} is not an integer dtype"
        if strategy == "tensor":
            if math.prod(zshape) != 1:
                return f"tensor strategy, but the zero point's shape is {list(zshape)}"
        elif symmetric:
            if zshape not in (sshape,):
                return f"symmetric, but a packed zero point {list(zshape)} is stored"
        elif zdt != "I32" or zshape != packed_zp:
            return (f"the zero point's shape {list(zshape)} is not the packed "
                    f"{list(packed_zp)}")
    elif not symmetric:
        return "asymmetric, but no weight_zero_point is stored"
    return PackedParams("ct_pack_quantized", bits, group, symmetric, strategy, lead + (k,),
                        rows, k, _ROUND[sdt])


def _ct_params(f, g, qcfg):
    pdt, pshape = _info(f, g, "packed")
    if pdt != "I32" or len(pshape) < 2:
        raise ValueError(f"{g.name}: weight_packed is {pdt} {list(pshape)}, not a 2-d or wider I32")
    k_given = None
    if "shape" in g.tensors:
        # a few integers: checked from the header before anything is read
        # (a bogus weight_shape of a billion values would be read and walked)
        hdt, hshape = _info(f, g, "shape")
        if hdt not in _INT_DTYPES | {"U64"} or len(hshape) > 1 or math.prod(hshape) != len(pshape):
            raise ValueError(f"{g.name}: weight_shape is {hdt} {list(hshape)}, not the "
                             f"{len(pshape)} integers of the packed weight's shape")
        sh = np.asarray(f.get_tensor(g.tensors["shape"])).reshape(-1)
        if sh.dtype.kind not in "iu" or sh.size == 0 \
                or tuple(int(v) for v in sh[:-1]) != pshape[:-1] or int(sh[-1]) < 0:
            raise ValueError(f"{g.name}: weight_shape {sh.tolist()} does not match the packed "
                             f"shape {list(pshape)}")
        k_given = int(sh[-1])
    module = g.name[:-len(".weight")] if g.name.endswith(".weight") else g.name
    cands, missed = _ct_candidates(qcfg, module)
    if not cands and missed:
        raise ValueError(f"{g.name}: no config group of config.json's quantization_config "
                         f"applies to {module!r} (the int groups target "
                         f"{', '.join(missed)})")
    if not cands:
        raise ValueError(f"{g.name}: config.json has no quantization_config.config_groups with "
                         f"int weights (num_bits, strategy, group_size, symmetric)")
    fits, why = [], []
    for w in cands:
        p = _ct_try(w, f, g, pshape, k_given)
        (why if isinstance(p, str) else fits).append(p)
    fits = list(dict.fromkeys(fits))
    if not fits:
        raise ValueError(f"{g.name}: the quantization config contradicts the stored tensors: "
                         + "; ".join(dict.fromkeys(why)))
    if len(fits) > 1:
        raise ValueError(f"{g.name}: several config groups fit the stored tensors ("
                         + ", ".join(f"{p.bits} bits, {p.strategy} {p.group}" for p in fits)
                         + "): which one applies is not known")
    p = fits[0]
    if "g_idx" in g.tensors:
        gi = np.asarray(f.get_tensor(g.tensors["g_idx"])).reshape(-1)
        if gi.shape != (p.k,) or not np.array_equal(gi, np.arange(p.k) // p.group):
            raise ValueError(f"{g.name}: activation-ordered g_idx is not supported")
    return p


def _ct_zero_points(f, g, p):
    """The zero points as float32 [rows, groups] (None: symmetric)."""
    if "zero_point" not in g.tensors:
        return None
    groups = -(-p.k // p.group)
    z = np.asarray(f.get_tensor(g.tensors["zero_point"]))
    if p.strategy == "tensor":
        return np.full((p.rows, 1), z.reshape(-1)[0], np.float32)
    if p.symmetric:
        return np.asarray(z, np.float32).reshape(p.rows, groups)
    # packed along the rows: each slice's columns, transposed, are rows of
    # words the kernel unpacks (scale 1, no zero point)
    n = p.shape[-2]
    z = z.reshape(-1, z.shape[-2], groups)
    out = np.empty((z.shape[0], n, groups), np.float32)
    ones = np.ones((groups, 1), np.float32)
    col = np.empty((groups, n), np.float32)
    for e in range(z.shape[0]):
        words = np.ascontiguousarray(z[e].T, np.int32)
        _core._unpack_affine(words, ones, None, col, p.bits, max(n, 1), _KIND_ZP,
                             1 << (p.bits - 1), None)
        out[e] = col.T
    return out.reshape(p.rows, groups)


def ct_packed_chunks(f, g, qcfg, chunk_values=1 << 20):
    """The float32 values of compressed-tensors pack-quantized weight `g`,
    whole rows at a time (about `chunk_values` values a step, a new array
    each): 2-D arrays [rows, K] (the leading dimensions flattened)."""
    p = params(f, g, qcfg) if g.layout == "ct_pack_quantized" else None
    if p is None:
        raise ValueError(f"{g.name}: layout {g.layout!r} is not ct_pack_quantized")
    if p.rows == 0 or p.k == 0:
        return                   # no values (and a reshape of nothing to -1 is undefined)
    packed = f.get_tensor(g.tensors["packed"]).reshape(p.rows, -1)
    s = f.get_tensor(g.tensors["scale"])
    groups = -(-p.k // p.group) if p.k else 0
    s = s.reshape(1, 1) if p.strategy == "tensor" else s.reshape(p.rows, groups)
    z = _ct_zero_points(f, g, p)
    yield from _run(packed, s, z, p, _KIND_ZP, chunk_values)


# --------------------------------------------------------------------------- MLX

def _mlx_params(f, g, qcfg):
    module = g.name[:-len(".weight")] if g.name.endswith(".weight") else g.name
    cfg = qcfg if isinstance(qcfg, dict) else {}
    if isinstance(cfg.get(module), dict):          # a per-layer override (mixed bits)
        cfg = {**cfg, **cfg[module]}
    bits, group = cfg.get("bits"), cfg.get("group_size")
    if type(bits) is not int or type(group) is not int:
        raise ValueError(f"{g.name}: config.json's quantization has no integer bits and "
                         f"group_size (got bits={bits!r}, group_size={group!r})")
    mode = cfg.get("mode", "affine")
    if mode != "affine":
        raise ValueError(f"{g.name}: MLX quantization mode {mode!r} is not affine")
    if not 1 <= bits <= 8 or group < 1:
        raise ValueError(f"{g.name}: bits {bits} (1 to 8) or group_size {group} (>= 1) out of range")
    cdt, cshape = _info(f, g, "codes")
    if cdt != "U32" or len(cshape) < 2:
        raise ValueError(f"{g.name}: the weight is {cdt} {list(cshape)}, not a 2-d or wider U32")
    if "biases" not in g.tensors:
        raise ValueError(f"{g.name}: affine MLX quantization needs biases; none is stored")
    sdt, sshape = _info(f, g, "scales")
    bdt, bshape = _info(f, g, "biases")
    if sdt not in _ROUND or bdt != sdt:
        raise ValueError(f"{g.name}: scales {sdt} and biases {bdt} must share one dtype of F32, "
                         f"BF16, F16")
    if (cshape[-1] * 32) % bits:
        raise ValueError(f"{g.name}: {cshape[-1]} words per row do not hold a whole number of "
                         f"{bits}-bit codes")
    k = cshape[-1] * 32 // bits
    lead = cshape[:-1]
    if sshape != bshape or sshape[:-1] != lead or sshape[-1] * group != k:
        raise ValueError(f"{g.name}: scales {list(sshape)} and biases {list(bshape)} do not match "
                         f"the weight {list(cshape)}: {k} columns in groups of {group} need "
                         f"{list(lead + (-(-k // group),))}")
    return PackedParams("mlx", bits, group, False, "group", lead + (k,), math.prod(lead), k,
                        _ROUND[sdt])


def mlx_chunks(f, g, qcfg, chunk_values=1 << 20):
    """The float32 values of MLX affine-quantized weight `g`, whole rows at a
    time (about `chunk_values` values a step, a new array each): 2-D arrays
    [rows, K] (the leading dimensions flattened)."""
    p = params(f, g, qcfg) if g.layout == "mlx" else None
    if p is None:
        raise ValueError(f"{g.name}: layout {g.layout!r} is not mlx")
    if p.rows == 0 or p.k == 0:
        return
    codes = f.get_tensor(g.tensors["codes"]).reshape(p.rows, -1)
    s = f.get_tensor(g.tensors["scales"]).reshape(p.rows, -1)
    b = f.get_tensor(g.tensors["biases"]).reshape(p.rows, -1)
    yield from _run(codes, s, b, p, _KIND_BIAS, chunk_values)


# --------------------------------------------------------------------------- the loop

def _run(words, s, z, p, kind, chunk_values):
    if p.rows == 0 or p.k == 0:
        return
    step = max(1, chunk_values // p.k)
    per_tensor = s.shape[0] == 1 and p.rows > 1 and p.strategy == "tensor"
    offset = 1 << (p.bits - 1) if kind == _KIND_ZP else 0
    for r0 in range(0, p.rows, step):
        r1 = min(p.rows, r0 + step)
        # the file's bytes need not be aligned: np.require copies those rows then
        w = np.require(words[r0:r1], words.dtype.newbyteorder("="), ["C", "A"])
        if per_tensor:
            sc = np.full((r1 - r0, 1), np.float32(s.reshape(-1)[0]), np.float32)
        else:
            sc = np.require(np.asarray(s[r0:r1], np.float32), np.float32, ["C", "A"])
        zc = None if z is None else np.require(np.asarray(z[r0:r1], np.float32), np.float32,
                                              ["C", "A"])
        out = np.empty((r1 - r0, p.k), np.float32)
        _core._unpack_affine(w, sc, zc, out, p.bits, p.group, kind, offset, p.round_to)
        yield out
