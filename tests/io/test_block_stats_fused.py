"""inspect --target BLOCK's fused kernel (_core._stats with a block target:
src/kernels/stats/common.c, mf_stats_run_blocks): each window of values
decoded, quantized, dequantized and its statistics taken in one pass.  Its
accumulator must be, bit for bit, what the route it replaces gives: each
chunk copied to float32, minifloat.blocks.quantize, dequantize, then
_core._stats with the round trip y -- at every kernel level and thread
count, for every block format, with NaN, inf, zeros, tiny values and rows
whose last block is short.
"""
import math

import numpy as np
import pytest

import minifloat
from minifloat import _core, blocks
from minifloat.io import checkpoint as ck

from conftest import LEVELS, kernel_level

BLOCK_FORMATS = list(blocks.BLOCK_FORMATS)
SOURCES = ["float32", "bfloat16", "float16", "float8_e4m3fn", "float6_e3m2fn"]


def dtype_of(name):
    return np.dtype(getattr(minifloat, name, None) or name)


def values(n, seed):
    """float64 values of every kind a checkpoint may hold."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-12, 6, n))
    k = max(1, n // 50)
    for v in (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e-42, 1e-30, 7e4, 1e30):
        x[rng.integers(0, n, k)] = v
    x[: min(n, 64)] = 0.0                      # a block of zeros
    x[n // 2: n // 2 + 40] = 1e-39             # a block of tiny values
    return x


def source(n, src, seed=0):
    with np.errstate(over="ignore", invalid="ignore"):
        return values(n, seed).astype(np.float32).astype(dtype_of(src))


def reference(acc, chunk, fmt, amax, rel):
    """The route the fused kernel replaces (Stats.add_block before it)."""
    x = np.empty(chunk.size, np.float32)
    with np.errstate(invalid="ignore"):
        np.copyto(x, chunk.reshape(-1), casting="unsafe")
    q = blocks.quantize(x.reshape(chunk.shape), fmt, global_amax=amax)
    y = q.dequantize().reshape(-1)
    _core._stats(acc, x, "bfloat16", rel, y)


def fresh():
    a = np.zeros(14)
    a[ck._A_MIN], a[ck._A_MAX] = math.inf, -math.inf
    return a


def amax_of(x, fmt):
    if blocks.BLOCK_FORMATS[fmt].kind != blocks._KIND_NV:
        return None
    with np.errstate(invalid="ignore"):
        return float(_core._finite_amax(x.astype(np.float32).reshape(-1)))


def run_both(x, k, fmt, chunk):
    """(reference accumulator, fused accumulator) of whole rows x of k values
    cut into chunks as _block_chunks(..., chunk) cuts a tensor."""
    s = ck.Stats(fmt)
    amax = amax_of(x, fmt)
    ref = fresh()
    for c in ck._block_chunks_of(x.reshape(-1), k, s.block_size(), chunk):
        reference(ref, c, fmt, amax, s.lossy_rel)
    s.add_block_rows(x.reshape(-1), k, amax, chunk=chunk)
    return ref, s._acc


SHAPES = [(7, 100, 1000), (3, 7, 64), (1, 5000, 1000), (2, 3001, 1024), (40, 33, 300),
          (1, 1, 16), (9, 4096, 1 << 18)]


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
@pytest.mark.parametrize("src", SOURCES)
def test_fused_equals_quantize_dequantize(fmt, src):
    for level in LEVELS:
        with kernel_level(level):
            for i, (rows, k, chunk) in enumerate(SHAPES):
                x = source(rows * k, src, seed=i)
                ref, got = run_both(x, k, fmt, chunk)
                np.testing.assert_array_equal(got, ref, err_msg=f"{level} {rows}x{k} c{chunk}")


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4", "mxint8", "mxfp8_e4m3"])
def test_fused_any_thread_count(fmt):
    prev = _core.set_num_threads(None)
    _core.set_num_threads(prev)
    x = source(300 * 1000 + 77 * 1000, "bfloat16", seed=5)
    try:
        out = []
        for t in (1, 2, 3, 4):
            minifloat.set_num_threads(t)
            ref, got = run_both(x, 1000, fmt, 1 << 18)
            np.testing.assert_array_equal(got, ref, err_msg=f"{t} threads")
            out.append(got)
    finally:
        minifloat.set_num_threads(prev)
    for o in out[1:]:
        np.testing.assert_array_equal(o, out[0])


@pytest.mark.parametrize("fmt", ["mxfp6_e2m3", "nvfp4"])
def test_add_block_chunk_fused(fmt):
    """add_block of one 2-D chunk (the logical tensors' route) is fused too."""
    x = source(6 * 90, "bfloat16", seed=3).reshape(6, 90)
    s = ck.Stats(fmt)
    amax = amax_of(x, fmt)
    assert s.add_block(x, amax) is None
    ref = fresh()
    reference(ref, x, fmt, amax, s.lossy_rel)
    np.testing.assert_array_equal(s._acc, ref)
    q = ck.Stats(fmt).add_block(x, amax, quantized=True)
    assert isinstance(q, blocks.BlockScaled)


@pytest.mark.parametrize("src", ["float32", "bfloat16", "float16", "float8_e5m2"])
def test_finite_amax_of_codes(src):
    """_core._finite_amax reads float16 and format codes as they are."""
    x = source(10001, src, seed=7)
    with np.errstate(invalid="ignore"):
        want = float(_core._finite_amax(x.astype(np.float32)))
    assert float(_core._finite_amax(x)) == want
    assert float(_core._finite_amax(x[:0])) == 0.0


def test_finite_amax_of_codes_threads():
    """Split between threads (tasks of 2^16 values): the same maximum."""
    x = source((1 << 20) + 17, "bfloat16", seed=8)
    x[-1] = np.float32(3e38).astype(x.dtype)          # the largest finite value, last
    with np.errstate(invalid="ignore"):
        want = float(_core._finite_amax(x.astype(np.float32)))
    prev = _core.set_num_threads(None)
    _core.set_num_threads(prev)
    try:
        for t in (1, 2, 4):
            minifloat.set_num_threads(t)
            assert float(_core._finite_amax(x)) == want
    finally:
        minifloat.set_num_threads(prev)


@pytest.mark.parametrize("src", ["bfloat16", "float16", "float32", "float8_e5m2"])
def test_convert_mode_zero_counts(src):
    """convert's fused mode (moments=False) counts the zeros of the codes and
    of x (its flush-to-zero count is their difference) at every level, the
    blocks of finite values through the level's cast_err included."""
    rng = np.random.default_rng(11)
    n = 3 * 2048 + 31
    with np.errstate(over="ignore", invalid="ignore"):
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-24, 3, n))).astype(np.float32)
        x[rng.integers(0, n, 300)] = 0.0
        x[rng.integers(0, n, 100)] = -0.0
        # subnormals (of float32 and bfloat16) are not zeros: the levels
        # count values == 0 without DAZ
        x[rng.integers(0, n, 100)] = np.float32(1e-40) * rng.choice([-1, 1], 100)
        x = x.astype(dtype_of(src))
    xv = x.astype(np.float64)
    for target in ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "bfloat16",
                   "float6_e2m3fn", "float4_e2m1fn"]:
        with np.errstate(over="ignore", invalid="ignore"):
            y = xv.astype(dtype_of(target)).astype(np.float64)
        want = (int(np.count_nonzero(y == 0)), int(np.count_nonzero(xv == 0)))
        for level in LEVELS:
            acc = fresh()
            out = np.empty(n, dtype_of(target))
            with kernel_level(level), np.errstate(over="ignore", invalid="ignore"):
                _core._stats(acc, x, target, 0.25, None, out, False)
            assert (int(acc[ck._A_ZY]), int(acc[ck._A_ZX])) == want, (level, target)


@pytest.mark.parametrize("level", LEVELS)
def test_finite_amax_bf16_codes_every_level(level):
    """bfloat16 codes are scanned as they are (no decode): at every level,
    lengths around the vector widths, the largest magnitude at any place
    (negative, subnormal, beside infs and NaNs larger in bits)."""
    rng = np.random.default_rng(11)
    bf = minifloat.bfloat16
    specials = np.array([np.inf, -np.inf, np.nan, -np.nan], np.float32).astype(bf)
    with kernel_level(level):
        for n in list(range(0, 70)) + [1000, 4099]:
            x = np.empty(n, bf)
            x[...] = (rng.standard_normal(n) * 1e-3).astype(np.float32).astype(bf)
            if n:
                x[rng.integers(0, n, 3)] = specials[rng.integers(0, 4, 3)]
                for where, v in ((n - 1, -2.5), (0, 3e38), (n // 2, 1e-40)):
                    y = x.copy()
                    y[where] = np.float32(v).astype(bf)
                    x[...] = y
                    with np.errstate(invalid="ignore"):
                        want = float(_core._finite_amax(x.astype(np.float32)))
                    assert float(_core._finite_amax(x)) == want, (n, where, v)
            else:
                assert float(_core._finite_amax(x)) == 0.0
