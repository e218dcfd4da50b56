"""minifloat.block_matmul (BlockScaled @ BlockScaled): against the float64
product of the dequantized operands, and bit-for-bit against minifloat's
bfloat16 matmul of the same values (the GEMM it uses)."""
import itertools

import numpy as np
import pytest

import minifloat as mf
from minifloat import _core

FORMATS = list(mf.blocks.BLOCK_FORMATS)


def data(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 4, shape)
    return x.astype(np.float32)


def unscaled(q):
    """q's values without NVFP4's tensor scale (what the GEMM multiplies)"""
    if q.tensor_scale is None:
        return q.dequantize()
    return mf.BlockScaled(q.format, q.data, q.scales, q.shape, q.axis,
                          np.float32(1)).dequantize()


def expected_bits(qa, qb):
    """np.matmul of the bfloat16 values (exact: at most 7 significant bits)
    with float32 output, then the tensor scales as documented"""
    A = unscaled(qa)
    B = unscaled(qb)
    Ab, Bb = A.astype(mf.bfloat16), B.astype(mf.bfloat16)
    np.testing.assert_array_equal(Ab.astype(np.float32), A)      # the bfloat16 copy is exact
    np.testing.assert_array_equal(Bb.astype(np.float32), B)
    c = np.matmul(Ab, Bb, dtype=np.float32)
    if qa.tensor_scale is not None or qb.tensor_scale is not None:
        ts = (1.0 if qa.tensor_scale is None else float(qa.tensor_scale)) * \
             (1.0 if qb.tensor_scale is None else float(qb.tensor_scale))
        c = (c.astype(np.float64) * ts).astype(np.float32)
    return c


def check(qa, qb):
    c = mf.block_matmul(qa, qb)
    assert c.dtype == np.float32
    np.testing.assert_array_equal((qa @ qb).view(np.uint32), c.view(np.uint32))
    # the float64 product of the dequantized operands, within float32
    # accumulation (K roundings of partial sums; NVFP4: the dequantized
    # operands' and the tensor scale's roundings, three more)
    A = qa.dequantize().astype(np.float64)
    B = qb.dequantize().astype(np.float64)
    ref = A @ B
    K = qa.shape[-1]
    bound = (K + 4) * 2.0 ** -24 * (np.abs(A) @ np.abs(B)) + 1e-30
    assert np.all(np.abs(c - ref) <= bound)
    # and exactly the bfloat16 GEMM of the same values
    np.testing.assert_array_equal(c.view(np.uint32), expected_bits(qa, qb).view(np.uint32))
    return c


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format(fmt):
    a = data((37, 160), 1)
    b = data((160, 29), 2)
    check(mf.quantize(a, fmt), mf.quantize(b, fmt, axis=0))


@pytest.mark.parametrize("fa,fb", [p for p in itertools.product(FORMATS, FORMATS) if p[0] != p[1]])
def test_mixed_formats(fa, fb):
    a = data((9, 96), 3)
    b = data((96, 11), 4)
    check(mf.quantize(a, fa), mf.quantize(b, fb, axis=0))


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4", "mxint8", "nvfp4"])
@pytest.mark.parametrize("K", [1, 15, 17, 45, 101, 300])
def test_padding_on_k_never_leaks(fmt, K):
    """K not a multiple of the block: the padded codes take no part, even
    when they are not zero (written by another tool)"""
    qa = mf.quantize(data((13, K), 5), fmt)
    qb = mf.quantize(data((K, 7), 6), fmt, axis=0)
    c = check(qa, qb)
    kp = qa.scales.shape[-1] * qa.block_size
    if kp == K:
        return

    def dirty(q):
        raw = np.ascontiguousarray(q.data).view(np.uint8).copy()
        if q.data.dtype == np.uint8:          # float4: two codes a byte
            start = K // 2
            keep = raw[:, start] & 0x0F if K % 2 else None
            raw[:, start:] = 0x77              # 6.0, 6.0
            if K % 2:
                raw[:, start] = keep | 0x70
        else:
            raw[:, K:] = 0x3F if q.format != "mxint8" else 0x7F
        d = raw if q.data.dtype == np.uint8 else raw.view(q.data.dtype)
        return mf.BlockScaled(q.format, d, q.scales, q.shape, q.axis, q.tensor_scale)

    qa2, qb2 = dirty(qa), dirty(qb)
    assert not np.array_equal(np.asarray(qa2.data).view(np.uint8),
                              np.asarray(qa.data).view(np.uint8))
    np.testing.assert_array_equal(mf.block_matmul(qa2, qb2).view(np.uint32), c.view(np.uint32))


def test_shapes_leading_axes_vectors_and_transpose():
    a = data((2, 3, 64), 7)
    w = data((5, 64), 8)                      # (out, in), as torch.nn.Linear keeps it
    qa = mf.quantize(a, "mxfp8_e4m3")
    qw = mf.quantize(w, "mxfp8_e4m3")         # blocked along in (K)
    wt = qw.T
    assert wt.shape == (64, 5) and wt.axis == 0
    assert np.shares_memory(wt.data, qw.data) and np.shares_memory(wt.scales, qw.scales)
    c = qa @ wt
    assert c.shape == (2, 3, 5)
    flat = mf.BlockScaled(qa.format, qa.data.reshape(6, -1), qa.scales.reshape(6, -1), (6, 64), 1)
    np.testing.assert_array_equal(c.reshape(6, 5), flat @ wt)
    # the same as quantizing w.T along axis 0
    q0 = mf.quantize(np.ascontiguousarray(w.T), "mxfp8_e4m3", axis=0)
    np.testing.assert_array_equal(np.asarray(q0.data).view(np.uint8),
                                  np.asarray(wt.data).view(np.uint8))
    np.testing.assert_array_equal((qa @ q0).view(np.uint32), c.view(np.uint32))
    assert wt.T.shape == qw.shape and wt.T.axis == 1
    # a vector on the right: (K,)
    v = mf.quantize(data((64,), 9), "mxfp4")
    assert v.T is v
    cv = qa @ v
    assert cv.shape == (2, 3)
    col = mf.BlockScaled(v.format, v.data[None], v.scales[None], (64, 1), 0)
    np.testing.assert_array_equal(cv, (qa @ col)[..., 0])
    # a vector on the left: (K,) @ (K, N)
    c1 = mf.quantize(a[0, 0], "mxfp8_e4m3") @ wt
    assert c1.shape == (5,)
    np.testing.assert_array_equal(c1, c[0, 0])


def test_shape_errors():
    qa = mf.quantize(data((4, 64), 10), "mxfp4")
    qb = mf.quantize(data((64, 3), 11), "mxfp4", axis=0)
    with pytest.raises(ValueError, match="64 elements but b's first has 48"):
        qa @ mf.quantize(data((48, 3), 12), "mxfp4", axis=0)
    with pytest.raises(ValueError, match="axis=0"):
        qa @ mf.quantize(data((64, 3), 11), "mxfp4")            # b blocked along N
    with pytest.raises(ValueError, match="last axis"):
        mf.quantize(data((4, 64), 10), "mxfp4", axis=0) @ qb   # a blocked along M
    with pytest.raises(ValueError, match="axis 0"):
        qa @ mf.quantize(data((64, 3, 2), 13), "mxfp4", axis=0)
    with pytest.raises(TypeError, match="BlockScaled"):
        qa @ np.ones((64, 3), np.float32)
    with pytest.raises(TypeError, match="BlockScaled"):
        np.ones((4, 64), np.float32) @ qb
    with pytest.raises(TypeError, match="BlockScaled"):
        mf.block_matmul(qa, np.ones((64, 3), np.float32))
    with pytest.raises(ValueError, match="1-D and 2-D"):
        mf.quantize(data((2, 2, 32), 14), "mxfp4").T


def test_empty_operands():
    for m, k, n in [(0, 32, 4), (4, 32, 0), (3, 0, 5)]:
        qa = mf.quantize(np.zeros((m, k), np.float32), "nvfp4")
        qb = mf.quantize(np.zeros((k, n), np.float32), "nvfp4", axis=0)
        c = qa @ qb
        assert c.shape == (m, n) and c.dtype == np.float32
        assert np.all(c == 0)


def test_nan_scale_block_makes_its_row_and_column_nan():
    a = data((5, 64), 15)
    b = data((64, 6), 16)
    a[2, 40] = np.inf
    b[3, 4] = np.nan
    qa, qb = mf.quantize(a, "mxfp8_e4m3"), mf.quantize(b, "nvfp4", axis=0)
    c = qa @ qb
    nan = np.isnan(c)
    assert nan[2].all() and nan[:, 4].all()
    assert nan.sum() == 6 + 5 - 1
    assert np.all(c.view(np.uint32)[nan] == 0x7FC00000)        # +qNaN, as np.matmul's
    ok = ~nan
    np.testing.assert_array_equal(c[ok], expected_bits(qa, qb)[ok])


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4", "nvfp4"])
def test_levels_and_threads_give_the_same_bits(fmt):
    """the dequantization is split over threads and the GEMM over threads
    and levels: none of it changes a bit"""
    qa = mf.quantize(data((300, 520), 17), fmt)
    qb = mf.quantize(data((520, 70), 18), fmt, axis=0)
    ref = mf.block_matmul(qa, qb)
    prev_level = _core.get_kernel_level()
    prev_threads = _core.set_num_threads(None)
    _core.set_num_threads(prev_threads)
    try:
        for level in _core.kernel_levels():
            _core.set_kernel_level(level)
            for t in (1, 3):
                mf.set_num_threads(t)
                np.testing.assert_array_equal(mf.block_matmul(qa, qb).view(np.uint32),
                                              ref.view(np.uint32))
    finally:
        _core.set_kernel_level(prev_level)
        mf.set_num_threads(prev_threads)


def test_concurrent_calls_from_python_threads():
    """several Python threads quantizing and multiplying at once share the
    worker pool (a call that finds it busy works alone): same bits"""
    import threading
    a = data((96, 2 ** 15 + 48), 19)            # 3 Mi elements: the quantize is threaded
    b = data((2 ** 15 + 48, 40), 20)
    want = {}
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        qa, qb = mf.quantize(a, fmt), mf.quantize(b, fmt, axis=0)
        want[fmt] = (np.asarray(qa.data).view(np.uint8).copy(), (qa @ qb).view(np.uint32).copy())
    errors = []

    def work(fmt):
        try:
            for _ in range(2):
                qa, qb = mf.quantize(a, fmt), mf.quantize(b, fmt, axis=0)
                np.testing.assert_array_equal(np.asarray(qa.data).view(np.uint8), want[fmt][0])
                np.testing.assert_array_equal((qa @ qb).view(np.uint32), want[fmt][1])
        except Exception as e:          # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f,)) for f in ("mxfp8_e4m3", "nvfp4") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
