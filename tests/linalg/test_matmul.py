"""np.matmul for the float formats: one canonical float32 accumulation (the
"VDPBF16PS chain" of src/kernels/gemm/serial.c), bit-identical at every
kernel level, for any layout of the operands and any number of threads."""

import functools
import itertools
import warnings

import numpy as np
import pytest

import minifloat
from minifloat import _core

from conftest import EMULATED, FLOAT_FORMATS, LEVELS, kernel_level, mf_type

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs)

SIZES = [0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 64, 100]
FMT_INFO = {f["name"]: f for f in _core.formats()}


def code_dtype(name):
    return np.uint16 if FMT_INFO[name]["itemsize"] == 2 else np.uint8


def as_format(codes, name):
    return codes.view(mf_type(name))


def codes_of(arr):
    return arr.view(np.uint16 if arr.dtype.itemsize == 2 else np.uint8)


# ---- operands --------------------------------------------------------------

def bf16_codes(rng, shape, regime):
    """bfloat16 bit patterns that stress the accumulation."""
    shape = tuple(shape)
    if regime == "bits":                      # anything: NaN, inf, subnormals
        return rng.integers(0, 1 << 16, shape, dtype=np.uint16)
    sign = rng.integers(0, 2, shape).astype(np.uint16) << 15
    mant = rng.integers(0, 128, shape).astype(np.uint16)
    if regime == "tiny":                      # products near 2^-126: FTZ
        exp = rng.integers(55, 72, shape)
    elif regime == "huge":                    # products overflow
        exp = rng.integers(240, 255, shape)
    elif regime == "wide":                    # every exponent, subnormals too
        exp = rng.integers(0, 255, shape)
    elif regime == "cancel":                  # ties and cancellation
        exp = rng.choice(np.array([127, 127, 127, 103, 104, 115, 0]), shape)
        mant = rng.choice(np.array([0, 0, 1, 64]), shape).astype(np.uint16)
    else:                                     # ordinary values
        exp = rng.integers(120, 135, shape)
    return (sign | (exp.astype(np.uint16) << 7) | mant).astype(np.uint16)


def format_codes(rng, name, shape):
    """Every code of an 8-bit (or narrower) format, or bfloat16 patterns."""
    if name == "bfloat16":
        return bf16_codes(rng, shape, rng.choice(["bits", "wide", "cancel", "normal"]))
    bits = FMT_INFO[name]["bits"]
    return rng.integers(0, 1 << bits, tuple(shape), dtype=np.uint8)


def c_init(rng, shape, kind):
    if kind == "zero":
        return np.zeros(shape, np.float32)
    u = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    if kind == "subnormal":
        u &= np.uint32(0x807FFFFF)
    return u.view(np.float32)


def canonical_bits(c):
    """float32 bits with every NaN made the same (NaN bits are unspecified)."""
    c = c.copy()
    c[np.isnan(c)] = np.nan
    return c.view(np.uint32)


def gemm(level, name, a, b, c0):
    c = c0.copy()
    with kernel_level(level):
        _core._gemm_f32acc(name, a, b, c)
    return c


def mm(level, a, b, **kw):
    with kernel_level(level), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.matmul(a, b, **kw)


def assert_same_codes(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape
    np.testing.assert_array_equal(codes_of(x), codes_of(y))


SIMD_LEVELS = [lv for lv in LEVELS if lv != "serial"]


# ---- the float32 accumulation: every level == serial, bit for bit ----------

SHAPES = sorted(set(
    [(m, n, k) for m in (1, 3, 17) for n in (1, 16, 33) for k in SIZES]
    + [(m, n, k) for m in SIZES for n in (2, 31) for k in (0, 3, 32)]
    + [(m, 15, 100) for m in SIZES]
    + [(64, 64, 64), (100, 100, 100), (13, 70, 511), (25, 65, 1031), (200, 50, 257)]
    # up to 16 columns (the matrix-vector kernels, columns in groups of 8
    # or 4): rows in whole and ragged lane groups and tasks, k in whole and
    # ragged pair blocks, odd k
    + [(m, n, k) for m in (16, 40, 300) for n in (1, 3) for k in (31, 32, 33, 64, 100, 257)]
    + [(m, n, 257) for m in (23, 130) for n in (2, 4, 5, 8, 9, 13, 16, 17)]
    # 7-64 columns (the VDPBF16PS thin kernel's vectors of 16 and 8 a row,
    # rows in groups of 16, 12, 8 or 6, of 4 and alone)
    + [(m, n, k) for m in (29, 300) for n in (8, 24, 40, 57) for k in (33, 257)]
    + [(300, n, 256) for n in (7, 32, 64)]
    # from 1024 rows, 17-128 columns (in blocks of 64; x86 only: the Arm
    # levels have no such kernel, and qemu is slow)
    + ([] if EMULATED else [(1030, n, 33) for n in (17, 65, 128)])
))


@pytest.mark.parametrize("level", SIMD_LEVELS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_gemm_f32acc_equals_serial(level, m, n, k):
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    for regime in ("bits", "tiny", "huge", "wide", "cancel", "normal"):
        a = bf16_codes(rng, (m, k), regime)
        b = bf16_codes(rng, (k, n), rng.choice(["bits", "tiny", "huge", "wide", "cancel",
                                                 "normal", regime]))
        c0 = c_init(rng, (m, n), rng.choice(["zero", "subnormal", "bits"]))
        want = gemm("serial", "bfloat16", a, b, c0)
        got = gemm(level, "bfloat16", a, b, c0)
        np.testing.assert_array_equal(canonical_bits(got), canonical_bits(want),
                                      err_msg=f"{level} {regime} {(m, n, k)}")


@pytest.mark.parametrize("level", SIMD_LEVELS)
def test_gemm_threads_and_blocks_equal_serial(level):
    # big enough for several threads, several k blocks and edge tiles
    rng = np.random.default_rng(7)
    # tall (row tasks) and wide (column tasks)
    # and a few rows (v @ B: B's columns in the lanes, column panels on the
    # threads), an odd k among them
    for m, n, k in [(203, 389, 1100), (10, 3000, 301), (3001, 1, 2999), (1500, 16, 2001),
                    (700, 7, 3333), (1, 1100, 1001), (2, 700, 600), (3, 520, 999),
                    (4, 600, 500)]:
        a = bf16_codes(rng, (m, k), "cancel")
        b = bf16_codes(rng, (k, n), "normal")
        c0 = c_init(rng, (m, n), "subnormal")
        np.testing.assert_array_equal(canonical_bits(gemm(level, "bfloat16", a, b, c0)),
                                      canonical_bits(gemm("serial", "bfloat16", a, b, c0)))


@functools.lru_cache(maxsize=None)
def _block_order_cases():
    # the operands and the serial oracle's results, computed once for all
    # levels (the oracle is most of the time under emulation)
    rng = np.random.default_rng(17)
    cases = {}
    for m, n, k in [(401, 713, 1101), (250, 300, 6001), (37, 2100, 260), (301, 500, 640)]:
        a = bf16_codes(rng, (m, k), "cancel")
        b = bf16_codes(rng, (k, n), "normal")
        c0 = c_init(rng, (m, n), "subnormal")
        want = canonical_bits(gemm("serial", "bfloat16", a, b, c0))
        want_mm = mm("serial", as_format(a, "bfloat16"), as_format(b, "bfloat16"))
        cases[(m, n, k)] = (a, b, c0, want, want_mm)
    return cases


@pytest.mark.parametrize("level", SIMD_LEVELS)
def test_gemm_block_orders_equal_serial(level, threads):
    # the blocked driver's orders: A packed for all of k and the scratch
    # gone through in column chunks (several chunks, a ragged last one),
    # B packed once by all threads for row tasks, and k so deep that A is
    # packed one k block at a time; the float32 chain and the bfloat16
    # epilogue, at 1, 2 and 3 threads; an even k whose row tasks read A in
    # place (AVX512_BF16) and shrink as the rows run out, with B packed by
    # each thread
    for (m, n, k), (a, b, c0, want, want_mm) in _block_order_cases().items():
        aa, bb = as_format(a, "bfloat16"), as_format(b, "bfloat16")
        for t in (1, 3) if EMULATED else (1, 2, 3):
            threads(t)
            np.testing.assert_array_equal(canonical_bits(gemm(level, "bfloat16", a, b, c0)), want,
                                          err_msg=f"{level} {(m, n, k)} {t} threads")
            assert_same_codes(mm(level, aa, bb), want_mm)


@pytest.mark.parametrize("name", FLOAT_FORMATS)
@pytest.mark.parametrize("level", SIMD_LEVELS)
def test_gemm_every_format_equals_serial(level, name):
    rng = np.random.default_rng(len(name))
    for (m, n, k) in [(5, 7, 9), (33, 40, 65), (70, 33, 128)]:
        a = format_codes(rng, name, (m, k)).astype(code_dtype(name))
        b = format_codes(rng, name, (k, n)).astype(code_dtype(name))
        c0 = np.zeros((m, n), np.float32)
        np.testing.assert_array_equal(canonical_bits(gemm(level, name, a, b, c0)),
                                      canonical_bits(gemm("serial", name, a, b, c0)))


# ---- the documented semantics, on hand-made cases --------------------------

E = 2.0 ** -24


def bf(values):
    return np.array(values, dtype=np.float32).astype(minifloat.bfloat16)


def f32_chain(name, a, b):
    """gemm_f32acc at every level, checked equal; returns the float32 C."""
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    outs = [gemm(lv, name, codes_of(a), codes_of(b),
                 np.zeros((a.shape[0], b.shape[1]), np.float32)) for lv in LEVELS]
    for o in outs[1:]:
        np.testing.assert_array_equal(canonical_bits(o), canonical_bits(outs[0]))
    return outs[0]


@pytest.mark.parametrize("row,want", [
    # pairs (0,1), (2,3): index 1 is added before index 0
    ([1, E, E, -1], E),          # k order would give 0
    ([E, 1, -1, E], 0.0),        # k order would give E
    ([1, E, -1], 0.0),           # odd k: (+0 pad, then -1) after 1 + E
])
def test_pair_order(row, want):
    a = bf([row])
    b = bf(np.ones((len(row), 1)))
    assert f32_chain("bfloat16", a, b)[0, 0] == np.float32(want)


def test_ftz_daz():
    t = 2.0 ** -63
    # 0 - 2^-127 flushes to -0 before + 2^-126: 2^-126 (IEEE: 2^-127)
    c = f32_chain("bfloat16", bf([[t, t]]), bf([[t], [-t / 2]]))
    assert c[0, 0] == np.float32(2.0 ** -126)
    # 2^-126 - 2^-127 = 2^-127 is tiny: +0 (IEEE: 2^-127)
    c = f32_chain("bfloat16", bf([[t, t]]), bf([[-t / 2], [t]]))
    assert c[0, 0] == 0 and not np.signbit(c[0, 0])
    # a bfloat16 subnormal input counts as zero (IEEE: 2^-133 * 2^100)
    sub = np.array([[1]], np.uint16).view(minifloat.bfloat16)
    c = f32_chain("bfloat16", sub, bf([[2.0 ** 100]]))
    assert c[0, 0] == 0
    # tininess after rounding: 2^-126 - 2^-152 rounds to 2^-126, kept
    c = f32_chain("bfloat16", bf([[0, 2.0 ** -76]]), bf([[0], [-(2.0 ** -76)]]))
    assert c[0, 0] == 0
    c = f32_chain("bfloat16", bf([[2.0 ** -63, 2.0 ** -76]]),
                  bf([[2.0 ** -63], [-(2.0 ** -76)]]))
    assert c[0, 0] == np.float32(2.0 ** -126)


def test_unbounded_product_exponent():
    # (odd index first) 2^200 overflows to inf, then inf - 2^200 stays inf:
    # the products themselves never overflow or underflow
    h = 2.0 ** 100
    c = f32_chain("bfloat16", bf([[-h, h]]), bf([[h], [h]]))
    assert c[0, 0] == np.inf
    c = f32_chain("bfloat16", bf([[h, -h]]), bf([[h], [h]]))
    assert c[0, 0] == -np.inf


def test_zero_signs():
    z = f32_chain("bfloat16", bf([[-0.0, -0.0]]), bf([[1.0], [1.0]]))
    assert z[0, 0] == 0 and not np.signbit(z[0, 0])     # C starts at +0
    c0 = np.full((1, 1), -0.0, np.float32)
    a = codes_of(bf([[-0.0, -0.0]]))
    b = codes_of(bf([[1.0], [1.0]]))
    for lv in LEVELS:
        assert np.signbit(gemm(lv, "bfloat16", a, b, c0)[0, 0])          # -0 + -0
        a3 = codes_of(bf([[-0.0]]))
        assert not np.signbit(gemm(lv, "bfloat16", a3, codes_of(bf([[1.0]])), c0)[0, 0])
        # k == 0 leaves C alone, subnormal and all
        sub = np.array([[1e-40]], np.float32)
        e = np.zeros((1, 0), np.uint16)
        assert gemm(lv, "bfloat16", e, np.zeros((0, 1), np.uint16), sub)[0, 0] == sub[0, 0]


# ---- np.matmul: levels, layouts, stacks -----------------------------------

@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_matmul_levels_equal(name):
    rng = np.random.default_rng(3)
    t = mf_type(name)
    # and thin products (bfloat16's matrix-vector and vector-matrix
    # kernels, through the bfloat16 result's epilogue), a vector on either
    # side, a strided operand
    for (m, k, n) in [(2, 3, 2), (17, 33, 31), (64, 100, 65), (300, 257, 5), (130, 64, 16),
                      (1000, 301, 1), (1, 301, 1000), (3, 257, 130), (4, 64, 300),
                      # rows a whole number of cache lines long (the VDPBF16PS
                      # thin kernel's line-aligned blocks), an odd depth
                      (40, 2048, 16), (37, 1001, 12)]:
        a = as_format(format_codes(rng, name, (m, k)).astype(code_dtype(name)), name)
        b = as_format(format_codes(rng, name, (k, n)).astype(code_dtype(name)), name)
        want = mm("serial", a, b)
        assert want.dtype == t
        for lv in SIMD_LEVELS:
            assert_same_codes(mm(lv, a, b), want)
            if n == 1:
                assert_same_codes(mm(lv, a, b[:, 0]), mm("serial", a, b[:, 0]))
            elif m == 1:
                assert_same_codes(mm(lv, a[0], b), mm("serial", a[0], b))
                assert_same_codes(mm(lv, a[0], b[:, 1:]), mm("serial", a[0], b[:, 1:]))
            else:
                assert_same_codes(mm(lv, a[::2], b[:, ::-1]), mm("serial", a[::2], b[:, ::-1]))


@pytest.mark.parametrize("m,k,n", [(m, k, n) for m, k, n in itertools.product(SIZES, repeat=3)
                                   if (m * 7 + k * 3 + n) % 11 == 0])
def test_matmul_shapes(m, k, n, each_level):
    rng = np.random.default_rng(m + 1000 * k + 10 ** 6 * n)
    a = as_format(bf16_codes(rng, (m, k), "normal"), "bfloat16")
    b = as_format(bf16_codes(rng, (k, n), "cancel"), "bfloat16")
    got = a @ b
    want = mm("serial", a, b)
    assert got.shape == (m, n)
    assert_same_codes(got, want)
    if k == 0:
        assert not codes_of(got).any()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_matmul_layouts(each_level):
    rng = np.random.default_rng(11)
    base_a = as_format(bf16_codes(rng, (70, 90), "wide"), "bfloat16")
    base_b = as_format(bf16_codes(rng, (90, 80), "normal"), "bfloat16")
    want = mm("serial", base_a[:33, :47], base_b[:47, :35])
    a_t = np.ascontiguousarray(base_a[:33, :47].T).T          # column-major
    b_t = np.ascontiguousarray(base_b[:47, :35].T).T
    cases = [
        (base_a[:33, :47], base_b[:47, :35]),
        (a_t, base_b[:47, :35]),
        (base_a[:33, :47], b_t),
        (a_t, b_t),
    ]
    for a, b in cases:
        assert_same_codes(a @ b, want)
    # strided views (every other row/column)
    a2 = base_a[::2, ::2]
    b2 = base_b[::2, ::2]
    assert_same_codes(a2 @ b2, mm("serial", a2.copy(), b2.copy()))
    # negative strides
    a3 = base_a[::-1, ::-1]
    assert_same_codes(a3 @ base_b, mm("serial", a3.copy(), base_b))
    # output into a non-contiguous out=
    out = np.zeros((35, 33), minifloat.bfloat16).T
    r = np.matmul(base_a[:33, :47], base_b[:47, :35], out=out)
    assert r is out
    assert_same_codes(out.copy(), want)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn"])
def test_transposed_operand_packed_on_threads(name, threads):
    """a @ W.T with as many rows in a as in W (no swap): W.T is packed, from 1
    MiB on the threads in column strips (a ragged last strip and tile here),
    or inline where a stack's products hold the threads; the same codes as
    with W.T made C-ordered."""
    rng = np.random.default_rng(3)
    k = 1024 if name == "bfloat16" else 2048
    cases = [((600, k), (530, k)),                # one product: the strips on the threads
             ((3, 8, 65536 // (2 if name == "bfloat16" else 1)), (3, 8, 0))]   # a stack
    for (ashape, wshape) in cases:
        wshape = wshape[:-1] + (ashape[-1],)
        # finite values: with every code drawn, nearly every output of a long
        # k is NaN and a misplaced column would not show
        a = rng.standard_normal(ashape, np.float32).astype(mf_type(name))
        W = rng.standard_normal(wshape, np.float32).astype(mf_type(name))
        Wt = np.swapaxes(W, -1, -2)
        assert not Wt.flags.c_contiguous
        want = mm(LEVELS[-1], a, np.ascontiguousarray(Wt))
        for nt in (1, 2, 3):
            threads(nt)
            assert_same_codes(mm(LEVELS[-1], a, Wt), want)


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_transposed_operand_read_in_place(name, threads):
    """a @ W.T with W C-ordered and as many rows in a as in W or more: the
    blocked kernels pack their B panels straight from W's rows (the x86
    levels; others transpose W first).  The serial oracle's codes (and
    float32 results), at every level and 1-3 threads, for k below one
    16-pair transpose, odd, over several k blocks, B's columns not a whole
    panel, and (bfloat16, float8_e4m3fn) a B that all threads pack together."""
    rng = np.random.default_rng(23)
    shapes = [(40, 31, 40), (64, 1027, 48), (70, 64, 33)]
    if name in ("bfloat16", "float8_e4m3fn"):
        shapes.append((300, 600, 257))
        if not EMULATED:        # (the Arm levels transpose first: the small shapes say it)
            shapes.append((600, 2048, 530))
    for (t, k, m) in shapes:
        # finite values: a misplaced element shows
        x = rng.standard_normal((t, k), np.float32).astype(mf_type(name))
        W = rng.standard_normal((m, k), np.float32).astype(mf_type(name))
        want = mm("serial", x, np.ascontiguousarray(W.T))
        want_f32 = mm("serial", x, np.ascontiguousarray(W.T), dtype=np.float32).view(np.uint32)
        counts = (1, 2, 3) if t * k * m >= (1 << 23) else (1,)
        if EMULATED and len(counts) > 1:
            counts = (1, 3)
        for lv in LEVELS:
            for nt in counts:
                threads(nt)
                assert_same_codes(mm(lv, x, W.T), want)
                np.testing.assert_array_equal(mm(lv, x, W.T, dtype=np.float32).view(np.uint32),
                                              want_f32)
    # specials: NaN and inf codes where the format has them, and the warnings
    x = as_format(format_codes(rng, name, (48, 96)).astype(code_dtype(name)), name)
    W = as_format(format_codes(rng, name, (40, 96)).astype(code_dtype(name)), name)
    want = mm("serial", x, np.ascontiguousarray(W.T))
    for lv in LEVELS:
        assert_same_codes(mm(lv, x, W.T), want)


@pytest.mark.thread_unsafe      # sets and restores the process-wide packing limit
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn"])
def test_b_wider_than_one_packing(name, threads):
    """A B wider than one packing: with an epilogue (matmul) its column blocks
    go one after the other, each packed once by all threads; accumulating
    into C (_gemm_f32acc) each thread packs for itself.  The packing limit
    is lowered so that small products take those paths: serial's codes and
    float32 results at every level and 1-3 threads, B C-ordered and
    transposed."""
    rng = np.random.default_rng(29)
    prev = _core._set_gemm_bpack_limit(64 << 10)
    try:
        for (t, k, m) in ((300, 300, 300), (250, 1000, 203)):
            x = rng.standard_normal((t, k), np.float32).astype(mf_type(name))
            W = rng.standard_normal((k, m), np.float32).astype(mf_type(name))
            Wt = np.ascontiguousarray(W.T)
            want = mm("serial", x, W)
            want_f32 = mm("serial", x, W, dtype=np.float32).view(np.uint32)
            c0 = rng.standard_normal((t, m)).astype(np.float32)
            want_c = c0.copy()
            with kernel_level("serial"):
                _core._gemm_f32acc(name, codes_of(x), codes_of(W), want_c)
            for lv in LEVELS:
                for nt in (1, 3) if EMULATED else (1, 2, 3):
                    threads(nt)
                    assert_same_codes(mm(lv, x, W), want)
                    assert_same_codes(mm(lv, x, Wt.T), want)
                    np.testing.assert_array_equal(
                        mm(lv, x, W, dtype=np.float32).view(np.uint32), want_f32)
                    c = c0.copy()
                    with kernel_level(lv):
                        _core._gemm_f32acc(name, codes_of(x), codes_of(W), c)
                    np.testing.assert_array_equal(c.view(np.uint32), want_c.view(np.uint32))
    finally:
        _core._set_gemm_bpack_limit(prev)
    with pytest.raises(ValueError, match="at least 4096"):
        _core._set_gemm_bpack_limit(100)


@pytest.mark.thread_unsafe      # sets and restores the process-wide packing limit
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn"])
def test_column_tasks_share_one_packing_of_a(name, threads):
    """Column tasks on several threads with A packed for all of k: all of A
    is packed once, by all threads, before the tasks.  Two row blocks (the
    second ragged), three k blocks (the last ragged; bfloat16's odd k keeps
    A from being read in place), B C-ordered and transposed, 1-3 threads:
    serial's codes.  (The packing limit is lowered so that 700 columns are
    wider than one packing: column tasks.)"""
    rng = np.random.default_rng(41)
    # (three k blocks at KC 512 on x86, at KC 256 on Arm, where qemu is slow)
    m, k, n = 250, 531 if EMULATED else 1031, 700
    x = rng.standard_normal((m, k), np.float32).astype(mf_type(name))
    W = rng.standard_normal((k, n), np.float32).astype(mf_type(name))
    Wt = np.ascontiguousarray(W.T)
    want = mm("serial", x, W)
    want_f32 = mm("serial", x, W, dtype=np.float32).view(np.uint32)
    prev = _core._set_gemm_bpack_limit(1 << 20)
    try:
        for lv in SIMD_LEVELS:
            for nt in (1, 3) if EMULATED else (1, 2, 3):
                threads(nt)
                assert_same_codes(mm(lv, x, W), want)
                assert_same_codes(mm(lv, x, Wt.T), want)
                np.testing.assert_array_equal(mm(lv, x, W, dtype=np.float32).view(np.uint32),
                                              want_f32)
    finally:
        _core._set_gemm_bpack_limit(prev)


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_linear_layer_with_a_transposed_weight(name, threads):
    """x @ W.T with W C-ordered (a linear layer): computed as (W @ x.T).T, W's
    rows read in place (fewer rows in x than in W), else W.T packed in tiles;
    the same codes as x @ W.T made C-ordered (the serial oracle), for 1-16
    rows (the thin kernels; 1-128 at avx512bf16 for 1024 rows of W or more) and more, stacks of x, a strided out=, at every
    level and thread count, with the same warnings."""
    rng = np.random.default_rng(17)
    shapes = [(1, 301, 40), (3, 64, 300), (16, 257, 130), (17, 96, 200), (40, 130, 64),
              (64, 64, 64), (80, 70, 50), (5, 2048, 24), (24, 257, 300), (32, 1000, 53),
              (40, 64, 1030), (100, 33, 1100)]
    if name in ("bfloat16", "float8_e4m3fn"):
        shapes.append((12, 1024, 700))      # the gemm's own threads
    for (t, k, m) in shapes:
        # threads: the gemm's (the last shape) and the stack's (two (16, 257,
        # 130) products: 2^20 multiply-adds)
        counts = (1, 2, 3) if (t, k, m) in ((16, 257, 130), (12, 1024, 700)) else (1,)
        if EMULATED and len(counts) > 1:
            counts = (1, 3)
        x = as_format(format_codes(rng, name, (t, k)).astype(code_dtype(name)), name)
        W = as_format(format_codes(rng, name, (m, k)).astype(code_dtype(name)), name)
        want = mm("serial", x, np.ascontiguousarray(W.T))
        xs = np.stack([x, x[::-1]])
        want_s = mm("serial", xs, np.ascontiguousarray(W.T))
        want_f32 = mm("serial", x, np.ascontiguousarray(W.T), dtype=np.float32).view(np.uint32)
        for lv in LEVELS:
            for nt in counts:
                threads(nt)
                assert_same_codes(mm(lv, x, W.T), want)
                assert_same_codes(mm(lv, xs, W.T), want_s)
                # rows in reverse (negative strides), of x and of W
                assert_same_codes(mm(lv, x[::-1], W.T), want[::-1])
                assert_same_codes(mm(lv, x, W[::-1].T), want[:, ::-1])
                out = np.zeros((m, t), mf_type(name)).T
                mm(lv, x, W.T, out=out)
                assert_same_codes(out.copy(), want)
                f32 = mm(lv, x, W.T, dtype=np.float32)
                np.testing.assert_array_equal(f32.view(np.uint32), want_f32)
    # warnings: an overflow and an invalid the inputs do not hold, as the
    # C-ordered operand gives them
    t = mf_type(name)
    big = float(minifloat.finfo(t).max)
    x = np.full((2, 8), big, np.float32).astype(t)
    W = np.full((5, 8), big, np.float32).astype(t)
    with warnings.catch_warnings(record=True) as w1:
        warnings.simplefilter("always")
        r1 = x @ W.T
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        r2 = x @ np.ascontiguousarray(W.T)
    assert_same_codes(r1, r2)
    assert [str(w.message) for w in w1] == [str(w.message) for w in w2]


FIRST_PRODUCT = """
import sys, warnings
import numpy as np, minifloat
t = getattr(minifloat, sys.argv[1])
x = np.ones((8, 32), np.float32).astype(t)
warnings.simplefilter("error")
np.seterr(all="raise")
r = x @ x.T                      # the process's first product
assert (r.astype(np.float32) == 32).all(), r
big = np.full((2, 8), float(minifloat.finfo(t).max), np.float32).astype(t)
try:
    big @ big.T
except FloatingPointError as e:
    print("raised:", e)
"""


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn"])
def test_first_product_raises_nothing(name):
    # a process's first product runs the once-per-process checks of its
    # level (the avx512bf16 level tests VDPBF16PS on overflowing operands);
    # they leave no status flag behind for NumPy to report as the caller's
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", FIRST_PRODUCT, name], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("raised: overflow"), out.stdout   # a real one still is


def test_unaligned_operands(each_level):
    rng = np.random.default_rng(12)
    a = as_format(bf16_codes(rng, (70, 90), "normal"), "bfloat16")
    b = as_format(bf16_codes(rng, (90, 80), "cancel"), "bfloat16")

    def unaligned(x):
        buf = np.zeros(x.nbytes + 1, np.uint8)
        u = buf[1:].view(x.dtype).reshape(x.shape)
        u[...] = x
        assert not u.flags.aligned
        return u

    want = mm("serial", a, b)
    assert_same_codes(unaligned(a) @ unaligned(b), want)
    out = unaligned(np.zeros((70, 80), minifloat.bfloat16))
    np.matmul(a, b, out=out)
    assert_same_codes(out.copy(), want)


def test_thin_products_at_every_row_offset(each_level):
    # matrix @ vector and @ a few columns, and v @ matrix, with rows starting
    # at every offset within a cache line (the kernels do the pairs up to the
    # next line first where all rows start alike): ragged row groups, odd
    # and even k, NaN and inf among the values; the same bits as serial
    rng = np.random.default_rng(21)
    base = bf16_codes(rng, (53, 33 * 64), "cancel")           # rows 4224 bytes apart
    base[5, 100], base[40, 700] = 0x7FC0, 0xFF80
    vec = bf16_codes(rng, (33 * 64,), "normal")
    cols = bf16_codes(rng, (33 * 64, 27), "normal")
    for s in list(range(0, 40)) + [77, 500]:
        for k in (1000, 1001):
            a = as_format(base[:, s:s + k], "bfloat16")
            v = as_format(vec[:k], "bfloat16")
            b = as_format(cols[:k, :3], "bfloat16")
            b27 = as_format(cols[:k], "bfloat16")
            assert_same_codes(mm(each_level, a, v), mm("serial", a, v))
            assert_same_codes(mm(each_level, a, b), mm("serial", a, b))
            assert_same_codes(mm(each_level, a, b27), mm("serial", a, b27))
            at = as_format(base[:4, s:s + k].T.copy(), "bfloat16")
            assert_same_codes(mm(each_level, v, a.T), mm("serial", v, a.T))
            assert_same_codes(mm(each_level, v[None, :], at), mm("serial", v[None, :], at))


@pytest.mark.skipif(EMULATED, reason="the Arm levels have no thin kernel past 16 columns")
def test_thin_products_past_16_columns_at_row_offsets():
    # 17-128 columns (the VDPBF16PS thin kernel takes them from 1024 rows)
    # with rows starting at several offsets within a cache line
    rng = np.random.default_rng(22)
    base = bf16_codes(rng, (1030, 1100), "cancel")
    base[5, 100], base[900, 700] = 0x7FC0, 0xFF80
    cols = bf16_codes(rng, (1100, 100), "normal")
    for s in (0, 1, 7, 33):
        for k in (64, 65):
            a = as_format(base[:, s:s + k], "bfloat16")
            for n in (27, 100):
                b = as_format(cols[:k, :n], "bfloat16")
                want = mm("serial", a, b)
                for lv in SIMD_LEVELS:
                    assert_same_codes(mm(lv, a, b), want)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"])
def test_thin_products_of_8bit_codes(name):
    # the 8-bit formats' thin kernel (avx512bf16: each row's codes decoded
    # through the format's table as they are read): every code (NaN, inf,
    # zeros of both signs), rows at every offset within a cache line, rows
    # in whole and ragged groups, odd and even k, 1-16 columns and, on 1030
    # rows, 17-128; x @ W.T read in place; the same bits as serial at every
    # level
    rng = np.random.default_rng(23)
    base = format_codes(rng, name, (53, 1200))
    cols = format_codes(rng, name, (1200, 16))
    for s in ((0, 33) if EMULATED else list(range(0, 66, 5)) + [77]):
        for k in (1000, 1001):
            a = as_format(base[:, s:s + k], name)
            for n in (1, 9, 16):
                b = as_format(cols[:k, :n], name)
                want = mm("serial", a, b)
                for lv in SIMD_LEVELS:
                    assert_same_codes(mm(lv, a, b), want)
    if EMULATED:
        return          # the Arm levels have no thin kernel past 16 columns
    big = format_codes(rng, name, (1030, 300))
    wide = format_codes(rng, name, (300, 100))
    for s in (0, 1, 33):
        a = as_format(big[:, s:s + 257], name)
        for n in (27, 64, 100):
            b = as_format(wide[:257, :n], name)
            want = mm("serial", a, b)
            x = as_format(np.ascontiguousarray(codes_of(b).T), name)
            want_t = mm("serial", x, np.ascontiguousarray(a.T))
            for lv in SIMD_LEVELS:
                assert_same_codes(mm(lv, a, b), want)
                assert_same_codes(mm(lv, x, a.T), want_t)


def test_deep_narrow():
    # k too deep to pack: the unpacked path, same chain
    rng = np.random.default_rng(13)
    a = as_format(bf16_codes(rng, (2, 600_000), "cancel"), "bfloat16")
    b = as_format(bf16_codes(rng, (600_000, 3), "normal"), "bfloat16")
    want = mm("serial", a, b)
    for lv in SIMD_LEVELS:
        assert_same_codes(mm(lv, a, b), want)


def test_matmul_stacks(each_level):
    rng = np.random.default_rng(5)
    a = as_format(bf16_codes(rng, (4, 3, 9, 20), "normal"), "bfloat16")
    b = as_format(bf16_codes(rng, (3, 20, 7), "cancel"), "bfloat16")
    got = a @ b                                                 # broadcast stack
    assert got.shape == (4, 3, 9, 7)
    for i in range(4):
        for j in range(3):
            assert_same_codes(got[i, j], mm("serial", a[i, j].copy(), b[j].copy()))
    # 1-D @ 2-D, 2-D @ 1-D, 1-D @ 1-D
    v = as_format(bf16_codes(rng, (20,), "normal"), "bfloat16")
    m2 = as_format(bf16_codes(rng, (20, 6), "normal"), "bfloat16")
    assert_same_codes(v @ m2, mm("serial", v[None, :], m2)[0])
    assert_same_codes(m2.T @ v, mm("serial", m2.T.copy(), v[:, None])[:, 0])
    r = v @ v
    assert r.shape == () and r.dtype == minifloat.bfloat16
    assert codes_of(np.asarray(r)[None]) == codes_of(mm("serial", v[None, :], v[:, None])[0])


def test_stack_on_the_threads(threads):
    # a stack of products each too small for the gemm's own threads: the
    # products on the threads, each on one; the bits of one product at a
    # time, strided operands (packed by each thread) and the warnings too.
    # Products of a deep enough k (the second shape) fetch the next one's
    # operands as they go, each thread the product it took next: every
    # product taken exactly once, at every thread count
    rng = np.random.default_rng(21)
    for name, (s, m, k, n) in [("bfloat16", (24, 32, 64, 40)), ("float8_e4m3fn", (24, 32, 64, 40)),
                               ("bfloat16", (7, 96, 256, 96)), ("float8_e5m2", (5, 96, 256, 96))]:
        a = as_format(format_codes(rng, name, (s, m, k)).astype(code_dtype(name)), name)
        b = as_format(format_codes(rng, name, (s, k, n)).astype(code_dtype(name)), name)
        pairs = [(a, b)] + ([(a[:, ::2, :], b[:, :, ::-1])] if name == "bfloat16" else [])
        for x, y in pairs:
            want = [mm("serial", x[i].copy(), y[i].copy()) for i in range(x.shape[0])]
            for level in LEVELS:
                for nthreads in (1, 2, 3):
                    threads(nthreads)
                    with kernel_level(level), np.errstate(all="ignore"):
                        got = x @ y
                    for i in range(x.shape[0]):
                        assert_same_codes(got[i], want[i])
    big = as_format(np.full((16, 64, 64), 0x7F00, np.uint16), "bfloat16")   # 1.7e38
    with pytest.warns(RuntimeWarning, match="overflow"):
        r = big @ big
    assert np.isinf(r.astype(np.float32)).all()


def _warned(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = fn()
    return r, sorted({str(x.message) for x in w if issubclass(x.category, RuntimeWarning)})


def _at(level, a, b):
    with kernel_level(level):
        return a @ b


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_bf16_results_from_the_registers(threads, nthreads):
    """bfloat16 products whose k is one block (at most 512) with A read in
    place: AVX512_BF16 rounds each tile to bfloat16 in the kernel's
    registers, and a tile holding a value that rounds to infinity, an inf or
    a NaN goes through the scratch's store instead.  Every level equals the
    serial result bit for bit, warnings included: last row panels of 1, 6,
    8 and 11 rows, last tiles of 1, 8, 13 and 31 columns, a tile that
    overflows, one with a NaN, one with an inf, ties and cancellation, in a
    single product and in a stack (and a k of 2, too small for the blocked
    kernels, for the edge)."""
    threads(nthreads)
    rng = np.random.default_rng(31)
    for (m, k, n) in [(128, 256, 128), (35, 64, 77), (30, 512, 40), (49, 2, 95), (23, 510, 33), (37, 100, 31)]:
        for regime in ("normal", "cancel", "wide"):
            a = bf16_codes(rng, (m, k), regime)
            b = bf16_codes(rng, (k, n), "normal")
            if regime == "normal":
                a[0, :] = 0x7F00                       # row 0 x b: beyond the bf16 range
                a[m - 1, 0] = 0x7FC1                   # a NaN in the last row panel
                a[m // 2, 1] = 0x7F80                  # an inf in a middle one
            x, y = as_format(a, "bfloat16"), as_format(b, "bfloat16")
            want, want_w = _warned(lambda: _at("serial", x, y))
            for lv in SIMD_LEVELS:
                got, got_w = _warned(lambda: _at(lv, x, y))
                assert_same_codes(got, want)
                assert got_w == want_w
            stack_x = as_format(np.stack([a, a[::-1]]), "bfloat16")
            stack_y = as_format(np.stack([b, b]), "bfloat16")
            for lv in SIMD_LEVELS:
                got = mm(lv, stack_x, stack_y)
                assert_same_codes(got[0], want)
                assert_same_codes(got[1], mm("serial", stack_x[1], stack_y[1]))


def test_many_small_matmuls(each_level):
    rng = np.random.default_rng(9)
    a = as_format(bf16_codes(rng, (1000, 4, 4), "normal"), "bfloat16")
    b = as_format(bf16_codes(rng, (1000, 4, 4), "normal"), "bfloat16")
    got = a @ b
    for i in range(0, 1000, 97):
        assert_same_codes(got[i], mm("serial", a[i], b[i]))


def test_out_and_mixed_dtypes():
    rng = np.random.default_rng(2)
    a = as_format(bf16_codes(rng, (8, 12), "normal"), "bfloat16")
    b = as_format(bf16_codes(rng, (12, 5), "normal"), "bfloat16")
    out = np.empty((8, 5), minifloat.bfloat16)
    r = np.matmul(a, b, out=out)
    assert r is out
    assert_same_codes(out, a @ b)
    # bf16 @ float32 promotes to float32 and is NumPy's float32 matmul
    b32 = b.astype(np.float32)
    r = a @ b32
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, a.astype(np.float32) @ b32)
    # a float32 out= receives the rounded bfloat16 result (NumPy dispatches
    # on the inputs and casts)
    o32 = np.empty((8, 5), np.float32)
    np.matmul(a, b, out=o32)
    np.testing.assert_array_equal(o32, (a @ b).astype(np.float32))
    # dtype=float32 selects the (F, F) -> float32 loop: the unrounded chains
    for lv in LEVELS:
        with kernel_level(lv):
            r = np.matmul(a, b, dtype=np.float32)
        assert r.dtype == np.float32
        want = gemm("serial", "bfloat16", codes_of(a), codes_of(b), np.zeros((8, 5), np.float32))
        np.testing.assert_array_equal(r.view(np.uint32), want.view(np.uint32))
    big = as_format(bf16_codes(rng, (40, 300), "wide"), "bfloat16")
    big_b = as_format(bf16_codes(rng, (300, 50), "bits"), "bfloat16")
    want = canonical_bits(gemm("serial", "bfloat16", codes_of(big), codes_of(big_b),
                               np.zeros((40, 50), np.float32)))
    for lv in LEVELS:
        r = mm(lv, big, big_b, dtype=np.float32)
        np.testing.assert_array_equal(r.view(np.uint32), want)      # NaN is +qNaN


def test_shape_errors():
    a = np.ones((3, 4), minifloat.bfloat16)
    with pytest.raises(ValueError):
        a @ a
    with pytest.raises(ValueError):
        np.matmul(a, a.T, out=np.empty((4, 4), minifloat.bfloat16))


# ---- accuracy against float64 ---------------------------------------------

@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_error_bound(name):
    """|C - exact| <= (k u32 sum|a b| + k 2^-126)(1 + u) + u |exact| + s/2 where
    u32 = 2^-24 (float32 accumulation; gamma_k with products exact),
    2^-126 per step is what FTZ can drop, u the format's unit roundoff and
    s its smallest subnormal (operands here have no bfloat16 subnormals)."""
    rng = np.random.default_rng(4)
    info = FMT_INFO[name]
    t = mf_type(name)
    fi = minifloat.finfo(t)
    k = 300
    # values well inside the range so that nothing overflows
    a = (rng.standard_normal((40, k)) * 0.25).astype(np.float32).astype(t)
    b = (rng.standard_normal((k, 30)) * 0.25).astype(np.float32).astype(t)
    if info["special"] == "e8m0":
        a = np.full((40, k), 0.5, np.float32).astype(t)
        b = (2.0 ** rng.integers(-5, 5, (k, 30))).astype(np.float32).astype(t)
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    exact = a64 @ b64
    mag = np.abs(a64) @ np.abs(b64)
    u32 = 2.0 ** -24
    u = float(fi.eps) / 2
    s = float(fi.smallest_subnormal)
    for lv in LEVELS:
        got = mm(lv, a, b).astype(np.float64)
        finite = np.isfinite(got) & (np.abs(exact) <= float(fi.max))
        acc_err = (k * u32 / (1 - k * u32)) * mag + k * 2.0 ** -126
        bound = acc_err * (1 + u) + u * np.abs(exact) + s / 2 + 1e-300
        err = np.abs(got - exact)
        assert np.all(err[finite] <= bound[finite]), (lv, np.max(err - bound))


# ---- special values and flags ------------------------------------------------

def test_nan_is_canonical_and_flags():
    a = bf([[np.inf, 1.0]])
    b = bf([[0.0], [1.0]])
    for lv in LEVELS:
        with kernel_level(lv):
            with pytest.warns(RuntimeWarning, match="invalid"):
                r = a @ b
            assert codes_of(r)[0, 0] == 0x7FC0
            big = bf([[3e38, 3e38]])
            with pytest.warns(RuntimeWarning, match="overflow"):
                r = big @ bf([[1.0], [1.0]])
            assert codes_of(r)[0, 0] == 0x7F80
            # NaN in, NaN out: no warning
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                r = bf([[np.nan, 1.0]]) @ bf([[1.0], [1.0]])
                assert codes_of(r)[0, 0] == 0x7FC0
                r = bf([[np.inf, 1.0]]) @ bf([[1.0], [1.0]])
                assert codes_of(r)[0, 0] == 0x7F80


# ---- torch ---------------------------------------------------------------------

def _torch_uses_vdpbf16ps():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    # oneDNN picks VDPBF16PS where there is AVX512_BF16 and no AMX
    return "avx512bf16" in LEVELS and "amx_bf16" not in flags


@pytest.mark.skipif(not _torch_uses_vdpbf16ps(), reason="torch's bf16 matmul is not VDPBF16PS")
@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (96, 33, 128), (128, 256, 100),
                                   (200, 511, 64), (256, 512, 256)])
def test_equals_torch(m, k, n, each_level):
    """torch's CPU bf16 matmul (oneDNN, VDPBF16PS with k pairs in their natural
    layout) computes the same chain for these shapes.  It differs for small
    ones (e.g. 8 x 16 @ 16 x 8: another kernel, k order, no FTZ) and for
    k > 512, where oneDNN splits k into blocks of 512 or 1024 (by shape),
    runs one chain per block from zero and adds the block results."""
    import torch
    rng = np.random.default_rng(m + k + n)
    e = np.float32(2.0 ** -24)
    pats = np.array([[1, e, e, -1], [e, 1, -1, e], [1, -1, e, 0],
                     [2.0 ** -63, 2.0 ** -63, 0, 0]], np.float32)
    a = pats[rng.integers(0, 4, (m, (k + 3) // 4))].reshape(m, -1)[:, :k]
    b = rng.choice(np.array([1, 1, 1, -1, 2.0 ** -63, -2.0 ** -64], np.float32), (k, n))
    a = a * rng.choice(np.array([1, 1.5, 0.75], np.float32), (m, 1))
    ab = a.astype(minifloat.bfloat16)
    bb = b.astype(minifloat.bfloat16)
    ours = ab @ bb
    theirs = torch.mm(torch.from_numpy(codes_of(ab).view(np.int16)).view(torch.bfloat16),
                      torch.from_numpy(codes_of(bb).view(np.int16)).view(torch.bfloat16))
    np.testing.assert_array_equal(codes_of(ours),
                                  theirs.view(torch.int16).numpy().view(np.uint16))


# ---- threads: concurrent calls, fork ---------------------------------------

def _big_pair(seed):
    rng = np.random.default_rng(seed)
    a = as_format(bf16_codes(rng, (160, 300), "normal"), "bfloat16")
    b = as_format(bf16_codes(rng, (300, 200), "cancel"), "bfloat16")
    return a, b


@pytest.mark.parametrize("level", SIMD_LEVELS)
def test_concurrent_calls(level):
    import threading
    pairs = [_big_pair(s) for s in range(4)]
    want = [mm("serial", a, b) for a, b in pairs]
    got = [None] * 4

    def work(i):
        for _ in range(3):
            got[i] = np.matmul(*pairs[i])

    with kernel_level(level):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for g, w in zip(got, want):
        assert_same_codes(g, w)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_fork_after_threads():
    import os
    a, b = _big_pair(1)
    want = a @ b                      # starts the worker threads
    pid = os.fork()
    if pid == 0:                      # child: the parent's workers are gone
        ok = False
        try:
            ok = np.array_equal(codes_of(a @ b), codes_of(want))
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
