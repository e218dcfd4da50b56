"""convert --to LAYOUT on a model folder, end to end: a tiny bf16 model
built with transformers is written in each hub layout, and the result is
read back by the reference loaders -- transformers with compressed-tensors
(decompressed: the weights equal minifloat's own dequantization bit for
bit), transformers' MXFP4 loader for gpt-oss -- and by minifloat's layouts
(load(dequantize=True)); DeepSeek FP8 and ModelOpt NVFP4, which no CPU
loader here reads, are checked against their formulas and converted back to
a bf16 folder that from_pretrained loads."""
import json
import os

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst

from _cli import run

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny LlamaForCausalLM in bf16, saved (K = 256 / 384: whole groups of 128)."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=256, intermediate_size=384,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=64)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    d = tmp_path_factory.mktemp("llama") / "ref"
    model.save_pretrained(d)
    return d


def _bits(x):
    return np.asarray(x, np.float32).astype(mf.bfloat16).view(np.uint16)


def _quantized_names(folder):
    with mst.open(folder) as f:
        return sorted(f.keys())


@pytest.mark.parametrize("layout,stored", [
    ("compressed-tensors-fp8", ("weight", "weight_scale")),
    ("compressed-tensors-w4a16", ("weight_packed", "weight_scale", "weight_shape")),
    ("compressed-tensors-nvfp4", ("weight_packed", "weight_scale", "weight_global_scale")),
])
def test_compressed_tensors_layouts_load_in_transformers(llama, tmp_path, layout, stored):
    pytest.importorskip("compressed_tensors")
    out = tmp_path / layout
    run("convert", llama, out, "--to", layout)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"]["quant_method"] == "compressed-tensors"
    names = _quantized_names(out)
    for s in stored:
        assert f"model.layers.0.mlp.down_proj.{s}" in names
    assert "model.embed_tokens.weight" in names and "lm_head.weight" in names
    assert "model.norm.weight" in names
    ref = mst.load(llama)
    got = mst.load(out)
    for n in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"):
        np.testing.assert_array_equal(np.asarray(got[n]).view(np.uint16),
                                      np.asarray(ref[n]).view(np.uint16))   # kept as stored
    # transformers + compressed-tensors decompress it: the same weights as
    # minifloat's own dequantization, bit for bit, and no missing keys
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.bfloat16, output_loading_info=True,
        quantization_config=transformers.CompressedTensorsConfig(run_compressed=False))
    assert not info["missing_keys"]
    sd = model.state_dict()
    ours = mst.load(out, dequantize=True)
    n_linear = 0
    for name, v in ours.items():
        if name.endswith("proj.weight"):
            n_linear += 1
            w = sd[name]
            assert w.dtype == torch.bfloat16
            np.testing.assert_array_equal(w.view(torch.int16).numpy().view(np.uint16), _bits(v),
                                          err_msg=name)
            err = np.abs(np.asarray(v, np.float32) - np.asarray(ref[name], np.float32)).max()
            assert err <= np.abs(np.asarray(ref[name], np.float32)).max() / (
                6 if "nvfp4" in layout or "w4a16" in layout else 14), name
    assert n_linear == 2 * len(LINEAR)


def test_deepseek_fp8_and_back(llama, tmp_path):
    out, back = tmp_path / "fp8", tmp_path / "bf16"
    res = run("convert", llama, out, "--to", "deepseek-fp8", "--ignore", "re:.*o_proj")
    assert "deepseek-fp8" in res.stdout
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization_config"]["quant_method"] == "fp8"
    assert cfg["quantization_config"]["weight_block_size"] == [128, 128]
    f = mst.load(out)
    ref = mst.load(llama)
    w, s = f["model.layers.1.mlp.up_proj.weight"], f["model.layers.1.mlp.up_proj.weight_scale_inv"]
    assert w.dtype == mf.float8_e4m3fn and w.shape == (384, 256) and s.shape == (3, 2)
    # DeepSeek's formula: float32(q) * s per 128x128 block
    deq = w.astype(np.float32) * np.repeat(np.repeat(s, 128, 0), 128, 1)
    r = np.asarray(ref["model.layers.1.mlp.up_proj.weight"], np.float32)
    assert np.abs(deq - r).max() <= np.abs(r).max() / 14
    assert "model.layers.0.self_attn.o_proj.weight_scale_inv" not in f          # --ignore
    assert f["model.layers.0.self_attn.o_proj.weight"].dtype == mf.bfloat16
    # and back to bf16: a folder from_pretrained loads, no missing or unexpected key
    run("convert", out, back, "--to", "bfloat16")
    assert "quantization_config" not in json.loads((back / "config.json").read_text())
    model, info = transformers.AutoModelForCausalLM.from_pretrained(back, dtype=torch.bfloat16,
                                                                    output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    np.testing.assert_array_equal(
        model.state_dict()["model.layers.1.mlp.up_proj.weight"].view(torch.int16).numpy()
        .view(np.uint16), _bits(deq))


def test_modelopt_nvfp4(llama, tmp_path):
    out = tmp_path / "mo"
    run("convert", llama, out, "--to", "modelopt-nvfp4")
    hq = json.loads((out / "hf_quant_config.json").read_text())
    assert hq["producer"]["name"] == "modelopt" and hq["quantization"]["quant_algo"] == "NVFP4"
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    f = mst.load(out)
    ref = mst.load(llama)
    n = "model.layers.0.mlp.gate_proj.weight"
    assert f[n].dtype == np.uint8 and f[n].shape == (384, 128)
    assert f[n + "_scale"].dtype == mf.float8_e4m3fn and f[n + "_scale"].shape == (384, 16)
    assert f[n + "_scale_2"].shape == ()
    # ModelOpt's formula: e2m1 * (float32(scale) * scale_2)
    lut = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    codes = np.stack([f[n] & 15, f[n] >> 4], -1).reshape(384, 256)
    per_block = f[n + "_scale"].astype(np.float32) * np.float32(f[n + "_scale_2"])
    deq = lut[codes] * np.repeat(per_block, 16, axis=1)
    np.testing.assert_array_equal(np.asarray(mst.load(out, dequantize=True)[n]), deq)
    r = np.asarray(ref[n], np.float32)
    assert np.abs(deq - r).max() <= np.abs(r).max() / 5


def test_gpt_oss_mxfp4_loads_in_transformers(tmp_path):
    torch.manual_seed(1)
    cfg = transformers.GptOssConfig(vocab_size=64, hidden_size=64, intermediate_size=64,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=16, num_local_experts=4,
                                    num_experts_per_tok=2, layer_types=["full_attention"] * 2)
    src, out = tmp_path / "ref", tmp_path / "mx"
    transformers.GptOssForCausalLM(cfg).to(torch.bfloat16).save_pretrained(src)
    run("convert", src, out, "--to", "gpt-oss-mxfp4")
    assert json.loads((out / "config.json").read_text())["quantization_config"][
        "quant_method"] == "mxfp4"
    names = _quantized_names(out)
    assert "model.layers.0.mlp.experts.gate_up_proj_blocks" in names
    assert "model.layers.0.mlp.experts.gate_up_proj_bias" in names        # kept
    assert "model.layers.0.self_attn.q_proj.weight" in names              # not an expert
    model = transformers.AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.bfloat16, quantization_config=transformers.Mxfp4Config(dequantize=True))
    sd = model.state_dict()
    ours = mst.load(out, dequantize=True)
    for n in ("model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj"):
        assert tuple(sd[n].shape) == ours[n].shape
        np.testing.assert_array_equal(sd[n].view(torch.int16).numpy().view(np.uint16),
                                      _bits(ours[n]))
    assert os.path.exists(out / "generation_config.json")


def test_layout_errors(llama, tmp_path):
    out = run("convert", llama, tmp_path / "x", "--to", "int4-magic", check=False)
    assert out.returncode == 2
    for name in ("deepseek-fp8", "compressed-tensors-w4a16", "gpt-oss-mxfp4"):
        assert name in out.stderr                                # the error lists the layouts
    out = run("convert", llama, tmp_path / "y", "--to", "bfloat16", "--ignore", "x", check=False)
    assert out.returncode == 2 and "--ignore" in out.stderr
    q = tmp_path / "q"
    run("convert", llama, q, "--to", "deepseek-fp8")
    out = run("convert", q, tmp_path / "z", "--to", "modelopt-nvfp4", check=False)
    assert out.returncode == 2 and "re-quantizing" in out.stderr
    assert not (tmp_path / "z").exists()


def test_inspect_folder_reads_its_config(llama, tmp_path):
    """inspect of the folder itself (not a file in it) reads the folder's
    config.json: a compressed-tensors int4 weight is decoded, its
    statistics those of the dequantized values."""
    out = tmp_path / "w4"
    run("convert", llama, out, "--to", "compressed-tensors-w4a16")
    rep = json.loads(run("inspect", out, "--json").stdout)
    rows = {r["name"]: r for r in rep["files"][0]["tensors"]}
    r = rows["model.layers.0.mlp.down_proj.weight"]
    assert r["decoded"] is True and r["shape"] == [256, 384]
    v = np.asarray(mst.load(out, dequantize=True)["model.layers.0.mlp.down_proj.weight"],
                   np.float64)
    assert r["max"] == pytest.approx(v.max()) and r["std"] == pytest.approx(v.std())
