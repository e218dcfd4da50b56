/*
 * The portable loops of the SIMD GEMM levels, included by each level's file
 * (gemm/<level>.c) so that the compiler vectorises them with that level's
 * ISA flags: the generic packers (a level may use them for its ops table or
 * for the edges its own packers leave) and the small-product loop
 * (ops->small).  Everything else of the GEMM is driver.c's, compiled once.
 */
#ifndef MF_GEMM_LOOPS_H
#define MF_GEMM_LOOPS_H

#include <math.h>
#include <string.h>
#include "../kernels.h"
#include "common.h"
#include "driver.h"

/*
 * Small products: no packing, no threads, no MXCSR switch.  When every
 * operand value is zero, inf/NaN or of magnitude in [2^-63, 2^64) (always,
 * for the 8/6/4-bit formats but e8m0), every product is an exact normal
 * float32 and the canonical step is c + a*b followed by a flush to zero,
 * which the compiler vectorises.  Other operands go to the serial oracle.
 */
#define MF_GEMM_SMALL_NB 64
#define MF_GEMM_SMALL_RB 8

static inline float
mf_gemm_dec(const mf_format *f, const char *base, mf_intp i)
{
    if (f->itemsize == 2) {
        uint16_t v;
        memcpy(&v, base + 2 * i, 2);
        uint32_t u = (uint32_t)v << 16;
        float x;
        memcpy(&x, &u, 4);
        return x;
    }
    return mf_lut8[f->id][((const uint8_t *)base)[i]];
}

static inline float
mf_gemm_flush(float x)
{
    /* a zero exponent field (zero or subnormal) keeps only the sign */
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= (u & 0x7F800000u) ? 0xFFFFFFFFu : 0x80000000u;
    memcpy(&x, &u, 4);
    return x;
}

/* are all values of an (r x c) block (row stride ld) "safe" (see above)? */
static inline int
mf_gemm_all_safe(const mf_format *f, const void *src, mf_intp ld, mf_intp r, mf_intp c)
{
    if (f->itemsize == 1 && f->id != MF_FLOAT8_E8M0FNU) {
        return 1;
    }
    unsigned bad = 0;
    for (mf_intp i = 0; i < r; i++) {
        const char *row = (const char *)src + i * ld * f->itemsize;
        if (f->itemsize == 2) {
            const uint16_t *h = (const uint16_t *)row;
            for (mf_intp j = 0; j < c; j++) {
                /* exponent field 64..190 is [2^-63, 2^64); 0 with a zero
                 * mantissa is zero; 255 is inf/NaN */
                unsigned e = (h[j] >> 7) & 0xFFu;
                bad |= (e - 64u > 126u) & (e != 255u) & ((h[j] & 0x7FFFu) != 0);
            }
        }
        else {
            for (mf_intp j = 0; j < c; j++) {
                float x = fabsf(mf_gemm_dec(f, row, j));
                bad |= !(x == 0.0f || !(x <= 0x1p127f) || (x >= 0x1p-63f && x < 0x1p64f));
            }
        }
    }
    return !bad;
}

static inline void
mf_gemm_small(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
              const void *A, mf_intp lda, const void *B, mf_intp ldb,
              float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    if (!mf_gemm_all_safe(f, A, lda, m, k) || !mf_gemm_all_safe(f, B, ldb, k, n)) {
        mf_serial_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    const mf_intp sz = f->itemsize;
    float acc[MF_GEMM_SMALL_RB][MF_GEMM_SMALL_NB];
    float brow[MF_GEMM_SMALL_NB];
    for (mf_intp j0 = 0; j0 < n; j0 += MF_GEMM_SMALL_NB) {
        mf_intp nb = mf_gemm_min(MF_GEMM_SMALL_NB, n - j0);
        for (mf_intp i0 = 0; i0 < m; i0 += MF_GEMM_SMALL_RB) {
            mf_intp rb = mf_gemm_min(MF_GEMM_SMALL_RB, m - i0);
            for (mf_intp r = 0; r < rb; r++) {
                for (mf_intp j = 0; j < nb; j++) {
                    acc[r][j] = ep ? 0.0f : mf_gemm_flush(C[(i0 + r) * ldc + j0 + j]);
                }
            }
            for (mf_intp q = 0; q < (k + 1) / 2; q++) {
                for (int h = 1; h >= 0; h--) {
                    mf_intp p = 2 * q + h;
                    if (p >= k) {
                        for (mf_intp r = 0; r < rb; r++) {
                            for (mf_intp j = 0; j < nb; j++) {
                                acc[r][j] = acc[r][j] + 0.0f;     /* the +0 pad */
                            }
                        }
                        continue;
                    }
                    const char *bp = (const char *)B + (p * ldb + j0) * sz;
                    for (mf_intp j = 0; j < nb; j++) {
                        brow[j] = mf_gemm_dec(f, bp, j);
                    }
                    for (mf_intp r = 0; r < rb; r++) {
                        float a = mf_gemm_dec(f, (const char *)A + (i0 + r) * lda * sz, p);
                        for (mf_intp j = 0; j < nb; j++) {
                            acc[r][j] = mf_gemm_flush(acc[r][j] + a * brow[j]);
                        }
                    }
                }
            }
            if (ep != NULL) {
                mf_gemm_finish(ep, i0, j0, rb, nb, &acc[0][0], MF_GEMM_SMALL_NB);
            }
            else {
                for (mf_intp r = 0; r < rb; r++) {
                    memcpy(C + (i0 + r) * ldc + j0, acc[r], sizeof(float) * nb);
                }
            }
        }
    }
}

/* ---- generic packers (scalar), parametrised by the context ---- */

/* code -> bfloat16 bits / float32 value; every float format decodes exactly */
static inline uint32_t
mf_gemm_bf16(const mf_gemm_ctx *c, const char *p)
{
    if (c->f->itemsize == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    return c->bf16[*(const uint8_t *)p];
}

static inline float
mf_gemm_f32(const mf_gemm_ctx *c, const char *p)
{
    uint32_t u = mf_gemm_bf16(c, p) << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* bfloat16 pairs: one uint32 per (row or column, q): low half k = 2q, high
 * half k = 2q + 1 (0 beyond k) -- VDPBF16PS adds the high product first */
static inline void
mf_gemm_pack_a_pairs(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                     mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const int MR = c->MR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    uint32_t *d = (uint32_t *)dst;
    for (mf_intp ir = 0; ir < cnt; ir += MR, d += kq * MR) {
        for (int i = 0; i < MR; i++) {
            if (ir + i >= cnt) {
                for (mf_intp q = 0; q < kq; q++) {
                    d[q * MR + i] = 0;
                }
                continue;
            }
            const char *row = (const char *)src + ((r0 + ir + i) * ld + p0) * sz;
            mf_intp qfull = kc / 2;    /* pairs with both members below k */
            if (sz == 2) {
                for (mf_intp q = 0; q < qfull; q++) {
                    uint32_t v;
                    memcpy(&v, row + 4 * q, 4);
                    d[q * MR + i] = v;
                }
            }
            else {
                for (mf_intp q = 0; q < qfull; q++) {
                    d[q * MR + i] = mf_gemm_bf16(c, row + 2 * q)
                                    | (mf_gemm_bf16(c, row + 2 * q + 1) << 16);
                }
            }
            for (mf_intp q = qfull; q < kq; q++) {
                uint32_t lo = mf_gemm_bf16(c, row + 2 * q * sz);
                uint32_t hi = (p0 + 2 * q + 1 < k) ? mf_gemm_bf16(c, row + (2 * q + 1) * sz) : 0;
                d[q * MR + i] = lo | (hi << 16);
            }
        }
    }
}

static inline void
mf_gemm_pack_b_pairs(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                     mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const int NR = c->NR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    uint32_t *d = (uint32_t *)dst;
    for (mf_intp jr = 0; jr < cnt; jr += NR) {
        mf_intp nr = mf_gemm_min(NR, cnt - jr);
        for (mf_intp q = 0; q < kq; q++, d += NR) {
            mf_intp plo = p0 + 2 * q, phi = plo + 1;
            const char *rlo = (const char *)src + (plo * ld + r0 + jr) * sz;
            const char *rhi = (const char *)src + (phi * ld + r0 + jr) * sz;
            mf_intp j = 0;
            for (; j < nr; j++) {
                uint32_t hi = phi < k ? mf_gemm_bf16(c, rhi + j * sz) : 0;
                d[j] = mf_gemm_bf16(c, rlo + j * sz) | (hi << 16);
            }
            for (; j < NR; j++) {
                d[j] = 0;
            }
        }
    }
}

/* float32 pairs for the FMA levels: two floats per (row or column, q), slot
 * 0 holds k = 2q + 1 (0 beyond k), slot 1 holds k = 2q: a plain k-ordered
 * FMA chain over the slots is the VDPBF16PS order */
static inline void
mf_gemm_pack_a_f32(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                   mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const int MR = c->MR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    const mf_intp qfull = kc / 2;      /* pairs with both members below k */
    const uint16_t *tab = c->bf16;
    uint32_t *d = (uint32_t *)dst;     /* float32 bits: a bfloat16 code shifted */
    for (mf_intp ir = 0; ir < cnt; ir += MR, d += 2 * kq * MR) {
        for (int i = 0; i < MR; i++) {
            if (ir + i >= cnt) {
                for (mf_intp q = 0; q < 2 * kq; q++) {
                    d[q * MR + i] = 0;
                }
                continue;
            }
            const char *row = (const char *)src + ((r0 + ir + i) * ld + p0) * sz;
            /* the format's branch out of the loop: this loop is most of
             * the work of a product with few columns */
            if (sz == 2) {
                const uint16_t *h = (const uint16_t *)row;
                for (mf_intp q = 0; q < qfull; q++) {
                    d[(2 * q) * MR + i] = (uint32_t)h[2 * q + 1] << 16;
                    d[(2 * q + 1) * MR + i] = (uint32_t)h[2 * q] << 16;
                }
            }
            else {
                const uint8_t *b = (const uint8_t *)row;
                for (mf_intp q = 0; q < qfull; q++) {
                    d[(2 * q) * MR + i] = (uint32_t)tab[b[2 * q + 1]] << 16;
                    d[(2 * q + 1) * MR + i] = (uint32_t)tab[b[2 * q]] << 16;
                }
            }
            for (mf_intp q = qfull; q < kq; q++) {      /* an odd kc's last pair */
                uint32_t hi = (p0 + 2 * q + 1 < k) ? mf_gemm_bf16(c, row + (2 * q + 1) * sz) : 0;
                d[(2 * q) * MR + i] = hi << 16;
                d[(2 * q + 1) * MR + i] = mf_gemm_bf16(c, row + 2 * q * sz) << 16;
            }
        }
    }
}

static inline void
mf_gemm_pack_b_f32(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                   mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const int NR = c->NR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    float *d = (float *)dst;
    for (mf_intp jr = 0; jr < cnt; jr += NR) {
        mf_intp nr = mf_gemm_min(NR, cnt - jr);
        for (mf_intp q = 0; q < kq; q++) {
            for (int s = 0; s < 2; s++, d += NR) {
                mf_intp p = p0 + 2 * q + 1 - s;
                mf_intp j = 0;
                if (p < k && sz == 2) {
                    /* bfloat16: a shift, vectorised by the compiler */
                    const uint16_t *row = (const uint16_t *)src + p * ld + r0 + jr;
                    uint32_t *du = (uint32_t *)d;
                    for (; j < nr; j++) {
                        du[j] = (uint32_t)row[j] << 16;
                    }
                }
                else if (p < k) {
                    const char *row = (const char *)src + (p * ld + r0 + jr) * sz;
                    for (; j < nr; j++) {
                        d[j] = mf_gemm_f32(c, row + j * sz);
                    }
                }
                for (; j < NR; j++) {
                    d[j] = 0.0f;
                }
            }
        }
    }
}

#endif
