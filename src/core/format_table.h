/*
 * The format table: the one place where minifloat's number formats are
 * defined.  Every other part of the package (dtypes, casts, finfo, DLPack
 * codes, docs) derives what it needs from these rows; no format constant is
 * written anywhere else.
 *
 * A float format is (sign?, exponent bits, mantissa bits, bias) plus a rule
 * for its special values.  Derived quantities (largest finite code, NaN code,
 * eps, ...) are computed from the row by the functions below.
 */
#ifndef MF_FORMAT_TABLE_H
#define MF_FORMAT_TABLE_H

#include <stdint.h>

typedef enum {
    MF_KIND_FLOAT = 0,
    MF_KIND_SINT = 1,
    MF_KIND_UINT = 2,
} mf_kind;

/* How a float format spends its top codes. */
typedef enum {
    /* IEEE 754 style: exponent all ones is inf (mantissa 0) or NaN. */
    MF_SPECIAL_IEEE = 0,
    /* "fn": finite, no inf; only S.1111.111 (all exponent and mantissa bits
     * set) is NaN; everything else is a number. */
    MF_SPECIAL_FN = 1,
    /* "fnuz": finite, unsigned zero: no inf, no -0; the code 1000...0 (the
     * would-be -0) is the single NaN. */
    MF_SPECIAL_FNUZ = 2,
    /* No inf and no NaN (float6/float4, OCP MX element types). */
    MF_SPECIAL_NONE = 3,
    /* float8_e8m0fnu: unsigned power of two, no zero, all ones is NaN. */
    MF_SPECIAL_E8M0 = 4,
} mf_special;

typedef enum {
    MF_BFLOAT16 = 0,
    MF_FLOAT8_E3M4,
    MF_FLOAT8_E4M3,
    MF_FLOAT8_E4M3B11FNUZ,
    MF_FLOAT8_E4M3FN,
    MF_FLOAT8_E4M3FNUZ,
    MF_FLOAT8_E5M2,
    MF_FLOAT8_E5M2FNUZ,
    MF_FLOAT8_E8M0FNU,
    MF_FLOAT6_E2M3FN,
    MF_FLOAT6_E3M2FN,
    MF_FLOAT4_E2M1FN,
    MF_INT4,
    MF_UINT4,
    MF_INT2,
    MF_UINT2,
    MF_INT1,
    MF_UINT1,
    MF_NUM_PUBLIC_FORMATS,
    /* Formats the codec knows but that are NumPy's own dtypes: used by the
     * casts so that float16 is rounded by the same code as everything else. */
    MF_IEEE_FLOAT16 = MF_NUM_PUBLIC_FORMATS,
    MF_IEEE_FLOAT32,
    MF_NUM_FORMATS,
} mf_format_id;

typedef struct mf_format {
    mf_format_id id;
    const char *name;          /* the ml_dtypes name, also the dtype's str */
    const char *dtype_class;   /* name of the DType class, e.g. BFloat16DType */
    mf_kind kind;
    int bits;                  /* significant bits of one value */
    int itemsize;              /* storage bytes of one value in an ndarray */
    /* float formats */
    int exp_bits;
    int mant_bits;
    int bias;
    mf_special special;
    int has_sign;
    /* DLPack type: (code, bits) */
    int dlpack_code;
    int dlpack_bits;
    char typechar;             /* dtype.char */
} mf_format;

extern const mf_format mf_formats[MF_NUM_FORMATS];

static inline const mf_format *
mf_fmt(mf_format_id id) { return &mf_formats[id]; }

/* ---- derived quantities (all computed from the row) ---- */

/* mask of the value bits (all codes live in [0, mf_code_mask]) */
static inline uint32_t
mf_code_mask(const mf_format *f) { return (f->bits >= 32) ? 0xFFFFFFFFu : ((1u << f->bits) - 1u); }

static inline uint32_t
mf_sign_bit(const mf_format *f) { return f->has_sign ? (1u << (f->bits - 1)) : 0u; }

/* largest magnitude code that is a finite number */
static inline uint32_t
mf_max_finite_mag(const mf_format *f)
{
    uint32_t mag_mask = mf_code_mask(f) & ~mf_sign_bit(f);
    switch (f->special) {
        case MF_SPECIAL_IEEE:
            /* exponent all ones is inf/NaN */
            return (((1u << f->exp_bits) - 1u) << f->mant_bits) - 1u;
        case MF_SPECIAL_FN:
        case MF_SPECIAL_E8M0:
            return mag_mask - 1u;     /* all ones is NaN */
        case MF_SPECIAL_FNUZ:
        case MF_SPECIAL_NONE:
        default:
            return mag_mask;
    }
}

static inline int mf_has_inf(const mf_format *f) { return f->special == MF_SPECIAL_IEEE; }
static inline int mf_has_nan(const mf_format *f) { return f->special != MF_SPECIAL_NONE; }
static inline int mf_has_negzero(const mf_format *f)
{
    return f->has_sign && f->special != MF_SPECIAL_FNUZ;
}
static inline int mf_has_zero(const mf_format *f) { return f->special != MF_SPECIAL_E8M0; }
static inline int mf_is_float(const mf_format *f) { return f->kind == MF_KIND_FLOAT; }

/* the canonical (quiet) NaN a NaN input becomes, given the input's sign */
static inline uint32_t
mf_nan_code(const mf_format *f, int sign)
{
    switch (f->special) {
        case MF_SPECIAL_IEEE:
            return (sign ? mf_sign_bit(f) : 0u)
                   | (((1u << f->exp_bits) - 1u) << f->mant_bits)
                   | (f->mant_bits ? (1u << (f->mant_bits - 1)) : 0u);
        case MF_SPECIAL_FN:
            return (sign ? mf_sign_bit(f) : 0u) | (mf_code_mask(f) & ~mf_sign_bit(f));
        case MF_SPECIAL_FNUZ:
            return mf_sign_bit(f);
        case MF_SPECIAL_E8M0:
            return mf_code_mask(f);
        case MF_SPECIAL_NONE:
        default:
            /* no NaN: ml_dtypes stores a zero whose sign is the opposite of
             * the NaN's sign bit; minifloat's casts do the same. */
            return sign ? 0u : mf_sign_bit(f);
    }
}

/* is this code a NaN? */
static inline int
mf_code_isnan(const mf_format *f, uint32_t c)
{
    uint32_t mag = c & ~mf_sign_bit(f);
    switch (f->special) {
        case MF_SPECIAL_IEEE:
            return mag > ((((1u << f->exp_bits) - 1u) << f->mant_bits));
        case MF_SPECIAL_FN:
            return mag == (mf_code_mask(f) & ~mf_sign_bit(f));
        case MF_SPECIAL_FNUZ:
            return c == mf_sign_bit(f);
        case MF_SPECIAL_E8M0:
            return c == mf_code_mask(f);
        default:
            return 0;
    }
}

static inline int
mf_code_isinf(const mf_format *f, uint32_t c)
{
    return f->special == MF_SPECIAL_IEEE
           && (c & ~mf_sign_bit(f)) == ((((1u << f->exp_bits) - 1u) << f->mant_bits));
}

static inline uint32_t
mf_inf_code(const mf_format *f, int sign)
{
    return (sign ? mf_sign_bit(f) : 0u) | ((((1u << f->exp_bits) - 1u) << f->mant_bits));
}

/* smallest exponent of a normal number (e8m0 has no subnormals: code 0 is normal) */
static inline int
mf_emin(const mf_format *f)
{
    return (f->special == MF_SPECIAL_E8M0) ? -f->bias : 1 - f->bias;
}

/* integer formats */
static inline int64_t mf_int_min(const mf_format *f)
{
    return f->kind == MF_KIND_SINT ? -((int64_t)1 << (f->bits - 1)) : 0;
}
static inline int64_t mf_int_max(const mf_format *f)
{
    return f->kind == MF_KIND_SINT ? (((int64_t)1 << (f->bits - 1)) - 1)
                                   : (((int64_t)1 << f->bits) - 1);
}

#endif
