/*
 * One-element fast paths shared by the serial kernels and the tails of the
 * SIMD kernels.  They compute exactly what the codec (codec.h) computes, by
 * the float32 bit manipulations the SIMD kernels vectorise; rare cases go
 * to the codec itself.
 */
#ifndef MF_SCALAR_OPS_H
#define MF_SCALAR_OPS_H

#include <string.h>
#include <fenv.h>
#include "kernels.h"
#include "../core/codec.h"

/* code -> float32 exactly as the kernels decode (bfloat16 NaN payloads
 * kept by the bit shift) */
static inline float
mf_dec_code(const mf_format *f, uint32_t c)
{
    if (f->id == MF_BFLOAT16) {
        return mf_bits_f32(c << 16);
    }
    if (f->itemsize == 1) {
        return mf_lut8[f->id][c & 0xFFu];
    }
    return mf_decode_f32(f, c);
}

static inline float
mf_dec1(const mf_format *f, const void *src, mf_intp i)
{
    if (f->itemsize == 2) {
        uint16_t c;
        memcpy(&c, (const char *)src + 2 * i, 2);
        if (f->id == MF_BFLOAT16) {
            return mf_bits_f32((uint32_t)c << 16);
        }
        return mf_decode_f32(f, c);
    }
    return mf_lut8[f->id][((const uint8_t *)src)[i]];
}

/* Raise the FPU's overflow flag, as a float conversion that overflows does,
 * so NumPy's np.errstate machinery reports it after the loop. */
static inline void
mf_raise_overflow(void)
{
    feraiseexcept(FE_OVERFLOW);
}

/*
 * float32 -> code, round to nearest even, cast rules.  A finite input too
 * large for the format raises the FPU overflow flag.
 * Normal range: round the float32 bits; subnormal range of the target: let
 * the FPU round by adding a power of two whose ulp is the target's smallest
 * subnormal.
 */
static inline uint32_t
mf_enc1_ovf(const mf_format *f, float x, int *ovf)
{
    uint32_t u = mf_f32_bits(x);
    if (f->id == MF_BFLOAT16) {
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
            return ((u >> 16) & 0x8000u) | 0x7FC0u;
        }
        uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        if ((r & 0x7FFFu) == 0x7F80u && (u & 0x7FFFFFFFu) != 0x7F800000u) {
            *ovf = 1;
        }
        return r;
    }
    if (f->kind != MF_KIND_FLOAT) {
        return mf_encode_f32(f, x);
    }
    uint32_t sign = u >> 31;
    uint32_t au = u & 0x7FFFFFFFu;
    if (au > 0x7F800000u) {
        /* NaN, from its bits: a signaling NaN raises nothing (converting it
         * to double would raise "invalid"), as in NumPy's float16 casts */
        return mf_nan_code(f, (int)sign);
    }
    if (au >= 0x7F800000u || f->special == MF_SPECIAL_E8M0) {
        return mf_encode_f64_ovf(f, (double)x, ovf);   /* inf, e8m0: the codec */
    }
    const int M = f->mant_bits;
    const int emin = mf_emin(f);
    const uint32_t min_normal_bits = (uint32_t)(emin + 127) << 23;
    uint32_t code;
    if (au >= min_normal_bits) {
        int drop = 23 - M;
        uint32_t r = au + ((1u << (drop - 1)) - 1u) + ((au >> drop) & 1u);
        code = (r >> drop) - ((uint32_t)(127 - f->bias) << M);
    }
    else {
        /* C = 2^(emin - M + 23): ulp(C) is the target's subnormal step */
        const uint32_t cbits = (uint32_t)(emin - M + 23 + 127) << 23;
        float c = mf_bits_f32(cbits);
        float t = mf_bits_f32(au) + c;
        code = mf_f32_bits(t) - cbits;
    }
    if (code > mf_max_finite_mag(f)) {
        *ovf = 1;
        return mf_overflow_code(f, (int)sign, 0);
    }
    if (code == 0 && f->special == MF_SPECIAL_FNUZ) {
        return 0u;
    }
    return code | (sign ? mf_sign_bit(f) : 0u);
}

/* one element, raising the overflow flag itself (callers with many
 * elements use mf_enc1_ovf and raise once) */
static inline uint32_t
mf_enc1(const mf_format *f, float x)
{
    int ovf = 0;
    uint32_t c = mf_enc1_ovf(f, x, &ovf);
    if (ovf) {
        mf_raise_overflow();
    }
    return c;
}

static inline void
mf_enc1_store(const mf_format *f, void *dst, mf_intp i, float x, int *ovf)
{
    uint32_t c = mf_enc1_ovf(f, x, ovf);
    if (f->itemsize == 2) {
        uint16_t v = (uint16_t)c;
        memcpy((char *)dst + 2 * i, &v, 2);
    }
    else {
        ((uint8_t *)dst)[i] = (uint8_t)c;
    }
}

#endif
