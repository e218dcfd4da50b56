"""Malformed quantized checkpoints give clear errors: `convert` (and the
dequantizing Python API) refuse them with exit status 2 / an exception
whose one-line message names the user's path and the tensor, never a
traceback nor codes read as values; `inspect` lists such a weight
undecoded (no statistics of its codes), or refuses a checkpoint it cannot
open with the same kind of message."""
import json

import numpy as np
import pytest

import minifloat.io.safetensors as mst
from minifloat.io import layouts

from _cli import run

FP8 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
MODELOPT = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}
NORM = {"model.norm.weight": ("BF16", (8,))}
W = "model.layers.0.mlp.down_proj.weight"


def _arrays(tensors):
    return {n: (np.full(v[1], 1, mst.DTYPES[v[0]]) if isinstance(v, tuple) else v)
            for n, v in tensors.items()}


def _folder(tmp_path, tensors, config=None, hf_quant=None):
    folder = tmp_path / "model"
    folder.mkdir()
    mst.save(folder / "model.safetensors", _arrays(tensors))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return folder


def _sharded(tmp_path, shards, weight_map, config=FP8):
    folder = tmp_path / "model"
    folder.mkdir()
    for name, tensors in shards.items():
        mst.save(folder / name, _arrays(tensors))
    (folder / "config.json").write_text(json.dumps(config))
    mst.save_index(folder / "model.safetensors.index.json", weight_map)
    return folder


def _ct_pack(tmp_path, groups, shape=np.array([16, 32], np.int64)):
    cfg = {"quantization_config": {"quant_method": "compressed-tensors",
                                   "format": "pack-quantized", "config_groups": groups}}
    return _folder(tmp_path, {
        W + "_packed": ("I32", (16, 4)), W + "_scale": ("BF16", (16, 1)),
        W + "_shape": shape, **NORM}, cfg)


INT4_CHANNEL = {"group_0": {"targets": ["Linear"],
                            "weights": {"num_bits": 4, "strategy": "channel"}}}


# (id, build(tmp_path) -> the path a user gives, the logical tensor, words its message has)
CASES = [
    ("fp8_no_scale_inv",
     lambda p: _folder(p, {W: ("F8_E4M3", (200, 300)), **NORM}, FP8),
     W, ["unknown quantized layout", "no scale tensor"]),
    ("fp8_scale_wrong_shape",
     lambda p: _folder(p, {W: ("F8_E4M3", (200, 300)), W + "_scale_inv": ("F32", (3, 3)), **NORM},
                       FP8),
     W, ["unknown quantized layout", W + "_scale_inv is [3, 3]", "needs [2, 3]"]),
    ("scale_in_unlisted_shard",
     lambda p: _sharded(p, {"a.safetensors": {W: ("F8_E4M3", (200, 300)), **NORM},
                            "b.safetensors": {W + "_scale_inv": ("F32", (2, 3)),
                                              "lm_head.weight": ("BF16", (4, 4))}},
                        {W: "a.safetensors", "model.norm.weight": "a.safetensors",
                         "lm_head.weight": "b.safetensors"}),
     W, ["unknown quantized layout", W + "_scale_inv is in shard b.safetensors",
         "does not list"]),
    ("ct_pack_no_matching_group",
     lambda p: _ct_pack(p, {"group_0": {"targets": ["re:.*q_proj$"],
                                        "weights": {"num_bits": 4, "strategy": "channel"}}}),
     W, ["compressed-tensors pack-quantized", "no config group", "re:.*q_proj$"]),
    ("ct_pack_no_int_group",
     lambda p: _ct_pack(p, {"group_0": {"targets": ["Linear"],
                                        "weights": {"num_bits": 8, "type": "float"}}}),
     W, ["compressed-tensors pack-quantized", "no quantization_config.config_groups with int"]),
    # a weight_shape of 2^22 integers is refused from the header, not read and walked
    ("ct_pack_weight_shape_too_long",
     lambda p: _ct_pack(p, INT4_CHANNEL, ("I64", (1 << 22,))),
     W, ["compressed-tensors pack-quantized", "weight_shape is I64 [4194304]",
         "not the 2 integers"]),
    ("ct_pack_weight_shape_not_integers",
     lambda p: _ct_pack(p, INT4_CHANNEL, ("F8_E4M3", (2,))),
     W, ["compressed-tensors pack-quantized", "weight_shape is F8_E4M3 [2]"]),
    ("modelopt_nvfp4_scale_2_not_one_value",
     lambda p: _folder(p, {W: ("U8", (16, 16)), W + "_scale": ("F8_E4M3", (16, 2)),
                           W + "_scale_2": ("F32", (2,)), **NORM}, None, MODELOPT),
     W, ["modelopt nvfp4", W + "_scale_2 holds 2 values", "not a single one"]),
    ("ct_nvfp4_global_scale_not_one_value",
     lambda p: _folder(p, {W + "_packed": ("U8", (16, 16)), W + "_scale": ("F8_E4M3", (16, 2)),
                           W + "_global_scale": ("F32", (1, 2)), **NORM},
                       {"quantization_config": {"quant_method": "compressed-tensors",
                                                "format": "nvfp4-pack-quantized"}}),
     W, ["nvfp4-pack-quantized", W + "_global_scale holds 2 values", "not a single one"]),
]


def _one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_convert_refuses(tmp_path, case):
    _, build, name, words = case
    path = build(tmp_path)
    out_p = tmp_path / "out"
    out = run("convert", path, out_p, "--to", "bfloat16", check=False)
    assert out.returncode == 2
    msg = _one_line(out.stderr)
    assert msg.startswith("minifloat: error: ") and str(path) in msg and repr(name) in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    assert not out_p.exists()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_inspect_shows_undecoded(tmp_path, case):
    _, build, name, words = case
    path = build(tmp_path)
    rep = json.loads(run("inspect", path, "--json").stdout)
    rows = {r["name"]: r for r in rep["files"][0]["tensors"]}
    r = rows[name]
    assert r["decoded"] is False
    assert all(r[k] is None for k in ("min", "max", "mean", "std", "nan", "inf"))
    assert words[0] in r["layout"]
    # the codes and scales are never listed as tensors of their own
    assert not any(n.startswith(W) and n != name for n in rows), sorted(rows)
    text = run("inspect", path).stdout
    assert "not decoded yet" in text
    if words[0] == "unknown quantized layout":
        assert "unknown quantized layout" in text


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_python_api_refuses(tmp_path, case):
    _, build, name, words = case
    path = build(tmp_path)
    with mst.open(path, dequantize=True) as f:
        assert name in f.keys()
        with pytest.raises(ValueError) as e:
            f.get_tensor(name)
        assert "model.norm.weight" in f.keys() and f.get_tensor("model.norm.weight").size == 8
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and repr(name) in msg
    for w in words:
        assert w in msg, (w, msg)
    with pytest.raises(ValueError):
        mst.load(path, dequantize=True)
    (entry,) = [e for e in layouts.logical_tensors(path) if e["name"] == name]
    assert entry["decoded"] is False


def test_missing_shard(tmp_path):
    """an index that puts a tensor in a shard file that is not there"""
    folder = _sharded(tmp_path, {"a.safetensors": {W: ("F8_E4M3", (200, 300))}},
                      {W: "a.safetensors", W + "_scale_inv": "b.safetensors"})
    index = folder / "model.safetensors.index.json"
    for path in (folder, index):
        for args in (("inspect", path), ("convert", path, tmp_path / "out", "--to", "bfloat16")):
            out = run(*args, check=False)
            assert out.returncode == 2
            msg = _one_line(out.stderr)
            assert str(index) in msg and repr(W + "_scale_inv") in msg
            assert "b.safetensors" in msg and "does not exist" in msg
            assert not (tmp_path / "out").exists()
    with pytest.raises(FileNotFoundError) as e:
        mst.open(folder, dequantize=True)
    assert e.value.filename == str(index) and repr(W + "_scale_inv") in e.value.strerror


def test_inspect_reads_a_folders_config(tmp_path):
    """a model folder given to inspect: its config.json is read (an FP8 code
    tensor under quant_method "fp8" is never shown as values)"""
    folder = _folder(tmp_path, {W: ("F8_E4M3", (4, 4))}, FP8)
    for path in (folder, folder / "model.safetensors"):
        (row,) = json.loads(run("inspect", path, "--json").stdout)["files"][0]["tensors"]
        assert row["decoded"] is False and row["max"] is None


def test_ambiguous_claims_are_one_unknown_tensor():
    """a quantized weight whose logical name is also a plain stored tensor:
    one unknown logical tensor holding both, never one of them hidden"""
    t = {"m.weight_packed": ("U8", (4, 8)), "m.weight_scale": ("F8_E4M3", (4, 1)),
         "m.weight_global_scale": ("F32", (1,)), "m.weight": ("BF16", (4, 16)),
         "m.bias": ("BF16", (4,))}
    lay = layouts.detect(t, {"quant_method": "compressed-tensors"})
    (g,) = lay.groups.values()
    assert g.name == "m.weight" and g.layout == "unknown" and not g.decoded
    assert sorted(g.tensors.values()) == ["m.weight", "m.weight_global_scale", "m.weight_packed",
                                          "m.weight_scale"]
    assert "ambiguous" in g.description


def test_fp8_weight_with_packed_sibling_is_unknown():
    t = {"m.weight": ("F8_E4M3", (4, 4)), "m.weight_packed": ("U8", (4, 2)),
         "m.weight_scale": ("F32", (4, 1))}
    (g,) = layouts.detect(t, {"quant_method": "compressed-tensors"}).groups.values()
    assert g.layout == "unknown" and not g.decoded and "m.weight_packed" in g.description
