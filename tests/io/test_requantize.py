"""minifloat.io.requantize: float weights written in the hubs' quantized
layouts, compared bit for bit with each layout's reference quantizer --
compressed-tensors' calculate_qparams / generate_gparam and compressors
(run here), transformers' Fp8Quantize (run here), ModelOpt's
NVFP4QTensor.quantize and triton_kernels' downcast_to_mxfp_torch (not
installed: transcribed in torch below, citing their source) -- then read
back with the references' own decompression and with minifloat.io.layouts,
and the round-trip error checked against what the format allows.  The
weights are random, rounded to the source dtype, with ragged N and K where
the layout allows, an all-zero block, a block with one huge value and a
block of tiny values; the band size is made small so every weight is
quantized in several bands."""
import json
import types

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst
from minifloat.io import layouts
from minifloat.io import requantize as rq

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
_NP = {"BF16": mf.bfloat16, "F16": np.float16, "F32": np.float32}
_TORCH = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


@pytest.fixture(autouse=True)
def _small_bands(monkeypatch):
    monkeypatch.setattr(rq, "_BAND_VALUES", 3000)


def _weight(shape, dtype, zero, huge=1536.0, tiny=(3, 2.0 ** -20)):
    """Random weights in the source dtype (as float32), with the region
    `zero` (a tuple of slices) all zero, one huge value and one row of tiny
    ones."""
    w = (RNG.standard_normal(shape) * 0.02).astype(np.float32)
    w[zero] = 0
    w[(-1,) * len(shape)] = huge
    r, t = tiny
    w[(r % shape[0],) + (slice(None),) * (len(shape) - 1)] *= t / 0.02
    return w.astype(_NP[dtype]).astype(np.float32)


def _write(tmp_path, layout, name, w, dtype="BF16"):
    q = rq.quantizer(layout, dtype)
    calls = []

    def read_rows(a, b):
        calls.append((a, b))
        return w[a:b]

    specs = q.specs(name, w.shape, read_rows)
    assert [s[:3] for s in specs] == q.stored(name, w.shape)
    p = tmp_path / "model.safetensors"
    mst.write(p, specs)
    cfg = rq.quantization_config(layout)
    if rq.config_file(layout) == "config.json":
        (tmp_path / "config.json").write_text(json.dumps({"quantization_config": cfg}))
    else:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(cfg))
    # bounded memory: bands of rows (DeepSeek: 128-row block bands; gpt-oss:
    # one expert), every row read at most twice (NVFP4: three times -- the
    # tensor's amax, the block scales, the codes -- so that no weight keeps
    # its block scales while the writer writes the shard's other scales)
    per = max(b - a for a, b in calls)
    if layout == "gpt-oss-mxfp4":
        assert per == 1
    elif layout == "deepseek-fp8":
        assert per == 128 or per == w.shape[0]
    else:
        assert per * w.shape[1] <= max(3000, w.shape[1])
    passes = 3 if layout in ("compressed-tensors-nvfp4", "modelopt-nvfp4") else 2
    assert sum(b - a for a, b in calls) <= passes * w.shape[0]
    return p, mst.load(p)


def _decoded(p, name):
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups[name]
        assert g.decoded, g
        got = np.concatenate([c.copy() for c in layouts.chunks(f, g, 1000)]).reshape(g.shape)
    return g, got


def _u8(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy()


def _same(a, t):
    """minifloat's stored array and a torch tensor: the same bytes."""
    a = np.ascontiguousarray(a)
    assert a.shape == tuple(t.shape), (a.shape, tuple(t.shape))
    np.testing.assert_array_equal(a.view(np.uint8).reshape(-1), _u8(t).reshape(-1))


def _bits(t):
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy().view(np.uint32)


def _to_dtype_bits(x, dtype):
    return x.astype(_NP[dtype]).view(np.uint16 if dtype != "F32" else np.uint32)


# --------------------------------------------------------------------------- DeepSeek FP8

def _transformers_fp8(w):
    """transformers' Fp8Quantize._quantize_one (integrations/finegrained_fp8.py)
    on the weight padded with zeros to whole 128x128 blocks (it leaves a
    ragged weight unquantized; zeros never change a block's amax), cropped."""
    fp8 = pytest.importorskip("transformers.integrations.finegrained_fp8")
    cfg = types.SimpleNamespace(weight_block_size=[128, 128], scale_fmt=None)
    op = fp8.Fp8Quantize(types.SimpleNamespace(quantization_config=cfg))
    n, k = w.shape
    pad = np.zeros((-(-n // 128) * 128, -(-k // 128) * 128), np.float32)
    pad[:n, :k] = w
    out = op._quantize_one("m.weight", torch.from_numpy(pad).to(torch.bfloat16))
    return out["m.weight"][:n, :k], out["m.weight_scale_inv"]


@pytest.mark.parametrize("n,k", [(300, 200), (128, 256), (5, 7)])
def test_deepseek_fp8_matches_transformers(tmp_path, n, k):
    w = _weight((n, k), "BF16", (slice(0, 128), slice(0, 128)))
    if n > 128 and k > 128:
        w[0:128, 0:128] = 0                     # an all-zero block: scale 1
    p, t = _write(tmp_path, "deepseek-fp8", "m.weight", w)
    q_ref, s_ref = _transformers_fp8(w)
    _same(t["m.weight"], q_ref)
    _same(t["m.weight_scale_inv"], s_ref)
    assert t["m.weight_scale_inv"].shape == (-(-n // 128), -(-k // 128))
    if n > 128 and k > 128:
        assert t["m.weight_scale_inv"][0, 0] == 1.0
    g, got = _decoded(p, "m.weight")
    assert g.layout == "fp8_block"
    s = np.repeat(np.repeat(t["m.weight_scale_inv"], 128, 0), 128, 1)[:n, :k]
    ref = q_ref.to(torch.float32).numpy() * s
    np.testing.assert_array_equal(got, ref)
    # e4m3: 3 mantissa bits (half an ulp: 2**-4 relative), subnormals 2**-9 apart
    assert (np.abs(got - w) <= np.abs(w) * 2.0 ** -4 + s * 2.0 ** -10).all()


# --------------------------------------------------------------------------- compressed-tensors

def _ct(preset):
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.quantization import preset_name_to_scheme
    return preset_name_to_scheme(preset, ["Linear"])


def _ct_qparams(w_t, scheme, groups=None, global_scale=None):
    """llm-compressor's min-max observer: amin / amax of the weight as the
    model holds it (per row, or per group of `groups`), into
    compressed-tensors' calculate_qparams."""
    from compressed_tensors.quantization.utils import calculate_qparams
    x = w_t if groups is None else w_t.unflatten(-1, (-1, groups))
    mn = torch.amin(x, dim=-1, keepdim=groups is None)
    mx = torch.amax(x, dim=-1, keepdim=groups is None)
    s, _ = calculate_qparams(mn, mx, scheme.weights, global_scale=global_scale)
    return s.to(w_t.dtype)                       # the module's scale parameter's dtype


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
@pytest.mark.parametrize("n,k", [(37, 200), (8, 64)])
def test_ct_fp8_matches_compressed_tensors(tmp_path, dtype, n, k):
    scheme = _ct("FP8_DYNAMIC")
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    w = _weight((n, k), dtype, (slice(1, 2), slice(None)), huge=300.0)
    p, t = _write(tmp_path, "compressed-tensors-fp8", "m.weight", w, dtype)
    wt = torch.from_numpy(w).to(_TORCH[dtype])
    s = _ct_qparams(wt, scheme)
    out = FloatQuantizationCompressor.compress({"weight": wt, "weight_scale": s}, scheme)
    _same(t["m.weight"], out["weight"])
    _same(t["m.weight_scale"], s)
    assert t["m.weight_scale"].dtype == _NP[dtype] and t["m.weight_scale"].shape == (n, 1)
    g, got = _decoded(p, "m.weight")
    assert g.layout == "ct_float_quantized"
    back = FloatQuantizationCompressor.decompress(
        {"weight": torch.from_numpy(np.array(t["m.weight"]).view(np.uint8))
         .view(torch.float8_e4m3fn), "weight_scale": s}, scheme)["weight"]
    np.testing.assert_array_equal(_to_dtype_bits(got, dtype), _bits(back.to(_TORCH[dtype])))
    sf = np.asarray(t["m.weight_scale"], np.float32)
    # w / s rounded to the source dtype, then to e4m3
    assert (np.abs(got - w) <= np.abs(w) * (2.0 ** -4 + 2.0 ** -7) + sf * 2.0 ** -9).all()


@pytest.mark.parametrize("dtype", ["BF16", "F32"])
@pytest.mark.parametrize("n,k,block", [(300, 200, [128, 128]), (64, 96, "32x64")])
def test_ct_fp8_block_decodes_as_compressed_tensors(tmp_path, dtype, n, k, block):
    """compressed-tensors' FP8_BLOCK layout (weight_scale on a block grid,
    ragged edge blocks), written by its own compressor and read back: the
    decoded values are its decompress()'s bits, in float32 and rounded to
    bf16 by convert."""
    scheme = _ct("FP8_BLOCK")
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    from compressed_tensors.quantization.utils import calculate_qparams
    scheme.weights.block_structure = [int(v) for v in block.split("x")] \
        if isinstance(block, str) else block
    bh, bw = scheme.weights.block_structure
    w = _weight((n, k), dtype, (slice(1, 2), slice(None)), huge=300.0)
    wt = torch.from_numpy(w.astype(np.float32)).to(_TORCH[dtype])
    rows, cols = -(-n // bh), -(-k // bw)
    pad = torch.zeros(rows * bh, cols * bw, dtype=wt.dtype)
    pad[:n, :k] = wt
    blocks = pad.reshape(rows, bh, cols, bw).transpose(1, 2).reshape(rows, cols, -1)
    s, _ = calculate_qparams(blocks.amin(-1), blocks.amax(-1), scheme.weights)
    s = s.to(wt.dtype)
    out = FloatQuantizationCompressor.compress({"weight": wt, "weight_scale": s}, scheme)
    assert tuple(out["weight"].shape) == (n, k) and tuple(s.shape) == (rows, cols)
    weights = scheme.weights.model_dump(mode="json")
    weights["block_structure"] = block
    cfg = {"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
                                   "config_groups": {"group_0": {"targets": ["Linear"],
                                                                 "weights": weights}}}}
    folder = tmp_path / "ct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    p = folder / "model.safetensors"
    mst.save(p, {"m.weight": _u8(out["weight"]).reshape(n, k).view(mf.float8_e4m3fn),
                 "m.weight_scale": s.float().numpy().astype(_NP[dtype])})
    g, got = _decoded(p, "m.weight")
    assert (g.layout, g.block) == ("ct_fp8_block", (bh, bw))
    back = FloatQuantizationCompressor.decompress(
        {"weight": out["weight"], "weight_scale": s}, scheme)["weight"]
    np.testing.assert_array_equal(_to_dtype_bits(got, dtype), _bits(back.to(_TORCH[dtype])))
    if dtype == "F32":
        np.testing.assert_array_equal(got.view(np.uint32), _bits(back))
    # a scale grid the config's block does not fit: listed, never decoded
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["block_structure"] = [16, 16]
    (folder / "config.json").write_text(json.dumps(cfg))
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups["m.weight"]
    assert g.layout == "unknown" and not g.decoded and "block_structure 16x16" in g.description


def _unpack_int4(packed, k):
    u = packed.view(np.uint32)
    nib = (u[:, :, None] >> (np.arange(8, dtype=np.uint32) * 4)) & 15
    return nib.reshape(u.shape[0], -1)[:, :k].astype(np.int64) - 8


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
@pytest.mark.parametrize("n,k", [(37, 256), (4, 128)])
def test_ct_w4a16_matches_compressed_tensors(tmp_path, dtype, n, k):
    scheme = _ct("W4A16")
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    w = _weight((n, k), dtype, (slice(1, 2), slice(0, 128)))
    p, t = _write(tmp_path, "compressed-tensors-w4a16", "m.weight", w, dtype)
    wt = torch.from_numpy(w).to(_TORCH[dtype])
    s = _ct_qparams(wt, scheme, groups=128)
    out = PackedQuantizationCompressor.compress({"weight": wt, "weight_scale": s}, scheme)
    _same(t["m.weight_packed"], out["weight_packed"])
    _same(t["m.weight_scale"], s)
    np.testing.assert_array_equal(t["m.weight_shape"], [n, k])
    assert t["m.weight_shape"].dtype == np.int64 and tuple(out["weight_shape"].tolist()) == (n, k)
    # layouts knows the layout (not decoded yet); the reference decompresses it
    with mst.open(p) as f:
        g = layouts.scan(f, p).groups["m.weight"]
        assert g.layout == "ct_pack_quantized" and g.shape == (n, k)
    back = PackedQuantizationCompressor.decompress(
        {"weight_packed": torch.from_numpy(np.array(t["m.weight_packed"])),
         "weight_scale": s, "weight_shape": torch.from_numpy(t["m.weight_shape"].copy())},
        scheme)["weight"]
    codes = _unpack_int4(np.ascontiguousarray(t["m.weight_packed"]), k)
    sf = np.repeat(np.asarray(t["m.weight_scale"], np.float32), 128, axis=1)
    mine = (codes * sf).astype(np.float32)
    np.testing.assert_array_equal(_to_dtype_bits(mine, dtype), _bits(back.to(_TORCH[dtype])))
    assert codes.min() >= -8 and codes.max() <= 7
    # half a step (w / s rounded to the source dtype first: its ulp at 8), or
    # what the clamp to 7 steps cuts where the scale was rounded down
    bound = np.maximum(sf * (0.5 + 2.0 ** -4), np.abs(w) - 7 * sf) * (1 + 2.0 ** -7)
    assert (np.abs(mine - w) <= bound).all()


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32"])
@pytest.mark.parametrize("n,k", [(37, 96), (3, 16)])
def test_ct_nvfp4_matches_compressed_tensors(tmp_path, dtype, n, k):
    scheme = _ct("NVFP4")
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.quantization.utils import generate_gparam
    w = _weight((n, k), dtype, (slice(1, 2), slice(0, 16)), huge=60.0)
    p, t = _write(tmp_path, "compressed-tensors-nvfp4", "m.weight", w, dtype)
    wt = torch.from_numpy(w).to(_TORCH[dtype])
    mn, mx = torch.aminmax(wt)
    gs = generate_gparam(mn, mx)
    s = _ct_qparams(wt, scheme, groups=16, global_scale=gs)
    out = NVFP4PackedCompressor.compress({"weight": wt, "weight_scale": s,
                                          "weight_global_scale": gs}, scheme)
    _same(t["m.weight_packed"], out["weight_packed"])
    _same(t["m.weight_scale"], out["weight_scale"])
    _same(t["m.weight_global_scale"], gs)
    assert (np.asarray(t["m.weight_scale"], np.float32)[1, 0] == 0.125)   # the zero block
    g, got = _decoded(p, "m.weight")
    assert g.layout == "ct_nvfp4_pack"
    back = NVFP4PackedCompressor.decompress(
        {"weight_packed": torch.from_numpy(np.array(t["m.weight_packed"])),
         "weight_scale": out["weight_scale"], "weight_global_scale": gs}, scheme)["weight"]
    assert back.dtype == torch.bfloat16            # its decompressor's output
    np.testing.assert_array_equal(_to_dtype_bits(got, "BF16"), _bits(back))
    eff = np.repeat(np.asarray(t["m.weight_scale"], np.float32) / gs.item(), 16, axis=1)
    # e2m1's widest gap (4 to 6) and a block scale rounded down by e4m3
    assert (np.abs(got - w) <= eff * 1.0 + 1e-30).all()


# --------------------------------------------------------------------------- ModelOpt NVFP4

def _modelopt_quantize(w_t):
    """ModelOpt's NVFP4QTensor.quantize (modelopt/torch/quantization/qtensor/
    nvfp4_tensor.py), block 16, transcribed in torch: get_weights_scaling_
    factor_2, get_weights_scaling_factor, the scaled weight, _cast_fp4 and
    its packing."""
    n, k = w_t.shape
    s2 = w_t.abs().amax().float() / (6.0 * 448.0)
    block_amax = w_t.view(n, k // 16, 16).abs().amax(dim=-1).float()
    pbs = block_amax / (6.0 * s2)
    pbs[pbs == 0] = 1.0
    pbs = pbs.clamp_(min=2 ** -9).to(torch.float8_e4m3fn)
    scaled = (w_t.view(n, k // 16, 16) / (pbs.to(torch.float32) * s2).unsqueeze(-1)).view(n, k)
    bounds = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5])
    sign_bit = (scaled < 0).to(torch.uint8)
    a = scaled.abs()
    ordv = torch.searchsorted(bounds, a, out_int32=True).to(torch.uint8)
    odd = torch.any(a.unsqueeze(-1) == bounds[[1, 3, 5]], dim=-1).to(torch.uint8)
    qv = (sign_bit << 3) + ordv + odd
    return (qv[..., 1::2] << 4) | qv[..., 0::2], pbs, s2


@pytest.mark.parametrize("n,k", [(37, 96), (2, 16)])
def test_modelopt_nvfp4_matches_its_quantize(tmp_path, n, k):
    w = _weight((n, k), "BF16", (slice(1, 2), slice(0, 16)), huge=60.0)
    p, t = _write(tmp_path, "modelopt-nvfp4", "m.weight", w)
    q, sc, s2 = _modelopt_quantize(torch.from_numpy(w).to(torch.bfloat16))
    _same(t["m.weight"], q)
    _same(t["m.weight_scale"], sc)
    assert t["m.weight_scale_2"].shape == () and t["m.weight_scale_2"] == s2.item()
    g, got = _decoded(p, "m.weight")
    assert g.layout == "modelopt_nvfp4"
    eff = np.repeat(np.asarray(t["m.weight_scale"], np.float32) * s2.item(), 16, axis=1)
    assert (np.abs(got - w) <= eff * 1.0 + 1e-30).all()


def test_nvfp4_ties_round_to_even(tmp_path):
    """Quotients exactly on the e2m1 grid's midpoints: both references round
    them to the even neighbour (ModelOpt's _cast_fp4, compressed-tensors'
    cast_to_fp4), the sign of a negative tie kept."""
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6, -0.25, -0.75, -1.25, -1.75,
                     -2.5, -3.5, -5, 0], np.float32)
    # block amax 6 and tensor amax 6: s2 = 6 / 2688, block scale e4m3(448) = 448,
    # so w / (448 * s2) = w exactly
    w = ties.reshape(1, 16)
    p, t = _write(tmp_path, "modelopt-nvfp4", "m.weight", w)
    q, _, _ = _modelopt_quantize(torch.from_numpy(w).to(torch.bfloat16))
    _same(t["m.weight"], q)
    codes = np.stack([t["m.weight"] & 15, t["m.weight"] >> 4], -1).reshape(-1)
    np.testing.assert_array_equal(codes, [0, 2, 2, 4, 4, 6, 6, 7, 8, 10, 10, 12, 12, 14, 14, 0])


# --------------------------------------------------------------------------- gpt-oss MXFP4

def _downcast_to_mxfp_torch(src, axis):
    """triton_kernels numerics_details/mxfp.py downcast_to_mxfp_torch(src,
    torch.uint8, axis) with DequantScaleRoundingMode.ROUND_UP (what
    transformers' integrations/mxfp4.py quantize_to_mxfp4 calls),
    transcribed for an axis length that is a multiple of 32."""
    src = src.transpose(axis, src.ndim - 1).to(torch.float32)
    groups = src.view(*src.shape[:-1], src.shape[-1] // 32, 32)
    max_val = groups.abs().amax(dim=-1, keepdim=True)
    ds_int = (max_val / 6.0).view(torch.int32)
    ds_int_rounded = (ds_int + 0x007FFFFF) & 0x7F800000
    dsr = ds_int_rounded.view(torch.float32)
    quant_scale = torch.where(dsr == 0, torch.tensor(0.0), 1.0 / dsr)
    qt = (groups * quant_scale).view(src.shape)
    q_int = qt.contiguous().view(torch.int32)

    def rsh(x, s):
        return (x >> s) & ((1 << (32 - s)) - 1)

    signs = q_int & 0x80000000
    exponents = rsh(q_int, 23) & 0xFF
    mant_orig = q_int & 0x7FFFFF
    is_sub = exponents < 127
    shift = 127 - exponents - 1
    mant_pre = 0x400000 | rsh(mant_orig, 1)
    bit0 = (mant_orig & 0x1) != 0
    mask = (1 << shift.clamp(max=31)) - 1
    dropped = (mant_pre & mask) != 0
    sticky = is_sub & (bit0 | dropped)
    mant = torch.where(is_sub, mant_pre >> shift, mant_orig)
    exponents = torch.maximum(exponents, torch.tensor(126)) - 126
    m2 = rsh(mant, 21) & 0x3
    lsb = rsh(m2, 1) & 0x1
    guard = m2 & 0x1
    sticky |= (mant & ((1 << 21) - 1)) != 0
    inc = guard & (sticky.to(torch.int32) | lsb)
    e2m1 = rsh(((exponents << 2) | m2) + inc, 1)
    e2m1 = torch.minimum(e2m1, torch.tensor(0x7))
    v = (rsh(signs, 28) | e2m1).to(torch.uint8)
    v = v.view(*v.shape[:-1], v.shape[-1] // 2, 2)
    packed = v[..., 0] | (v[..., 1] << 4)
    scale = (ds_int_rounded >> 23).to(torch.uint8).squeeze(-1)
    return packed.transpose(axis, src.ndim - 1), scale.transpose(axis, src.ndim - 1)


@pytest.mark.parametrize("e,k,n", [(3, 96, 40), (2, 64, 1)])
def test_gpt_oss_mxfp4_matches_triton_kernels(tmp_path, e, k, n):
    mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
    w = _weight((e, k, n), "BF16", (0, slice(0, 32), 0))
    w[-1, 0:32, -1] = 6.0 * 2.0 ** -3                  # amax / 6 a power of two: kept
    name = "model.layers.0.mlp.experts.gate_up_proj"
    p, t = _write(tmp_path, "gpt-oss-mxfp4", name, w)
    packed, scale = _downcast_to_mxfp_torch(torch.from_numpy(w).to(torch.bfloat16), axis=1)
    # stored as gpt-oss does: [E, N, K/32, 16] and [E, N, K/32]
    ref_blocks = packed.transpose(1, 2).contiguous().view(e, n, k // 32, 16)
    _same(t[name + "_blocks"], ref_blocks)
    _same(t[name + "_scales"], scale.transpose(1, 2))
    assert t[name + "_scales"][0, 0, 0] == 0                    # the zero block
    g, got = _decoded(p, name)
    assert g.layout == "gpt_oss_mxfp4" and got.shape == (e, k, n)
    ref = mxfp4.convert_moe_packed_tensors(torch.from_numpy(t[name + "_blocks"].copy()),
                                           torch.from_numpy(t[name + "_scales"].copy()),
                                           dtype=torch.float32)
    np.testing.assert_array_equal(got.view(np.uint32), _bits(ref))
    x = np.exp2(np.repeat(t[name + "_scales"].astype(np.float64) - 127, 32, axis=2))
    x = np.transpose(x, (0, 2, 1))
    # rounded up scale: nothing clipped; e2m1's widest gap is 2
    assert (np.abs(got - w) <= x).all()


# --------------------------------------------------------------------------- selection, configs

@pytest.mark.parametrize("name,shape,layout,want", [
    ("model.layers.0.self_attn.q_proj.weight", (4096, 4096), "deepseek-fp8", True),
    ("model.layers.0.self_attn.q_proj.weight", (100, 70), "deepseek-fp8", True),
    ("model.layers.0.self_attn.q_proj.weight", (100, 70), "compressed-tensors-fp8", True),
    ("model.layers.0.self_attn.q_proj.weight", (100, 200), "compressed-tensors-w4a16", False),
    ("model.layers.0.self_attn.q_proj.weight", (100, 256), "compressed-tensors-w4a16", True),
    ("model.layers.0.self_attn.q_proj.weight", (100, 40), "compressed-tensors-nvfp4", False),
    ("model.layers.0.self_attn.q_proj.weight", (100, 48), "modelopt-nvfp4", True),
    ("model.layers.0.self_attn.q_proj.bias", (4096,), "deepseek-fp8", False),
    ("model.embed_tokens.weight", (1000, 256), "deepseek-fp8", False),
    ("lm_head.weight", (1000, 256), "compressed-tensors-fp8", False),
    ("model.layers.0.input_layernorm.weight", (256,), "deepseek-fp8", False),
    ("model.layers.0.mlp.gate.weight", (64, 256), "deepseek-fp8", False),
    ("model.layers.0.mlp.router.weight", (32, 256), "modelopt-nvfp4", False),
    ("model.layers.0.mlp.gate_proj.weight", (512, 256), "modelopt-nvfp4", True),
    ("model.layers.0.mlp.shared_expert_gate.weight", (1, 256), "compressed-tensors-fp8", False),
    ("model.layers.0.mlp.experts.gate_up_proj", (4, 64, 96), "gpt-oss-mxfp4", True),
    ("model.layers.0.mlp.experts.down_proj", (4, 48, 96), "gpt-oss-mxfp4", False),
    ("model.layers.0.mlp.experts.gate_up_proj_bias", (4, 96), "gpt-oss-mxfp4", False),
    ("model.layers.0.self_attn.q_proj.weight", (64, 64), "gpt-oss-mxfp4", False),
    ("model.layers.0.mlp.router.weight", (4, 64), "gpt-oss-mxfp4", False),
])
def test_should_quantize(name, shape, layout, want):
    assert rq.should_quantize(name, shape, layout) is want


def test_should_quantize_ignore_patterns():
    n = "model.layers.3.self_attn.o_proj.weight"
    assert not rq.should_quantize(n, (64, 64), "deepseek-fp8", ["re:.*o_proj$"])
    assert not rq.should_quantize(n, (64, 64), "deepseek-fp8", ["model.layers.3.*"])
    assert not rq.should_quantize(n, (64, 64), "deepseek-fp8", ["model.layers.3.self_attn.o_proj"])
    assert rq.should_quantize(n, (64, 64), "deepseek-fp8", ["model.layers.4.*", "re:.*q_proj$"])
    with pytest.raises(ValueError):
        rq.should_quantize(n, (64, 64), "int3")


@pytest.mark.parametrize("layout,preset", [("compressed-tensors-fp8", "FP8_DYNAMIC"),
                                           ("compressed-tensors-w4a16", "W4A16"),
                                           ("compressed-tensors-nvfp4", "NVFP4A16")])
def test_ct_config_is_what_model_compressor_writes(tmp_path, layout, preset):
    scheme = _ct(preset)
    import compressed_tensors
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig
    fmt = rq.quantization_config(layout)["format"]
    qc = QuantizationConfig(config_groups={"group_0": scheme}, format=fmt,
                            ignore=["lm_head", "re:.*mlp.gate$"], quantization_status="compressed")
    ModelCompressor(quantization_config=qc).update_config(str(tmp_path))
    ref = json.loads((tmp_path / "config.json").read_text())["quantization_config"]
    mine = json.loads(json.dumps(rq.quantization_config(layout,
                                                        ignore=["lm_head", "re:.*mlp.gate$"])))
    assert ref.pop("version") == compressed_tensors.__version__
    mine.pop("version")
    assert mine == ref
    # and compressed-tensors reads it back as that scheme
    back = QuantizationConfig.model_validate(
        {k: v for k, v in mine.items() if k not in ("sparsity_config", "transform_config")})
    assert back.format == fmt and back.config_groups["group_0"].weights == scheme.weights


def test_other_configs():
    assert rq.quantization_config("deepseek-fp8") == {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
        "weight_block_size": [128, 128]}
    g = rq.quantization_config("gpt-oss-mxfp4")
    assert g["quant_method"] == "mxfp4" and "lm_head" in g["modules_to_not_convert"]
    m = rq.quantization_config("modelopt-nvfp4", ignore=["lm_head", "model.layers.0.mlp.gate"])
    assert m["producer"]["name"] == "modelopt" and m["quantization"]["quant_algo"] == "NVFP4"
    assert m["quantization"]["group_size"] == 16
    assert m["quantization"]["exclude_modules"] == ["lm_head", "model.layers.0.mlp.gate"]
    assert rq.config_file("modelopt-nvfp4") == "hf_quant_config.json"
    assert {rq.config_file(lay) for lay in rq.LAYOUTS if lay != "modelopt-nvfp4"} == {"config.json"}
    # transformers reads the DeepSeek and gpt-oss configs
    tq = pytest.importorskip("transformers.utils.quantization_config")
    c = tq.FineGrainedFP8Config.from_dict(rq.quantization_config("deepseek-fp8"))
    assert tuple(c.weight_block_size) == (128, 128)
    c = tq.Mxfp4Config.from_dict(g)
    assert "lm_head" in c.modules_to_not_convert


def test_scales_first_or_codes_first():
    """The stored tensors' iterables can be consumed in any order (write sorts
    them by dtype: DeepSeek's F32 scales come before the F8 codes), each
    once, with the same bytes."""
    w = _weight((130, 48), "BF16", (slice(0, 1), slice(0, 16)))
    for lay in ("deepseek-fp8", "compressed-tensors-nvfp4", "modelopt-nvfp4"):
        q = rq.quantizer(lay)
        a = q.chunks("m.weight", w.shape, lambda r0, r1: w[r0:r1])
        b = q.chunks("m.weight", w.shape, lambda r0, r1: w[r0:r1])
        fa = {k: b"".join(bytes(c) for c in v) for k, v in a.items()}
        fb = {k: b"".join(bytes(c) for c in b[k]) for k in reversed(list(b))}
        assert fa == fb
    w3 = _weight((2, 64, 8), "BF16", (0, slice(0, 32), 0))
    q = rq.quantizer("gpt-oss-mxfp4")
    a = q.chunks("x.down_proj", w3.shape, lambda r0, r1: w3[r0:r1])
    b = q.chunks("x.down_proj", w3.shape, lambda r0, r1: w3[r0:r1])
    fa = {k: b"".join(bytes(c) for c in v) for k, v in a.items()}
    fb = {k: b"".join(bytes(c) for c in b[k]) for k in reversed(list(b))}
    assert fa == fb


def test_bad_arguments():
    with pytest.raises(ValueError):
        rq.quantizer("fp8")
    with pytest.raises(ValueError):
        rq.quantizer("deepseek-fp8", dtype="F64")
