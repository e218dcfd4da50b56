"""Packed integer weights (minifloat.io.packed_int): compressed-tensors
pack-quantized and MLX affine checkpoints, written by the references' own
packers, recognised by minifloat.io.layouts.detect and decoded a few rows at
a time, bit for bit against the references' own dequantization (float32 and
the scale's dtype); the _core._unpack_affine kernel against an independent
numpy bit-stream unpacking for ragged shapes and every width 1 to 8."""
import json

import numpy as np
import pytest

import minifloat as mf
import minifloat.io.safetensors as mst
from minifloat import _core
from minifloat.io import packed_int

from _checkpoints import bits_of as _bits_of, open_detected as _open

BF16 = np.dtype(mf.bfloat16)


# --------------------------------------------------------------------------- helpers

def _stream_unpack(words, k, bits):
    """Field j of each row: bits j*bits .. of the row's words, lowest first (numpy)."""
    w = np.ascontiguousarray(words).view(np.uint32)
    b = np.unpackbits(w.astype("<u4").view(np.uint8).reshape(w.shape[0], -1), axis=1,
                      bitorder="little")[:, :k * bits].reshape(w.shape[0], k, bits)
    return (b.astype(np.int64) << np.arange(bits)).sum(-1)


# --------------------------------------------------------------------------- the kernel

@pytest.mark.parametrize("bits", range(1, 9))
@pytest.mark.parametrize("k,group", [(1, 1), (37, 5), (100, 32), (64, 64), (33, 100)])
def test_kernel_against_numpy(bits, k, group):
    rng = np.random.default_rng(bits * 1000 + k)
    rows = 7
    need = -(-k * bits // 32)
    words = rng.integers(0, 2**32, (rows, need), dtype=np.uint64).astype(np.uint32)
    groups = -(-k // group)
    s = rng.standard_normal((rows, groups)).astype(np.float32)
    z = rng.integers(-3, 4, (rows, groups)).astype(np.float32)
    u = _stream_unpack(words, k, bits)
    gidx = np.arange(k) // group
    S, Z = s[:, gidx], z[:, gidx]
    off = 1 << (bits - 1)
    out = np.empty((rows, k), np.float32)
    _core._unpack_affine(words, s, z, out, bits, group, 0, off, None)
    want = ((u - off).astype(np.float32) - Z) * S
    assert np.array_equal(_bits_of(out), _bits_of(want))
    _core._unpack_affine(words.view(np.int32), s, z, out, bits, group, 1, 0, None)
    want = S * u.astype(np.float32) + Z
    assert np.array_equal(_bits_of(out), _bits_of(want))
    # bfloat16 arithmetic: each operation rounded to bfloat16
    sb = s.astype(BF16).astype(np.float32)
    _core._unpack_affine(words, sb, z, out, bits, group, 1, 0, "bfloat16")
    prod = (sb[:, gidx] * u.astype(np.float32)).astype(BF16).astype(np.float32)
    want = (prod + Z).astype(BF16).astype(np.float32)
    assert np.array_equal(_bits_of(out), _bits_of(want))


@pytest.mark.parametrize("rnd,exps", [("float16", (-34, 10)), ("bfloat16", (-140, 122))])
def test_kernel_rounding_in_the_scale_dtype(rnd, exps):
    """Every product and sum rounded to the scale's dtype, as numpy's casts
    round: subnormal and overflowing results included."""
    dt = np.dtype(np.float16) if rnd == "float16" else BF16
    rng = np.random.default_rng(7)
    rows, k, bits = 64, 256, 8
    words = rng.integers(0, 2**32, (rows, k * bits // 32), dtype=np.uint64).astype(np.uint32)
    mag = np.float32(2.0) ** np.linspace(*exps, rows).round().astype(np.float32)[:, None]
    with np.errstate(over="ignore", under="ignore"):
        s = (rng.standard_normal((rows, 1)) * mag).astype(np.float32).astype(dt).astype(np.float32)
        z = (rng.standard_normal((rows, 1)) * mag).astype(np.float32).astype(dt).astype(np.float32)
    u = _stream_unpack(words, k, bits).astype(np.float32)
    out = np.empty((rows, k), np.float32)
    _core._unpack_affine(words, s, z, out, bits, k, 1, 0, rnd)
    with np.errstate(over="ignore", under="ignore"):
        want = ((s * u).astype(dt).astype(np.float32) + z).astype(dt).astype(np.float32)
    tiny = np.finfo(np.float16).tiny if rnd == "float16" else np.float32(2.0**-126)
    assert np.isinf(want).any() and (np.abs(want[want != 0]) < tiny).any()
    assert np.array_equal(_bits_of(out), _bits_of(want))
    _core._unpack_affine(words, s, z, out, bits, k, 0, 128, rnd)
    with np.errstate(over="ignore", under="ignore"):
        q = ((u - 128) - z).astype(dt).astype(np.float32)
        want = (q * s).astype(dt).astype(np.float32)
    assert np.array_equal(_bits_of(out), _bits_of(want))


def test_kernel_checks_shapes():
    w = np.zeros((4, 2), np.uint32)
    s = np.ones((4, 2), np.float32)
    s1 = np.ones((4, 1), np.float32)
    out = np.empty((4, 17), np.float32)        # 17 4-bit fields need 3 words
    with pytest.raises(ValueError, match="words has 2 words per row"):
        _core._unpack_affine(w, s, None, out, 4, 16, 0, 8, None)
    out = np.empty((4, 16), np.float32)
    with pytest.raises(ValueError, match="scale has 2 columns"):
        _core._unpack_affine(w, s, None, out, 4, 16, 0, 8, None)
    with pytest.raises(ValueError, match="rows disagree"):
        _core._unpack_affine(w[:3], s1, None, out, 4, 16, 0, 8, None)
    with pytest.raises(ValueError, match="z has shape"):
        _core._unpack_affine(w, s1, s, out, 4, 16, 0, 8, None)
    with pytest.raises(ValueError, match="bias"):
        _core._unpack_affine(w, s1, None, out, 4, 16, 1, 0, None)
    with pytest.raises(ValueError, match="bits must be 1 to 8"):
        _core._unpack_affine(w, s1, None, out, 9, 16, 0, 8, None)
    with pytest.raises(ValueError, match="round_to"):
        _core._unpack_affine(w, s1, None, out, 4, 16, 0, 8, "float8")
    with pytest.raises(ValueError, match="C-contiguous"):
        _core._unpack_affine(w, s1, None, out[:, ::2], 4, 16, 0, 8, None)


# --------------------------------------------------------------------------- compressed-tensors

torch = pytest.importorskip("torch")


def _ct_checkpoint(n, k, bits, strategy, group, symmetric, sdtype, seed=0):
    """A weight quantized and packed by compressed-tensors' own compressor:
    (stored tensors as numpy, the quantization config, its decompressed weight)."""
    ctq = pytest.importorskip("compressed_tensors.quantization")
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization.utils import calculate_qparams
    args = ctq.QuantizationArgs(num_bits=bits, strategy=strategy, group_size=group,
                                symmetric=symmetric)
    scheme = ctq.QuantizationScheme(targets=["Linear"], weights=args)
    g = torch.Generator().manual_seed(seed)
    lead = n if isinstance(n, tuple) else (n,)
    w = (torch.randn(*lead, k, generator=g) * 0.05).to(sdtype)
    if strategy == "group":
        x = w.float().reshape(*lead, k // group, group)
        mn, mx = x.amin(-1), x.amax(-1)
    else:
        mn, mx = w.float().amin(-1, keepdim=True), w.float().amax(-1, keepdim=True)
    scale, zp = calculate_qparams(mn, mx, args)
    sd = {"weight": w, "weight_scale": scale.to(sdtype), "weight_zero_point": zp}
    packed = PackedQuantizationCompressor.compress(sd, scheme)
    ref = PackedQuantizationCompressor.decompress(packed, scheme)["weight"]
    name = "model.layers.0.mlp.down_proj."
    arrays = {name + key: _np(t) for key, t in packed.items()}
    qcfg = {"quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"],
                                          "weights": json.loads(args.model_dump_json())}}}
    return arrays, qcfg, ref


def _np(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


def _ref_f32(ref):
    return ref.float().numpy()


CT_CASES = [
    # (n, k, bits, strategy, group, symmetric, scale dtype)
    (37, 384, 4, "group", 128, True, torch.bfloat16),
    (37, 384, 4, "group", 128, False, torch.bfloat16),
    (45, 160, 4, "group", 32, False, torch.bfloat16),
    (45, 160, 8, "group", 32, True, torch.bfloat16),
    (45, 256, 8, "group", 128, False, torch.bfloat16),
    (33, 300, 4, "channel", None, True, torch.bfloat16),      # ragged: 37.5 words a row
    (33, 301, 4, "channel", None, False, torch.bfloat16),
    (29, 301, 8, "channel", None, False, torch.bfloat16),     # 75.25 words a row
    (29, 302, 8, "channel", None, True, torch.float16),
    (31, 96, 4, "group", 32, False, torch.float16),
    (31, 96, 4, "group", 32, False, torch.float32),
    (30, 299, 8, "channel", None, False, torch.float32),
    ((3, 37), 64, 4, "group", 32, False, torch.bfloat16),  # MoE experts: zero points per slice
    ((2, 21), 77, 8, "channel", None, False, torch.float16),
]


@pytest.mark.parametrize("case", CT_CASES, ids=lambda c: f"{c[0]}x{c[1]}-int{c[2]}-{c[3]}"
                         f"{c[4] or ''}-{'sym' if c[5] else 'asym'}-{str(c[6])[6:]}")
@pytest.mark.parametrize("chunk_values", [1 << 20, 500])
def test_ct_pack_quantized(tmp_path, case, chunk_values):
    n, k, bits, strategy, group, symmetric, sdtype = case
    arrays, qcfg, ref = _ct_checkpoint(n, k, bits, strategy, group, symmetric, sdtype)
    f, lay = _open(tmp_path, arrays, qcfg)
    g = lay.groups["model.layers.0.mlp.down_proj.weight"]
    assert g.layout == "ct_pack_quantized"
    assert ("zero_point" in g.tensors) == (not symmetric)
    p = packed_int.params(f, g, qcfg)
    lead = n if isinstance(n, tuple) else (n,)
    assert (p.bits, p.group, p.symmetric, p.shape) == (bits, group or k, symmetric, lead + (k,))
    n = p.rows
    parts = list(packed_int.ct_packed_chunks(f, g, qcfg, chunk_values))
    assert all(c.dtype == np.float32 and c.shape[1] == k for c in parts)
    if chunk_values < k * n:
        assert len(parts) > 1 and max(c.size for c in parts) <= max(chunk_values, k)
    got = np.concatenate(parts)
    assert got.shape == (n, k)
    # float32: the reference's values (computed in the scale's dtype) widened
    ref = ref.reshape(n, k)
    assert np.array_equal(_bits_of(got), _bits_of(_ref_f32(ref)))
    # in the reference's output dtype
    back = torch.from_numpy(got).to(ref.dtype)
    assert torch.equal(back.view(torch.int16 if ref.dtype != torch.float32 else torch.int32),
                       ref.view(torch.int16 if ref.dtype != torch.float32 else torch.int32))


def test_ct_dequantize_float32_output(tmp_path):
    """compressed-tensors' dequantize asked for float32 output computes in the
    scale's dtype all the same: the same values."""
    ctq = pytest.importorskip("compressed_tensors.quantization")
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    arrays, qcfg, _ = _ct_checkpoint(20, 256, 4, "group", 128, False, torch.bfloat16, seed=3)
    f, lay = _open(tmp_path, arrays, qcfg)
    g = lay.groups["model.layers.0.mlp.down_proj.weight"]
    t = {r: torch.from_numpy(np.array(f.get_tensor(n)).view(np.int16) if r == "scale"
                             else np.array(f.get_tensor(n))) for r, n in g.tensors.items()}
    t["scale"] = t["scale"].view(torch.bfloat16)
    args = ctq.QuantizationArgs(num_bits=4, strategy="group", group_size=128, symmetric=False)
    zp = unpack_from_int32(t["zero_point"], 4, (20, 2), packed_dim=0)
    q = unpack_from_int32(t["packed"], 4, (20, 256))
    ref = dequantize(q, t["scale"], zp, args, dtype=torch.float32)
    got = np.concatenate(list(packed_int.ct_packed_chunks(f, g, qcfg)))
    assert np.array_equal(_bits_of(got), _bits_of(ref.numpy()))


def test_ct_config_contradicts_shapes(tmp_path):
    arrays, qcfg, _ = _ct_checkpoint(16, 256, 4, "group", 128, True, torch.bfloat16)
    f, lay = _open(tmp_path, arrays, qcfg)
    g = lay.groups["model.layers.0.mlp.down_proj.weight"]
    bad = json.loads(json.dumps(qcfg))
    bad["config_groups"]["group_0"]["weights"]["group_size"] = 64
    with pytest.raises(ValueError, match="the scale has 2 columns; 256 columns in groups of 64"):
        packed_int.params(f, g, bad)
    bad["config_groups"]["group_0"]["weights"].update(group_size=128, num_bits=8)
    with pytest.raises(ValueError, match="packed width 32"):
        list(packed_int.ct_packed_chunks(f, g, bad))
    bad["config_groups"]["group_0"]["weights"].update(num_bits=4, symmetric=False)
    with pytest.raises(ValueError, match="no weight_zero_point"):
        packed_int.params(f, g, bad)
    with pytest.raises(ValueError, match="no quantization_config.config_groups"):
        packed_int.params(f, g, None)
    # two groups, one of which fits: that one is used
    two = json.loads(json.dumps(qcfg))
    two["config_groups"]["group_1"] = {"targets": ["Linear"],
                                       "weights": {**two["config_groups"]["group_0"]["weights"],
                                                   "num_bits": 8}}
    assert packed_int.params(f, g, two).bits == 4


def test_ct_g_idx(tmp_path):
    arrays, qcfg, ref = _ct_checkpoint(16, 256, 4, "group", 128, True, torch.bfloat16)
    name = "model.layers.0.mlp.down_proj.weight_g_idx"
    ident = {**arrays, name: (np.arange(256) // 128).astype(np.int32)}
    f, lay = _open(tmp_path, ident, qcfg)
    g = lay.groups["model.layers.0.mlp.down_proj.weight"]
    assert "g_idx" in g.tensors
    got = np.concatenate(list(packed_int.ct_packed_chunks(f, g, qcfg)))
    assert np.array_equal(_bits_of(got), _bits_of(_ref_f32(ref)))
    f.close()
    perm = {**arrays, name: (np.arange(256)[::-1] // 128).astype(np.int32)}
    f, lay = _open(tmp_path, perm, qcfg)
    g = lay.groups["model.layers.0.mlp.down_proj.weight"]
    with pytest.raises(ValueError, match="activation-ordered g_idx is not supported"):
        list(packed_int.ct_packed_chunks(f, g, qcfg))


# --------------------------------------------------------------------------- the command line

def test_ct_int4_convert_and_inspect(tmp_path):
    """A compressed-tensors int4 asymmetric group-32 checkpoint, through the
    layouts layer: inspect shows the values, convert --to bfloat16 writes
    the weight under its unquantized name, bit for bit compressed-tensors'
    decompression."""
    from _cli import run
    arrays, qcfg, ref = _ct_checkpoint(45, 160, 4, "group", 32, False, torch.bfloat16)
    p = tmp_path / "model.safetensors"
    mst.save(p, arrays)
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": qcfg}))
    rep = json.loads(run("inspect", p, "--json").stdout)
    (row,) = rep["files"][0]["tensors"]
    assert row["name"] == "model.layers.0.mlp.down_proj.weight" and row["decoded"] is True
    assert row["shape"] == [45, 160]
    r = ref.float().numpy().astype(np.float64)
    assert row["max"] == pytest.approx(r.max()) and row["std"] == pytest.approx(r.std())
    out = tmp_path / "out"
    run("convert", tmp_path, out, "--to", "bfloat16")
    got = mst.load(out)
    assert list(got) == ["model.layers.0.mlp.down_proj.weight"]
    w = got["model.layers.0.mlp.down_proj.weight"]
    assert np.array_equal(np.asarray(w).view(np.uint16), ref.view(torch.int16).numpy().view(np.uint16))
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
