"""_core._unpack_e2m1, the kernel behind the MXFP4 / NVFP4 / gpt-oss decodes
(minifloat.io.layouts): packed e2m1 codes times a float32 scale per block,
row by row or transposed, against a NumPy oracle written from the e2m1
table -- bit for bit at every kernel level, with ragged last blocks, codes
with a row stride, NaN / inf / zero / subnormal scales, and bad arguments
refused.  (The layouts' tests compare the same values with transformers,
compressed-tensors and ModelOpt; these need none of them, so the sanitizer
leg runs them.)"""
import numpy as np
import pytest

from minifloat import _core

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def _oracle(codes, scales, block, k):
    nib = np.stack([codes & 15, codes >> 4], axis=-1).reshape(codes.shape[0], 2 * codes.shape[1])
    nib = nib[:, :k]
    s = np.repeat(scales, block, axis=1)[:, :k]
    return E2M1[nib] * s                      # one float32 multiplication


def _scales(rng, shape):
    s = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = s.reshape(-1)
    if flat.size >= 6:
        flat[:6] = [np.nan, np.inf, -np.inf, 0.0, 2.0 ** -140, 3e38]
    return s


@pytest.mark.parametrize("rows,k,block", [(5, 64, 16), (3, 96, 32), (37, 48, 32), (1, 2, 16),
                                          (17, 22, 16), (40, 160, 32), (0, 32, 32), (4, 0, 16),
                                          # the transposed tiles of 8 rows: blocks of
                                          # 8/16/32 with a ragged last block, a block
                                          # that is not a multiple of 8, a block wider
                                          # than the row
                                          (16, 40, 8), (24, 72, 16), (19, 104, 32),
                                          (9, 36, 6), (8, 24, 10), (11, 16, 64)])
@pytest.mark.parametrize("transposed", [False, True])
def test_matches_oracle(each_level, rows, k, block, transposed):
    rng = np.random.default_rng(rows * 1000 + k)
    wide = rng.integers(0, 256, (rows, k // 2 + 7), dtype=np.uint8)
    codes = wide[:, 3:3 + k // 2]                 # rows with a stride, not contiguous
    nb = -(-k // block)
    scales = np.zeros((rows, nb + 3), np.float32)[:, 2:2 + nb]   # a row stride here too
    scales[...] = _scales(rng, (rows, nb))
    with np.errstate(all="ignore"):
        want = _oracle(codes, scales, block, k)
    out = np.full((k, rows) if transposed else (rows, k), 7.0, np.float32)
    with np.errstate(all="ignore"):
        _core._unpack_e2m1(codes, scales, out, block, transposed)
    got = out.T if transposed else out
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_bad_arguments():
    c = np.zeros((4, 8), np.uint8)
    s = np.ones((4, 1), np.float32)
    o = np.empty((4, 16), np.float32)
    with pytest.raises(ValueError, match="scales"):
        _core._unpack_e2m1(c, np.ones((4, 2), np.float32), o, 16, False)
    with pytest.raises(ValueError, match="out"):
        _core._unpack_e2m1(c, s, np.empty((16, 4), np.float32), 16, False)
    with pytest.raises(ValueError, match="even"):
        _core._unpack_e2m1(c, s, o, 15, False)
    with pytest.raises(ValueError, match="contiguous rows"):
        _core._unpack_e2m1(np.zeros((8, 4), np.uint8).T, s, o, 16, False)
    with pytest.raises(ValueError, match="scales must be .* contiguous rows"):
        _core._unpack_e2m1(c, np.ones((2, 4), np.float32).T, o, 16, False)
    with pytest.raises(ValueError, match="scales must be"):
        _core._unpack_e2m1(c, np.ones((4, 1), np.float64), o, 16, False)
    with pytest.raises(ValueError, match="_unpack_e2m1: out must be writable"):
        o.flags.writeable = False
        _core._unpack_e2m1(c, s, o, 16, False)
