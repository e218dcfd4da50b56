"""Every kernel level against the serial kernels, bit for bit.

The serial kernels (src/kernels/stream/serial.c) are the oracle; they are in turn
checked against the codec (``_core._oracle_encode`` / ``_oracle_decode``).
Each test runs the serial level and one other level on the same data and
compares the codes (or float32 / float64 bits), and the floating-point flags
NumPy reports (overflow, invalid, ...).

The kernels are reached through the public paths that call them on
contiguous data: float32 <-> format casts (decode_f32, encode_f32), + - * /
(binary), and ``_core._kernel_reduce`` for sum and dot (whose float64 result
the public reductions only show rounded to the format).
"""

import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minifloat
from minifloat import _core

from conftest import FLOAT_FORMATS, INT_FORMATS, LEVELS, kernel_level

pytestmark = pytest.mark.arm   # in the Arm leg of CI (.ci/arm-legs)

FORMATS = {f["name"]: f for f in _core.formats()}
OTHER_LEVELS = [lv for lv in LEVELS if lv != "serial"]
ALL_FORMATS = FLOAT_FORMATS + INT_FORMATS
OPS = [np.add, np.subtract, np.multiply, np.true_divide]
REDUCE_LENGTHS = [0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 4095, 4096, 4097, 8192, 8193, 100000]



# ------------------------------------------------------------------ helpers

def dtype_of(name):
    return np.dtype(getattr(minifloat, name))


def code_type(name):
    return np.uint16 if dtype_of(name).itemsize == 2 else np.uint8


def all_codes(name):
    return np.arange(256 ** dtype_of(name).itemsize).astype(code_type(name))


def f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def bits32(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def bits64(x):
    return np.float64(x).view(np.uint64)


def flags(fn):
    """fn() with every NumPy FP error reported to a callback: the result and
    the set of error names ("overflow", "invalid", ...)."""
    seen = set()

    def record(kind, flag):
        seen.add(kind)

    with np.errstate(all="call", call=record):
        result = fn()
    return result, frozenset(seen)


def at(level, fn):
    """fn() under a kernel level, with the FP flags it raised."""
    with kernel_level(level):
        return flags(fn)


def encode(name, x):
    return x.astype(dtype_of(name)).view(code_type(name))


def decode(name, codes):
    return codes.view(dtype_of(name)).astype(np.float32)


def assert_same_codes(got, ref, what=""):
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape
    bad = np.nonzero(got != ref)[0]
    assert bad.size == 0, f"{what}: {bad.size} mismatches, first at {bad[:8]}: {got[bad[:8]]} != {ref[bad[:8]]}"


def assert_same_as_codec(got, oracle, what):
    """float32 decode vs the codec's float64: equal bits, except that a NaN
    only has to be a NaN of the same sign (bfloat16 keeps NaN payloads)."""
    got = np.asarray(got, dtype=np.float32)
    ref = np.asarray(oracle).astype(np.float32)
    nan = np.isnan(ref)
    assert (np.isnan(got) == nan).all(), what
    assert (np.signbit(got[nan]) == np.signbit(ref[nan])).all(), what
    assert_same_codes(bits32(got[~nan]), bits32(ref[~nan]), what)


def float_finite_values(name):
    """Every finite value of the format, sorted, as float64 (no duplicates)."""
    codes = all_codes(name).astype(np.uint32)
    v = _core._oracle_decode(name, codes)
    v = v[np.isfinite(v)]
    return np.unique(v)


def boundary_float32(name):
    """float32 inputs around every rounding boundary of the format."""
    info = FORMATS[name]
    vals = float_finite_values(name)
    vals = vals[vals >= 0]
    mids = (vals[:-1] + vals[1:]) / 2            # ties, exact in float64
    out = [vals.astype(np.float32), mids.astype(np.float32)]
    # beyond the largest finite value: one more step, half a step, twice
    mx = info["max"]
    top_step = mx - vals[-2] if vals.size > 1 else mx
    extra = np.array([mx + top_step / 2, mx + top_step, mx + 1.5 * top_step, 2 * mx, 4 * mx,
                      info["smallest_subnormal"] / 2, info["smallest_subnormal"] / 4,
                      info["smallest_subnormal"] * 0.75, info["smallest_normal"] / 2],
                     dtype=np.float64)
    out.append(extra.astype(np.float32))
    base = np.concatenate(out)
    base = base[np.isfinite(base)]
    up = np.nextafter(base, np.float32(np.inf))
    down = np.nextafter(base, np.float32(0))
    out = np.concatenate([base, up, down])
    specials = f32([
        0x00000000, 0x00000001, 0x00000002, 0x003FFFFF, 0x00400000, 0x00400001, 0x005FFFFF,
        0x00600000, 0x00600001, 0x007FFFFF, 0x00800000, 0x00800001, 0x00C00000, 0x00BFFFFF,
        0x3F800000, 0x3FC00000, 0x7F000000, 0x7F400000, 0x7F3FFFFF, 0x7F7F7FFF, 0x7F7F8000,
        0x7F7F8001, 0x7F7FFFFF, 0x7F800000,
        0x7FC00000, 0x7FC00001, 0x7FFFFFFF, 0x7F800001, 0x7FA00000, 0x7FBFFFFF, 0x7FE12345,
    ])
    out = np.concatenate([out, specials])
    out = np.concatenate([out, -out])
    return np.ascontiguousarray(out, dtype=np.float32)


def random_float32(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def random_in_range(name, n, seed):
    """float32 values mostly inside the format's range, some outside, with
    some zeros, NaNs and infinities."""
    rng = np.random.default_rng(seed)
    info = FORMATS[name]
    mx = info["max"]
    x = rng.uniform(-1.1 * mx, 1.1 * mx, n) * rng.choice([1.0, 2.0 ** -8, 2.0 ** -16], n)
    pick = rng.random(n)
    x[pick < 0.02] = np.nan
    x[(pick >= 0.02) & (pick < 0.03)] = np.inf
    x[(pick >= 0.03) & (pick < 0.04)] = -np.inf
    x[(pick >= 0.04) & (pick < 0.05)] = -0.0
    return x.astype(np.float32)


# ------------------------------------------------------------------ oracle

@pytest.mark.parametrize("name", ALL_FORMATS)
def test_serial_decode_is_codec(name):
    codes = all_codes(name)
    with kernel_level("serial"):
        got = decode(name, codes)
    assert_same_as_codec(got, _core._oracle_decode(name, codes.astype(np.uint32)), name)


@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_serial_encode_is_codec(name):
    x = np.concatenate([boundary_float32(name), random_float32(1 << 16, 7)])
    with kernel_level("serial"), np.errstate(all="ignore"):
        got = encode(name, x)
    ref = _core._oracle_encode(name, x.astype(np.float64))
    assert_same_codes(got.astype(np.uint32), ref, name)


# ------------------------------------------------------------------ decode

@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", ALL_FORMATS)
def test_decode_all_codes(level, name):
    codes = all_codes(name)
    ref, ref_flags = at("serial", lambda: decode(name, codes))
    got, got_flags = at(level, lambda: decode(name, codes))
    assert_same_codes(bits32(got), bits32(ref), f"{name} {level}")
    assert got_flags == ref_flags
    assert_same_as_codec(got, _core._oracle_decode(name, codes.astype(np.uint32)), f"{name} {level} vs codec")


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", ALL_FORMATS)
def test_decode_random_and_tails(level, name):
    rng = np.random.default_rng(3)
    ct = code_type(name)
    codes = rng.integers(0, 256 ** dtype_of(name).itemsize, 4096 + 200).astype(ct)
    with kernel_level("serial"):
        full = decode(name, codes)
    for off in (0, 1, 3):
        for n in list(range(0, 131)) + [1000, 1023, 4096]:
            src = codes[off:off + n]
            out = np.full(n + 20, np.float32(12345.0))
            with kernel_level(level):
                np.copyto(out[5:5 + n], src.view(dtype_of(name)), casting="unsafe")
            assert_same_codes(bits32(out[5:5 + n]), bits32(full[off:off + n]), f"{name} {level} off={off} n={n}")
            assert (out[:5] == 12345.0).all() and (out[5 + n:] == 12345.0).all()


# ------------------------------------------------------------------ encode

def check_encode(level, name, x, what):
    ref, ref_flags = at("serial", lambda: encode(name, x))
    got, got_flags = at(level, lambda: encode(name, x))
    assert_same_codes(got, ref, f"{what} {name} {level}")
    assert got_flags == ref_flags, f"{what} {name} {level}: flags {set(got_flags)} != {set(ref_flags)}"
    return ref


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", ALL_FORMATS)
def test_encode_boundaries(level, name):
    if name in FLOAT_FORMATS:
        x = boundary_float32(name)
    else:
        x = np.concatenate([np.arange(-40, 40, 0.25, dtype=np.float32), f32([0x7FC00000, 0x7F800000, 0xFF800000])])
    ref = check_encode(level, name, x, "boundaries")
    if name in FLOAT_FORMATS:
        oracle = _core._oracle_encode(name, x.astype(np.float64))
        assert_same_codes(ref.astype(np.uint32), oracle, f"{name} serial vs codec")


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_encode_flags_per_value(level, name):
    """The FP flags (overflow above all) of every boundary value alone."""
    x = boundary_float32(name)
    if x.size > 4000:
        # bfloat16: the values near its top and bottom, and the specials
        ax = np.abs(x)
        keep = (ax > 3e38) | (ax < 1e-37) | ~np.isfinite(x)
        x = np.concatenate([x[keep], x[:: max(1, x.size // 1000)]])
    for v in x:
        one = np.array([v], dtype=np.float32)
        ref, ref_flags = at("serial", lambda: encode(name, one))
        got, got_flags = at(level, lambda: encode(name, one))
        assert got[0] == ref[0], f"{name} {level} {hex(bits32(one)[0])}"
        assert got_flags == ref_flags, f"{name} {level} {hex(bits32(one)[0])}: {set(got_flags)} != {set(ref_flags)}"
    # and through np.errstate(over="raise"), as users see it
    for v in x[:: max(1, x.size // 200)]:
        one = np.array([v], dtype=np.float32)
        outcomes = []
        for lv in ("serial", level):
            with kernel_level(lv), np.errstate(over="raise", invalid="ignore"):
                try:
                    encode(name, one)
                    outcomes.append(None)
                except FloatingPointError as e:
                    outcomes.append(str(e))
        assert outcomes[0] == outcomes[1], f"{name} {level} {hex(bits32(one)[0])}: {outcomes}"


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_encode_flags_in_vectors(level, name):
    """The flags of each boundary value inside the vector body of a run of
    harmless values (single values go through the tail code)."""
    x = boundary_float32(name)
    if x.size > 4000:
        ax = np.abs(x)
        keep = (ax > 3e38) | (ax < 1e-38) | ~np.isfinite(x)
        x = np.concatenate([x[keep], x[:: max(1, x.size // 300)]])
    base = np.full(96, np.float32(0.5))
    for k, v in enumerate(x):
        run = base.copy()
        run[(7 * k) % 64] = v
        ref, ref_flags = at("serial", lambda: encode(name, run))
        got, got_flags = at(level, lambda: encode(name, run))
        assert_same_codes(got, ref, f"{name} {level} {hex(bits32(v))}")
        assert got_flags == ref_flags, f"{name} {level} {hex(bits32(v))}: {set(got_flags)} != {set(ref_flags)}"


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", ALL_FORMATS)
def test_encode_random_bits(level, name):
    x = random_float32(1 << 20, hash(name) & 0xFFFF)
    ref = check_encode(level, name, x, "random bits")
    if name in FLOAT_FORMATS:
        sub = x[:: 16]
        oracle = _core._oracle_encode(name, sub.astype(np.float64))
        assert_same_codes(ref[:: 16].astype(np.uint32), oracle, f"{name} serial vs codec")


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_encode_random_in_range(level, name):
    check_encode(level, name, random_in_range(name, 1 << 18, 11), "in range")


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_encode_tails_and_offsets(level, name):
    """Every length 0..130 at unaligned offsets; nothing outside the output
    is written; an overflow in the last element alone still raises."""
    dt = dtype_of(name)
    ct = code_type(name)
    x = random_in_range(name, 4096 + 200, 5)
    x[~np.isfinite(x)] = 0.5                       # overflow only where put below
    x = np.clip(x, -FORMATS[name]["max"], FORMATS[name]["max"]).astype(np.float32)
    big = np.float32(min(4 * FORMATS[name]["max"], 3e38))
    sentinel = ct(0xA5)
    for off in (0, 1, 3):
        for n in list(range(0, 131)) + [1000, 1023, 4096]:
            src = x[off:off + n]
            for last_big in ((False, True) if n else (False,)):
                if last_big:
                    src = src.copy()
                    src[-1] = big
                outs = []
                for lv in ("serial", level):
                    buf = np.full(n + 9, sentinel, dtype=ct)
                    with kernel_level(lv):
                        _, fl = flags(lambda: np.copyto(buf[4:4 + n].view(dt), src, casting="unsafe"))
                    assert (buf[:4] == sentinel).all() and (buf[4 + n:] == sentinel).all()
                    outs.append((buf[4:4 + n].copy(), fl))
                assert_same_codes(outs[1][0], outs[0][0], f"{name} {level} off={off} n={n}")
                assert outs[1][1] == outs[0][1], f"{name} {level} off={off} n={n} big={last_big}"
                if last_big and FORMATS[name]["max"] * 2 < 3.4e38:
                    assert "overflow" in outs[0][1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(FLOAT_FORMATS),
       bits=st.lists(st.integers(0, 2 ** 32 - 1), min_size=0, max_size=80))
def test_encode_hypothesis(name, bits):
    x = f32(np.array(bits, dtype=np.uint64).astype(np.uint32)) if bits else np.zeros(0, np.float32)
    oracle = _core._oracle_encode(name, x.astype(np.float64))
    ref, ref_flags = at("serial", lambda: encode(name, x))
    assert_same_codes(ref.astype(np.uint32), oracle, name)
    for level in OTHER_LEVELS:
        got, got_flags = at(level, lambda: encode(name, x))
        assert_same_codes(got, ref, f"{name} {level}")
        assert got_flags == ref_flags


# ------------------------------------------------------------------ binary

def binary_operands(name):
    """All pairs for the 8-bit formats; for bfloat16 every code against a
    sample of codes (specials included)."""
    ct = code_type(name)
    if dtype_of(name).itemsize == 1:
        a, b = np.meshgrid(np.arange(256, dtype=ct), np.arange(256, dtype=ct), indexing="ij")
        return a.ravel().copy(), b.ravel().copy()
    rng = np.random.default_rng(17)
    sample = np.concatenate([
        np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F,
                  0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0x0100, 0x4000, 0x3F00],
                 dtype=np.uint16),
        rng.integers(0, 65536, 12).astype(np.uint16)])
    a = np.tile(np.arange(65536, dtype=np.uint16), sample.size)
    b = np.repeat(sample, 65536)
    # both orders
    return np.concatenate([a, b]), np.concatenate([b, a])


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_binary_pairs(level, name, op):
    dt = dtype_of(name)
    a, b = binary_operands(name)
    A, B = a.view(dt), b.view(dt)
    ref, ref_flags = at("serial", lambda: op(A, B))
    got, got_flags = at(level, lambda: op(A, B))
    ct = code_type(name)
    assert_same_codes(got.view(ct), ref.view(ct), f"{name} {op.__name__} {level}")
    assert got_flags == ref_flags


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_binary_flags_per_pair(level, name):
    """Flags of single operations around overflow, 0/0, inf - inf."""
    dt = dtype_of(name)
    ct = code_type(name)
    vals = float_finite_values(name)
    mx = vals[-1]
    picks = [mx, -mx, vals[-2], 0.0, -0.0, 1.0, vals[vals > 0][0], np.inf, -np.inf, np.nan]
    xs = np.array(picks, dtype=np.float32)
    with np.errstate(all="ignore"):
        codes = encode(name, xs)
    one = encode(name, np.ones(1, np.float32))[0]
    for op in OPS:
        for i in range(codes.size):
            for j in range(codes.size):
                # alone (the tail code) and inside a vector body of 1 op 1
                A = codes[i:i + 1].view(dt)
                B = codes[j:j + 1].view(dt)
                ra = np.full(80, one, dtype=ct)
                rb = np.full(80, one, dtype=ct)
                ra[(5 * i + j) % 64] = codes[i]
                rb[(5 * i + j) % 64] = codes[j]
                for xa, xb in ((A, B), (ra.view(dt), rb.view(dt))):
                    ref, ref_flags = at("serial", lambda: op(xa, xb))
                    got, got_flags = at(level, lambda: op(xa, xb))
                    assert_same_codes(got.view(ct), ref.view(ct), f"{name} {level} {op.__name__}")
                    assert got_flags == ref_flags, f"{name} {level} {op.__name__} {xs[i]} {xs[j]}"


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_binary_tails_and_offsets(level, name):
    dt = dtype_of(name)
    ct = code_type(name)
    rng = np.random.default_rng(23)
    a = rng.integers(0, 256 ** dt.itemsize, 400).astype(ct)
    b = rng.integers(0, 256 ** dt.itemsize, 400).astype(ct)
    sentinel = ct(0x5A)
    for op in OPS:
        for oa, ob, oo in ((0, 0, 0), (1, 2, 3), (3, 1, 0)):
            for n in list(range(0, 131)) + [255, 256, 257]:
                outs = []
                for lv in ("serial", level):
                    buf = np.full(n + 8, sentinel, dtype=ct)
                    out = buf[oo:oo + n].view(dt)
                    with kernel_level(lv):
                        _, fl = flags(lambda: op(a[oa:oa + n].view(dt), b[ob:ob + n].view(dt), out=out))
                    assert (buf[:oo] == sentinel).all() and (buf[oo + n:] == sentinel).all()
                    outs.append((buf[oo:oo + n].copy(), fl))
                assert_same_codes(outs[1][0], outs[0][0], f"{name} {op.__name__} {level} n={n}")
                assert outs[1][1] == outs[0][1]


# ------------------------------------------------------------------ sum, dot

def reduce_data(name, n, kind, seed):
    """Codes for the sum/dot tests.  kind: finite, specials (NaNs of both
    signs, infinities, -0 mixed in), negzero (all -0), random (any code),
    extremes (the largest and smallest magnitudes: float32 lanes overflow,
    products underflow)."""
    ct = code_type(name)
    rng = np.random.default_rng(seed)
    size = dtype_of(name).itemsize
    if kind == "random":
        return rng.integers(0, 256 ** size, n).astype(ct)
    with kernel_level("serial"):
        vals = decode(name, all_codes(name))
    finite = np.nonzero(np.isfinite(vals))[0].astype(ct)
    if kind == "negzero":
        z = np.nonzero((vals == 0) & np.signbit(vals))[0]
        if z.size == 0:
            z = np.nonzero(vals == 0)[0]
        if z.size == 0:
            z = finite[:1]
        return np.full(n, z[0], dtype=ct)
    if kind == "extremes":
        mags = np.abs(vals[finite].astype(np.float64))
        order = finite[np.argsort(mags)]
        pool = np.concatenate([order[:12], order[-12:]])
        return rng.choice(pool, n).astype(ct)
    if size == 2:
        # bfloat16: moderate exponents so that sums are not all inf
        mag = rng.integers(0x3000, 0x4800, n).astype(np.uint16)
        codes = mag | (rng.integers(0, 2, n).astype(np.uint16) << 15)
    else:
        codes = rng.choice(finite, n)
    if kind == "specials" and n:
        special = np.nonzero(~np.isfinite(vals))[0].astype(ct)
        zero = np.nonzero(vals == 0)[0].astype(ct)
        extra = np.concatenate([special, zero])
        if extra.size:
            k = max(1, n // 50)
            idx = rng.integers(0, n, k)
            codes[idx] = rng.choice(extra, k)
    return codes


def reduce_at(level, name, a, b=None):
    """The float64 bits of sum(a) or dot(a, b) at a level, with the FP flags
    the kernel raised (1 divide, 2 overflow, 4 underflow, 8 invalid)."""
    with kernel_level(level):
        if b is None:
            value, fl = _core._kernel_reduce(name, a)
        else:
            value, fl = _core._kernel_reduce(name, a, b)
    return int(bits64(value)), fl


@pytest.mark.parametrize("kind", ["finite", "specials", "negzero", "random", "extremes"])
@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_sum_dot_exact(level, name, kind):
    for n in REDUCE_LENGTHS:
        a = reduce_data(name, n, kind, n + 1)
        b = reduce_data(name, n, kind, n + 2)
        s_ref = reduce_at("serial", name, a)
        s_got = reduce_at(level, name, a)
        assert s_got == s_ref, f"sum {name} {level} {kind} n={n}: {s_got!r} != {s_ref!r}"
        d_ref = reduce_at("serial", name, a, b)
        d_got = reduce_at(level, name, a, b)
        assert d_got == d_ref, f"dot {name} {level} {kind} n={n}: {d_got!r} != {d_ref!r}"


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_sum_dot_unaligned(level, name):
    size = dtype_of(name).itemsize
    for n in (1, 17, 33, 100, 4097):
        a = reduce_data(name, n, "specials", 3).view(np.uint8)
        b = reduce_data(name, n, "finite", 4).view(np.uint8)
        for off in (1, 2, 5):
            ba = bytearray(n * size + 8)
            bb = bytearray(n * size + 8)
            ba[off:off + n * size] = a.tobytes()
            bb[off:off + n * size] = b.tobytes()
            va = memoryview(ba)[off:off + n * size]
            vb = memoryview(bb)[off:off + n * size]
            assert reduce_at(level, name, va) == reduce_at("serial", name, a)
            assert reduce_at(level, name, va, vb) == reduce_at("serial", name, a, b)


def test_sum_nan_signs():
    """Sums and dots meeting NaNs of both signs: the NaN that comes out (its
    sign survives into the code) is the one serial returns.

    Which NaN serial returns is decided by how the compiler arranged its
    float operations (operand order of the vectorised lanes_combine, the
    argument order of the fmaf call) and by libm's fmaf; the SIMD kernels
    follow serial as built by gcc 12 -O3 with glibc's FMA fmaf (see
    avx512.c).  A build that compiles serial.c differently can fail here and
    in the "specials"/"random" sum and dot cases with NaNs of both signs."""
    for name in ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e3m4"):
        ct = code_type(name)
        with kernel_level("serial"):
            vals = decode(name, all_codes(name))
        nans = np.nonzero(np.isnan(vals))[0]
        pos = nans[~np.signbit(vals[nans])][0]
        neg = nans[np.signbit(vals[nans])][0]
        one = np.nonzero(vals == 1.0)[0][0]
        rng = np.random.default_rng(0)
        for n in (2, 17, 32, 33, 64, 100, 4096 + 64):
            for trial in range(30):
                a = np.full(n, one, dtype=ct)
                b = np.full(n, one, dtype=ct)
                k = rng.integers(1, 4)
                a[rng.integers(0, n, k)] = rng.choice([pos, neg], k)
                b[rng.integers(0, n, k)] = rng.choice([pos, neg], k)
                for level in OTHER_LEVELS:
                    assert reduce_at(level, name, a) == reduce_at("serial", name, a)
                    assert reduce_at(level, name, a, b) == reduce_at("serial", name, a, b)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(FLOAT_FORMATS), data=st.data())
def test_sum_dot_hypothesis(name, data):
    size = dtype_of(name).itemsize
    n = data.draw(st.integers(0, 300))
    a = np.array(data.draw(st.lists(st.integers(0, 256 ** size - 1), min_size=n, max_size=n)),
                 dtype=np.uint32).astype(code_type(name))
    b = np.array(data.draw(st.lists(st.integers(0, 256 ** size - 1), min_size=n, max_size=n)),
                 dtype=np.uint32).astype(code_type(name))
    s_ref = reduce_at("serial", name, a)
    d_ref = reduce_at("serial", name, a, b)
    for level in OTHER_LEVELS:
        assert reduce_at(level, name, a) == s_ref
        assert reduce_at(level, name, a, b) == d_ref


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_public_sum_and_vecdot(level, name):
    """a.sum(), sums along an axis and np.vecdot give the same codes and flags."""
    dt = dtype_of(name)
    ct = code_type(name)
    for n in (0, 1, 33, 4097, 20000):
        if n == 0 and not FORMATS[name]["has_zero"]:
            continue          # no identity for an empty sum
        a = reduce_data(name, n, "specials", 5)
        b = reduce_data(name, n, "finite", 6)
        for fn in (lambda: np.asarray(a.view(dt).sum()),
                   lambda: np.asarray(np.vecdot(a.view(dt), b.view(dt)))):
            ref, ref_flags = at("serial", fn)
            got, got_flags = at(level, fn)
            assert ref.view(ct) == got.view(ct)
            assert ref_flags == got_flags
    m = reduce_data(name, 7 * 300, "finite", 8).reshape(7, 300)
    for axis in (0, 1):
        ref, _ = at("serial", lambda: m.view(dt).sum(axis=axis))
        got, _ = at(level, lambda: m.view(dt).sum(axis=axis))
        assert_same_codes(got.view(ct), ref.view(ct), f"{name} axis={axis}")


@contextlib.contextmanager
def read_prefetch(nbytes):
    """Run a block with sum and dot prefetching nbytes ahead (0: not at all)."""
    prev = _core.set_read_prefetch(nbytes)
    try:
        yield
    finally:
        _core.set_read_prefetch(prev)


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_sum_dot_prefetch_changes_nothing(level, name):
    """sum and dot with and without the software prefetch (the CPU's default
    is on only where it was measured to help, so both are run everywhere):
    serial's bits and flags, unaligned runs too."""
    size = dtype_of(name).itemsize
    for dist in (0, 64, 16384):
        with read_prefetch(dist):
            for n in REDUCE_LENGTHS:
                a = reduce_data(name, n, "specials", n + 11)
                b = reduce_data(name, n, "finite", n + 12)
                assert reduce_at(level, name, a) == reduce_at("serial", name, a), (dist, n)
                assert reduce_at(level, name, a, b) == reduce_at("serial", name, a, b), (dist, n)
            n = 4097
            a = reduce_data(name, n, "finite", 13)
            ba = bytearray(n * size + 8)
            ba[3:3 + n * size] = a.tobytes()
            va = memoryview(ba)[3:3 + n * size]
            assert reduce_at(level, name, va) == reduce_at("serial", name, a)
    x = reduce_data(name, 300 * 7, "finite", 14).view(dtype_of(name)).reshape(7, 300)
    with kernel_level(level):
        with read_prefetch(0):
            want = x.sum(axis=1), x.sum()
        with read_prefetch(16384):
            got = x.sum(axis=1), x.sum()
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g).view(code_type(name)),
                                      np.asarray(w).view(code_type(name)))


@pytest.mark.thread_unsafe      # reads back the process-wide distance it set
def test_read_prefetch_setting():
    """The distance is a byte count from 0 to 1 MiB: the setter says so, and a
    bad MINIFLOAT_READ_PREFETCH warns and keeps the CPU's default."""
    prev = _core.get_read_prefetch()
    for bad in (-1, (1 << 20) + 1):
        with pytest.raises(ValueError, match="byte count from 0 to 1048576"):
            _core.set_read_prefetch(bad)
    assert _core.get_read_prefetch() == prev
    with read_prefetch(4096):
        assert _core.get_read_prefetch() == 4096
    assert _core.get_read_prefetch() == prev
    code = "from minifloat import _core; print(_core.get_read_prefetch())"
    env = {k: v for k, v in os.environ.items() if k != "MINIFLOAT_READ_PREFETCH"}
    default = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert default in ("0", "16384")
    for value, want in (("8192", "8192"), ("0", "0"), ("lots", default)):
        env = dict(os.environ, MINIFLOAT_READ_PREFETCH=value)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True)
        assert r.stdout.strip() == want
        assert ("is not a byte count" in r.stderr) == (value == "lots")


@pytest.mark.parametrize("level", OTHER_LEVELS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_sum_overflow_flag(level, name):
    """A sum whose float64 result overflows the format raises there, as serial."""
    info = FORMATS[name]
    if not np.isfinite(info["max"]):
        return
    dt = dtype_of(name)
    with np.errstate(all="ignore"):
        x = np.full(64, np.float32(info["max"])).astype(dt)
    for lv in ("serial", level):
        with kernel_level(lv):
            _, fl = flags(lambda: x.sum())
        if lv == "serial":
            ref_flags = fl
        else:
            assert fl == ref_flags


# ------------------------------------------------------------------ large runs

STREAM_BYTES = 8 << 20      # the kernels stream outputs this large past the caches


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e8m0fnu"])
def test_large_runs(name):
    """Outputs large enough for non-temporal stores, at unaligned offsets:
    decode, encode and binary equal serial, and nothing around is written."""
    dt = dtype_of(name)
    ct = code_type(name)
    size = dt.itemsize
    n_enc = STREAM_BYTES // size + 1000
    n_dec = STREAM_BYTES // 4 + 1000
    x = random_in_range(name, n_enc + 8, 29)
    with kernel_level("serial"), np.errstate(all="ignore"):
        codes = encode(name, x)
    for off in (0, 3):
        # encode
        src = x[off:off + n_enc]
        outs = []
        for lv in LEVELS:
            buf = np.full(n_enc + 16, ct(0xA5), dtype=ct)
            with kernel_level(lv):
                _, fl = flags(lambda: np.copyto(buf[5 + off:5 + off + n_enc].view(dt), src, casting="unsafe"))
            outs.append((buf, fl))
        for buf, fl in outs[1:]:
            assert_same_codes(buf, outs[0][0], f"encode {name} off={off}")
            assert fl == outs[0][1]
        # decode
        outs = []
        for lv in LEVELS:
            buf = np.full(n_dec + 16, np.float32(-7.0))
            with kernel_level(lv):
                np.copyto(buf[1 + off:1 + off + n_dec], codes[off:off + n_dec].view(dt), casting="unsafe")
            outs.append(buf)
        for buf in outs[1:]:
            assert_same_codes(bits32(buf), bits32(outs[0]), f"decode {name} off={off}")
        # binary
        outs = []
        a = codes[off:off + n_enc].view(dt)
        b = codes[::-1][off:off + n_enc].view(dt)
        for lv in LEVELS:
            buf = np.full(n_enc + 16, ct(0x5A), dtype=ct)
            with kernel_level(lv):
                _, fl = flags(lambda: np.multiply(a, b, out=buf[2 + off:2 + off + n_enc].view(dt)))
            outs.append((buf, fl))
        for buf, fl in outs[1:]:
            assert_same_codes(buf, outs[0][0], f"binary {name} off={off}")
            assert fl == outs[0][1]
