/*
 * The generic codec: exact decoding of every code of every format, and
 * encoding from float64 with one rounding, driven only by the format table.
 *
 * This is the serial oracle.  Every fast path (lookup tables, bit tricks,
 * SIMD kernels) is tested bit for bit against these functions.
 */
#ifndef MF_CODEC_H
#define MF_CODEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "format_table.h"

typedef enum {
    MF_ROUND_NEAREST_EVEN = 0,
    MF_ROUND_TOWARD_ZERO = 1,
    MF_ROUND_STOCHASTIC = 2,
} mf_rounding;

static inline uint64_t mf_f64_bits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline double mf_bits_f64(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
static inline uint32_t mf_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float mf_bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static inline int
mf_clz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return x ? __builtin_clzll(x) : 64;
#else
    int n = 0;
    if (!x) return 64;
    while (!(x & 0x8000000000000000ull)) { x <<= 1; n++; }
    return n;
#endif
}

/* ---------------------------------------------------------------- decode */

/* Exact value of code `c` (NaN keeps the code's sign where it has one). */
static inline double
mf_decode_f64(const mf_format *f, uint32_t c)
{
    c &= mf_code_mask(f);
    if (f->kind != MF_KIND_FLOAT) {
        if (f->kind == MF_KIND_SINT && (c & (1u << (f->bits - 1)))) {
            return (double)((int64_t)c - ((int64_t)1 << f->bits));
        }
        return (double)c;
    }
    uint32_t sbit = mf_sign_bit(f);
    int sign = (c & sbit) != 0;
    if (mf_code_isnan(f, c)) {
        /* fnuz's single NaN is the would-be -0 code, ml_dtypes decodes it as -nan */
        return sign ? -NAN : NAN;
    }
    if (mf_code_isinf(f, c)) {
        return sign ? -INFINITY : INFINITY;
    }
    uint32_t mag = c & ~sbit;
    int M = f->mant_bits;
    uint32_t E = mag >> M;
    uint32_t mant = mag & ((1u << M) - 1u);
    double v;
    if (f->special == MF_SPECIAL_E8M0) {
        v = ldexp(1.0, (int)E - f->bias);
    }
    else if (E == 0) {
        v = ldexp((double)mant, mf_emin(f) - M);
    }
    else {
        v = ldexp((double)((1u << M) | mant), (int)E - f->bias - M);
    }
    return sign ? -v : v;
}

/* Every format's values are exact in float32. */
static inline float
mf_decode_f32(const mf_format *f, uint32_t c)
{
    return (float)mf_decode_f64(f, c);
}

/* ---------------------------------------------------------------- encode */

/* What an out-of-range finite value (or an infinity) becomes. */
static inline uint32_t
mf_overflow_code(const mf_format *f, int sign, int saturate)
{
    uint32_t sbit = sign ? mf_sign_bit(f) : 0u;
    if (saturate) {
        if (f->special == MF_SPECIAL_E8M0 && sign) {
            return mf_nan_code(f, sign);
        }
        return sbit | mf_max_finite_mag(f);
    }
    switch (f->special) {
        case MF_SPECIAL_IEEE: return mf_inf_code(f, sign);
        case MF_SPECIAL_NONE: return sbit | mf_max_finite_mag(f);  /* nothing else to give */
        default:              return mf_nan_code(f, sign);
    }
}

/*
 * Encode a float64 into an integer format: C truncation toward zero, then
 * wrap-around to the format's width (what ml_dtypes does).  Values outside
 * the int32 range and NaN become 0, the low bits of x86's "integer
 * indefinite" 0x80000000; defined here so every platform agrees.
 */
static inline uint32_t
mf_encode_int_from_f64(const mf_format *f, double x)
{
    int64_t v;
    if (!(fabs(x) < 2147483648.0)) {
        v = 0;
    }
    else {
        v = (int64_t)x;
    }
    return (uint32_t)((uint64_t)v & mf_code_mask(f));
}

/*
 * Encode float64 `x` into format `f`, rounding once from x.
 *   rmode:    nearest-even, toward zero, or stochastic (uses `rbits`, 64
 *             uniformly random bits: round up with probability equal to the
 *             discarded fraction).
 *   saturate: overflow and infinities clamp to the largest finite value
 *             instead of becoming inf/NaN.
 */
static inline uint32_t
mf_encode_f64_ex(const mf_format *f, double x, mf_rounding rmode, int saturate, uint64_t rbits,
                 int *overflow)
{
    if (f->kind != MF_KIND_FLOAT) {
        return mf_encode_int_from_f64(f, x);
    }
    uint64_t u = mf_f64_bits(x);
    int sign = (int)(u >> 63);
    uint64_t au = u & 0x7FFFFFFFFFFFFFFFull;
    uint32_t sbit = sign ? mf_sign_bit(f) : 0u;

    if (au > 0x7FF0000000000000ull) {                 /* NaN */
        return mf_nan_code(f, sign);
    }
    if (f->special == MF_SPECIAL_E8M0 && (sign || au == 0)) {
        /* no sign and no zero: negatives and zero are NaN */
        return mf_nan_code(f, sign);
    }
    if (au == 0x7FF0000000000000ull) {                /* +-inf */
        if (f->special == MF_SPECIAL_IEEE && !saturate) {
            return mf_inf_code(f, sign);               /* also toward zero: inf stays inf */
        }
        return mf_overflow_code(f, sign, saturate);    /* saturate: the largest finite */
    }
    if (au == 0) {
        return (f->special == MF_SPECIAL_FNUZ) ? 0u : sbit;
    }

    /* x = sig * 2^(e2 - 52) with sig a 53-bit integer, 2^52 <= sig < 2^53 */
    int e2 = (int)(au >> 52) - 1023;
    uint64_t sig = au & 0x000FFFFFFFFFFFFFull;
    if (e2 == -1023) {                                /* float64 subnormal */
        int lz = mf_clz64(sig) - 11;
        sig <<= lz;
        e2 = -1022 - lz;
    }
    else {
        sig |= 0x0010000000000000ull;
    }

    const int M = f->mant_bits;
    const int emin = mf_emin(f);
    if (f->special == MF_SPECIAL_E8M0 && e2 < emin) {
        /* no zero to underflow to: the smallest value is code 0 */
        return 0u;
    }
    int qexp = (e2 >= emin ? e2 : emin) - M;          /* exponent of one unit in the last place */
    int shift = 52 + qexp - e2;                       /* >= 52 - M > 0 */
    uint64_t q;
    int round_up = 0;
    if (shift >= 64) {
        q = 0;
        if (rmode == MF_ROUND_STOCHASTIC) {
            /* probability x / 2^qexp, tiny: compare in double */
            double p = ldexp((double)sig, -shift);
            double uniform = ldexp((double)(rbits >> 11), -53);
            round_up = uniform < p;
        }
        /* nearest: x < ulp/2 here, so it rounds to zero */
    }
    else {
        q = sig >> shift;
        uint64_t rem = sig & ((1ull << shift) - 1ull);
        if (rmode == MF_ROUND_NEAREST_EVEN) {
            uint64_t half = 1ull << (shift - 1);
            round_up = rem > half || (rem == half && (q & 1u));
        }
        else if (rmode == MF_ROUND_STOCHASTIC) {
            /* P(round up) = rem / 2^shift */
            round_up = (rbits >> (64 - shift)) < rem;
        }
    }
    q += (uint64_t)round_up;

    uint64_t code;
    if (e2 >= emin) {
        /* q in [2^M, 2^(M+1)]; the carry into the exponent is automatic */
        code = ((uint64_t)(e2 + f->bias) << M) + q - (1ull << M);
    }
    else {
        code = q;                                      /* subnormal (or the smallest normal) */
    }
    if (code > mf_max_finite_mag(f)) {
        if (overflow) {
            *overflow = 1;     /* a finite value too large for the format */
        }
        return mf_overflow_code(f, sign, saturate || rmode == MF_ROUND_TOWARD_ZERO);
    }
    if (code == 0 && f->special == MF_SPECIAL_FNUZ) {
        return 0u;
    }
    return (uint32_t)code | sbit;
}

/* The cast: round to nearest even, ml_dtypes' overflow rules. */
static inline uint32_t
mf_encode_f64(const mf_format *f, double x)
{
    return mf_encode_f64_ex(f, x, MF_ROUND_NEAREST_EVEN, 0, 0, NULL);
}

/* The cast, noting in *overflow when a finite input was too large. */
static inline uint32_t
mf_encode_f64_ovf(const mf_format *f, double x, int *overflow)
{
    if (f->kind == MF_KIND_FLOAT && f->has_sign && f->special != MF_SPECIAL_E8M0) {
        /* a finite x in the target's normal range: round the magnitude's
         * bits to M mantissa bits (nearest even: the carry moves into the
         * exponent) and rebias; anything else, or a result past the largest
         * finite value, takes the general path */
        const uint64_t u = mf_f64_bits(x);
        const uint64_t au = u & 0x7FFFFFFFFFFFFFFFull;
        const int M = f->mant_bits;
        if (au >= (uint64_t)(mf_emin(f) + 1023) << 52 && au < 0x7FF0000000000000ull) {
            const int drop = 52 - M;
            const uint64_t r = au + ((1ull << (drop - 1)) - 1u) + ((au >> drop) & 1u);
            const uint64_t code = (r >> drop) - ((uint64_t)(1023 - f->bias) << M);
            if (code <= mf_max_finite_mag(f)) {
                return (uint32_t)code | ((u >> 63) ? mf_sign_bit(f) : 0u);
            }
        }
    }
    return mf_encode_f64_ex(f, x, MF_ROUND_NEAREST_EVEN, 0, 0, overflow);
}

/* float32 widens exactly, so rounding from the double is rounding once. */
static inline uint32_t
mf_encode_f32(const mf_format *f, float x)
{
    return mf_encode_f64(f, (double)x);
}

/*
 * A float64 holding the value of a wider number (int64, long double) rounded
 * to odd: rounding that double once more to any format with at most 51
 * significant bits gives the correctly rounded result of the wide value.
 */
static inline double
mf_round_to_odd_adjust(double d, int inexact, int wide_is_above)
{
    if (!inexact) {
        return d;
    }
    uint64_t u = mf_f64_bits(d);
    if ((u & 1u) == 0) {
        /* d is even: step one ulp toward the true value to make it odd */
        double toward = wide_is_above ? INFINITY : -INFINITY;
        d = nextafter(d, toward);
    }
    return d;
}

static inline double
mf_int64_to_f64_odd(int64_t v)
{
    double d = (double)v;
    /* (int64_t)d may overflow for d == 2^63; compare in long double-free way */
    if (d >= 9223372036854775808.0) {
        return mf_round_to_odd_adjust(d, 1, 0);
    }
    int64_t back = (int64_t)d;
    return mf_round_to_odd_adjust(d, back != v, v > back);
}

static inline double
mf_uint64_to_f64_odd(uint64_t v)
{
    double d = (double)v;
    if (d >= 18446744073709551616.0) {
        return mf_round_to_odd_adjust(d, 1, 0);
    }
    uint64_t back = (uint64_t)d;
    return mf_round_to_odd_adjust(d, back != v, v > back);
}

static inline double
mf_longdouble_to_f64_odd(long double v)
{
    double d = (double)v;
    if (isnan(d) || isinf(d)) {
        return d;
    }
    long double back = (long double)d;
    return mf_round_to_odd_adjust(d, back != v, v > back);
}

/*
 * float64 -> float32 rounded to odd (toward zero, the last bit set where
 * that dropped anything), with integer operations only (no FP flags):
 * float32 has 24 significant bits, every float format here at most 11, so
 * encoding the result rounds x once (RNE of a value rounded to odd with two
 * or more extra bits is RNE of the value), including where the target's
 * subnormals lie among float32's normals or subnormals.  Beyond float32's
 * range (finite) it gives the largest float32 of x's sign, past every
 * format's overflow threshold; inf and NaN keep their sign (a NaN's payload
 * is not kept: the encoders give the format's NaN of the sign).
 */
static inline float
mf_f64_to_f32_odd(double x)
{
    const uint64_t u = mf_f64_bits(x);
    const uint64_t au = u & 0x7FFFFFFFFFFFFFFFull;
    uint32_t r;
    if (au >= 0x7FF0000000000000ull) {
        r = au == 0x7FF0000000000000ull ? 0x7F800000u : 0x7FC00000u;
    }
    else if (au >= 0x47F0000000000000ull) {           /* >= 2^128 */
        r = 0x7F7FFFFFu;
    }
    else if (au >= 0x3810000000000000ull) {           /* >= 2^-126: a normal float32 */
        r = (uint32_t)((au >> 29) - ((uint64_t)(1023 - 127) << 23))
            | (uint32_t)((au & 0x1FFFFFFFull) != 0);
    }
    else {                                            /* units of 2^-149 */
        const int e = (int)(au >> 52);
        const uint64_t sig = (au & 0x000FFFFFFFFFFFFFull) | (e ? 0x0010000000000000ull : 0);
        const int sh = 926 - (e ? e : 1);             /* >= 30 */
        r = sh >= 64 ? (uint32_t)(sig != 0)
                     : (uint32_t)(sig >> sh) | (uint32_t)((sig & ((1ull << sh) - 1u)) != 0);
    }
    return mf_bits_f32(r | (uint32_t)(u >> 32 & 0x80000000u));
}

/* ------------------------------------------------------ step and ordering */

/* next representable code after c in the direction of `toward` (a value) */
static inline uint32_t
mf_nextafter_code(const mf_format *f, uint32_t c, double toward)
{
    double x = mf_decode_f64(f, c);
    if (isnan(x) || isnan(toward)) {
        return isnan(x) ? c : mf_encode_f64(f, toward);
    }
    if (x == toward) {
        return mf_encode_f64(f, toward);   /* IEEE: returns `toward` (keeps its sign of zero) */
    }
    uint32_t sbit = mf_sign_bit(f);
    int up = toward > x;                    /* move up in value */
    if (x == 0.0) {
        if (!mf_has_negzero(f) && !f->has_sign) {
            return up ? 1u : c;
        }
        /* smallest subnormal with the sign of the direction */
        return up ? 1u : (sbit | 1u);
    }
    int neg = (c & sbit) != 0;
    uint32_t mag = c & ~sbit;
    /* moving away from zero increments the magnitude code */
    if (up != neg) {
        mag += 1;
        if (mag > mf_max_finite_mag(f)) {
            return mf_overflow_code(f, neg, 0);
        }
    }
    else {
        mag -= 1;
        if (mag == 0 && f->special == MF_SPECIAL_FNUZ) {
            return 0u;
        }
    }
    return (neg ? sbit : 0u) | mag;
}

#endif
