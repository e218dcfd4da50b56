"""Independent references for the family conformance tests (every format, any folder).

Nothing here calls minifloat's codec: every format is re-derived from its
definition (the OCP 8-bit floating point spec OFP8 v1.0 for e4m3fn/e5m2, the OCP
Microscaling (MX) spec v1.0 for the 6- and 4-bit formats and e8m0, ml_dtypes'
definitions for bfloat16, e3m4, e4m3 and the fnuz formats), its
values are built as exact Fractions, and rounding is done against exact
midpoints.  The midpoints of neighbouring values of any of these formats need
at most 9 significant bits, so they are exact float64 numbers and comparing a
float64 input with them is an exact comparison: the vectorised encoder below is
an exact round-to-nearest-even of the float64 value (one rounding).
"""
from fractions import Fraction

import numpy as np

from _refs import X86  # noqa: F401  (where NumPy/ml_dtypes results are CPU-dependent)

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a test dependency
    ml_dtypes = None

#: ml_dtypes' version, (major, minor); (0, 0) without it
ML_VERSION = (tuple(int(p) for p in ml_dtypes.__version__.split(".")[:2])
              if ml_dtypes is not None else (0, 0))
#: ml_dtypes 0.7 rounds as minifloat does where earlier versions did not:
#: float64 once (not through float32), float8_e8m0fnu's subnormal inputs to
#: nearest, and a NumPy float or an out-of-range value into int4/int2/int1 as
#: 0 (earlier: the C conversion's wrapped bits, which minifloat keeps)
ML_07 = ML_VERSION >= (0, 7)

# name: (exp_bits, mant_bits, bias, special, signed)
#   special: "ieee" (inf + NaNs), "fn" (only S.1111.111 is NaN), "fnuz" (0x80 is
#   the single NaN, no -0), "none" (no inf, no NaN), "e8m0" (unsigned powers of
#   two, 0xFF NaN, no zero)
FLOAT_DEFS = {
    "bfloat16": (8, 7, 127, "ieee", True),
    "float8_e3m4": (3, 4, 3, "ieee", True),
    "float8_e4m3": (4, 3, 7, "ieee", True),
    "float8_e4m3b11fnuz": (4, 3, 11, "fnuz", True),
    "float8_e4m3fn": (4, 3, 7, "fn", True),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz", True),
    "float8_e5m2": (5, 2, 15, "ieee", True),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz", True),
    "float8_e8m0fnu": (8, 0, 127, "e8m0", False),
    "float6_e2m3fn": (2, 3, 1, "none", True),
    "float6_e3m2fn": (3, 2, 3, "none", True),
    "float4_e2m1fn": (2, 1, 1, "none", True),
}
# name: (bits, signed)
INT_DEFS = {
    "int4": (4, True), "uint4": (4, False), "int2": (2, True),
    "uint2": (2, False), "int1": (1, True), "uint1": (1, False),
}
# facts written down from the sources above, independently of the codec (max
# finite, smallest normal, smallest subnormal and eps as ml_dtypes 0.6's finfo
# prints them, the number of NaN codes, the DLPack type code of dlpack.h; 6 and
# 4-bit formats' codes are DLPack 1.1's kDLFloat6_e2m3fn ... kDLFloat4_e2m1fn)
FACTS = {
    "bfloat16": (3.38953e+38, 1.17549e-38, 9.18355e-41, 0.0078125, 254, 4),
    "float8_e3m4": (15.5, 0.25, 0.015625, 0.0625, 30, 7),
    "float8_e4m3": (240, 0.015625, 0.00195312, 0.125, 14, 8),
    "float8_e4m3b11fnuz": (30, 0.000976562, 0.00012207, 0.125, 1, 9),
    "float8_e4m3fn": (448, 0.015625, 0.00195312, 0.125, 2, 10),
    "float8_e4m3fnuz": (240, 0.0078125, 0.000976562, 0.125, 1, 11),
    "float8_e5m2": (57344, 6.10352e-05, 1.52588e-05, 0.25, 6, 12),
    "float8_e5m2fnuz": (57344, 3.05176e-05, 7.62939e-06, 0.25, 1, 13),
    "float8_e8m0fnu": (1.70141e+38, 5.87747e-39, 5.87747e-39, 1, 1, 14),
    "float6_e2m3fn": (7.5, 1, 0.125, 0.125, 0, 15),
    "float6_e3m2fn": (28, 0.25, 0.0625, 0.25, 0, 16),
    "float4_e2m1fn": (6, 1, 0.5, 0.5, 0, 17),
}

FLOAT_NAMES = list(FLOAT_DEFS)
INT_NAMES = list(INT_DEFS)
SMALL_FLOATS = [n for n in FLOAT_NAMES if n != "bfloat16"]   # the formats of 8 bits or fewer


def bits_of(name):
    if name in INT_DEFS:
        return INT_DEFS[name][0]
    e, m, _, _, signed = FLOAT_DEFS[name]
    return e + m + (1 if signed else 0)


def ncodes(name):
    return 1 << bits_of(name)


def code_dtype(name):
    """the unsigned integer type that holds one stored element"""
    return np.uint16 if bits_of(name) > 8 else np.uint8


def all_codes(name):
    return np.arange(ncodes(name), dtype=code_dtype(name))


def ml_type(name):
    return getattr(ml_dtypes, name, None) if ml_dtypes is not None else None


class Format:
    """One float format, derived from its definition with exact arithmetic."""

    def __init__(self, name):
        e, m, bias, special, signed = FLOAT_DEFS[name]
        self.name, self.E, self.M, self.bias, self.special, self.signed = name, e, m, bias, special, signed
        self.bits = e + m + (1 if signed else 0)
        self.sbit = (1 << (self.bits - 1)) if signed else 0
        self.mag_codes = 1 << (e + m)
        # magnitude code -> Fraction | "inf" | "nan"
        self.mag = [self._mag_value(c) for c in range(self.mag_codes)]
        finite = [c for c in range(self.mag_codes) if isinstance(self.mag[c], Fraction)]
        self.max_mag = max(finite)
        assert finite == list(range(self.max_mag + 1))
        self.max = self.mag[self.max_mag]
        if special == "e8m0":
            self.smallest_subnormal = self.smallest_normal = self.mag[0]
        else:
            self.smallest_subnormal = self.mag[1]
            self.smallest_normal = self.mag[1 << m]
        self.has_inf = special == "ieee"
        self.has_nan = special != "none"
        self.has_negzero = signed and special not in ("fnuz",)
        self.has_zero = special != "e8m0"

    def _mag_value(self, c):
        E, M = c >> self.M, c & ((1 << self.M) - 1)
        top = (1 << self.E) - 1
        sp = self.special
        if sp == "ieee" and E == top:
            return "inf" if M == 0 else "nan"
        if sp == "fn" and c == self.mag_codes - 1:
            return "nan"
        if sp == "e8m0":
            if c == self.mag_codes - 1:
                return "nan"
            return Fraction(2) ** (E - self.bias)
        if E == 0:
            return Fraction(M, 1 << self.M) * Fraction(2) ** (1 - self.bias)
        return (1 + Fraction(M, 1 << self.M)) * Fraction(2) ** (E - self.bias)

    # ------------------------------------------------------------ decoding
    def value(self, code):
        """exact value of a code: Fraction, or float('inf')/-inf/nan (with sign)"""
        neg = bool(code & self.sbit)
        mag = code & ~self.sbit & (self.mag_codes - 1)
        if self.special == "fnuz" and code == self.sbit:
            return float("-nan")      # the would-be -0 (ml_dtypes decodes it with the sign set)
        v = self.mag[mag]
        if v == "nan":
            return -float("nan") if neg else float("nan")
        if v == "inf":
            return -float("inf") if neg else float("inf")
        return -v if neg else v

    def decode_f64(self):
        """float64 value of every code (NaN with the code's sign); a fresh copy"""
        if not hasattr(self, "_dec"):
            self._dec = self._decode_f64()
        return self._dec.copy()

    def _decode_f64(self):
        out = np.empty(1 << self.bits, np.float64)
        for c in range(1 << self.bits):
            v = self.value(c)
            if isinstance(v, Fraction):
                f = float(v)
                assert Fraction(f) == v
                if v == 0 and c & self.sbit:
                    f = -0.0
                out[c] = f
            else:
                out[c] = v
        return out

    def is_nan_code(self, code):
        v = self.value(int(code))
        return isinstance(v, float) and v != v

    # ------------------------------------------------------------ codes of specials
    def nan_code(self, negative):
        """the code a NaN input becomes in a cast (ml_dtypes' choice)"""
        if self.special == "ieee":
            return (self.sbit if negative else 0) | (((1 << self.E) - 1) << self.M) | (1 << (self.M - 1))
        if self.special == "fn":
            return (self.sbit if negative else 0) | (self.mag_codes - 1)
        if self.special == "fnuz":
            return self.sbit
        if self.special == "e8m0":
            return 0xFF
        # no NaN: ml_dtypes stores a zero with the opposite sign of the NaN
        return 0 if negative else self.sbit

    def inf_code(self, negative):
        assert self.has_inf
        return (self.sbit if negative else 0) | (((1 << self.E) - 1) << self.M)

    def overflow_code(self, negative, saturate=False):
        """what a finite value too large for the format (or an inf) becomes"""
        s = self.sbit if negative else 0
        if self.special == "e8m0":
            if negative:
                return 0xFF
            return self.max_mag if saturate else 0xFF
        if saturate or self.special == "none":
            return s | self.max_mag
        if self.special == "ieee":
            return self.inf_code(negative)
        return self.nan_code(negative)

    # ------------------------------------------------------------ encoding
    def _grid(self):
        if not hasattr(self, "_g"):
            vals = [self.mag[c] for c in range(self.max_mag + 1)]
            ulp = vals[-1] - vals[-2] if self.special != "e8m0" else vals[-1]
            vals.append(vals[-1] + ulp)          # the virtual value above max finite
            g = np.array([float(v) for v in vals])
            mids = [(vals[i] + vals[i + 1]) / 2 for i in range(len(vals) - 1)]
            gm = np.array([float(v) for v in mids])
            for a, b in zip(vals, g):
                assert Fraction(float(b)) == a
            for a, b in zip(mids, gm):
                assert Fraction(float(b)) == a      # exact: comparisons below are exact
            self._g = (g, gm)
        return self._g

    def encode(self, x, rounding="nearest", saturate=False):
        """Exact single rounding of float64 values `x` to codes (uint32).

        rounding: "nearest" (ties to even; for e8m0, whose values have no
        mantissa bit, ties go up in magnitude as ml_dtypes and the codec's
        significand rule do), or "toward_zero" (finite values never overflow
        then: they clamp to the largest finite value)."""
        x = np.asarray(x, np.float64).reshape(-1)
        g, gm = self._grid()
        neg = np.signbit(x)
        ax = np.abs(x)
        nan = np.isnan(x)
        inf = np.isinf(x)
        fin = ~nan & ~inf
        axf = np.where(fin, ax, 0.0)
        c = np.searchsorted(g, axf, side="right") - 1       # g[c] <= ax < g[c+1]
        below = c < 0                                        # only e8m0: below 2^-127
        c = np.clip(c, 0, len(g) - 1)
        if rounding == "nearest":
            cc = np.minimum(c, len(gm) - 1)
            mid = gm[cc]
            up = axf > mid
            tie = axf == mid
            if self.special == "e8m0":
                up |= tie
            else:
                up |= tie & (cc % 2 == 1)
            c = np.where(c >= len(g) - 1, c, cc + up)
        elif rounding == "toward_zero":
            c = np.minimum(c, self.max_mag)
        else:
            raise ValueError(rounding)
        c = np.where(below, 0, c)
        over = fin & (c > self.max_mag)
        s = np.where(neg, self.sbit, 0)
        code = (c | s).astype(np.int64)
        if self.special == "fnuz":
            code = np.where(c == 0, 0, code)                 # no -0
        # overflow of finite values
        code = np.where(over & neg, self.overflow_code(True, saturate), code)
        code = np.where(over & ~neg, self.overflow_code(False, saturate), code)
        # infinities
        if self.has_inf and not saturate:
            ic = (self.inf_code(True), self.inf_code(False))
        else:
            ic = (self.overflow_code(True, saturate), self.overflow_code(False, saturate))
        code = np.where(inf & neg, ic[0], code)
        code = np.where(inf & ~neg, ic[1], code)
        if self.special == "e8m0":
            code = np.where(fin & (neg | (ax == 0)), 0xFF, code)   # no sign, no zero
        code = np.where(nan & neg, self.nan_code(True), code)
        code = np.where(nan & ~neg, self.nan_code(False), code)
        return code.astype(np.uint32)

    def neighbours(self, x):
        """(lower code, upper code) of the two representable values around finite,
        in-range float64 values x (equal when x is representable)."""
        lo = self.encode(x, "toward_zero")
        # away from zero: toward zero of x, then step if inexact
        v = self.decode_f64()[lo]
        step = (v != x).astype(np.uint32)
        hi = lo + step     # magnitude code + 1 (the sign bit is above every magnitude code)
        if self.special == "fnuz":      # toward zero of a tiny negative is +0 (code 0)
            hi = np.where((lo == 0) & np.signbit(x) & (step == 1), self.sbit | 1, hi)
        return lo, hi


_FMT_CACHE = {}


def fmt(name):
    if name not in _FMT_CACHE:
        _FMT_CACHE[name] = Format(name)
    return _FMT_CACHE[name]


#: ufuncs that are IEEE 754 sign operations (bit operations on the sign bit)
SIGN_UFUNCS = ("negative", "positive", "absolute", "fabs", "conjugate", "copysign")


def sign_ref(name, ufunc, a, b=None):
    """The codes of a sign operation on codes ``a`` (and ``b`` for copysign):
    negative flips the sign bit, absolute/fabs clear it, copysign takes b's,
    positive/conjugate copy; NaN payloads stay.  A fnuz format has no -0: its
    +0 and its NaN (the would-be -0) keep their code.  Only for formats with a
    sign bit (e8m0 has none: its ufuncs round the float32 result)."""
    f = fmt(name)
    assert f.signed, name
    S = f.sbit
    a = np.asarray(a).astype(np.int64)
    if ufunc == "negative":
        r = a ^ S
    elif ufunc in ("absolute", "fabs"):
        r = a & ~S
    elif ufunc == "copysign":
        r = (a & ~S) | (np.asarray(b).astype(np.int64) & S)
    else:
        r = a
    if f.special == "fnuz":
        r = np.where((a & ~S) == 0, a, r)
    return r.astype(code_dtype(name))


def boundary_values(name):
    """Every boundary class of a format, as float64 values (both signs):
    zeros, max finite, the midpoint above it and its float64 neighbours, the
    smallest normal and subnormal and midpoints around them, all ties (each
    midpoint of two neighbouring values and its float64 neighbours: ties to even
    on both sides, values that round up into the next binade), inf, NaN,
    float32 subnormals and huge values."""
    f = fmt(name)
    g, gm = f._grid()
    v = [0.0, float(f.max), float(f.smallest_normal), float(f.smallest_subnormal)]
    v += list(g) + list(gm)
    v += list(np.nextafter(gm, np.inf)) + list(np.nextafter(gm, -np.inf))
    v += list(np.nextafter(g, np.inf)) + list(np.nextafter(g, -np.inf))
    # float32 neighbours of the midpoints (what a float32 input can express)
    gm32 = gm.astype(np.float32)
    v += list(np.nextafter(gm32, np.float32(np.inf)).astype(np.float64))
    v += list(np.nextafter(gm32, np.float32(-np.inf)).astype(np.float64))
    v += [float(f.smallest_subnormal) / 2, float(f.smallest_subnormal) / 4,
          float(f.smallest_subnormal) * 0.75, float(f.smallest_subnormal) * 0.25]
    v += [1e-45, 1.4e-45, 1e-40, 2.0 ** -126, 2.0 ** -127, 2.0 ** -149, 2.0 ** -150,
          1e-300, 5e-324, 3.4028234663852886e38, 1e39, 1e300, 1.7976931348623157e308,
          float("inf"), float("nan")]
    v = np.array(v, np.float64)
    v = np.concatenate([v, -v])
    # NaNs with payloads, both signs
    nan_bits = np.array([0x7FF8000000000000, 0x7FF0000000000001, 0x7FF4000000000000,
                         0x7FFFFFFFFFFFFFFF, 0xFFF8000000000000, 0xFFF0000000000001,
                         0xFFFFFFFFFFFFFFFF], dtype=np.uint64)
    return np.concatenate([v, nan_bits.view(np.float64)])


def float32_boundary_bits(name):
    """boundary_values() as float32 bit patterns (the values that are exactly
    float32, plus the float32 neighbours of the rest) and float32 NaN payloads."""
    v = boundary_values(name)
    with np.errstate(all="ignore"):
        v32 = v.astype(np.float32)
    up = np.nextafter(v32, np.float32(np.inf))
    dn = np.nextafter(v32, np.float32(-np.inf))
    out = np.concatenate([v32, up, dn]).view(np.uint32)
    nan_bits = np.array([0x7FC00000, 0x7F800001, 0x7FA00000, 0x7FFFFFFF, 0xFFC00000,
                         0xFF800001, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x007FFFFF,
                         0x807FFFFF, 0x00400000, 0x00400001, 0x00600000, 0x00600001],
                        dtype=np.uint32)
    return np.concatenate([out, nan_bits])


def random_f32_bits(n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)


def int_wrap(values, name):
    """wrap Python/NumPy integers to the integer format's range"""
    bits, signed = INT_DEFS[name]
    v = np.asarray(values, np.int64) & ((1 << bits) - 1)
    if signed:
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v


def encode_fraction(name, q):
    """Exact round-to-nearest-even of a Fraction (or int) into format `name`
    (scalar, slow; for wide sources such as int64 and long double that a
    float64 cannot hold exactly)."""
    import bisect
    f = fmt(name)
    q = Fraction(q)
    neg = q < 0
    a = -q if neg else q
    if f.special == "e8m0" and (neg or a == 0):
        return 0xFF
    if not hasattr(f, "_fgrid"):
        vals = [f.mag[c] for c in range(f.max_mag + 1)]
        ulp = vals[-1] - vals[-2] if f.special != "e8m0" else vals[-1]
        f._fgrid = vals + [vals[-1] + ulp]
    g = f._fgrid
    c = bisect.bisect_right(g, a) - 1
    if c < 0:
        return 0                                   # e8m0 below 2^-127
    if c < len(g) - 1 and g[c] != a:
        mid = (g[c] + g[c + 1]) / 2
        if a > mid or (a == mid and (f.special == "e8m0" or c % 2 == 1)):
            c += 1
    if c > f.max_mag:
        return f.overflow_code(neg)
    if c == 0 and f.special == "fnuz":
        return 0
    return c | (f.sbit if neg else 0)


def kind_char(name):
    """NumPy's kind letter for the format's nature ('f', 'i', 'u'); the dtype's
    own .kind is 'V' (docs/design.md, "Which dtype API")."""
    if name in FLOAT_DEFS:
        return "f"
    return "i" if INT_DEFS[name][1] else "u"
