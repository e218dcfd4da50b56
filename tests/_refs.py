"""Independent references for the bfloat16 tests.

Nothing here calls minifloat: the references are plain integer arithmetic on
IEEE bit patterns (NumPy), Python's exact ``fractions.Fraction``, and the two
peers (torch, ml_dtypes), so a test compares minifloat against something that
does not share its code.

bfloat16 codes are handled as ``np.uint16`` arrays throughout.
"""
import platform
from fractions import Fraction

import numpy as np

import minifloat

#: NumPy's own float32 loops pick which NaN operand comes out by CPU: on x86
#: (SSE/AVX) the first operand's, on aarch64 its NEON loops may return the
#: other's (and ml_dtypes converts NaN/inf/out-of-range floats to integers as
#: the C compiler does there).  Where a reference is such a NumPy or ml_dtypes
#: result, NaN signs/payloads and those conversions are compared exactly on
#: x86 only; minifloat's own results are the same on every CPU.
X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")

BF16 = np.dtype(minifloat.bfloat16)

#: every bfloat16 code, 0x0000 .. 0xFFFF
ALL_CODES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
ALL_CODES.setflags(write=False)

POS_INF = 0x7F80
NEG_INF = 0xFF80
QNAN = 0x7FC0          # ml_dtypes' NaN for a positive NaN input
MAX_CODE = 0x7F7F      # largest finite
MIN_NORMAL_CODE = 0x0080
MIN_SUBNORMAL_CODE = 0x0001


# --------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------
def decode_f32(codes):
    """bfloat16 codes -> float32 values (exact: a bfloat16 is the top half of a float32)."""
    codes = np.asarray(codes, dtype=np.uint16)
    return (codes.astype(np.uint32) << 16).view(np.float32)


def decode_f64(codes):
    with np.errstate(invalid="ignore"):   # signalling NaNs
        return decode_f32(codes).astype(np.float64)


def as_bf16(codes):
    """A minifloat bfloat16 array with the given codes (a view on a fresh copy)."""
    return np.array(codes, dtype=np.uint16, copy=True, order="C").view(BF16)


def bits(a):
    """The codes of a minifloat bfloat16 array (or scalar) as uint16."""
    return np.asarray(a).view(np.uint16)


def is_nan_code(codes):
    codes = np.asarray(codes, dtype=np.uint16)
    return (codes & 0x7FFF) > 0x7F80


def finite_codes():
    return ALL_CODES[~is_nan_code(ALL_CODES) & ((ALL_CODES & 0x7FFF) != 0x7F80)]


def ulp_f64(codes):
    """The spacing of the bfloat16 grid at each (finite) code, as float64."""
    mag = np.asarray(codes, dtype=np.uint16) & 0x7FFF
    up = np.minimum(mag + 1, 0x7F80).astype(np.uint16)
    return decode_f64(up) - decode_f64(mag)


# --------------------------------------------------------------------------
# exact rounding to bfloat16
# --------------------------------------------------------------------------
def bf16_code_from_fraction(value):
    """Round an exact rational (Fraction/int) to bfloat16, nearest-even.

    Subnormals are kept; anything that rounds past the largest finite value
    is +-inf.  This is the slow, obviously-correct reference.
    """
    value = Fraction(value)
    sign = 0x8000 if value < 0 else 0
    v = abs(value)
    if v == 0:
        return sign
    # exponent e with 2**e <= v < 2**(e+1)
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    q = max(e - 7, -133)           # exponent of one unit in the last place
    scaled = v / Fraction(2) ** q  # value in units of the quantum
    r = scaled.numerator // scaled.denominator
    rem = scaled - r
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and r % 2 == 1):
        r += 1
    code = ((q + 133) << 7) + r
    if code >= POS_INF:
        code = POS_INF
    return sign | code


def _nan_inf_codes(sign, is_nan, is_inf):
    out = np.where(is_inf, POS_INF, QNAN).astype(np.uint32)
    return out | (sign << 15)


def bf16_codes_from_f64(x):
    """Round float64 values to bfloat16 codes, once, with integer arithmetic.

    NaN follows ml_dtypes: sign kept, quiet NaN 0x7FC0 / 0xFFC0.
    """
    shape = np.shape(x)
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    b = x.view(np.uint64)
    sign = (b >> np.uint64(63)).astype(np.uint32)
    exp = ((b >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    man = b & np.uint64((1 << 52) - 1)
    special = exp == 0x7FF
    normal = (exp > 0) & ~special
    M = np.where(normal, man | np.uint64(1 << 52), man)      # integer significand
    E = np.where(normal, exp - 1075, -1074)                   # value = M * 2**E
    top = np.where(normal, exp - 1023, -1075)                 # floor(log2 |x|) (f64 subnormals: far below bf16)
    Q = np.maximum(top - 7, -133)
    s = Q - E                                                 # bits to drop (>= 0 here)
    big = s > 62
    s_c = np.clip(s, 1, 62).astype(np.uint64)
    r = M >> s_c
    rem = M & ((np.uint64(1) << s_c) - np.uint64(1))
    half = np.uint64(1) << (s_c - np.uint64(1))
    up = (rem > half) | ((rem == half) & ((r & np.uint64(1)) == np.uint64(1)))
    r = r + up.astype(np.uint64)
    r = np.where(s <= 0, M << np.clip(-s, 0, 62).astype(np.uint64), r)
    r = np.where(big, np.uint64(0), r)                        # < half the smallest subnormal
    zero = (M == 0)
    code = ((Q + 133).astype(np.int64) << 7) + r.astype(np.int64)
    code = np.where(zero, 0, code)
    code = np.minimum(code, POS_INF).astype(np.uint32)
    code = code | (sign << 15)
    is_nan = special & (man != 0)
    is_inf = special & (man == 0)
    code = np.where(special, _nan_inf_codes(sign, is_nan, is_inf), code)
    return code.astype(np.uint16).reshape(shape)


def bf16_codes_from_f32(x):
    """Round float32 values to bfloat16 (exact, since float32 -> float64 is exact)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):   # signalling NaNs
        out = bf16_codes_from_f64(x.astype(np.float64))
    # float32 -> float64 keeps the sign of a NaN, so the NaN codes are right too
    return out


def f32_from_parts(sign, exp, man):
    return ((np.uint32(sign) << 31) | (np.uint32(exp) << 23) | np.uint32(man)).view(np.float32)


# --------------------------------------------------------------------------
# peers (torch is optional: it is not in the test extras; tests needing it skip)
# --------------------------------------------------------------------------
def have_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def torch_or_skip():
    import pytest

    return pytest.importorskip("torch")


def torch_round_f32(x):
    """float32 -> bfloat16 codes by torch's vectorised ``.to(torch.bfloat16)``."""
    torch = torch_or_skip()

    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def torch_bf16(codes):
    """A torch bfloat16 tensor with the given codes."""
    torch = torch_or_skip()

    c = np.ascontiguousarray(codes, dtype=np.uint16).view(np.int16)
    return torch.from_numpy(c.copy()).view(torch.bfloat16)


def torch_e4m3fn_saturates(torch):
    """Whether this torch's .to(float8_e4m3fn) clamps an overflowing value to
    448.  torch 2.12 and later do (2.13 is the version this project pins);
    2.11 and earlier gave NaN, as ml_dtypes does (seen with torch 2.11.0 on a
    lent GPU machine).  The tests compare with whichever rule the torch they
    find has: minifloat's --saturate and --no-saturate give each bit for bit."""
    y = torch.tensor([1e6, -1e6]).to(torch.float8_e4m3fn).float()
    return not bool(torch.isnan(y).any())


def torch_codes(t):
    torch = torch_or_skip()

    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def ml_round_f32(x):
    """float32 -> bfloat16 codes by ml_dtypes."""
    import ml_dtypes

    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


# --------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------
def same_codes(got, want, nan_equal=True):
    """Element-wise: codes equal, or (nan_equal) both NaN of any payload/sign."""
    got = np.asarray(got, dtype=np.uint16)
    want = np.asarray(want, dtype=np.uint16)
    eq = got == want
    if nan_equal:
        eq |= is_nan_code(got) & is_nan_code(want)
    return eq


def assert_codes_equal(got, want, nan_equal=True, what="", inputs=None):
    got = np.asarray(got, dtype=np.uint16)
    want = np.asarray(want, dtype=np.uint16)
    assert got.shape == want.shape, (got.shape, want.shape)
    ok = same_codes(got, want, nan_equal)
    if not ok.all():
        idx = np.flatnonzero(~ok.ravel())
        lines = []
        for i in idx[:8]:
            g, w = got.ravel()[i], want.ravel()[i]
            extra = ""
            if inputs is not None:
                extra = " inputs " + ", ".join(
                    f"0x{int(np.asarray(inp).ravel()[i]):04x}" if np.asarray(inp).dtype == np.uint16
                    else repr(np.asarray(inp).ravel()[i]) for inp in inputs)
            lines.append(f"  [{i}] got 0x{int(g):04x} ({float(decode_f32(g))!r}) "
                         f"want 0x{int(w):04x} ({float(decode_f32(w))!r}){extra}")
        raise AssertionError(f"{what}: {len(idx)} of {ok.size} differ\n" + "\n".join(lines))


def ulps_apart(got_codes, want_codes):
    """Distance in bfloat16 codes along the ordered line (finite inputs)."""
    def ordered(c):
        c = np.asarray(c, dtype=np.uint16).astype(np.int64)
        return np.where(c & 0x8000, -(c & 0x7FFF), c)
    return np.abs(ordered(got_codes) - ordered(want_codes))


# --------------------------------------------------------------------------
# the printing rule (the reference for str/repr): the exact value when its
# decimal has at most 6 significant digits, else the shortest round-trip
# decimal
# --------------------------------------------------------------------------
EXACT_PRINT_DIGITS = 6


def exact_sig_digits(x):
    """Significant digits of the exact decimal expansion of a finite,
    nonzero float (trailing zeros of integers not counted: 448.0 has 3,
    100000.0 has 1)."""
    import decimal

    return len(decimal.Decimal(abs(x)).normalize().as_tuple().digits)

def _round_code_py(v):
    """Round a positive float64 to a bfloat16 magnitude code (scalar, fast)."""
    import math

    m, e = math.frexp(v)            # v = m * 2**e, 0.5 <= m < 1
    q = max(e - 8, -133)
    r = round(math.ldexp(v, -q))    # exact scaling; round() is half-to-even
    return min(((q + 133) << 7) + r, POS_INF)


def shortest_decimal(code):
    """(digits, exponent10) of the shortest decimal that rounds back to this
    finite, nonzero bfloat16 code; among several of that length the closest
    to the exact value; an exact tie goes to the even last digit."""
    import decimal

    code = int(code) & 0x7FFF
    x = float(decode_f64(np.uint16(code)))
    ctx = decimal.Context(prec=400)
    exact = decimal.Decimal(x)
    for p in range(1, 10):
        mant, ex = f"{x:.{p - 1}e}".split("e")
        digits = int(mant.replace(".", ""))
        k = int(ex) - (p - 1)
        cands = []
        for d in (digits - 1, digits, digits + 1):
            if d > 0 and _round_code_py(float(f"{d}e{k}")) == code:
                dist = ctx.abs(ctx.subtract(decimal.Decimal(f"{d}e{k}"), exact))
                cands.append((dist, d % 2, d))
        if cands:
            d = min(cands)[2]
            return d, k
    raise AssertionError("no round-trip decimal")


def print_str(code):
    """The string a bfloat16 value prints as: its exact value when that has
    at most 6 significant digits, else the shortest round-trip decimal,
    laid out as Python lays out a float (repr)."""
    code = int(code)
    if (code & 0x7FFF) > 0x7F80:
        return "nan"
    if (code & 0x7FFF) == 0x7F80:
        return "-inf" if code & 0x8000 else "inf"
    if (code & 0x7FFF) == 0:
        return "-0.0" if code & 0x8000 else "0.0"
    val = float(decode_f64(np.uint16(code & 0x7FFF)))
    if exact_sig_digits(val) > EXACT_PRINT_DIGITS:
        d, k = shortest_decimal(code)
        val = float(f"{d}e{k}")
    return repr(-val if code & 0x8000 else val)


_PRINT_CACHE = []


def all_print_strs():
    """print_str for every code (computed once per process: about 1 s)."""
    if not _PRINT_CACHE:
        pos = [print_str(c) for c in range(0x8000)]
        neg = [p if p == "nan" else ("-" + p) for p in pos]
        _PRINT_CACHE.extend(pos + neg)
    return _PRINT_CACHE
