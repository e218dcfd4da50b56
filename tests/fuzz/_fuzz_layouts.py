"""Fuzz targets for the quantized checkpoint layouts (minifloat.io.layouts,
minifloat.io.packed_int) and the JSON files next to a checkpoint
(config.json, hf_quant_config.json, a sharded checkpoint's index), used by
_fuzz_targets.TARGETS as ``layouts`` and ``config``.

The bytes are read with _fuzz_targets.Reader rather than atheris's
FuzzedDataProvider, as the other targets are, so that the corpus replays in
the tests without atheris.  Each input starts from one of the hub layouts
built valid (a template: the tensors its reference writes, with small
dimensions drawn from the bytes), then mutates it: a tensor dropped,
renamed, given another dtype or another shape, a stranger added, the
config's values replaced by others of any JSON type.
"""
import atexit
import json
import math
import os
import shutil
import tempfile

import numpy as np

from minifloat.io import layouts, packed_int
from minifloat.io import safetensors as st

#: what a user may see from detect() for a malformed set of tensors
LAYOUT_ALLOWED = (ValueError,)
#: what a user may see from reading a checkpoint folder with bad JSON files
CONFIG_ALLOWED = (ValueError, KeyError, OSError)

_DIMS = [1, 2, 3, 4, 8, 16, 32, 33, 64, 128, 129, 200, 0]
_CODES = list(st.DTYPES)
_MODULES = ["m", "model.layers.0.mlp.down_proj", "mlp.experts.down_proj", "a.b", ""]
_SUFFIXES = [".weight", ".weight_scale_inv", ".weight_scale", ".weight_scale_2",
             ".weight_global_scale", ".weight_packed", ".weight_zero_point", ".weight_shape",
             ".weight_g_idx", ".input_scale", ".scales", ".biases", ".scale", ".qweight",
             ".qzeros", ".g_idx", "_blocks", "_scales", ".bias", "_scale", ""]
#: JSON values of every type, for a config field replaced by junk
_JUNK = [None, True, False, 0, 1, -1, 3, 4, 8, 16, 32, 128, 2**40, 0.5, float("1e308"), "",
         "x", "int", "float", "group", "channel", "tensor", "block", "affine", "re:.*",
         "re:(", "Linear", [], [1], [128, 128], [0, 128], {}, {"a": 1}]


def _dim(r):
    k = r.uint(1)
    if k < 240:
        return _DIMS[k % len(_DIMS)]
    return r.uint(2)


def _cdiv(a, b):
    return -(-a // b)


def _junk(r, depth=0):
    k = r.uint(1)
    if k < 200 or depth > 2:
        return r.pick(_JUNK)
    if k < 228:
        return [_junk(r, depth + 1) for _ in range(r.uint(1) % 3)]
    return {r.pick(["num_bits", "strategy", "group_size", "symmetric", "type", "weights",
                    "targets", "bits", "quant_method", "format", "x"]): _junk(r, depth + 1)
            for _ in range(r.uint(1) % 3)}


def _ct_group(r, bits, strategy, group, symmetric):
    w = {"num_bits": bits, "type": "int", "strategy": strategy, "symmetric": symmetric}
    if strategy == "group":
        w["group_size"] = group
    return {"targets": r.pick([["Linear"], ["re:.*down_proj"], ["re:.*other"], []]),
            "weights": w}


def template(r):
    """(tensors name -> (code, shape), config.json dict or None,
    hf_quant_config.json dict or None, __metadata__ dict, values name ->
    bytes for the tensors whose values the layout reads, e.g. weight_shape):
    one hub layout built as its reference writes it, with small dimensions
    from `r`."""
    mod = r.pick(_MODULES)
    w = (mod + "." if mod else "") + "weight"
    n, k = _dim(r), _dim(r)
    kind = r.uint(1) % 16
    t, cfg, hfq, meta, vals = {}, None, None, {}, {}
    modelopt = {"producer": {"name": "modelopt", "version": "0.1"},
                "quantization": {"quant_algo": r.pick(["NVFP4", "FP8"])}}
    if kind == 0:                                   # DeepSeek FP8 block
        bh, bw = r.pick([(128, 128), (64, 64), (1, 128), (32, 16)])
        t = {w: ("F8_E4M3", (n, k)), w + "_scale_inv": ("F32", (_cdiv(n, bh), _cdiv(k, bw)))}
        cfg = {"quant_method": "fp8", "weight_block_size": [bh, bw]}
    elif kind == 1:                                 # gpt-oss MXFP4
        e, g = _dim(r) % 5, _dim(r) % 7
        base = (mod or "experts") + r.pick(["_gate_up_proj", "_down_proj"])
        t = {base + "_blocks": ("U8", (e, n, g, 16)), base + "_scales": ("U8", (e, n, g))}
        cfg = {"quant_method": "mxfp4"}
    elif kind in (2, 3):                            # compressed-tensors float / fp8 block
        bh, bw = r.pick([1, 2, 3, 128]), r.pick([1, 2, 5, 128])
        sshape = r.pick([(n, 1), (n,), (1,), (), (_cdiv(n, bh), _cdiv(k, bw))])
        t = {w: (r.pick(["F8_E4M3", "F8_E5M2"]), (n, k)),
             w + "_scale": (r.pick(["F32", "BF16", "F16"]), sshape)}
        if r.flag():
            t[w.rsplit("weight", 1)[0] + "input_scale"] = ("F32", (1,))
        cfg = {"quant_method": "compressed-tensors", "format": "float-quantized"}
        if r.flag():                                # the FP8_BLOCK preset's config group
            cfg["config_groups"] = {"group_0": {
                "targets": r.pick([["Linear"], ["re:.*weight"], ["re:nothing"], ["re:("]]),
                "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                            "block_structure": r.pick([[bh, bw], f"{bh}x{bw}", [bh], "x"])}}}
    elif kind in (4, 5):                            # compressed-tensors pack-quantized
        bits = r.pick([4, 8, 2, 3])
        strategy = r.pick(["group", "channel", "tensor"])
        group = r.pick([32, 16, 128, 7])
        symmetric = bool(r.flag())
        cols = {"group": _cdiv(k, group), "channel": 1, "tensor": 1}[strategy]
        t = {w + "_packed": ("I32", (n, _cdiv(k * bits, 32))),
             w + "_scale": (r.pick(["BF16", "F32", "F16"]),
                            (1,) if strategy == "tensor" else (n, cols)),
             w + "_shape": ("I64", (2,))}
        vals[w + "_shape"] = np.array([n, k], "<i8").tobytes()
        if not symmetric:
            t[w + "_zero_point"] = ("I32", (1,) if strategy == "tensor"
                                    else (_cdiv(n * bits, 32), cols))
        cfg = {"quant_method": "compressed-tensors", "format": "pack-quantized",
               "config_groups": {"group_0": _ct_group(r, bits, strategy, group, symmetric)}}
        if r.flag():
            cfg["config_groups"]["group_1"] = _ct_group(r, r.pick([4, 8]), "group", 128, True)
    elif kind == 6:                                 # compressed-tensors nvfp4 / mxfp4
        k2 = k + k % 2
        if r.flag():
            t = {w + "_packed": ("U8", (n, k2 // 2)), w + "_scale": ("F8_E4M3", (n, _cdiv(k2, 16))),
                 w + "_global_scale": ("F32", (1,))}
        else:
            t = {w + "_packed": ("U8", (n, k2 // 2)), w + "_scale": ("U8", (n, _cdiv(k2, 32)))}
        cfg = {"quant_method": "compressed-tensors",
               "format": r.pick(["nvfp4-pack-quantized", "mxfp4-pack-quantized"])}
    elif kind == 7:                                 # ModelOpt NVFP4
        k2 = k + k % 2
        t = {w: ("U8", (n, k2 // 2)), w + "_scale": ("F8_E4M3", (n, _cdiv(k2, 16))),
             w + "_scale_2": ("F32", r.pick([(), (1,)]))}
        if r.flag():
            t[w.rsplit("weight", 1)[0] + "input_scale"] = ("F32", ())
        hfq = modelopt
    elif kind == 8:                                 # ModelOpt FP8
        t = {w: ("F8_E4M3", (n, k)), w + "_scale": ("F32", ())}
        hfq = modelopt
    elif kind == 9:                                 # AMD Quark MXFP4
        k2 = k + k % 2
        t = {w: ("U8", (n, k2 // 2)), w + "_scale": ("U8", (n, _cdiv(k2, 32)))}
        cfg = {"quant_method": "quark"}
    elif kind == 10:                                # MLX affine
        bits = r.pick([4, 8, 2, 3, 6])
        group = r.pick([32, 64, 128])
        words = _cdiv(k * bits, 32)
        kk = words * 32 // bits
        mw = (mod + "." if mod else "")
        t = {mw + "weight": ("U32", (n, words)),
             mw + "scales": (r.pick(["BF16", "F16", "F32"]), (n, _cdiv(kk, group)))}
        t[mw + "biases"] = t[mw + "scales"]
        cfg = {"group_size": group, "bits": bits}
        if r.flag():
            cfg["mode"] = r.pick(["affine", "mxfp4"])
        if r.flag() and mod:
            cfg[mod] = {"group_size": r.pick([32, 64]), "bits": r.pick([4, 8])}
    elif kind == 11:                                # FBGEMM FP8
        t = {w: ("F8_E4M3", (n, k)), w + "_scale": ("F32", (n, 1))}
        cfg = {"quant_method": "fbgemm_fp8"}
    elif kind == 12:                                # minifloat's own block-scaled tensors
        fmt = r.pick(["mxfp4", "nvfp4", "mxfp8"])
        t = {w: ("U8", (n, k)), w + "_scale": ("F8_E8M0", (n, _cdiv(k, 32)))}
        info = {"format": fmt, "shape": [n, k], "scale": w + "_scale"}
        if r.flag():
            t[w + "_scale_2"] = ("F32", ())
            info["tensor_scale"] = w + "_scale_2"
        meta = {"minifloat.block_scaled": json.dumps({w: info})}
    elif kind == 13:                                # GPTQ / AWQ
        mw = (mod + "." if mod else "")
        t = {mw + "qweight": ("I32", (k, n)), mw + "qzeros": ("I32", (1, n)),
             mw + "scales": ("F16", (1, n)), mw + "g_idx": ("I32", (k,))}
        cfg = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    elif kind == 14:                                # DeepSeek-V4 style m.scale
        mw = (mod + "." if mod else "")
        t = {mw + "weight": ("F8_E4M3", (n, k)), mw + "scale": ("F8_E8M0", (n, _cdiv(k, 128)))}
    else:                                           # nothing quantized
        t = {w: (r.pick(["BF16", "F32", "F16"]), (n, k))}
    return t, cfg, hfq, meta, vals


def mutate(r, t, cfg, hfq, meta, vals):
    """A few of: a tensor dropped, renamed, its dtype or shape changed, a
    stranger added; a config field replaced by junk."""
    t = dict(t)
    for _ in range(r.uint(1) % 4):
        op = r.uint(1) % 8
        names = list(t)
        if op == 0 and names:
            del t[r.pick(names)]
        elif op == 1 and names:
            old = r.pick(names)
            stem = old.rsplit(".", 1)[0] if "." in old else old
            t[stem + r.pick(_SUFFIXES)] = t.pop(old)
        elif op == 2 and names:
            nm = r.pick(names)
            t[nm] = (r.pick(_CODES), t[nm][1])
        elif op == 3 and names:
            nm = r.pick(names)
            code, shape = t[nm]
            shape = list(shape)
            if shape and r.flag():
                shape[r.uint(1) % len(shape)] = _dim(r)
            elif r.flag():
                shape.append(_dim(r))
            elif shape:
                shape.pop()
            t[nm] = (code, tuple(shape))
        elif op == 4:
            t[r.pick(_MODULES) + r.pick(_SUFFIXES)] = (r.pick(_CODES),
                                                     tuple(_dim(r) for _ in range(r.uint(1) % 4)))
        elif op == 5:
            which = r.uint(1) % 3
            if which == 0:
                d = dict(cfg) if isinstance(cfg, dict) else {}
                d[r.pick(list(d) + ["quant_method", "weight_block_size", "config_groups",
                                    "bits", "group_size", "format", "mode"])] = _junk(r)
                cfg = d
            elif which == 1:
                hfq = {"producer": _junk(r) if r.flag() else {"name": "modelopt"},
                       "quantization": _junk(r)}
            else:
                meta = dict(meta)
                meta["minifloat.block_scaled"] = r.pick(
                    ["{", "[]", "null", '{"w": 1}', '{"weight": {"shape": "x", "scale": []}}',
                     json.dumps({nm: {"shape": [r.sint(1), 2], "scale": r.pick(names or ["x"]),
                                      "tensor_scale": r.pick(names or ["x"])}
                                 for nm in names[:2]}),
                     "[" * 100000])
        elif op == 6 and cfg is not None and isinstance(cfg.get("config_groups"), dict):
            cg = json.loads(json.dumps(cfg["config_groups"]))
            for grp in cg.values():
                if isinstance(grp, dict) and isinstance(grp.get("weights"), dict):
                    grp["weights"][r.pick(["num_bits", "strategy", "group_size", "symmetric",
                                           "type", "block_structure"])] = _junk(r)
                    if r.flag():
                        grp["targets"] = _junk(r)
            cfg = {**cfg, "config_groups": cg}
        elif op == 7:
            if cfg is not None and r.flag():
                cfg = {"quantization_config": cfg}
            elif vals:
                vals = {}                               # the values from the fuzz bytes
    return t, cfg, hfq, meta, vals


class MemFile:
    """A safetensors file in memory (the reading API the layouts use: keys,
    info, get_tensor, metadata), its tensors' bytes from the fuzz input."""

    def __init__(self, t, meta, fill, vals=None):
        self.path = "<fuzz>"
        self._info, self._meta, self._vals = {}, meta, vals or {}
        self._fill = np.frombuffer(fill or b"\0", np.uint8)
        off = 0
        for name, (code, shape) in t.items():
            size, whole = st._nbytes(code, shape)
            if not whole:
                continue
            self._info[name] = st.TensorInfo(code, tuple(shape), off, off + size)
            off += size

    def keys(self):
        return list(self._info)

    def info(self, name):
        return self._info[name]

    def metadata(self):
        return dict(self._meta)

    def get_tensor(self, name):
        i = self._info[name]
        v = self._vals.get(name)
        data = (np.frombuffer(v, np.uint8) if v is not None and len(v) == i.end - i.begin
                else np.resize(self._fill, i.end - i.begin))
        return st._tensor_from_bytes(data, i)

    def nbytes(self):
        return sum(i.end - i.begin for i in self._info.values())


def _check_layouts(lay, tensors):
    """The documented invariants of detect()'s answer."""
    seen = {}
    for g in lay.groups.values():
        stored = list(g.tensors.values())
        assert len(set(stored)) == len(stored), f"{g.name}: a tensor twice in one group {stored}"
        for s in stored:
            assert s in tensors, f"{g.name}: {s!r} is not a stored tensor"
            assert s not in seen, f"{s!r} belongs to {seen[s]!r} and {g.name!r}"
            seen[s] = g.name
        assert g.name not in tensors or g.name in stored, \
            f"logical {g.name!r} hides the stored tensor of the same name"
        if g.shape is not None:
            assert all(type(d) is int and d >= 0 for d in g.shape), (g.name, g.shape)
        if g.decoded:
            _check_decoded_shape(g, tensors)
    assert lay.owner == seen


def _check_decoded_shape(g, tensors):
    """A decoded logical tensor's shape follows from its stored shapes."""
    assert g.shape is not None, g.name
    shp = {role: tensors[n][1] for role, n in g.tensors.items()}
    if g.layout in ("fp8_block", "ct_fp8_block"):
        bh, bw = g.block
        n, k = shp["codes"]
        scale = shp["scale_inv" if g.layout == "fp8_block" else "scale"]
        assert g.shape == (n, k) and scale == (_cdiv(n, bh), _cdiv(k, bw))
    elif g.layout == "gpt_oss_mxfp4":
        e, n, grp, b = shp["blocks"]
        assert b == 16 and g.shape == (e, grp * 32, n) and shp["scales"] == (e, n, grp)
    elif g.layout in layouts._FP4_LAYOUTS:
        n, half = shp["codes"]
        (block,) = g.block
        assert g.shape == (n, 2 * half) and (2 * half) % block == 0
        assert shp["scale"] == (n, 2 * half // block)
    elif g.layout in ("ct_pack_quantized", "mlx"):
        codes = shp["packed" if "packed" in shp else "codes"]
        assert tuple(g.shape[:-1]) == codes[:-1], (g.shape, codes)
    else:                    # FP8 with one scale per tensor or per row
        assert g.shape == shp["codes"], (g.layout, g.shape, shp)
        ns = math.prod(shp["scale"])
        rows = shp["codes"][0] if len(shp["codes"]) == 2 else 1
        assert ns == 1 or (len(shp["codes"]) == 2 and ns == rows), (g.layout, shp)


def _decode_all(f, lay, max_values=1 << 15):
    """Every decoded logical tensor's values: as many as its shape says."""
    for g in lay.groups.values():
        if not g.decoded or math.prod(g.shape) > max_values:
            continue
        k = g.shape[-1] if g.shape else 1
        rows = 0
        for c in layouts.chunks(f, g, 1 << 12):
            assert c.dtype == np.float32 and c.ndim == 2 and c.shape[1] == k, (g.name, c.shape)
            rows += c.shape[0]
        assert rows * k == math.prod(g.shape), (g.name, rows, k, g.shape)


def check_layouts(data):
    """A set of tensor names/dtypes/shapes (a hub layout, mutated), a
    config and metadata drawn from the bytes: minifloat.io.layouts.detect
    and (for the packed integer layouts) packed_int.params must answer or
    raise ValueError; the answer keeps its invariants, and the values of
    what it says it decodes come out in the shape it says."""
    from _fuzz_targets import Reader
    r = Reader(data)
    t, cfg, hfq, meta, vals = mutate(r, *template(r))
    qcfg = cfg.get("quantization_config", cfg) if isinstance(cfg, dict) else None
    if qcfg is not None and not isinstance(qcfg, dict):
        qcfg = None
    f = MemFile(t, meta, r.rest(), vals)
    tensors = {n: (f.info(n).dtype, f.info(n).shape) for n in f.keys()}
    try:
        lay = layouts.detect(tensors, qcfg, hfq, f.metadata())
    except LAYOUT_ALLOWED:
        return
    _check_layouts(lay, tensors)
    for g in lay.groups.values():
        if g.layout in ("ct_pack_quantized", "mlx"):
            try:
                p = packed_int.params(f, g, qcfg)
            except LAYOUT_ALLOWED:
                continue
            g.shape, g.decoded, g.config = tuple(p.shape), True, qcfg
            _check_decoded_shape(g, tensors)
    if f.nbytes() <= 1 << 16:
        _decode_all(f, lay)


# --------------------------------------------------------------------------- config files

_TMP = None


def _folder():
    """One scratch folder per process (emptied for each input): on tmpfs
    where there is one, so the fuzzer's speed is not the disk's."""
    global _TMP
    if _TMP is None or not os.path.isdir(_TMP):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _TMP = tempfile.mkdtemp(prefix="minifloat-fuzz-config-", dir=base)
        atexit.register(shutil.rmtree, _TMP, True)
    for name in os.listdir(_TMP):
        p = os.path.join(_TMP, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
    return _TMP


def _json_text(r, obj):
    """obj as JSON text, sometimes cut short, or nested deeply, or raw bytes."""
    k = r.uint(1)
    if k < 215:
        return json.dumps(obj).encode()
    if k < 230:
        s = json.dumps(obj).encode()
        return s[:r.uint(2) % (len(s) + 1)]
    if k < 240:
        return b"[" * (r.uint(2) % 200000) + b"]" * (r.uint(1) % 3)
    if k < 248:
        return r.pick([b"", b"null", b"[]", b"\"x\"", b"{\"a\": NaN}", b"\xff\xfe", b"{}",
                       b'{"quantization_config": [], "quantization": "x"}'])
    return r.take(r.uint(1))


def _write_checkpoint(folder, r, t, meta, vals, index_mode):
    """The tensors (tiny; data from the bytes) as one file, or as two shards
    with an index json whose weight_map may lie."""
    fill = r.take(r.uint(1) % 64)
    arrays = {}
    for name, (code, shape) in t.items():
        size, whole = st._nbytes(code, shape)
        if not whole or size > 1 << 16:
            continue
        raw = vals.get(name)
        if raw is None or len(raw) != size:
            raw = (fill * (size // max(len(fill), 1) + 1))[:size] if fill else bytes(size)
        arrays[name] = st._tensor_from_bytes(np.frombuffer(bytearray(raw), np.uint8),
                                             st.TensorInfo(code, tuple(shape), 0, size))
    names = list(arrays)
    if not index_mode:
        st.save(os.path.join(folder, "model.safetensors"), arrays, meta or None)
        return None
    split = r.uint(1) % (len(names) + 1)
    shards = {"model-00001-of-00002.safetensors": names[:split],
              "model-00002-of-00002.safetensors": names[split:]}
    weight_map = {}
    for shard, ns in shards.items():
        st.save(os.path.join(folder, shard), {n: arrays[n] for n in ns}, meta or None)
        weight_map.update({n: shard for n in ns})
    for _ in range(r.uint(1) % 3):
        op = r.uint(1) % 5
        if op == 0 and weight_map:                          # a tensor the index omits
            del weight_map[r.pick(list(weight_map))]
        elif op == 1 and weight_map:                        # a shard that is not there
            weight_map[r.pick(list(weight_map))] = r.pick(
                ["missing.safetensors", "", "../x.safetensors", "/abs.safetensors", "sub/",
                 "model-00001-of-00002.safetensors", "a\u0000b"])
        elif op == 2:
            weight_map[r.pick(_MODULES) + r.pick(_SUFFIXES)] = r.pick(list(shards))
        elif op == 3 and weight_map:
            weight_map[r.pick(list(weight_map))] = _junk(r)
        else:
            try:
                os.unlink(os.path.join(folder, r.pick(list(shards))))
            except FileNotFoundError:
                pass
    return {"metadata": r.pick([{}, {"total_size": 1}, [], None, {"a": {"b": 1}}]),
            "weight_map": weight_map if r.uint(1) < 240 else _junk(r)}


def check_config(data):
    """config.json / hf_quant_config.json / a sharded checkpoint's index
    (JSON built from the bytes: a hub layout's config, mutated, or broken
    text) next to a tiny checkpoint in a temporary folder: read_configs,
    detect, packed_int.params, and minifloat.io.safetensors.open(folder,
    dequantize=True) with every tensor read must answer or raise
    ValueError, KeyError or OSError with a message."""
    from _fuzz_targets import Reader
    from minifloat.io import checkpoint
    r = Reader(data)
    t, cfg, hfq, meta, vals = mutate(r, *template(r))
    folder = _folder()
    index_mode = r.uint(1) % 3 == 0
    if cfg is not None or r.flag():
        outer = cfg if cfg is not None and r.uint(1) < 40 else (
            {"model_type": "x", r.pick(["quantization_config", "quantization"]): cfg})
        with open(os.path.join(folder, "config.json"), "wb") as fh:
            fh.write(_json_text(r, outer))
    if hfq is not None or r.uint(1) < 30:
        with open(os.path.join(folder, "hf_quant_config.json"), "wb") as fh:
            fh.write(_json_text(r, hfq))
    index = _write_checkpoint(folder, r, t, meta, vals, index_mode)
    if index is not None:
        with open(os.path.join(folder, "model.safetensors.index.json"), "wb") as fh:
            fh.write(_json_text(r, index))
    how = r.uint(1) % 4

    def message(e):
        assert str(e), f"{type(e).__name__} without a message"

    try:
        qcfg, hfq2 = layouts.read_configs(os.path.join(folder, "model.safetensors"))
        assert qcfg is None or isinstance(qcfg, dict)
        assert hfq2 is None or isinstance(hfq2, dict)
        with st.open(folder) as f:
            tensors = {n: (f.info(n).dtype, f.info(n).shape) for n in f.keys()}
            lay = layouts.detect(tensors, qcfg, hfq2, f.metadata())
            _check_layouts(lay, tensors)
            for g in lay.groups.values():
                if g.layout in ("ct_pack_quantized", "mlx"):
                    try:
                        packed_int.params(f, g, qcfg)
                    except ValueError as e:
                        message(e)
        with st.open(folder, dequantize=True) as f:
            for name in f.keys():
                try:
                    a = f.get_tensor(name)
                except ValueError as e:
                    message(e)
                    continue
                g = f.layouts.groups.get(name)
                if g is not None:
                    assert a.dtype == np.float32 and a.shape == tuple(g.shape), (name, a.shape)
        if how == 0:
            checkpoint.inspect_file(folder)
        elif how == 1:
            layouts.logical_tensors(folder)
    except CONFIG_ALLOWED as e:
        message(e)
