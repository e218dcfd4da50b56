"""Block-scaled formats (minifloat.quantize): against a slow reference written
here from the spec texts (OCP Microscaling v1.0 section 6; NVFP4 as
TransformerEngine's core_nvfp4.cuh states it), hand-computed vectors, torch
and ml_dtypes element casts, hypothesis properties, checkpoints and DLPack."""
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import minifloat as mf
from minifloat import _core

FORMATS = list(mf.blocks.BLOCK_FORMATS)
MX_FLOAT = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4"]
MODES = ["floor", "ceil", "even", "rceil"]

# ---------------------------------------------------------------- reference
# Element formats from their definitions (OCP 8-bit FP and MX v1.0 tables):
# (exponent bits, mantissa bits, bias, top codes that are not numbers)
ELEMENTS = {
    "mxfp8_e4m3": (4, 3, 7, "e4m3"),       # S.1111.111 is NaN, max 448
    "mxfp8_e5m2": (5, 2, 15, "ieee"),      # exponent 11111 is inf/NaN, max 57344
    "mxfp6_e2m3": (2, 3, 1, "none"),       # max 7.5
    "mxfp6_e3m2": (3, 2, 3, "none"),       # max 28
    "mxfp4": (2, 1, 1, "none"),            # max 6
    "nvfp4": (2, 1, 1, "none"),
    "e4m3": (4, 3, 7, "e4m3"),             # NVFP4's scale format
}
EMAX = {"mxfp8_e4m3": 8, "mxfp8_e5m2": 15, "mxfp6_e2m3": 2, "mxfp6_e3m2": 4, "mxfp4": 2,
        "mxint8": 0}


def element_values(fmt):
    """magnitudes of codes 0, 1, ... up to the largest finite one"""
    E, M, bias, special = ELEMENTS[fmt]
    vals = []
    for c in range(1 << (E + M)):
        e, m = c >> M, c & ((1 << M) - 1)
        if special == "e4m3" and c == (1 << (E + M)) - 1:
            break
        if special == "ieee" and e == (1 << E) - 1:
            break
        vals.append(m * 2.0 ** (1 - bias - M) if e == 0 else (1 + m / 2 ** M) * 2.0 ** (e - bias))
    return np.array(vals)


def round_element(v, fmt):
    """round-to-nearest-even into the element format, saturating to the
    largest normal; returns codes (sign bit = the top bit)"""
    E, M, bias, _ = ELEMENTS[fmt]
    vals = element_values(fmt)
    a = np.minimum(np.abs(v), vals[-1])
    hi = np.clip(np.searchsorted(vals, a), 0, len(vals) - 1)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - vals[lo], vals[hi] - a
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    sign = np.signbit(v).astype(np.int64) << (E + M)
    return (pick | sign).astype(np.uint8)


def flog2(a):
    """floor(log2 a) of a positive float, exactly (frexp: a = m 2^ex, 0.5 <= m < 1)"""
    return math.frexp(a)[1] - 1


def e8m0_exponent(amax, fmt, mode):
    """the shared exponent from a block's amax (float64 holding a float32)"""
    emax = EMAX[fmt]
    out = np.empty(amax.shape, np.int64)
    for i, a in np.ndenumerate(amax):
        a = float(a)
        if a == 0:
            e = -10 ** 6                       # log2(0) = -inf: clamps to -127
        elif mode == "floor":                  # the spec
            e = flog2(a) - emax
        elif mode == "ceil":
            f = flog2(a)
            e = f + (a != 2.0 ** f) - emax
        elif mode == "even":
            mb = 6 if fmt == "mxint8" else ELEMENTS[fmt][1]
            f = flog2(a)
            if f >= -126:     # a normal float32: round its significand half-up to mb bits
                r = math.floor(a / 2.0 ** f * 2 ** mb + 0.5) / 2 ** mb
                f += r >= 2
            e = f - emax
        else:   # rceil: amax / max_elem in float32, rounded up to a power of two
            mx = 127 / 64 if fmt == "mxint8" else element_values(fmt)[-1]
            d = float(np.float32(a) / np.float32(mx))
            if d == 0:
                e = -10 ** 6
            else:
                f = flog2(d)
                e = f + (d != 2.0 ** f)
        out[i] = min(max(e, -127), 127)
    return out


def ref_quantize(x, fmt, mode="floor"):
    """(codes per element (rows, kp) uint8, scale codes (rows, nb) uint8) for
    2-d float32 x, blocks along the last axis"""
    x = np.asarray(x, np.float32)
    rows, k = x.shape
    B = 16 if fmt == "nvfp4" else 32
    nb = -(-k // B)
    xp = np.zeros((rows, nb * B), np.float64)
    xp[:, :k] = x
    blk = xp.reshape(rows, nb, B)
    finite = np.all(np.isfinite(blk), axis=-1)
    with np.errstate(invalid="ignore"):
        amax = np.where(finite, np.max(np.abs(np.where(np.isfinite(blk), blk, 0)), axis=-1), 0)
    if fmt == "nvfp4":
        return ref_nvfp4(x, blk, finite, amax)
    e = e8m0_exponent(amax, fmt, mode)
    scales = np.where(finite, e + 127, 255).astype(np.uint8)
    v = blk / 2.0 ** e[..., None]          # exact: a power of two
    if fmt == "mxint8":
        q = np.clip(np.rint(np.where(finite[..., None], v, 0) * 64), -127, 127)
        codes = q.astype(np.int8).view(np.uint8)
    else:
        codes = round_element(v, fmt)
    codes = np.where(finite[..., None], codes, 0).astype(np.uint8)
    return codes.reshape(rows, nb * B), scales


def ref_nvfp4(x, blk, finite, amax):
    f32 = np.float32
    fin = x[np.isfinite(x)]
    gamax = f32(np.max(np.abs(fin))) if fin.size else f32(0)
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = f32(448 * 6) / gamax
    s_enc = min(s_enc, np.finfo(f32).max)
    if gamax == 0 or s_enc == 0:
        s_enc = f32(1)
    s_dec = f32(1) / f32(s_enc)
    sdb = (amax.astype(f32) * f32(f32(s_enc) * f32(f32(1) / f32(6)))).astype(np.float64)
    sc = round_element(sdb, "e4m3")                      # saturating RNE
    sval = element_values("e4m3")[sc & 0x7F].astype(f32)
    with np.errstate(divide="ignore"):
        rcp = np.minimum(f32(1) / (sval * s_dec), np.finfo(f32).max).astype(f32)
    with np.errstate(over="ignore"):
        v = (blk.astype(f32) * rcp[..., None]).astype(np.float64)
    v = np.where(np.isfinite(v), v, np.sign(v) * 6)
    codes = np.where(finite[..., None], round_element(v, "nvfp4"), 0).astype(np.uint8)
    scales = np.where(finite, sc, 0x7F).astype(np.uint8)
    return codes.reshape(x.shape[0], -1), scales, s_dec


def ref_dequantize(codes, scales, fmt, k, s_dec=None):
    rows = codes.shape[0]
    B = 16 if fmt == "nvfp4" else 32
    c = codes.reshape(rows, -1, B)
    if fmt == "mxint8":
        val = c.view(np.int8).astype(np.float64) / 64
    else:
        E, M, _, _ = ELEMENTS[fmt]
        mag = element_values(fmt)
        val = mag[c & ((1 << (E + M)) - 1)] * np.where(c >> (E + M), -1.0, 1.0)
    if fmt == "nvfp4":
        sv = element_values("e4m3")
        sval = np.where(scales == 0x7F, np.nan, sv[np.minimum(scales & 0x7F, len(sv) - 1)])
        out = (val * sval[..., None]).astype(np.float32) * np.float32(s_dec)
    else:
        sval = np.where(scales == 255, np.nan, 2.0 ** (scales.astype(np.float64) - 127))
        with np.errstate(over="ignore"):
            out = (val * sval[..., None]).astype(np.float32)
    return out.reshape(rows, -1)[:, :k]


def unpack_fp4(data, kp):
    d = np.asarray(data).view(np.uint8)
    out = np.empty(d.shape[:-1] + (kp,), np.uint8)
    out[..., 0::2] = d & 0xF
    out[..., 1::2] = d >> 4
    return out


def codes_of(q):
    """per-element codes (uint8) of a BlockScaled in its blocked layout"""
    kp = q.scales.shape[-1] * q.block_size
    if q.data.dtype == np.uint8:
        return unpack_fp4(q.data, kp)
    return np.asarray(q.data).view(np.uint8)


def check_against_reference(x, fmt, mode="floor"):
    q = mf.quantize(x, fmt, scale_rounding=mode)
    ref = ref_quantize(x, fmt, mode)
    np.testing.assert_array_equal(q.scales.view(np.uint8), ref[1])
    np.testing.assert_array_equal(codes_of(q), ref[0])
    s_dec = None
    if fmt == "nvfp4":
        assert q.tensor_scale.view(np.uint32) == np.float32(ref[2]).view(np.uint32)
        s_dec = ref[2]
    y = q.dequantize()
    yr = ref_dequantize(ref[0], ref[1], fmt, x.shape[1], s_dec)
    np.testing.assert_array_equal(y.view(np.uint32), yr.view(np.uint32))
    return q


def wide_data(rows, k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-40, 40, (rows, 1))
    x *= 2.0 ** rng.integers(-6, 6, (rows, k))
    return x.astype(np.float32)


# ---------------------------------------------------------------- the reference agrees

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_random_against_spec_reference(fmt, mode):
    if fmt == "nvfp4" and mode != "floor":
        pytest.skip("nvfp4 has one scale rule")
    x = wide_data(6, 200, 1)
    check_against_reference(x, fmt, mode)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 2.0 ** -126, 1.0, -1.0,
                     2.0 ** -140, 3.4e38, -3.4e38, 448.0, 6.0, 5.0, 7.5, 1.75, 2.0 ** -149],
                    np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_special_values_against_spec_reference(fmt, mode):
    if fmt == "nvfp4" and mode != "floor":
        pytest.skip("nvfp4 has one scale rule")
    rng = np.random.default_rng(2)
    B = 16 if fmt == "nvfp4" else 32
    # blocks made of a few specials each, and blocks of one special repeated
    x = rng.choice(SPECIALS, size=(40, 3 * B))
    x[:, :B] = SPECIALS[np.arange(40) % len(SPECIALS), None]
    x[0] = 0.0
    x[1] = -0.0
    check_against_reference(x, fmt, mode)


@settings(max_examples=60, deadline=None)
@given(fmt=st.sampled_from(FORMATS), mode=st.sampled_from(MODES),
       x=hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(1, 70)),
                    elements=st.floats(width=32, allow_nan=True, allow_infinity=True)))
def test_property_any_float32_matches_reference(fmt, mode, x):
    if fmt == "nvfp4":
        mode = "floor"
    check_against_reference(x, fmt, mode)


# ---------------------------------------------------------------- hand-computed vectors

def block(values, B=32):
    x = np.zeros((1, B), np.float32)
    x[0, :len(values)] = values
    return x


def test_hand_mxfp4():
    # amax 6 = 1.5 * 2^2: shared exponent 2 - emax(E2M1) 2 = 0 -> scale 2^0, code 127
    q = mf.quantize(block([6.0, 3.0, -0.5, 0.25, 0.75, -0.0]), "mxfp4")
    assert q.scales.view(np.uint8)[0, 0] == 127
    c = codes_of(q)[0, :6]
    # 6 -> 0b0111, 3 -> 0b0101, -0.5 -> 0b1001, 0.25 -> tie 0/0.5 -> even 0,
    # 0.75 -> tie 0.5/1.0 -> even 1.0 (0b0010), -0 -> 0b1000
    assert list(c) == [0x7, 0x5, 0x9, 0x0, 0x2, 0x8]
    assert q.data.view(np.uint8)[0, 0] == 0x57           # element 0 in the low nibble


def test_hand_mxfp8_power_of_two_amax_and_saturation():
    # amax exactly 1.0: floor(log2 1) - 8 = -8 -> code 119; 1.0 / 2^-8 = 256 = 0x78
    q = mf.quantize(block([1.0, 0.5]), "mxfp8_e4m3")
    assert q.scales.view(np.uint8)[0, 0] == 119
    assert list(codes_of(q)[0, :2]) == [0x78, 0x70]
    # amax 1.9: same exponent; 1.9 * 256 = 486.4 > 448 saturates to 448 (0x7E), never NaN
    q = mf.quantize(block([1.9, -1.9]), "mxfp8_e4m3")
    assert q.scales.view(np.uint8)[0, 0] == 119
    assert list(codes_of(q)[0, :2]) == [0x7E, 0xFE]
    # ceil puts 1.9 one binade up: scale 2^-7, 1.9 * 128 = 243.2 -> 240 (0x77)
    q = mf.quantize(block([1.9]), "mxfp8_e4m3", scale_rounding="ceil")
    assert q.scales.view(np.uint8)[0, 0] == 120
    assert codes_of(q)[0, 0] == 0x77


def test_hand_mxfp6():
    # E2M3 (bias 1, max 7.5 = 1.875 * 2^2, emax 2): amax 7.5 -> scale 2^0 (code 127);
    # 7.5 -> 0b011111; 0.125 (the smallest subnormal) -> 0b000001; 0.0625 ties 0 / 0.125
    # -> even 0; -1.0 -> 0b101000
    q = mf.quantize(block([7.5, 0.125, 0.0625, -1.0]), "mxfp6_e2m3")
    assert q.scales.view(np.uint8)[0, 0] == 127
    assert list(codes_of(q)[0, :4]) == [0x1F, 0x01, 0x00, 0x28]
    assert q.data.dtype == mf.float6_e2m3fn
    # amax 8 = 2^3: scale 2^1 (code 128); 8 / 2 = 4 = 1.0 * 2^2 -> exponent field 3: 0b011000
    q = mf.quantize(block([8.0]), "mxfp6_e2m3")
    assert q.scales.view(np.uint8)[0, 0] == 128 and codes_of(q)[0, 0] == 0x18
    # E3M2 (bias 3, max 28 = 1.75 * 2^4, emax 4): amax 30 -> scale 2^0, 30 saturates to
    # 28 (0b011111); 0.0625 = 2^-4, the smallest subnormal -> 0b000001
    q = mf.quantize(block([30.0, 0.0625, -28.0]), "mxfp6_e3m2")
    assert q.scales.view(np.uint8)[0, 0] == 127
    assert list(codes_of(q)[0, :3]) == [0x1F, 0x01, 0x3F]


def test_hand_subnormal_amax_clamps_scale():
    # amax 2^-140: floor(log2) - 15 = -155, clamped to -127 (code 0);
    # 2^-140 / 2^-127 = 2^-13, an E5M2 normal: exponent field -13 + 15 = 2 -> 0x08
    q = mf.quantize(block([2.0 ** -140]), "mxfp8_e5m2")
    assert q.scales.view(np.uint8)[0, 0] == 0
    assert codes_of(q)[0, 0] == 0x08
    assert q.dequantize()[0, 0] == np.float32(2.0 ** -140)


@pytest.mark.parametrize("fmt", FORMATS)
def test_zero_block(fmt):
    B = 16 if fmt == "nvfp4" else 32
    x = np.zeros((1, B), np.float32)
    x[0, 1::2] = -0.0
    q = mf.quantize(x, fmt)
    assert q.scales.view(np.uint8)[0, 0] == 0
    y = q.dequantize()
    assert np.all(y == 0)
    if fmt != "mxint8":                      # int8 has no -0
        np.testing.assert_array_equal(np.signbit(y), np.signbit(x))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_nonfinite_in_block_gives_nan_scale(fmt, bad):
    B = 16 if fmt == "nvfp4" else 32
    x = np.ones((1, 2 * B), np.float32)
    x[0, 3] = bad
    q = mf.quantize(x, fmt)
    nan_code = 0x7F if fmt == "nvfp4" else 0xFF
    assert q.scales.view(np.uint8)[0, 0] == nan_code
    assert q.scales.view(np.uint8)[0, 1] != nan_code
    y = q.dequantize()
    assert np.all(np.isnan(y[0, :B])) and np.all(y[0, B:] == 1.0)


def test_hand_mxint8():
    # amax 1.5: exponent 0 - 0 = 0 -> scale 1; 1.5 * 64 = 96; 0.5/64 * 64 ties to even 0;
    # 1.5/64 * 64 = 1.5 -> 2; -1.984375 clamps to -127 not -128
    q = mf.quantize(block([1.5, 0.5 / 64, 1.5 / 64, -1.5]), "mxint8")
    assert q.scales.view(np.uint8)[0, 0] == 127
    assert list(q.data[0, :4]) == [96, 0, 2, -96]
    q = mf.quantize(block([1.999]), "mxint8")
    assert q.data[0, 0] == 127


def test_hand_nvfp4():
    # global amax 2688 = 448 * 6: tensor encode scale 1 exactly; block amax 2688 ->
    # e4m3(2688 / 6) saturates to 448 (0x7E); block amax 12 -> e4m3(2) = 0x40,
    # elements 12 * 1/2 = 6 (0b0111), 3 * 1/2 = 1.5 (0b0011)
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 2688.0
    x[0, 16:18] = [12.0, -3.0]
    q = mf.quantize(x, "nvfp4")
    assert q.tensor_scale == np.float32(1.0)
    assert list(q.scales.view(np.uint8)[0]) == [0x7E, 0x40]
    c = codes_of(q)[0]
    assert c[0] == 0x7 and c[16] == 0x7 and c[17] == 0xB
    np.testing.assert_array_equal(q.dequantize(), x)


def test_nvfp4_global_amax_keyword_and_zero_tensor():
    x = np.zeros((2, 16), np.float32)
    assert mf.quantize(x, "nvfp4").tensor_scale == 1.0
    q = mf.quantize(np.full((1, 16), 3.0, np.float32), "nvfp4", global_amax=2688.0)
    assert q.tensor_scale == 1.0


# ---------------------------------------------------------------- torch / ml_dtypes agree

def torchao_style_floor(x, emax, max_pos):
    """what torchao's to_mx (FLOOR) computes, in torch: returns (scaled, e8m0 codes)"""
    torch = pytest.importorskip("torch")
    xt = torch.from_numpy(x).reshape(x.shape[0], -1, 32)
    amax = xt.abs().amax(-1)
    pow2 = ((amax.view(torch.int32) >> 23) & 0xFF) - 127
    e = torch.clamp(pow2 - emax, -127, 127)
    scale = torch.exp2(e.to(torch.float32))
    scaled = torch.clamp(xt / scale[..., None], -max_pos, max_pos)
    e8m0 = scale.to(torch.float8_e8m0fnu)
    return scaled, e8m0


@pytest.mark.parametrize("fmt,tdt,emax,max_pos", [("mxfp8_e4m3", "float8_e4m3fn", 8, 448.0),
                                                   ("mxfp8_e5m2", "float8_e5m2", 15, 57344.0)])
def test_mxfp8_bit_exact_with_torch(fmt, tdt, emax, max_pos):
    torch = pytest.importorskip("torch")
    x = wide_data(8, 256, 3)
    scaled, e8m0 = torchao_style_floor(x, emax, max_pos)
    q = mf.quantize(x, fmt)
    want = scaled.to(getattr(torch, tdt)).view(torch.uint8).reshape(8, 256).numpy()
    np.testing.assert_array_equal(np.asarray(q.data).view(np.uint8), want)
    np.testing.assert_array_equal(q.scales.view(np.uint8), e8m0.view(torch.uint8).numpy())
    # and minifloat's e8m0 scales go to torch as the same bits
    t = mf.to_torch(q.scales)
    assert t.dtype == torch.float8_e8m0fnu
    assert torch.equal(t.view(torch.uint8), e8m0.view(torch.uint8))


@pytest.mark.parametrize("fmt,mldt,emax", [("mxfp4", "float4_e2m1fn", 2),
                                            ("mxfp6_e2m3", "float6_e2m3fn", 2),
                                            ("mxfp6_e3m2", "float6_e3m2fn", 4)])
def test_mx_subbyte_bit_exact_with_ml_dtypes(fmt, mldt, emax):
    ml = pytest.importorskip("ml_dtypes")
    pytest.importorskip("torch")
    x = wide_data(4, 128, 4)
    mx = float(ml.finfo(getattr(ml, mldt)).max)
    scaled, e8m0 = torchao_style_floor(x, emax, mx)
    want = scaled.numpy().astype(getattr(ml, mldt)).view(np.uint8).reshape(4, 128)
    q = mf.quantize(x, fmt)
    np.testing.assert_array_equal(codes_of(q), want)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(q.scales.view(np.uint8), e8m0.view(torch.uint8).numpy())


def test_nvfp4_scales_bit_exact_with_torch_e4m3_cast():
    torch = pytest.importorskip("torch")
    x = wide_data(4, 64, 5) / 1000
    q = mf.quantize(x, "nvfp4")
    amax = torch.from_numpy(x).reshape(4, -1, 16).abs().amax(-1)
    s_enc = torch.tensor(448.0 * 6.0) / torch.from_numpy(np.abs(x)).max()
    sdb = amax * (s_enc * torch.tensor(1.0 / 6.0, dtype=torch.float32))
    want = torch.clamp(sdb, max=448.0).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    np.testing.assert_array_equal(q.scales.view(np.uint8), want)


# ---------------------------------------------------------------- levels, padding, axes

@pytest.mark.parametrize("fmt", FORMATS)
def test_serial_and_simd_levels_bit_exact(fmt):
    x = wide_data(5, 333, 6)
    x[0, 5] = np.nan
    x[1, 40] = -np.inf
    results = []
    prev = _core.get_kernel_level()
    try:
        for level in _core.kernel_levels():
            _core.set_kernel_level(level)
            q = mf.quantize(x, fmt)
            results.append((np.asarray(q.data).view(np.uint8).copy(), q.scales.view(np.uint8).copy(),
                            q.dequantize().view(np.uint32)))
    finally:
        _core.set_kernel_level(prev)
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_array_equal(a, b)


def _edge_rows(k, seed):
    """rows that reach every branch of the one-pass SIMD loops: blocks of
    zeros, of subnormals, at the top and bottom of the E8M0 range, with an
    inf or a NaN, amax exactly a power of two, the specials scattered"""
    rng = np.random.default_rng(seed)
    rows = [wide_data(1, k, seed)[0],
            np.zeros(k, np.float32),
            (rng.standard_normal(k) * 2.0 ** -140).astype(np.float32),
            (rng.standard_normal(k) * 2.0 ** 120).astype(np.float32),
            (rng.standard_normal(k) * 2.0 ** -120).astype(np.float32),
            np.where(rng.random(k) < 0.5, 0.0, 2.0 ** rng.integers(-20, 20, k)).astype(np.float32)]
    spec = wide_data(1, k, seed + 1)[0]
    idx = rng.integers(0, k, max(k // 7, 1))
    spec[idx] = rng.choice(SPECIALS, idx.size)
    rows.append(spec)
    z = np.zeros(k, np.float32)
    z[::16] = rng.choice(SPECIALS, z[::16].size)        # one special per NVFP4 block
    rows.append(z)
    return np.stack(rows)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_levels_bit_exact_modes_widths_edges(fmt, mode):
    """the one-pass SIMD quantize (8 blocks at a time, the scales vectorised
    for "floor") against the serial passes: every scale rule, block counts
    that leave partial groups of 8 (and an odd count of NVFP4 blocks), a
    padded tail, and the edge rows"""
    if fmt == "nvfp4" and mode != "floor":
        pytest.skip("nvfp4 has one scale rule")
    levels = _core.kernel_levels()
    prev = _core.get_kernel_level()
    try:
        for k in (16, 32, 48, 7 * 32, 9 * 32 + 16, 17 * 16 + 5, 600):
            x = _edge_rows(k, k)
            got = []
            for level in levels:
                _core.set_kernel_level(level)
                q = mf.quantize(x, fmt, scale_rounding=mode)
                got.append((codes_of(q), q.scales.view(np.uint8).copy()))
            for g in got[1:]:
                np.testing.assert_array_equal(got[0][0], g[0])
                np.testing.assert_array_equal(got[0][1], g[1])
    finally:
        _core.set_kernel_level(prev)
    check_against_reference(_edge_rows(333, 5), fmt, mode)


@pytest.mark.parametrize("fmt", FORMATS)
def test_padding_never_leaks(fmt):
    B = 16 if fmt == "nvfp4" else 32
    x = wide_data(3, 2 * B + 5, 7)
    q = mf.quantize(x, fmt)
    assert q.shape == x.shape and q.dequantize().shape == x.shape
    xp = np.zeros((3, 3 * B), np.float32)
    xp[:, :x.shape[1]] = x
    qp = mf.quantize(xp, fmt)
    np.testing.assert_array_equal(np.asarray(q.data).view(np.uint8), np.asarray(qp.data).view(np.uint8))
    np.testing.assert_array_equal(q.dequantize(), qp.dequantize()[:, :x.shape[1]])
    # the padded codes are +0
    assert np.all(codes_of(q)[:, x.shape[1]:] == 0)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4", "nvfp4"])
def test_axis(fmt):
    x = wide_data(4 * 6, 40, 8).reshape(4, 6, 40)
    q = mf.quantize(x, fmt, axis=0)
    assert q.axis == 0 and q.shape == x.shape
    qt = mf.quantize(np.moveaxis(x, 0, -1), fmt)
    np.testing.assert_array_equal(np.asarray(q.data).view(np.uint8),
                                  np.asarray(qt.data).view(np.uint8))
    np.testing.assert_array_equal(q.dequantize(), np.moveaxis(qt.dequantize(), -1, 0))
    assert np.asarray(q).shape == x.shape


def test_slicing_non_blocked_axes():
    x = wide_data(6 * 5, 64, 9).reshape(6, 5, 64)
    q = mf.quantize(x, "mxfp4")
    full = q.dequantize()
    np.testing.assert_array_equal(q[2].dequantize(), full[2])
    np.testing.assert_array_equal(q[1:4, ::2].dequantize(), full[1:4, ::2])
    np.testing.assert_array_equal(q[..., :].dequantize(), full)
    assert q[1:4, 3].shape == (3, 64)
    assert np.shares_memory(q[2].data, q.data)
    with pytest.raises(IndexError, match="blocks"):
        q[:, :, :10]
    qa = mf.quantize(x, "mxfp8_e4m3", axis=1)
    np.testing.assert_array_equal(qa[:, :, 3].dequantize(), qa.dequantize()[:, :, 3])
    np.testing.assert_array_equal(qa[4].dequantize(), qa.dequantize()[4])
    assert qa[4].axis == 0


def test_array_protocol_nbytes_sqnr():
    x = wide_data(16, 256, 10)
    q = mf.quantize(x, "mxfp4")
    assert q.nbytes == 16 * 128 + 16 * 8          # 4.25 bits per element
    assert q.bits_per_element == 4.25
    np.testing.assert_array_equal(np.asarray(q), q.dequantize())
    assert np.asarray(q, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError):
        np.asarray(q, copy=False)
    r = q.error_report(x)
    assert 15 < r["sqnr_db"] < 25 and r["nonfinite"] == 0
    assert q.sqnr(x) == r["sqnr_db"]
    assert mf.quantize(x, "mxfp8_e4m3").sqnr(x) > r["sqnr_db"] + 8
    exact = np.ones((2, 32), np.float32)
    assert mf.quantize(exact, "mxfp4").sqnr(exact) == float("inf")


def test_errors():
    with pytest.raises(ValueError, match="mxfp4"):
        mf.quantize(np.ones(32), "mxfp5")
    with pytest.raises(ValueError, match="scale_rounding"):
        mf.quantize(np.ones(32), "mxfp4", scale_rounding="up")
    with pytest.raises(ValueError, match="nvfp4"):
        mf.quantize(np.ones(32), "nvfp4", scale_rounding="ceil")
    with pytest.raises(ValueError):
        mf.quantize(np.float32(1), "mxfp4")
    with pytest.raises(TypeError):
        mf.quantize(np.ones(32, complex), "mxfp4")
    from numpy.exceptions import AxisError
    with pytest.raises(AxisError):
        mf.quantize(np.ones((2, 32)), "mxfp4", axis=2)


def test_empty_and_1d():
    q = mf.quantize(np.zeros((0, 64), np.float32), "mxfp8_e4m3")
    assert q.dequantize().shape == (0, 64)
    q = mf.quantize(np.arange(50, dtype=np.float32), "nvfp4")
    assert q.shape == (50,) and q.scales.shape == (4,)
    assert q.sqnr(np.arange(50, dtype=np.float32)) > 15


@settings(max_examples=40, deadline=None)
@given(fmt=st.sampled_from(FORMATS),
       x=hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(1, 80)),
                    elements=st.floats(-2.0 ** 100, 2.0 ** 100, width=32).filter(
                        lambda v: v == 0 or abs(v) > 2.0 ** -100)))
def test_property_requantizing_is_exact(fmt, x):
    """quantize(dequantize(q)) == q for MX (a dequantized block has the same
    binade of amax); the error is within half an element step of the scale"""
    q = mf.quantize(x, fmt)
    y = q.dequantize()
    if fmt != "nvfp4":
        q2 = mf.quantize(y, fmt)
        np.testing.assert_array_equal(q2.dequantize(), y)
    assert np.all(np.isfinite(y))
    assert np.all(np.abs(y) <= np.abs(x).max() * (1 + 2 ** -1) + 1e-30)


# ---------------------------------------------------------------- checkpoints and DLPack

@pytest.mark.parametrize("fmt", FORMATS)
def test_dict_round_trip(fmt):
    x = wide_data(4, 70, 11)
    q = mf.quantize(x, fmt)
    tensors, meta = q.to_dict("model.layers.0.mlp.weight")
    assert set(tensors) >= {"model.layers.0.mlp.weight", "model.layers.0.mlp.weight_scale"}
    assert ("model.layers.0.mlp.weight_scale_2" in tensors) == (fmt == "nvfp4")
    assert all(isinstance(v, str) for v in meta.values())
    info = json.loads(meta["minifloat.block_scaled"])["model.layers.0.mlp.weight"]
    assert info["format"] == fmt and info["shape"] == [4, 70]
    assert np.shares_memory(tensors["model.layers.0.mlp.weight"], q.data)
    q2 = mf.BlockScaled.from_dict(tensors, meta, "model.layers.0.mlp.weight")
    np.testing.assert_array_equal(q2.dequantize(), q.dequantize())


TORCH_DATA = {"mxfp8_e4m3": "float8_e4m3fn", "mxfp8_e5m2": "float8_e5m2",
              "mxfp4": "float4_e2m1fn_x2", "nvfp4": "float4_e2m1fn_x2", "mxint8": "int8"}


def _to_torch(torch, a):
    if a.dtype == np.uint8:          # packed float4 pairs
        return torch.from_numpy(np.ascontiguousarray(a)).view(torch.float4_e2m1fn_x2)
    if a.dtype == np.int8 or a.dtype == np.float32:
        return torch.from_numpy(np.ascontiguousarray(a))
    return mf.to_torch(np.ascontiguousarray(a))


@pytest.mark.parametrize("fmt", list(TORCH_DATA))
def test_safetensors_torch_round_trip(fmt, tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    x = wide_data(8, 96, 12)
    q = mf.quantize(x, fmt)
    tensors, meta = q.to_dict("weight")
    tt = {k: _to_torch(torch, v) for k, v in tensors.items()}
    assert tt["weight"].dtype == getattr(torch, TORCH_DATA[fmt])
    assert tt["weight_scale"].dtype == (torch.float8_e4m3fn if fmt == "nvfp4"
                                        else torch.float8_e8m0fnu)
    path = tmp_path / "q.safetensors"
    st_torch.save_file(tt, str(path), metadata=meta)
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        meta2 = f.metadata()
        loaded = {k: f.get_tensor(k) for k in f.keys()}
    back = {k: (v.view(torch.uint8).numpy() if v.dtype == torch.float4_e2m1fn_x2
                else mf.asnumpy(v)) for k, v in loaded.items()}
    q2 = mf.BlockScaled.from_dict(back, meta2, "weight")
    np.testing.assert_array_equal(q2.dequantize().view(np.uint32), q.dequantize().view(np.uint32))
    # the torch tensors as they load, straight in (float4_e2m1fn_x2 included)
    q3 = mf.BlockScaled.from_dict(loaded, meta2, "weight")
    np.testing.assert_array_equal(q3.dequantize().view(np.uint32), q.dequantize().view(np.uint32))


def test_safetensors_numpy_uint8_and_foreign_checkpoint(tmp_path):
    """a checkpoint written by another tool: raw bytes, no minifloat metadata"""
    st_np = pytest.importorskip("safetensors.numpy")
    x = wide_data(4, 64, 13)
    q = mf.quantize(x, "nvfp4")
    tensors = {"w": q.data, "w_scale": q.scales.view(np.uint8),
               "w_scale_2": np.asarray(q.tensor_scale, np.float32).reshape(())}
    path = tmp_path / "n.safetensors"
    st_np.save_file(tensors, str(path))
    back = st_np.load_file(str(path))
    q2 = mf.BlockScaled.from_dict(back, None, "w", format="nvfp4")
    assert q2.shape == (4, 64)
    np.testing.assert_array_equal(q2.dequantize(), q.dequantize())


def test_dlpack_parts_to_torch():
    torch = pytest.importorskip("torch")
    x = wide_data(4, 64, 14)
    q = mf.quantize(x, "nvfp4")
    parts = q.dlpack_parts()
    data = torch.from_dlpack(parts["data"])
    assert data.dtype == torch.float4_e2m1fn_x2 and tuple(data.shape) == (4, 32)
    assert data.view(torch.uint8).data_ptr() == q.data.ctypes.data     # no copy
    scales = torch.from_dlpack(parts["scales"])
    assert scales.dtype == torch.float8_e4m3fn
    assert torch.equal(scales.view(torch.uint8), torch.from_numpy(q.scales.view(np.uint8)))
    assert float(torch.from_dlpack(parts["tensor_scale"])) == float(q.tensor_scale)
    qm = mf.quantize(x, "mxfp8_e4m3")
    p = qm.dlpack_parts()
    assert torch.from_dlpack(p["data"]).dtype == torch.float8_e4m3fn
    assert torch.from_dlpack(p["scales"]).dtype == torch.float8_e8m0fnu


@pytest.mark.parametrize("name", ["mxfp8", "mxfp4", "nvfp4"])
def test_bench_cases_and_their_numpy_code_agree(name):
    """The benchmark (benchmarks/ in the checkout) times quantize/dequantize against
    a NumPy version of the spec: that version gives the same bits"""
    from _checkout import benchmarks
    blocks = benchmarks("cases.blocks")
    assert f"quantize {name}" in [c.name for c in benchmarks("cases").CASES]
    assert f"dequantize {name}" in [c.name for c in benchmarks("cases").CASES]
    fmt, elem, emax, mx = blocks.BLOCK_BENCH[name]
    x = wide_data(4, 256, 15).reshape(-1)
    codes, scales, ts = blocks.np_block_quantize(x, fmt, getattr(mf, elem), emax, mx,
                                                 mf.float8_e4m3fn)
    q = mf.quantize(x, fmt)
    np.testing.assert_array_equal(np.asarray(q.data).view(np.uint8), codes.view(np.uint8).reshape(-1))
    np.testing.assert_array_equal(q.scales.view(np.uint8), np.asarray(scales).view(np.uint8).reshape(-1))
    y = blocks.np_block_dequantize(codes, scales, fmt, getattr(mf, elem), ts)
    np.testing.assert_array_equal(q.dequantize().view(np.uint32), y.view(np.uint32))


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4", "mxint8", "nvfp4"])
def test_threads_give_the_same_bits(fmt):
    """large tensors are split over threads (block ranges, also mid-row):
    the result does not depend on the split"""
    x = wide_data(3, (1 << 20) + 37, 16)
    x[1, 12345] = np.nan
    prev = mf.set_num_threads(1)
    try:
        q1 = mf.quantize(x, fmt)
        y1 = q1.dequantize()
        mf.set_num_threads(5)
        q5 = mf.quantize(x, fmt)
        y5 = q5.dequantize()
    finally:
        mf.set_num_threads(prev)
    np.testing.assert_array_equal(np.asarray(q1.data).view(np.uint8), np.asarray(q5.data).view(np.uint8))
    np.testing.assert_array_equal(q1.scales.view(np.uint8), q5.scales.view(np.uint8))
    np.testing.assert_array_equal(y1.view(np.uint32), y5.view(np.uint32))
    # and a slice of it against the spec reference
    check_against_reference(np.ascontiguousarray(x[:, 1000:1700]), fmt)


def test_quantize_torch_bfloat16_tensor():
    torch = pytest.importorskip("torch")
    t = torch.randn(4, 64).to(torch.bfloat16)
    q = mf.quantize(t, "mxfp8_e4m3")
    want = mf.quantize(t.float().numpy(), "mxfp8_e4m3")
    np.testing.assert_array_equal(q.dequantize(), want.dequantize())
    x = np.random.default_rng(17).standard_normal((4, 64)).astype(mf.bfloat16)
    np.testing.assert_array_equal(mf.quantize(x, "mxfp4").dequantize(),
                                  mf.quantize(x.astype(np.float32), "mxfp4").dequantize())
