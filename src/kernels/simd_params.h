/*
 * Format parameters of the SIMD kernels (avx2.c, avx512.c), derived from the
 * format table once per call and broadcast into registers by the kernels.
 * The kernels compute exactly what the serial kernels compute (serial.c,
 * scalar_ops.h); the comments below say which serial step each value
 * reproduces.
 */
#ifndef MF_SIMD_PARAMS_H
#define MF_SIMD_PARAMS_H

#include <stdint.h>
#include <string.h>
#include "kernels.h"
#include "parallel.h"
#include "../core/codec.h"

typedef enum {
    MF_SIMD_SERIAL = 0,   /* no SIMD path */
    MF_SIMD_BF16,         /* the bfloat16 bit tricks */
    MF_SIMD_SMALL,        /* sign / exponent / mantissa float of at most 8 bits */
    MF_SIMD_E8M0,         /* float8_e8m0fnu: unsigned powers of two */
    /* MF_SIMD_SMALL by special-value rule, for kernels compiled per rule */
    MF_SIMD_SMALL_IEEE,
    MF_SIMD_SMALL_FN,
    MF_SIMD_SMALL_FNUZ,
    MF_SIMD_SMALL_NONE,
    /* integer formats: decode only (their casts from float32 and their
     * arithmetic do not go through the kernels' encode) */
    MF_SIMD_SINT,
    MF_SIMD_UINT,
} mf_simd_path;

typedef struct {
    mf_simd_path path;
    mf_simd_path small_path;   /* SMALL: the MF_SIMD_SMALL_<rule> variant; else = path */
    mf_format_id id;
    /* ---- decode (the values of mf_lut8) ---- */
    uint32_t code_mask;    /* bytes alias their low bits (mf_init_luts) */
    uint32_t mag_mask;     /* code_mask without the sign bit */
    uint32_t sbit;         /* the code's sign bit (0 if unsigned) */
    int mant_shift;        /* 23 - M: mantissa into float32 position */
    uint32_t dec_adj;      /* (127 - bias) << 23: rebias a normal code's exponent */
    uint32_t dec_adj_sub;  /* (emin + 127) << 23: a subnormal code as 2^emin (1 + f) */
    uint32_t maxfin;       /* largest finite magnitude code */
    uint32_t inf_mag;      /* IEEE: magnitude code of inf; else 0xFFFFFFFF */
    /* the same, as the kernels compute it: t = code << (32 - bits) puts the
     * sign at bit 31 and drops the bits above the format's width; then
     * (t >>arith dec_sra) & dec_keep is sign | magnitude << mant_shift */
    int dec_shl;           /* 32 - bits */
    int dec_sra;           /* 32 - bits - mant_shift */
    uint32_t dec_keep;     /* 0x80000000 | mag_mask << mant_shift */
    uint32_t dec_spec_lim; /* magnitude << mant_shift above this: NaN or inf */
    uint32_t dec_inf_lim;  /* magnitude << mant_shift of inf (IEEE), else 0xFFFFFFFF */
    /* ---- encode (mf_enc1) ---- */
    uint32_t min_normal_bits;   /* float32 bits of the smallest normal */
    int drop;                   /* 23 - M */
    uint32_t round_bias;        /* (1 << (drop - 1)) - 1 */
    uint32_t exp_adj;           /* (127 - bias) << M */
    uint32_t sub_cbits;         /* float32 bits of C, ulp(C) = smallest subnormal */
    uint32_t ovf_code[2];       /* overflow and +-inf, by sign (mf_overflow_code) */
    uint32_t nan_code[2];       /* NaN, by sign (mf_nan_code) */
    /* the kernels build these as: a big lane (overflow, inf or NaN) gets
     * big_code, then the sign bit if negative (big_code | sbit ==
     * ovf_code[1]); a NaN lane then becomes (code & nan_and) ^ nan_xor */
    uint32_t big_code;
    uint32_t nan_and, nan_xor;
    int nan_fix;                /* nan_code != ovf_code: the NaN step is needed */
    int fnuz;                   /* a result of 0 drops its sign */
    int sign_bit7;              /* 8 bits with the sign on top: code | 0x80 is -code
                                 * (but for the fnuz NaN 0x80) */
} mf_simd_params;

static inline mf_simd_params
mf_simd_params_of(const mf_format *f)
{
    mf_simd_params p;
    memset(&p, 0, sizeof(p));
    p.id = f->id;
    if (f->kind != MF_KIND_FLOAT) {
        p.path = p.small_path = (f->kind == MF_KIND_SINT) ? MF_SIMD_SINT : MF_SIMD_UINT;
        p.code_mask = mf_code_mask(f);
        p.dec_shl = 32 - f->bits;
        return p;
    }
    if (f->id == MF_BFLOAT16) {
        p.path = p.small_path = MF_SIMD_BF16;
        return p;
    }
    if (f->itemsize != 1) {
        p.path = p.small_path = MF_SIMD_SERIAL;
        return p;
    }
    p.path = (f->special == MF_SPECIAL_E8M0) ? MF_SIMD_E8M0 : MF_SIMD_SMALL;
    const int M = f->mant_bits;
    p.code_mask = mf_code_mask(f);
    p.sbit = mf_sign_bit(f);
    p.mag_mask = p.code_mask & ~p.sbit;
    p.mant_shift = 23 - M;
    p.dec_adj = (uint32_t)(127 - f->bias) << 23;
    p.dec_adj_sub = (uint32_t)(mf_emin(f) + 127) << 23;
    p.maxfin = mf_max_finite_mag(f);
    p.inf_mag = mf_has_inf(f) ? (mf_inf_code(f, 0) & p.mag_mask) : 0xFFFFFFFFu;
    p.dec_shl = 32 - f->bits;
    p.dec_sra = 32 - f->bits - p.mant_shift;
    p.dec_keep = 0x80000000u | (p.mag_mask << p.mant_shift);
    p.dec_spec_lim = p.maxfin << p.mant_shift;
    p.dec_inf_lim = mf_has_inf(f) ? (p.inf_mag << p.mant_shift) : 0xFFFFFFFFu;
    const int emin = mf_emin(f);
    p.min_normal_bits = (uint32_t)(emin + 127) << 23;
    p.drop = 23 - M;
    p.round_bias = (1u << (p.drop - 1)) - 1u;
    p.exp_adj = (uint32_t)(127 - f->bias) << M;
    p.sub_cbits = (uint32_t)(emin - M + 23 + 127) << 23;
    for (int s = 0; s < 2; s++) {
        p.ovf_code[s] = mf_overflow_code(f, s, 0);
        p.nan_code[s] = mf_nan_code(f, s);
    }
    p.fnuz = f->special == MF_SPECIAL_FNUZ;
    p.big_code = p.ovf_code[0];
    if (f->special == MF_SPECIAL_NONE) {
        /* no NaN: the zero of the other sign */
        p.nan_and = p.sbit;
        p.nan_xor = p.sbit;
    }
    else {
        /* IEEE: the quiet NaN is inf with the top mantissa bit; else equal */
        p.nan_and = 0xFFFFFFFFu;
        p.nan_xor = p.nan_code[0] ^ p.ovf_code[0];
    }
    p.nan_fix = p.nan_code[0] != p.ovf_code[0] || p.nan_code[1] != p.ovf_code[1];
    p.small_path = p.path;
    if (p.path == MF_SIMD_SMALL) {
        switch (f->special) {
            case MF_SPECIAL_IEEE: p.small_path = MF_SIMD_SMALL_IEEE; break;
            case MF_SPECIAL_FN:   p.small_path = MF_SIMD_SMALL_FN; break;
            case MF_SPECIAL_FNUZ: p.small_path = MF_SIMD_SMALL_FNUZ; break;
            default:              p.small_path = MF_SIMD_SMALL_NONE; break;
        }
    }
    p.sign_bit7 = f->bits == 8 && f->has_sign;
    return p;
}

/* outputs this large or larger bypass the caches (non-temporal stores) */
#define MF_STREAM_BYTES ((mf_intp)8 << 20)

/*
 * Large outputs are written with non-temporal stores (they would only evict
 * the caches): [0, n) is split into a head that brings the output to a
 * 64-byte boundary, a body of whole `step`s streamed, and the rest; small
 * outputs (or ones not aligned to their element size) are one segment.  A
 * piece of a large output done by one of several threads (mf_par_stream,
 * parallel.h) streams too when it holds at least one whole step.
 * Each ISA file has its store instructions; the split is shared.
 */
typedef struct {
    mf_intp start[3], len[3];
    int stream[3];
    int count;
} segments;

static inline segments
stream_split(const void *out, mf_intp outsize, mf_intp n, mf_intp step)
{
    segments sg;
    mf_intp head = (mf_intp)(((64 - ((uintptr_t)out & 63)) & 63) / (uintptr_t)outsize);
    if ((n * outsize < MF_STREAM_BYTES && !(mf_par_stream && n >= head + step))
            || ((uintptr_t)out % (uintptr_t)outsize) != 0) {
        sg.start[0] = 0;
        sg.len[0] = n;
        sg.stream[0] = 0;
        sg.count = 1;
        return sg;
    }
    mf_intp body = (n - head) / step * step;
    sg.start[0] = 0;
    sg.len[0] = head;
    sg.stream[0] = 0;
    sg.start[1] = head;
    sg.len[1] = body;
    sg.stream[1] = 1;
    sg.start[2] = head + body;
    sg.len[2] = n - head - body;
    sg.stream[2] = 0;
    sg.count = 3;
    return sg;
}

#endif
