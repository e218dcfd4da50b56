"""Packed-e2m1 checkpoint layouts decoded against their reference code:
gpt-oss MXFP4 experts (transformers' convert_moe_packed_tensors, transposed
as its bf16 gpt-oss holds them), compressed-tensors nvfp4/mxfp4-pack-
quantized (its own decompressors), ModelOpt NVFP4 (its NVFP4QTensor
dequantize formula, computed here in torch) and AMD Quark MXFP4 (the OCP MX
formula).  The stored codes are random bytes, so every e2m1 code, sign and
nibble position is covered; float32 values are compared bit for bit, and
the converted bf16 file with the references' bf16 output."""
import json

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst
from minifloat.io import layouts

from _checkpoints import write_checkpoint as _write
from _cli import run

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(20)


def _values(p, name, chunk=1 << 20):
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups[name]
        assert g.decoded
        parts = [c.copy() for c in layouts.chunks(f, g, chunk)]
    got = np.concatenate(parts).reshape(g.shape)
    return g, got


def _e4m3_scales(shape):
    """Positive finite e4m3 scale codes (0x08..0x77: normal, below 448)."""
    return RNG.integers(0x08, 0x78, shape, dtype=np.uint8)


def _bits(t):
    """A float32 / bfloat16 torch tensor's bit patterns as a NumPy array."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy().view(np.uint32)


def _bf16_bits(x):
    return x.astype(mf.bfloat16).view(np.uint16)


# --------------------------------------------------------------------------- gpt-oss

@pytest.mark.parametrize("chunk,n,groups", [(1 << 20, 24, 5), (64, 24, 5), (1, 24, 5),
                                             (1 << 20, 600, 11), (1, 600, 11)])
def test_gpt_oss_mxfp4_matches_transformers(tmp_path, chunk, n, groups):
    """Several tiles of 256 stored rows (a partial one) and bands of 8 groups
    (a partial one) where n = 600 and 11 groups."""
    mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
    e = 3
    blocks = RNG.integers(0, 256, (e, n, groups, 16), dtype=np.uint8)
    scales = RNG.integers(100, 150, (e, n, groups), dtype=np.uint8)
    scales[0, 0, 0], scales[1, 2, 3] = 1, 254            # tiny and huge (inf in bf16) scales
    bias = RNG.standard_normal((e, n)).astype(np.float32)
    p = _write(tmp_path, {"model.layers.0.mlp.experts.gate_up_proj_blocks": blocks,
                          "model.layers.0.mlp.experts.gate_up_proj_scales": scales,
                          "model.layers.0.mlp.experts.gate_up_proj_bias": bias},
               {"quantization_config": {"quant_method": "mxfp4"}})
    g, got = _values(p, "model.layers.0.mlp.experts.gate_up_proj", chunk)
    assert g.shape == (e, groups * 32, n) and got.dtype == np.float32
    ref32 = mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                             dtype=torch.float32)
    assert tuple(ref32.shape) == g.shape
    np.testing.assert_array_equal(got.view(np.uint32), _bits(ref32))
    ref16 = mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales))
    np.testing.assert_array_equal(_bf16_bits(got), _bits(ref16))

    # convert --to bfloat16: one tensor of the bf16 model's name and shape,
    # its bits transformers', the bias kept bit for bit
    out_p = tmp_path / "out.safetensors"
    run("convert", p, out_p, "--to", "bfloat16")
    with mst.open(out_p) as f:
        assert sorted(f.keys()) == ["model.layers.0.mlp.experts.gate_up_proj",
                                    "model.layers.0.mlp.experts.gate_up_proj_bias"]
        w = np.asarray(f.get_tensor("model.layers.0.mlp.experts.gate_up_proj"))
        assert w.dtype == mf.bfloat16 and w.shape == g.shape
        np.testing.assert_array_equal(w.view(np.uint16), _bits(ref16))
        b = np.asarray(f.get_tensor("model.layers.0.mlp.experts.gate_up_proj_bias"))
        np.testing.assert_array_equal(b.view(np.uint32), bias.view(np.uint32))


@pytest.mark.parametrize("rounding,background", [("nearest", False), ("stochastic", False),
                                                  ("nearest", True)])
def test_gpt_oss_bf16_direct_is_the_cast(tmp_path, monkeypatch, rounding, background):
    """convert --to bfloat16 writes gpt-oss's bf16 codes straight from the
    kernel (every MXFP4 value is a bfloat16 value: tests/io/
    test_unpack_e2m1.py): the same bytes, rows and overall error as the
    float32 values through the cast and its statistics kernel, and the same
    reference sum (what a checkpoint mixing layouts divides its error by),
    with NaN, huge and tiny scales."""
    from minifloat.io import checkpoint
    if background:     # the background writer lends its buffers: bands computed in them
        monkeypatch.setattr(mst, "_BACKGROUND_MIN", 0)
        monkeypatch.setattr(mst, "_BACKGROUND_BUF", 1 << 16)
        monkeypatch.setattr(mst._core, "get_num_threads", lambda: 2)
        lent = []
        real = mst.lend_buffer
        monkeypatch.setattr(mst, "lend_buffer", lambda n: lent.append(real(n)) or lent[-1])
    blocks = RNG.integers(0, 256, (2, 40, 6, 16), dtype=np.uint8)
    scales = RNG.integers(100, 150, (2, 40, 6), dtype=np.uint8)
    scales[0, 0, :4] = [0, 1, 254, 255]
    name = "model.layers.0.mlp.experts.down_proj"
    p = _write(tmp_path, {name + "_blocks": blocks, name + "_scales": scales,
                          "model.layers.0.router.weight":
                              RNG.standard_normal((4, 40)).astype(np.float32)},
               {"quantization_config": {"quant_method": "mxfp4"}})
    got = []
    for direct in (True, False):
        monkeypatch.setattr(checkpoint, "_MXFP4_BF16_DIRECT", direct)
        out = tmp_path / f"out-{direct}.safetensors"
        with np.errstate(all="ignore"):
            rows, overall = checkpoint.convert_file(p, out, "bfloat16", rounding=rounding, seed=1)
        with mst.open(p) as f:
            g = layouts.scan(f, p).groups[name]
            row, tot = {}, {"err2": 0.0, "ref2": 0.0}
            with np.errstate(all="ignore"):
                for _ in checkpoint._dequant_cast_chunks(f, g, np.dtype(mf.bfloat16), False,
                                                         rounding, 1, row, tot, None):
                    pass
        got.append((out.read_bytes(), rows, overall, row, tot))
    assert got[0][0] == got[1][0]
    assert got[0][1:4] == got[1][1:4]
    assert got[0][4]["err2"] == got[1][4]["err2"] == 0.0
    assert got[0][4]["ref2"] == pytest.approx(got[1][4]["ref2"], rel=1e-14) and got[0][4]["ref2"] > 0
    r = [r for r in got[0][1] if r["name"] == name][0]
    assert r["rel_rms_error"] == 0.0 and r["to_nonfinite"] == r["flush_to_zero"] == 0
    if background:
        assert sum(b is not None for b in lent) == 2     # one band per expert, in write()


def test_gpt_oss_nan_scale_is_nan(tmp_path):
    """An e8m0 scale of 0xFF is NaN in the OCP MX spec: the block decodes as
    NaN (transformers' ldexp gives +-inf there and keeps zeros; no checkpoint
    on the hubs has such a scale)."""
    blocks = np.full((1, 2, 1, 16), 0x21, np.uint8)
    scales = np.array([[[127], [255]]], np.uint8)
    p = _write(tmp_path, {"e.down_proj_blocks": blocks, "e.down_proj_scales": scales},
               {"quantization_config": {"quant_method": "mxfp4"}})
    _, got = _values(p, "e.down_proj")
    assert np.isnan(got[0, :, 1]).all() and not np.isnan(got[0, :, 0]).any()
    assert got[0, 0, 0] == 0.5 and got[0, 1, 0] == 1.0


def test_gpt_oss_inspect_shows_values(tmp_path):
    mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
    blocks = RNG.integers(0, 256, (2, 8, 4, 16), dtype=np.uint8)
    scales = RNG.integers(120, 130, (2, 8, 4), dtype=np.uint8)
    p = _write(tmp_path, {"x.down_proj_blocks": blocks, "x.down_proj_scales": scales},
               {"quantization_config": {"quant_method": "mxfp4"}})
    ref = mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                           dtype=torch.float32).numpy().astype(np.float64)
    rep = json.loads(run("inspect", p, "--json").stdout)
    (row,) = rep["files"][0]["tensors"]
    assert row["name"] == "x.down_proj" and row["decoded"] is True
    assert row["shape"] == [2, 128, 8] and row["layout"] == "gpt-oss mxfp4 (32-blocks)"
    for k in ("min", "max", "mean", "std"):
        assert row[k] == pytest.approx(getattr(ref, k)(), rel=1e-9), k


# --------------------------------------------------------------------------- NVFP4 / MXFP4 2-D

def _ct_scheme(name):
    q = pytest.importorskip("compressed_tensors.quantization")
    return q.preset_name_to_scheme(name, ["Linear"])


@pytest.mark.parametrize("n,k", [(8, 64), (5, 48), (33, 160)])
def test_ct_nvfp4_matches_compressed_tensors(tmp_path, n, k):
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    sc = _e4m3_scales((n, k // 16))
    gs = np.array([1.0 / 3.7], np.float32)                 # the reciprocal of a scale_2
    p = _write(tmp_path, {"m.weight_packed": packed, "m.weight_scale": sc.view(mf.float8_e4m3fn),
                          "m.weight_global_scale": gs},
               {"quantization_config": {"quant_method": "compressed-tensors",
                                        "format": "nvfp4-pack-quantized"}})
    g, got = _values(p, "m.weight", chunk=k * 3)
    assert g.layout == "ct_nvfp4_pack" and got.shape == (n, k)
    scheme = _ct_scheme("NVFP4")
    t_sc = torch.from_numpy(sc).view(torch.float8_e4m3fn)
    # compressed-tensors' dequantization, computed in float32
    x_q = unpack_fp4_from_uint8(torch.from_numpy(packed), n, k, dtype=torch.float32)
    ref32 = dequantize(x_q=x_q, scale=t_sc.to(torch.float32), args=scheme.weights,
                       global_scale=torch.from_numpy(gs), dtype=torch.float32)
    np.testing.assert_array_equal(got.view(np.uint32), _bits(ref32))
    # and its decompressor's bf16 output
    out = NVFP4PackedCompressor.decompress({"weight_packed": torch.from_numpy(packed),
                                            "weight_scale": t_sc,
                                            "weight_global_scale": torch.from_numpy(gs)}, scheme)
    np.testing.assert_array_equal(_bf16_bits(got), _bits(out["weight"]))


def test_ct_mxfp4_matches_compressed_tensors(tmp_path):
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
    n, k = 12, 96
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    sc = RNG.integers(100, 150, (n, k // 32), dtype=np.uint8)
    p = _write(tmp_path, {"m.weight_packed": packed, "m.weight_scale": sc},
               {"quantization_config": {"quant_method": "compressed-tensors",
                                        "format": "mxfp4-pack-quantized"}})
    g, got = _values(p, "m.weight", chunk=k)
    assert g.layout == "ct_mxfp4_pack"
    out = MXFP4PackedCompressor.decompress({"weight_packed": torch.from_numpy(packed),
                                            "weight_scale": torch.from_numpy(sc)},
                                           _ct_scheme("MXFP4"))
    np.testing.assert_array_equal(_bf16_bits(got), _bits(out["weight"]))
    # MX values are exact: the float32 ones are e2m1 * 2**(s - 127) in float64
    lut = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(n, k)
    exact = lut[codes] * np.exp2(np.repeat(sc.astype(np.float64) - 127, 32, axis=1))
    np.testing.assert_array_equal(got, exact)


def _modelopt_reference(packed, sc, scale_2):
    """ModelOpt's NVFP4QTensor.dequantize (non-fast path), in torch: the e2m1
    values in bf16, per_block_scale = float32(weight_scale) * scale_2, their
    product in float32."""
    lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6],
                       dtype=torch.bfloat16)
    t = torch.from_numpy(packed)
    unpacked = torch.empty(t.shape[0], t.shape[1] * 2, dtype=torch.long)
    unpacked[:, 1::2] = (t >> 4).long()
    unpacked[:, 0::2] = (t & 0x0F).long()
    deq = lut[unpacked]
    per_block = torch.from_numpy(sc).view(torch.float8_e4m3fn).to(torch.float32) * \
        torch.from_numpy(scale_2)
    n, k = deq.shape
    return (deq.view(n, -1, 16) * per_block.unsqueeze(-1)).reshape(n, k)


def test_modelopt_nvfp4_matches_its_formula(tmp_path):
    n, k = 10, 80
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    sc = _e4m3_scales((n, k // 16))
    scale_2 = np.array(3.7 / 7, np.float32)                 # products round in float32
    p = _write(tmp_path, {"m.weight": packed, "m.weight_scale": sc.view(mf.float8_e4m3fn),
                          "m.weight_scale_2": scale_2, "m.input_scale": np.array(1.0, np.float32)},
               None, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}})
    g, got = _values(p, "m.weight", chunk=k * 4)
    assert g.layout == "modelopt_nvfp4" and got.shape == (n, k)
    ref = _modelopt_reference(packed, sc, scale_2)
    np.testing.assert_array_equal(got.view(np.uint32), _bits(ref))
    # the order matters: (e2m1 * s) * scale_2 would round differently somewhere
    alt = (np.asarray(got / np.repeat((sc.view(mf.float8_e4m3fn).astype(np.float32) * scale_2),
                                      16, axis=1), np.float32)
           * np.repeat(sc.view(mf.float8_e4m3fn).astype(np.float32), 16, axis=1)) * scale_2
    assert not np.array_equal(alt, got)

    out_p = tmp_path / "out.safetensors"
    run("convert", p, out_p, "--to", "bfloat16")
    with mst.open(out_p) as f:
        assert sorted(f.keys()) == ["m.weight"]       # scales and input_scale dropped
        np.testing.assert_array_equal(np.asarray(f.get_tensor("m.weight")).view(np.uint16),
                                      _bf16_bits(ref.numpy()))


def test_quark_mxfp4(tmp_path):
    n, k = 4, 64
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    sc = RNG.integers(110, 140, (n, k // 32), dtype=np.uint8)
    p = _write(tmp_path, {"m.weight": packed, "m.weight_scale": sc})
    g, got = _values(p, "m.weight")
    assert g.layout == "quark_mxfp4"
    lut = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(n, k)
    np.testing.assert_array_equal(got, lut[codes] * np.exp2(np.repeat(sc - 127.0, 32, axis=1)))


def test_nvfp4_ragged_k_not_decoded(tmp_path):
    """K not a multiple of the 16-block: recognised, never guessed."""
    p = _write(tmp_path, {"m.weight": np.zeros((4, 12), np.uint8),
                          "m.weight_scale": np.zeros((4, 1), np.uint8).view(mf.float8_e4m3fn),
                          "m.weight_scale_2": np.array(1.0, np.float32)},
               None, {"producer": {"name": "modelopt"}})
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups["m.weight"]
    assert g.layout == "modelopt_nvfp4" and not g.decoded
    out = run("convert", p, tmp_path / "o.safetensors", "--to", "bfloat16", check=False)
    assert out.returncode == 2 and "not supported yet" in out.stderr


def test_inspect_target_and_plot_bins_use_the_values(tmp_path):
    """--target and --plot's histogram read the decoded values: a histogram
    of log2|x| over the nonzero values of ModelOpt's formula."""
    n, k = 6, 64
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    sc = _e4m3_scales((n, k // 16))
    scale_2 = np.array(0.01, np.float32)
    p = _write(tmp_path, {"m.weight": packed, "m.weight_scale": sc.view(mf.float8_e4m3fn),
                          "m.weight_scale_2": scale_2},
               None, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}})
    from minifloat.io import checkpoint
    bins = np.linspace(-150, 130, 1121)
    rep = checkpoint.inspect_file(p, "float8_e4m3fn", bins=bins)
    (row,) = rep["tensors"]
    ref = _modelopt_reference(packed, sc, scale_2).numpy().astype(np.float64)
    nz = ref[ref != 0]
    want, _ = np.histogram(np.log2(np.abs(nz)), bins)
    np.testing.assert_array_equal(np.asarray(row["hist"])[:len(want)], want)
    assert row["target"]["format"] == "float8_e4m3fn" and row["max"] == pytest.approx(ref.max())
