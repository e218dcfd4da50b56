/*
 * Block-scaled quantize / dequantize (see blocks.h and docs/formats.md,
 * "Block-scaled formats").
 *
 * A block's amax is taken on the float32 bit patterns: |x| orders as its
 * bits do, and a block holds an inf or a NaN exactly when its largest
 * magnitude pattern is >= 0x7F800000.  Scales are powers of two (MX) or
 * E4M3 codes (NVFP4); the elements are scaled in float32 and clamped to the
 * element's largest finite value, then rounded to nearest even by the
 * active level's encode_f32 (the cast), which makes this kernel bit-exact
 * across levels whenever the cast is.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include "blocks.h"
#include "../codec.h"

/* elements scaled at a time (a multiple of every block size) */
#define CHUNK 2048

/* floor(log2 |v|) of a positive finite float32 given by its bits */
static inline int
flog2_bits(uint32_t b)
{
    uint32_t field = b >> 23;
    if (field) {
        return (int)field - 127;
    }
    return -149 + (31 - __builtin_clz(b));   /* subnormal: b = m, v = m * 2^-149 */
}

/* ceil(log2 |v|) of a positive finite float32 */
static inline int
clog2_bits(uint32_t b)
{
    int e = flog2_bits(b);
    int pow2 = (b >> 23) ? (b & 0x7FFFFFu) == 0 : (b & (b - 1u)) == 0;
    return e + !pow2;
}

/* the float32 2^e for -149 <= e <= 127, exactly */
static inline float
pow2f(int e)
{
    if (e >= -126) {
        return mf_bits_f32((uint32_t)(e + 127) << 23);
    }
    return mf_bits_f32(1u << (e + 149));
}

/* E8M0 scale code of a finite block with largest magnitude bits `ab` */
static inline uint32_t
mx_scale_code(const mf_block_params *p, uint32_t ab)
{
    if (ab >= 0x7F800000u) {
        return 0xFFu;                      /* inf or NaN in the block: the NaN scale */
    }
    if (ab == 0) {
        return 0u;                         /* log2(0) = -inf, clamped to 2^-127 */
    }
    int e;
    switch (p->mode) {
        case MF_SCALE_CEIL:
            e = clog2_bits(ab) - p->emax;
            break;
        case MF_SCALE_EVEN: {
            /* round amax half-up to the element's mantissa bits first */
            uint32_t r = ab + (1u << (23 - p->elem_mbits - 1));
            e = ((r >> 23) ? (int)(r >> 23) - 127 : flog2_bits(ab)) - p->emax;
            break;
        }
        case MF_SCALE_RCEIL: {
            float d = mf_bits_f32(ab) / p->elem_max;
            uint32_t db = mf_f32_bits(d);
            e = db ? clog2_bits(db) : -127;
            break;
        }
        case MF_SCALE_FLOOR:
        default:
            e = flog2_bits(ab) - p->emax;
            break;
    }
    if (e < -127) {
        e = -127;
    }
    if (e > 127) {
        e = 127;
    }
    return (uint32_t)(e + 127);
}

static inline uint32_t
block_amax_bits(const float *x, int n)
{
    const uint32_t *u = (const uint32_t *)x;
    uint32_t m = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = u[i] & 0x7FFFFFFFu;
        m = a > m ? a : m;
    }
    return m;
}

float
mf_finite_amax(const float *x, mf_intp n)
{
    const uint32_t *u = (const uint32_t *)x;
    uint32_t m = 0;
    for (mf_intp i = 0; i < n; i++) {
        uint32_t a = u[i] & 0x7FFFFFFFu;
        a = a < 0x7F800000u ? a : 0u;
        m = a > m ? a : m;
    }
    return mf_bits_f32(m);
}

/* scale one block of n values (<= block) into buf[0, block), clamped; pad +0 */
static inline void
scale_block(const float *x, int n, int block, float mul, float lim, float *buf)
{
    for (int i = 0; i < n; i++) {
        float v = x[i] * mul;
        v = v > lim ? lim : v;
        v = v < -lim ? -lim : v;
        buf[i] = v;
    }
    for (int i = n; i < block; i++) {
        buf[i] = 0.0f;
    }
}

static void
quantize_row(const mf_block_params *p, const float *x, mf_intp k, uint8_t *codes,
             uint8_t *scales, float *buf, uint8_t *cbuf)
{
    const int B = p->block;
    const mf_intp nblocks = (k + B - 1) / B;
    const mf_format *e4m3 = mf_fmt(MF_FLOAT8_E4M3FN);
    const float s_dec = 1.0f / p->s_enc;
    const float inv6 = 1.0f / 6.0f;
    for (mf_intp b0 = 0; b0 < nblocks; b0 += CHUNK / B) {
        mf_intp nb = nblocks - b0 < CHUNK / B ? nblocks - b0 : CHUNK / B;
        for (mf_intp b = 0; b < nb; b++) {
            mf_intp j0 = (b0 + b) * B;
            int n = (int)(k - j0 < B ? k - j0 : B);
            const float *xb = x + j0;
            float *vb = buf + b * B;
            uint32_t ab = block_amax_bits(xb, n);
            if (p->kind == MF_BLOCK_NV) {
                if (ab >= 0x7F800000u) {
                    scales[b0 + b] = (uint8_t)mf_nan_code(e4m3, 0);
                    memset(vb, 0, sizeof(float) * B);
                    continue;
                }
                /* TransformerEngine: S_dec_b = e4m3(amax * (S_enc / 6)), saturating */
                float sdb = mf_bits_f32(ab) * (p->s_enc * inv6);
                sdb = sdb < FLT_MAX ? sdb : FLT_MAX;
                uint32_t sc = mf_encode_f64_ex(e4m3, (double)sdb, MF_ROUND_NEAREST_EVEN, 1, 0,
                                               NULL);
                scales[b0 + b] = (uint8_t)sc;
                float rcp = 1.0f / (mf_lut8[MF_FLOAT8_E4M3FN][sc] * s_dec);
                rcp = rcp < FLT_MAX ? rcp : FLT_MAX;
                scale_block(xb, n, B, rcp, p->elem_max, vb);
                continue;
            }
            uint32_t sc = mx_scale_code(p, ab);
            scales[b0 + b] = (uint8_t)sc;
            if (sc == 0xFFu) {                       /* NaN scale: codes +0 */
                if (p->kind == MF_BLOCK_MXINT8) {
                    memset(codes + j0, 0, (size_t)B);
                }
                else {
                    memset(vb, 0, sizeof(float) * B);
                }
                continue;
            }
            float mul = pow2f(127 - (int)sc);       /* 1 / 2^(sc - 127), exact */
            if (p->kind == MF_BLOCK_MXINT8) {
                int8_t *cb = (int8_t *)codes + j0;
                for (int i = 0; i < n; i++) {
                    /* |v| <= 128: adding and taking away 1.5 * 2^23 rounds to
                     * nearest even */
                    float v = (xb[i] * mul) * 64.0f;
                    v = (v + 12582912.0f) - 12582912.0f;
                    v = v > 127.0f ? 127.0f : v;
                    v = v < -127.0f ? -127.0f : v;
                    cb[i] = (int8_t)v;
                }
                for (int i = n; i < B; i++) {
                    cb[i] = 0;
                }
                continue;
            }
            scale_block(xb, n, B, mul, p->elem_max, vb);
        }
        if (p->kind == MF_BLOCK_MXINT8) {
            continue;
        }
        mf_intp cnt = nb * B;
        if (p->elem->bits == 4) {
            mf_k->encode_f32(p->elem, buf, cbuf, cnt);
            uint8_t *d = codes + b0 * B / 2;
            for (mf_intp i = 0; i < cnt / 2; i++) {
                d[i] = (uint8_t)((cbuf[2 * i] & 0xFu) | (cbuf[2 * i + 1] << 4));
            }
        }
        else {
            mf_k->encode_f32(p->elem, buf, codes + b0 * B, cnt);
        }
    }
}

void
mf_block_quantize(const mf_block_params *p, const float *x, mf_intp rows, mf_intp k,
                  uint8_t *codes, uint8_t *scales)
{
    const int B = p->block;
    const mf_intp nblocks = (k + B - 1) / B;
    const mf_intp kp = nblocks * B;
    const mf_intp crow = (p->elem && p->elem->bits == 4) ? kp / 2 : kp;
    float buf[CHUNK];
    uint8_t cbuf[CHUNK];
    for (mf_intp r = 0; r < rows; r++) {
        quantize_row(p, x + r * k, k, codes + r * crow, scales + r * nblocks, buf, cbuf);
    }
}

void
mf_block_dequantize(const mf_block_params *p, const uint8_t *codes, const uint8_t *scales,
                    mf_intp rows, mf_intp k, float s_dec, float *out)
{
    const int B = p->block;
    const mf_intp nblocks = (k + B - 1) / B;
    const mf_intp kp = nblocks * B;
    const int fp4 = p->elem && p->elem->bits == 4;
    const mf_intp crow = fp4 ? kp / 2 : kp;
    const float *lut4 = fp4 ? mf_lut8[p->elem->id] : NULL;
    const float *lut_e4m3 = mf_lut8[MF_FLOAT8_E4M3FN];
    for (mf_intp r = 0; r < rows; r++) {
        const uint8_t *c = codes + r * crow;
        const uint8_t *s = scales + r * nblocks;
        float *o = out + r * k;
        if (p->kind == MF_BLOCK_MXINT8) {
            const int8_t *ci = (const int8_t *)c;
            for (mf_intp b = 0; b < nblocks; b++) {
                mf_intp j0 = b * B, j1 = j0 + B < k ? j0 + B : k;
                /* 2^(e - 6) may be below float32's normal range: two exact steps */
                float mul = s[b] == 0xFFu ? NAN : pow2f((int)s[b] - 127);
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = ((float)ci[j] * 0.015625f) * mul;
                }
            }
            continue;
        }
        if (fp4) {
            mf_intp j = 0;
            for (; j + 1 < k; j += 2) {
                uint8_t byte = c[j / 2];
                o[j] = lut4[byte & 0xFu];
                o[j + 1] = lut4[byte >> 4];
            }
            if (j < k) {
                o[j] = lut4[c[j / 2] & 0xFu];
            }
        }
        else {
            mf_k->decode_f32(p->elem, c, o, k);
        }
        for (mf_intp b = 0; b < nblocks; b++) {
            mf_intp j0 = b * B, j1 = j0 + B < k ? j0 + B : k;
            if (p->kind == MF_BLOCK_NV) {
                /* code * scale is exact (2 x 4 significant bits); one rounding
                 * for the tensor scale */
                float sc = lut_e4m3[s[b]];
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = (o[j] * sc) * s_dec;
                }
            }
            else {
                float mul = s[b] == 0xFFu ? NAN : pow2f((int)s[b] - 127);
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = o[j] * mul;
                }
            }
        }
    }
}
