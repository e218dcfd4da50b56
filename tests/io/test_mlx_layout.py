"""MLX affine checkpoints (minifloat.io.packed_int through
minifloat.io.layouts): weights quantized by mlx.core.quantize, decoded a few
rows at a time, bit for bit against mlx.core.dequantize (float32 and the
scales' dtype).  No torch here: the framework leg with mlx[cpu] runs it."""
import numpy as np
import pytest

import minifloat as mf
from minifloat.io import packed_int

from _checkpoints import bits_of as _bits_of, open_detected as _open

BF16 = np.dtype(mf.bfloat16)


def _mlx_checkpoint(shape, bits, group, dtype, seed=0):
    mx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(seed)
    w = mx.array((rng.standard_normal(shape) * 0.05).astype(np.float32)).astype(getattr(mx, dtype))
    q, s, b = mx.quantize(w, group_size=group, bits=bits)
    ref = mx.dequantize(q, s, b, group_size=group, bits=bits)

    def np_(a):
        if a.dtype == mx.bfloat16:
            return np.array(a.view(mx.uint16)).view(BF16)
        return np.array(a)
    name = "model.layers.0.mlp.up_proj."
    arrays = {name + "weight": np_(q), name + "scales": np_(s), name + "biases": np_(b)}
    return arrays, {"group_size": group, "bits": bits}, np_(ref)


@pytest.mark.parametrize("bits", [4, 8, 2, 3, 6])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_mlx(tmp_path, bits, group, dtype):
    shape = (3, 20, 384) if group == 64 else (45, 384)
    arrays, qcfg, ref = _mlx_checkpoint(shape, bits, group, dtype, seed=bits + group)
    f, lay = _open(tmp_path, arrays, qcfg)
    g = lay.groups["model.layers.0.mlp.up_proj.weight"]
    assert g.layout == "mlx"
    p = packed_int.params(f, g, qcfg)
    assert (p.bits, p.group, p.shape) == (bits, group, shape)
    parts = list(packed_int.mlx_chunks(f, g, qcfg, chunk_values=1000))
    assert len(parts) > 1
    got = np.concatenate(parts)
    want = ref.reshape(-1, shape[-1])
    # float32: MLX's values (computed in the scales' dtype) widened
    assert np.array_equal(_bits_of(got), _bits_of(want.astype(np.float32)))
    # in MLX's output dtype
    assert np.array_equal(got.astype(want.dtype).view(np.uint8), want.view(np.uint8))


def test_mlx_config_contradicts_shapes(tmp_path):
    arrays, qcfg, _ = _mlx_checkpoint((8, 256), 4, 64, "bfloat16")
    f, lay = _open(tmp_path, arrays, qcfg)
    g = lay.groups["model.layers.0.mlp.up_proj.weight"]
    with pytest.raises(ValueError, match="256 columns in groups of 32 need"):
        packed_int.params(f, g, {"group_size": 32, "bits": 4})
    with pytest.raises(ValueError, match="no integer bits and group_size"):
        list(packed_int.mlx_chunks(f, g, {"group_size": 64}))
    with pytest.raises(ValueError, match="not affine"):
        packed_int.params(f, g, {**qcfg, "mode": "mxfp4"})
    # a per-layer override (mixed-bit MLX checkpoints)
    over = {"group_size": 32, "bits": 8, "model.layers.0.mlp.up_proj": {"group_size": 64, "bits": 4}}
    assert packed_int.params(f, g, over).bits == 4
