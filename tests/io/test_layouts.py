"""Quantized checkpoint layouts (minifloat.io.layouts): each hub layout is
recognised from small files written in its naming; DeepSeek FP8 block
weights are decoded (against an independent float64 / float32 computation
of q * s) by inspect and convert; every other quantized layout, and any
unknown one, is refused by convert and shown undecoded by inspect -- never
its codes read as values."""
import json
import math

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst
from minifloat.io import checkpoint, layouts

from _checkpoints import write_checkpoint as _write
from _cli import run

ml = pytest.importorskip("ml_dtypes")

N, K = 200, 300          # ragged 128-blocks on both axes: scale grid 2 x 3
#: the layouts whose values minifloat decodes (the FP8 ones with float scales)
DECODED = {"fp8_block", "ct_float_quantized", "modelopt_fp8", "fbgemm_fp8", "fp8_tensor",
           "fp8_channel", "gpt_oss_mxfp4", "ct_nvfp4_pack", "ct_mxfp4_pack", "modelopt_nvfp4",
           "quark_mxfp4", "mlx"}


CT = {"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                              "config_groups": {"group_0": {"targets": ["Linear"],
                                                            "weights": {"num_bits": 4}}}}}
MODELOPT = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}
NORM = {"model.norm.weight": ("BF16", (32,))}

# (id, tensors, config.json, hf_quant_config.json, layout, logical name, logical shape, stored)
CASES = [
    ("deepseek_fp8", {"m.weight": ("F8_E4M3", (N, K)), "m.weight_scale_inv": ("F32", (2, 3))},
     {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, None,
     "fp8_block", "m.weight", (N, K), ["m.weight", "m.weight_scale_inv"]),
    ("deepseek_fp8_no_config", {"m.weight": ("F8_E4M3", (N, K)),
                                "m.weight_scale_inv": ("F32", (2, 3))}, None, None,
     "fp8_block", "m.weight", (N, K), ["m.weight", "m.weight_scale_inv"]),
    ("deepseek_fp8_64", {"m.weight": ("F8_E4M3", (N, K)), "m.weight_scale_inv": ("F32", (4, 5))},
     {"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}}, None,
     "fp8_block", "m.weight", (N, K), ["m.weight", "m.weight_scale_inv"]),
    ("gpt_oss_mxfp4", {"mlp.experts.down_proj_blocks": ("U8", (2, 8, 3, 16)),
                       "mlp.experts.down_proj_scales": ("U8", (2, 8, 3)),
                       "mlp.experts.down_proj_bias": ("BF16", (2, 8))},
     {"quantization_config": {"quant_method": "mxfp4"}}, None,
     "gpt_oss_mxfp4", "mlp.experts.down_proj", (2, 96, 8),
     ["mlp.experts.down_proj_blocks", "mlp.experts.down_proj_scales"]),
    ("ct_float_quantized", {"m.weight": ("F8_E4M3", (64, 32)), "m.weight_scale": ("BF16", (64, 1)),
                            "m.input_scale": ("F32", (1,))},
     {"quantization_config": {"quant_method": "compressed-tensors"}}, None,
     "ct_float_quantized", "m.weight", (64, 32), ["m.weight", "m.weight_scale", "m.input_scale"]),
    ("ct_fp8_block", {"m.weight": ("F8_E4M3", (N, K)), "m.weight_scale": ("BF16", (2, 3))},
     {"quantization_config": {"quant_method": "compressed-tensors"}}, None,
     "ct_fp8_block", "m.weight", (N, K), ["m.weight", "m.weight_scale"]),
    ("ct_pack_quantized", {"m.weight_packed": ("I32", (64, 4)), "m.weight_scale": ("BF16", (64, 1)),
                           "m.weight_zero_point": ("I32", (8, 1)), "m.weight_shape": ("I64", (2,))},
     CT, None, "ct_pack_quantized", "m.weight", (64, 32),
     ["m.weight_packed", "m.weight_scale", "m.weight_zero_point", "m.weight_shape"]),
    ("ct_nvfp4_pack", {"m.weight_packed": ("U8", (64, 16)), "m.weight_scale": ("F8_E4M3", (64, 2)),
                       "m.weight_global_scale": ("F32", (1,))}, None, None,
     "ct_nvfp4_pack", "m.weight", (64, 32),
     ["m.weight_packed", "m.weight_scale", "m.weight_global_scale"]),
    ("ct_mxfp4_pack", {"m.weight_packed": ("U8", (64, 16)), "m.weight_scale": ("U8", (64, 1))},
     None, None, "ct_mxfp4_pack", "m.weight", (64, 32), ["m.weight_packed", "m.weight_scale"]),
    ("modelopt_nvfp4", {"m.weight": ("U8", (64, 16)), "m.weight_scale": ("F8_E4M3", (64, 2)),
                        "m.weight_scale_2": ("F32", ()), "m.input_scale": ("F32", ())},
     None, MODELOPT, "modelopt_nvfp4", "m.weight", (64, 32),
     ["m.weight", "m.weight_scale", "m.weight_scale_2", "m.input_scale"]),
    ("modelopt_fp8", {"m.weight": ("F8_E4M3", (64, 32)), "m.weight_scale": ("F32", ()),
                      "m.input_scale": ("F32", ())}, None, MODELOPT,
     "modelopt_fp8", "m.weight", (64, 32), ["m.weight", "m.weight_scale", "m.input_scale"]),
    ("mlx", {"m.weight": ("U32", (64, 4)), "m.scales": ("BF16", (64, 1)),
             "m.biases": ("BF16", (64, 1))},
     {"quantization": {"group_size": 32, "bits": 4}}, None,
     "mlx", "m.weight", (64, 32), ["m.weight", "m.scales", "m.biases"]),
    ("fbgemm_fp8", {"m.weight": ("F8_E4M3", (64, 32)), "m.weight_scale": ("F32", (64, 1))},
     {"quantization_config": {"quant_method": "fbgemm_fp8"}}, None,
     "fbgemm_fp8", "m.weight", (64, 32), ["m.weight", "m.weight_scale"]),
    ("unknown_scale_shape", {"m.weight": ("F8_E4M3", (64, 32)), "m.weight_scale": ("F32", (3, 7))},
     None, None, "unknown", "m.weight", None, ["m.weight", "m.weight_scale"]),
    ("unknown_deepseek_bad_grid", {"m.weight": ("F8_E4M3", (N, K)),
                                   "m.weight_scale_inv": ("F32", (3, 3))}, None, None,
     "unknown", "m.weight", None, ["m.weight", "m.weight_scale_inv"]),
    ("unknown_zero_point", {"m.weight": ("I8", (64, 32)), "m.weight_zero_point": ("I8", (64, 1))},
     None, None, "unknown", "m.weight", None, ["m.weight", "m.weight_zero_point"]),
    ("unknown_v4_scale", {"m.weight": ("F8_E4M3", (N, K)), "m.scale": ("U8", (2, 3))},
     None, None, "unknown", "m.weight", None, ["m.weight", "m.scale"]),
    ("unknown_scale_in_other_shard", {"m.weight": ("F8_E4M3", (N, K))},
     {"quantization_config": {"quant_method": "fp8"}}, None, "unknown", "m.weight", None,
     ["m.weight"]),
    ("unknown_qweight", {"m.qweight": ("I32", (4, 64)), "m.qzeros": ("I32", (1, 8)),
                         "m.scales": ("F16", (1, 64))}, None, None, "unknown", "m.weight", None,
     ["m.qweight", "m.qzeros", "m.scales"]),
    ("unknown_codes_in_other_shard", {"m.weight_scale_inv": ("F32", (2, 3))},
     {"quantization_config": {"quant_method": "fp8"}}, None, "unknown", "m.weight_scale_inv",
     None, ["m.weight_scale_inv"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_detect(tmp_path, case):
    _, tensors, config, hfq, layout, name, shape, stored = case
    p = _write(tmp_path, {**tensors, **NORM}, config, hfq)
    with mst.open(p) as f:
        lay = layouts.scan(f, p)
    assert list(lay.groups) == [name]
    g = lay.groups[name]
    assert g.layout == layout and g.decoded == (layout in DECODED)
    if shape is not None:
        assert tuple(g.shape) == shape
    assert sorted(g.tensors.values()) == sorted(stored)
    assert "model.norm.weight" not in lay.owner         # unquantized tensors stay themselves
    if layout == "unknown":
        assert "unknown quantized layout" in g.description


@pytest.mark.parametrize("tensors", [
    {"w": ("F32", (2, 32)), "w_scale": ("F32", (2,))},         # values beside a float: not codes
    {"w8": ("F8_E4M3", (4, 4)), "scales": ("U8", (4,))},        # fp8 values, no quantization config
    {"x.weight": ("BF16", (4, 4)), "x.bias": ("BF16", (4,))},
])
def test_not_quantized(tmp_path, tensors):
    p = _write(tmp_path, tensors)
    with mst.open(p) as f:
        assert not layouts.scan(f, p)


# --------------------------------------------------------------------------- DeepSeek FP8

def _deepseek(tmp_path, n=N, k=K, block=(128, 128), config=True):
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x3C                          # no NaN codes
    q = codes.view(mf.float8_e4m3fn)
    gh, gw = -(-n // block[0]), -(-k // block[1])
    s = (rng.random((gh, gw)) * 1e-2 + 1e-4).astype(np.float32)
    s[0, 0] = np.float32(3.0) ** -20                               # products round in float32
    extra = {"embed.weight": (rng.standard_normal((16, 8))).astype(ml.bfloat16).view(mf.bfloat16),
             "pos": np.arange(5, dtype=np.int64)}
    cfg = ({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                    "weight_block_size": list(block)}} if config else None)
    p = _write(tmp_path, {"layers.0.proj.weight": q, "layers.0.proj.weight_scale_inv": s, **extra},
               cfg, name="ds.safetensors")
    return p, codes, s, extra


def _reference(codes, s, block=(128, 128)):
    """float32(q) * s per 128x128 block, as deepseek-ai/DeepSeek-V3's
    weight_dequant computes it (float32 multiply), block by block; and the
    exact product in float64."""
    q32 = codes.view(ml.float8_e4m3fn).astype(np.float32)
    r32 = np.empty_like(q32)
    r64 = np.empty(q32.shape, np.float64)
    for bi in range(s.shape[0]):
        for bj in range(s.shape[1]):
            sl = (slice(bi * block[0], (bi + 1) * block[0]), slice(bj * block[1], (bj + 1) * block[1]))
            r32[sl] = q32[sl] * s[bi, bj]
            r64[sl] = q32[sl].astype(np.float64) * float(s[bi, bj])
    return r32, r64


@pytest.mark.parametrize("chunk", [1 << 20, K * 7, 1])
def test_fp8_block_dequantize(tmp_path, chunk):
    p, codes, s, _ = _deepseek(tmp_path)
    r32, r64 = _reference(codes, s)
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups["layers.0.proj.weight"]
        got = np.concatenate([c.copy() for c in layouts.fp8_block_chunks(f, g, chunk)])
    assert got.dtype == np.float32 and got.shape == (N, K)
    np.testing.assert_array_equal(got.view(np.uint32), r32.view(np.uint32))
    # and within one float32 rounding of the exact product
    np.testing.assert_allclose(got, r64, rtol=2.0 ** -24, atol=0)


def test_fp8_block_other_block_size(tmp_path):
    p, codes, s, _ = _deepseek(tmp_path, 70, 90, (32, 64))
    r32, _ = _reference(codes, s, (32, 64))
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups["layers.0.proj.weight"]
        assert g.description == "fp8 block 32x64"
        got = np.concatenate([c.copy() for c in layouts.fp8_block_chunks(f, g, 200)])
    np.testing.assert_array_equal(got.view(np.uint32), r32.view(np.uint32))


@pytest.mark.parametrize("to, ml_type", [("bfloat16", "bfloat16"), ("float16", np.float16),
                                         ("float32", np.float32)])
def test_convert_deepseek(tmp_path, to, ml_type):
    p, codes, s, extra = _deepseek(tmp_path)
    out_p = tmp_path / "out.safetensors"
    rep = json.loads(run("convert", p, out_p, "--to", to, "--json").stdout)
    rows = {r["name"]: r for r in rep["tensors"]}
    assert set(rows) == {"layers.0.proj.weight", "embed.weight", "pos"}
    w = rows["layers.0.proj.weight"]
    assert w["layout"] == "fp8 block 128x128" and w["from"] == "F8_E4M3"
    assert w["stored"] == ["layers.0.proj.weight", "layers.0.proj.weight_scale_inv"]
    f = mst.open(out_p)
    assert set(f.keys()) == {"layers.0.proj.weight", "embed.weight", "pos"}   # scales dropped
    code = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}[to]
    assert f.info("layers.0.proj.weight").dtype == code
    assert tuple(f.info("layers.0.proj.weight").shape) == (N, K)
    assert f.info("pos").dtype == "I64"
    r32, _ = _reference(codes, s)
    want = r32.astype(getattr(ml, ml_type) if isinstance(ml_type, str) else ml_type)
    got = np.asarray(f.get_tensor("layers.0.proj.weight"))
    assert got.tobytes() == want.tobytes()                      # one rounding from float32
    e = want.astype(np.float64) - r32
    assert w["rel_rms_error"] == pytest.approx(math.sqrt((e ** 2).sum() / (r32.astype(np.float64) ** 2).sum()),
                                               rel=1e-9, abs=1e-300)
    np.testing.assert_array_equal(np.asarray(f.get_tensor("pos")), extra["pos"])


def test_convert_deepseek_only(tmp_path):
    p, codes, s, _ = _deepseek(tmp_path)
    out_p = tmp_path / "out.safetensors"
    run("convert", p, out_p, "--to", "bfloat16", "--only", "embed*")
    f = mst.open(out_p)     # the quantized weight is left as stored, codes and scales together
    assert f.info("layers.0.proj.weight").dtype == "F8_E4M3"
    assert f.info("layers.0.proj.weight_scale_inv").dtype == "F32"
    assert f.info("embed.weight").dtype == "BF16"
    np.testing.assert_array_equal(np.asarray(f.get_tensor("layers.0.proj.weight")).view(np.uint8),
                                  codes)
    run("convert", p, out_p, "--to", "bfloat16", "--only", "*proj.weight")
    assert set(mst.open(out_p).keys()) == {"layers.0.proj.weight", "embed.weight", "pos"}


@pytest.mark.parametrize("case", [c for c in CASES if c[4] not in DECODED], ids=lambda c: c[0])
def test_convert_refuses_other_layouts(tmp_path, case):
    _, tensors, config, hfq, layout, name, _, _ = case
    p = _write(tmp_path, {**tensors, **NORM}, config, hfq)
    out_p = tmp_path / "out.safetensors"
    out = run("convert", p, out_p, "--to", "bfloat16", check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    msg = out.stderr
    assert str(p) in msg and repr(name) in msg and "not supported yet" in msg
    assert ("unknown quantized layout" in msg) == (layout == "unknown")
    with mst.open(p) as f:
        assert layouts.scan(f, p).groups[name].description.split(" (")[0] in msg
    assert not out_p.exists()


@pytest.mark.parametrize("to", ["float8_e4m3fn", "mxfp4", "nvfp4"])
def test_convert_refuses_requantizing(tmp_path, to):
    p, _, _, _ = _deepseek(tmp_path)
    out_p = tmp_path / "out.safetensors"
    out = run("convert", p, out_p, "--to", to, check=False)
    assert out.returncode == 2 and "re-quantizing" in out.stderr and "not supported yet" in out.stderr
    assert "fp8 block 128x128" in out.stderr and str(p) in out.stderr
    assert not out_p.exists()


def test_convert_only_matching_nothing(tmp_path):
    p = _write(tmp_path, {"a.weight": np.ones((2, 4), np.float32)})
    for to in ("bfloat16", "mxfp4"):
        out = run("convert", p, tmp_path / "o.safetensors", "--to", to, "--only", "nomatch*",
                  check=False)
        assert out.returncode == 2 and "'nomatch*' matches no tensor" in out.stderr
        assert not (tmp_path / "o.safetensors").exists()


# --------------------------------------------------------------------------- inspect

def test_inspect_deepseek(tmp_path):
    p, codes, s, _ = _deepseek(tmp_path)
    r32, _ = _reference(codes, s)
    rep = json.loads(run("inspect", p, "--json", "--target", "float8_e4m3fn").stdout)
    (f,) = rep["files"]
    rows = {r["name"]: r for r in f["tensors"]}
    assert set(rows) == {"layers.0.proj.weight", "embed.weight", "pos"}
    w = rows["layers.0.proj.weight"]
    assert w["layout"] == "fp8 block 128x128" and w["decoded"] is True
    assert w["stored"] == ["layers.0.proj.weight", "layers.0.proj.weight_scale_inv"]
    assert w["shape"] == [N, K] and w["elements"] == N * K
    x = r32.astype(np.float64).reshape(-1)
    for k, v in {"min": x.min(), "max": x.max(), "mean": x.mean(), "std": x.std()}.items():
        assert w[k] == pytest.approx(v, rel=1e-9), k
    assert w["nan"] == 0 and w["inf"] == 0
    assert abs(w["max"]) <= 448 * float(s.max())         # values, not the codes' +-448
    assert w["target"]["format"] == "float8_e4m3fn" and w["target"]["rel_rms_error"] > 0
    assert f["totals"]["tensors"] == 3
    text = run("inspect", p).stdout
    assert "fp8 block 128x128" in text and "weight_scale_inv" not in text.split("quantized")[0]


@pytest.mark.parametrize("target", ["nvfp4", "mxfp4", "bfloat16"])
def test_inspect_deepseek_target_in_process(tmp_path, target, monkeypatch):
    """--target on a decoded tensor measures the cast of its values (what
    the same values in a float32 file give), in chunks of whole rows"""
    p, codes, s, _ = _deepseek(tmp_path)
    r32, _ = _reference(codes, s)
    plain = _write(tmp_path, {"layers.0.proj.weight": r32}, name="plain.safetensors")
    want = checkpoint.inspect_file(plain, target)["tensors"][0]
    monkeypatch.setattr(checkpoint, "KCHUNK", K * 3)       # several chunks, across block rows
    got = {r["name"]: r for r in checkpoint.inspect_file(p, target)["tensors"]}
    got = got["layers.0.proj.weight"]
    for k in ("min", "max", "nan", "inf"):
        assert got[k] == want[k], k
    for k in ("mean", "std"):
        assert got[k] == pytest.approx(want[k], rel=1e-12), k
    for k, v in want["target"].items():
        assert got["target"][k] == (v if isinstance(v, str) else pytest.approx(v, rel=1e-9)), k


@pytest.mark.parametrize("case", [c for c in CASES if c[4] not in DECODED][:6] + [CASES[-1]],
                         ids=lambda c: c[0])
def test_inspect_undecoded(tmp_path, case):
    _, tensors, config, hfq, layout, name, _, stored = case
    p = _write(tmp_path, {**tensors, **NORM}, config, hfq)
    rep = json.loads(run("inspect", p, "--json").stdout)
    rows = {r["name"]: r for r in rep["files"][0]["tensors"]}
    assert set(rows) == {name, "model.norm.weight"} | (set(tensors) - set(stored))
    r = rows[name]
    assert r["decoded"] is False and r["layout_id"] == layout and sorted(r["stored"]) == sorted(stored)
    assert all(r[k] is None for k in ("min", "max", "mean", "std", "nan", "inf"))
    text = run("inspect", p).stdout
    assert "not decoded yet" in text and r["layout"] in text


def test_sharded_deepseek(tmp_path):
    """a weight and its scale in different shards: the index reads as one
    logical tensor; each shard alone is refused, never half cast"""
    p, codes, s, _ = _deepseek(tmp_path)
    r32, _ = _reference(codes, s)
    t = mst.load(p)
    mst.save(tmp_path / "a.safetensors", {"layers.0.proj.weight": t["layers.0.proj.weight"]})
    mst.save(tmp_path / "b.safetensors", {"layers.0.proj.weight_scale_inv":
                                          t["layers.0.proj.weight_scale_inv"]})
    idx = tmp_path / "model.safetensors.index.json"
    mst.save_index(idx, {"layers.0.proj.weight": "a.safetensors",
                         "layers.0.proj.weight_scale_inv": "b.safetensors"})
    rep = json.loads(run("inspect", idx, "--json").stdout)
    (w,) = rep["files"][0]["tensors"]
    assert w["decoded"] is True and w["max"] == pytest.approx(float(r32.max()), rel=1e-12)
    for shard in ("a", "b"):
        out = run("convert", tmp_path / f"{shard}.safetensors", tmp_path / "o.safetensors",
                  "--to", "bfloat16", check=False)
        assert out.returncode == 2 and "unknown quantized layout" in out.stderr
        assert not (tmp_path / "o.safetensors").exists()


def test_convert_deepseek_matches_torch_formula(tmp_path):
    """bit for bit what DeepSeek's weight_dequant / fp8_cast_bf16.py writes:
    float32(q) * s in float32 (scales expanded over their 128x128 blocks,
    ragged at the edges), stored as bfloat16"""
    torch = pytest.importorskip("torch")
    storch = pytest.importorskip("safetensors.torch")
    p, codes, s, _ = _deepseek(tmp_path)
    out_p = tmp_path / "out.safetensors"
    run("convert", p, out_p, "--to", "bfloat16")
    q = torch.from_numpy(codes).view(torch.float8_e4m3fn)
    st_ = torch.from_numpy(s)
    full = st_.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]
    want = (q.to(torch.float32) * full).to(torch.bfloat16)
    got = storch.load_file(str(out_p))["layers.0.proj.weight"]
    assert got.dtype == torch.bfloat16 and torch.equal(got.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("scale_shape, scale_code, config, hfq, layout", [
    ((), "F32", None, MODELOPT, "modelopt_fp8"),
    ((1,), "F32", None, None, "fp8_tensor"),
    ((64, 1), "BF16", {"quantization_config": {"quant_method": "compressed-tensors"}}, None,
     "ct_float_quantized"),
    ((64, 1), "F32", {"quantization_config": {"quant_method": "fbgemm_fp8"}}, None, "fbgemm_fp8"),
    ((64,), "F32", None, None, "fp8_channel"),
])
@pytest.mark.parametrize("to", ["bfloat16", "float32"])
def test_fp8_with_tensor_or_row_scales_decodes(tmp_path, scale_shape, scale_code, config, hfq,
                                               layout, to):
    """w = float32(q) * float32(s), one scale per tensor or per row: inspect's
    statistics and convert's output are of those values, the scale is dropped"""
    rng = np.random.default_rng(3)
    codes = (rng.standard_normal((64, 32)) * 40).astype(ml.float8_e4m3fn)
    sdt = mst.DTYPES[scale_code]
    scale = (rng.uniform(0.001, 0.02, scale_shape)).astype(np.float32).astype(sdt)
    p = _write(tmp_path, {"m.weight": codes.view(mf.float8_e4m3fn), "m.weight_scale": scale,
                          **NORM}, config, hfq)
    s32 = np.asarray(scale, np.float32).reshape(-1, 1) if scale.size > 1 else np.float32(scale)
    ref32 = codes.astype(np.float32) * s32                 # one float32 multiplication
    ref64 = codes.astype(np.float64) * np.asarray(scale, np.float64).reshape(s32.shape)
    rep = json.loads(run("inspect", p, "--json").stdout)
    r = {t["name"]: t for t in rep["files"][0]["tensors"]}["m.weight"]
    assert r["decoded"] is True and r["layout_id"] == layout
    # the statistics are of the float32 values the layout defines (not of the codes)
    assert r["min"] == float(ref32.min()) and r["max"] == float(ref32.max())
    assert math.isclose(r["mean"], float(ref32.astype(np.float64).mean()), rel_tol=1e-9,
                        abs_tol=1e-12)
    assert math.isclose(r["mean"], float(ref64.mean()), rel_tol=1e-6, abs_tol=1e-9)
    out_p = tmp_path / "out.safetensors"
    run("convert", p, out_p, "--to", to)
    got = mst.load(out_p)
    assert set(got) == {"m.weight", "model.norm.weight"}
    w = got["m.weight"]
    want = ref32.astype(mf.bfloat16) if to == "bfloat16" else ref32
    assert w.shape == (64, 32) and w.dtype == want.dtype
    assert np.array_equal(w.view(np.uint8), want.view(np.uint8))
