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


def _bf16(x):
    import minifloat as mf
    with np.errstate(all="ignore"):
        return x.astype(mf.bfloat16).view(np.uint16)


@pytest.mark.parametrize("rows,k,block", [(5, 64, 16), (37, 48, 32), (1, 2, 16), (17, 22, 16),
                                          (0, 32, 32), (4, 0, 16), (16, 40, 8), (24, 72, 16),
                                          (19, 104, 32), (9, 36, 6), (8, 24, 10), (11, 16, 64),
                                          (3, 4200, 32)])
@pytest.mark.parametrize("transposed", [False, True])
def test_bfloat16_out_is_the_cast(each_level, rows, k, block, transposed):
    """out uint16: the bfloat16 codes of the float32 values, each rounded
    once as the cast rounds (scales that are not powers of two, so values
    round; NaN, inf, overflow past bfloat16's largest value, subnormals),
    bit for bit at every level; rows longer than the kernel's pieces."""
    rng = np.random.default_rng(rows * 1000 + k + 7)
    wide = rng.integers(0, 256, (rows, k // 2 + 7), dtype=np.uint8)
    codes = wide[:, 3:3 + k // 2]
    nb = -(-k // block)
    scales = np.zeros((rows, nb + 3), np.float32)[:, 2:2 + nb]
    scales[...] = _scales(rng, (rows, nb))
    if scales.size >= 9:
        scales.flat[6:9] = [3.3e38 / 6 * 1.0001, -1.1e-40, 5.7e37]
    with np.errstate(all="ignore"):
        want = _bf16(_oracle(codes, scales, block, k))
    out = np.full((k, rows) if transposed else (rows, k), 7, np.uint16)
    _core._unpack_e2m1(codes, scales, out, block, transposed)
    np.testing.assert_array_equal(out.T if transposed else out, want)


@pytest.mark.parametrize("rows,k,block", [(5, 64, 16), (37, 48, 32), (17, 22, 16), (9, 36, 6),
                                          (0, 32, 32), (3, 4200, 32), (2, 200, 100),
                                          (4, 96, 96)])
def test_ref2_is_the_sum_of_squares(each_level, rows, k, block):
    """_e2m1_ref2: the float64 sum of the squares of the finite float32
    values: exact per block for power-of-two scales (what MXFP4 has; the
    level's e2m1_sq over blocks of 3, 8, 16, 48 and 50 bytes: its 32- and
    16-byte steps and its tail), value by value for the others (NaN, inf,
    zero, subnormal, overflowing)."""
    rng = np.random.default_rng(rows + k)
    codes = rng.integers(0, 256, (rows, k // 2 + 5), dtype=np.uint8)[:, 2:2 + k // 2]
    nb = -(-k // block)
    scales = np.ldexp(1.0, rng.integers(-127, 128, (rows, nb))).astype(np.float32)
    if scales.size >= 10:
        scales.flat[:10] = [np.nan, np.inf, 0.0, 2.0 ** -140, 3e38, -0.75, 2.0 ** 126,
                            2.0 ** 125, 2.0 ** -127, 1.5]
    with np.errstate(all="ignore"):
        x = _oracle(codes, scales, block, k).astype(np.float64)
    want = np.sum(np.where(np.isfinite(x), x * x, 0.0))
    got = _core._e2m1_ref2(codes, scales, block)
    assert got == pytest.approx(want, rel=1e-14, abs=0)
    # only power-of-two scales up to 2^125: each block's sum is exact, so
    # the result is the exactly rounded sum of the blocks', in order
    ok = np.ldexp(1.0, rng.integers(-126, 126, (rows, nb))).astype(np.float32)
    blocks = [float(np.sum(_oracle(codes, ok, block, k).astype(np.float64)[r, j:j + block] ** 2))
              for r in range(rows) for j in range(0, k, block)]
    total = 0.0
    for b in blocks:
        total += b
    assert _core._e2m1_ref2(codes, ok, block) == total


def test_every_mxfp4_value_is_a_bfloat16_value():
    """Why convert writes gpt-oss's bfloat16 straight from the codes: every
    e2m1 value times every e8m0 scale (2^-127 .. 2^127; 0xFF is NaN) is a
    float32 that bfloat16 holds exactly, or inf, or NaN."""
    import minifloat as mf
    with np.errstate(all="ignore"):
        s = np.arange(256, dtype=np.uint8).view(mf.float8_e8m0fnu).astype(np.float32)
        x = E2M1[:, None] * s[None, :]
        back = x.astype(mf.bfloat16).astype(np.float32)
    fin = np.isfinite(x)
    assert fin.sum() > 3500 and np.isnan(x[:, 255]).all()
    np.testing.assert_array_equal(back[fin].view(np.uint32), x[fin].view(np.uint32))
    assert (np.isinf(back) == np.isinf(x)).all() and (np.isnan(back) == np.isnan(x)).all()


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
    with pytest.raises(ValueError, match="float32 \\(or uint16"):
        _core._unpack_e2m1(c, s, np.empty((4, 16), np.int16), 16, False)
    with pytest.raises(ValueError, match="_e2m1_ref2: .*need scales"):
        _core._e2m1_ref2(c, np.ones((4, 2), np.float32), 16)
    with pytest.raises(ValueError, match="_e2m1_ref2: block must be even"):
        _core._e2m1_ref2(c, s, 3)
