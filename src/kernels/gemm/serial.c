/*
 * Serial GEMM with float32 accumulation: the oracle of every gemm kernel.
 *
 * Canonical semantics ("the VDPBF16PS chain")
 * -------------------------------------------
 * gemm_f32acc computes C += A * B for codes of a float format.  Every value
 * of every format here is a bfloat16 value (8/6/4-bit formats decode exactly
 * into bfloat16), and every output element is one chain of float32 steps,
 * exactly what the AVX512_BF16 instruction VDPBF16PS computes when the k
 * values are packed in pairs (2q, 2q+1), the even index in the low half:
 *
 *   c = C[i,j]
 *   for q = 0, 1, ..., ceil(k/2) - 1:
 *       c = step(c, A[i,2q+1], B[2q+1,j])   (a +0 * +0 term when 2q+1 == k)
 *       c = step(c, A[i,2q],   B[2q,j])
 *   C[i,j] = c
 *
 * i.e. within each pair the odd index is added first, and an odd k is padded
 * with one zero term.  With k == 0, C is left unchanged.
 *
 *   step(c, a, b) = FTZ(RNE(DAZ(c) + DAZ(a) * DAZ(b)))
 *
 *   DAZ(x): a subnormal input (float32 c, or a bfloat16 a or b) counts as a
 *           zero of the same sign.  (Only bfloat16 itself and the smallest
 *           float8_e8m0fnu value, 2^-127, have bfloat16 subnormals.)
 *   a * b:  exact, with unbounded exponent (no underflow or overflow of the
 *           product itself: it is a fused multiply-add).
 *   RNE:    one rounding of the exact sum to float32's 24-bit significand,
 *           round to nearest even, with unbounded exponent; a magnitude of
 *           2^128 or more after rounding is +-inf.
 *   FTZ:    a nonzero result whose magnitude after that rounding is below
 *           2^-126 (tininess after rounding) becomes a zero with the sign of
 *           the exact result.  Results are never subnormal.
 *   Zeros:  IEEE signs (x + -x = +0, -0 + -0 = -0); the zero pad term is +0.
 *   Inf/NaN: IEEE (inf * 0 and inf - inf are NaN, a NaN operand gives NaN).
 *           Which NaN (sign, payload) comes out is not specified: the
 *           matmul loop stores every NaN result as the format's canonical
 *           NaN.
 *
 * Deviations from an IEEE float32 fused-multiply-add chain in k order: the
 * order inside each pair (1, 0, 3, 2, ...), DAZ on the inputs and FTZ on
 * every intermediate result.  Measured on AMD Zen 4: VDPBF16PS does exactly
 * this (checked bit for bit, NaNs aside, on millions of random and
 * adversarial operands), and AVX2/AVX-512 FMA under MXCSR.FTZ|DAZ does the
 * same step with tininess after rounding, so the avx2 and avx512 levels
 * emulate VDPBF16PS with two FMAs per pair.  torch's CPU bfloat16 matmul
 * (oneDNN with VDPBF16PS) computes the same chain for all but small shapes.
 *
 * This file computes the chain with portable C: the product of two bfloat16
 * values that are zero or of magnitude in [2^-63, 2^64) is an exact normal
 * float32, so step() is then c + a*b followed by a flush; other products go
 * through exact double arithmetic (step_exact).
 */
#include <math.h>
#include <float.h>
#include <string.h>
#include "../kernels.h"
#include "../scalar_ops.h"
#include "common.h"

static inline float
mf_flush(float x)
{
    return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

/* a value whose products with other such values are exact normal floats */
static inline int
mf_gemm_safe(float x)
{
    float ax = fabsf(x);
    return ax == 0.0f || isnan(ax) || ax == INFINITY || (ax >= 0x1p-63f && ax < 0x1p64f);
}

/*
 * step() for any c, a, b (already DAZ'd, c not subnormal): the exact sum in
 * double by TwoSum, rounded to odd at 53 bits, then to nearest even at 24
 * bits with unbounded exponent (53 >= 2*24 + 2, so the double rounding is
 * exact), then flushed.
 */
static float
step_exact(float c, float a, float b)
{
    double p = (double)a * (double)b;          /* exact: 16-bit significands */
    double dc = (double)c;
    if (!isfinite(dc) || !isfinite(p)) {
        return (float)(dc + p);                /* inf, NaN; p never overflows */
    }
    double s = dc + p;
    if (s == 0.0) {
        return (float)s;                       /* exact; IEEE zero sign */
    }
    double bb = s - dc;
    double err = (dc - (s - bb)) + (p - bb);   /* s + err == dc + p exactly */
    uint64_t u = mf_f64_bits(s);
    if (err != 0.0 && (u & 1u) == 0) {
        /* round to odd: step the magnitude toward the exact value */
        u = ((err > 0.0) == (s > 0.0)) ? u + 1 : u - 1;
    }
    u = u + 0x0FFFFFFFull + ((u >> 29) & 1u);
    u &= ~0x1FFFFFFFull;
    double r = mf_bits_f64(u);
    if (fabs(r) < 0x1p-126) {
        return s < 0.0 ? -0.0f : 0.0f;
    }
    if (fabs(r) >= 0x1p128) {
        return s < 0.0 ? -INFINITY : INFINITY;
    }
    return (float)r;
}

static inline float
step_any(float c, float a, float b)
{
    float p = a * b;
    /* exact product: zero from a zero factor, or a normal float, or inf/NaN
     * from an inf/NaN factor */
    if ((fabsf(p) >= FLT_MIN && fabsf(p) < INFINITY)
            || (p == 0.0f && (a == 0.0f || b == 0.0f))
            || isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
        return mf_flush(c + p);
    }
    return step_exact(c, a, b);
}

/* narrow C (few columns, e.g. stacks of tiny matrices): B decoded once;
 * when every operand is "safe" (mf_gemm_safe) each step is c + a*b and a
 * flush, with the n chains of a row interleaved */
enum { SER_NARROW = 16, SER_NARROW_RB = 16, SER_NARROW_BMAX = 256 };

static volatile float mf_opaque_zero = 0.0f;

/* code i of a row -> float32 with DAZ; *bad |= "not mf_gemm_safe" */
static inline float
dec_daz(const mf_format *f, const char *base, mf_intp i, unsigned *bad)
{
    if (f->id == MF_BFLOAT16) {
        uint16_t h;
        memcpy(&h, base + 2 * i, 2);
        unsigned e = (h >> 7) & 0xFFu;
        uint32_t u = (uint32_t)h << 16;
        u &= e ? 0xFFFFFFFFu : 0x80000000u;
        /* safe: zero (after DAZ), inf/NaN, or an exponent field 64..190 */
        *bad |= (e - 64u > 126u) & (e != 255u) & (e != 0u);
        float x;
        memcpy(&x, &u, 4);
        return x;
    }
    float x = mf_flush(mf_dec1(f, base, i));
    if (f->id == MF_FLOAT8_E8M0FNU || f->itemsize != 1) {
        *bad |= !mf_gemm_safe(x);     /* other 8/6/4-bit values are always safe */
    }
    return x;
}

static void
gemm_narrow(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
            const void *A, mf_intp lda, const void *B, mf_intp ldb,
            float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    const mf_intp sz = f->itemsize;
    float out[SER_NARROW_RB * SER_NARROW];
    float bdec[SER_NARROW_BMAX];
    float arow[2 * SER_NARROW_BMAX];
    const mf_intp kq = (k + 1) / 2;
    int fast = 2 * kq * n <= SER_NARROW_BMAX;
    /* a zero the compiler cannot see: a row of zeros stays a short loop
     * instead of becoming a memset (rep stos, slow to start on small rows) */
    const float zero = mf_opaque_zero;
    if (fast) {
        /* B rows in the canonical order, the odd k padded: row 2q holds
         * k = 2q + 1, row 2q + 1 holds k = 2q */
        unsigned bad = 0;
        for (mf_intp q = 0; q < kq; q++) {
            for (int h = 0; h < 2; h++) {
                mf_intp p = 2 * q + 1 - h;
                const char *brow = (const char *)B + p * ldb * sz;
                for (mf_intp j = 0; j < n; j++) {
                    bdec[(2 * q + h) * n + j] = p < k ? dec_daz(f, brow, j, &bad) : 0.0f;
                }
            }
        }
        fast = !bad;
    }
    for (mf_intp i0 = 0; i0 < m; i0 += SER_NARROW_RB) {
        mf_intp rb = m - i0 < SER_NARROW_RB ? m - i0 : SER_NARROW_RB;
        for (mf_intp r = 0; r < rb; r++) {
            const char *ar = (const char *)A + (i0 + r) * lda * sz;
            float *c = out + r * n;
            for (mf_intp j = 0; j < n; j++) {
                c[j] = ep ? zero : mf_flush(C[(i0 + r) * ldc + j]);
            }
            int rfast = fast;
            if (rfast) {
                unsigned bad = 0;
                for (mf_intp q = 0; q < kq; q++) {
                    arow[2 * q] = 2 * q + 1 < k ? dec_daz(f, ar, 2 * q + 1, &bad) : 0.0f;
                    arow[2 * q + 1] = dec_daz(f, ar, 2 * q, &bad);
                }
                rfast = !bad;
            }
            if (rfast) {
                for (mf_intp s = 0; s < 2 * kq; s++) {
                    const float a = arow[s];
                    const float *b = bdec + s * n;
                    for (mf_intp j = 0; j < n; j++) {
                        c[j] = mf_flush(c[j] + a * b[j]);
                    }
                }
                continue;
            }
            for (mf_intp j = 0; j < n; j++) {
                float cj = c[j];
                for (mf_intp q = 0; q < kq; q++) {
                    mf_intp p = 2 * q + 1;
                    if (p < k) {
                        cj = step_any(cj, mf_flush(mf_dec1(f, ar, p)),
                                      mf_flush(mf_dec1(f, (const char *)B + p * ldb * sz, j)));
                    }
                    else {
                        cj = cj + 0.0f;
                    }
                    cj = step_any(cj, mf_flush(mf_dec1(f, ar, p - 1)),
                                  mf_flush(mf_dec1(f, (const char *)B + (p - 1) * ldb * sz, j)));
                }
                c[j] = cj;
            }
        }
        if (ep != NULL) {
            mf_gemm_finish(ep, i0, 0, rb, n, out, n);
        }
        else {
            for (mf_intp r = 0; r < rb; r++) {
                memcpy(C + (i0 + r) * ldc, out + r * n, sizeof(float) * n);
            }
        }
    }
}

enum { SER_NB = 64, SER_RB = 4 };

/* decode n codes (unit stride) with DAZ; returns 1 if all are mf_gemm_safe */
static int
decode_daz(const mf_format *f, const void *src, float *dst, mf_intp n)
{
    int safe = 1;
    mf_serial_decode_f32(f, src, dst, n);
    for (mf_intp j = 0; j < n; j++) {
        dst[j] = mf_flush(dst[j]);
        safe &= mf_gemm_safe(dst[j]);
    }
    return safe;
}

void
mf_serial_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                      const void *A, mf_intp lda, const void *B, mf_intp ldb,
                      float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    const mf_intp sz = f->itemsize;
    float acc[SER_RB][SER_NB];
    float brow[SER_NB];
    if (m <= 0 || n <= 0 || (k <= 0 && ep == NULL)) {
        return;
    }
    if (k < 0) {
        k = 0;
    }
    if (n <= SER_NARROW) {
        gemm_narrow(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    for (mf_intp j0 = 0; j0 < n; j0 += SER_NB) {
        mf_intp nb = n - j0 < SER_NB ? n - j0 : SER_NB;
        for (mf_intp i0 = 0; i0 < m; i0 += SER_RB) {
            mf_intp rb = m - i0 < SER_RB ? m - i0 : SER_RB;
            for (mf_intp r = 0; r < rb; r++) {
                for (mf_intp j = 0; j < nb; j++) {
                    acc[r][j] = ep ? 0.0f : mf_flush(C[(i0 + r) * ldc + j0 + j]);
                }
            }
            for (mf_intp q = 0; q < (k + 1) / 2; q++) {
                for (int h = 1; h >= 0; h--) {
                    mf_intp p = 2 * q + h;
                    if (p >= k) {
                        /* the zero pad: c + (+0), turns -0 into +0 */
                        for (mf_intp r = 0; r < rb; r++) {
                            for (mf_intp j = 0; j < nb; j++) {
                                acc[r][j] = acc[r][j] + 0.0f;
                            }
                        }
                        continue;
                    }
                    int bsafe = decode_daz(f, (const char *)B + (p * ldb + j0) * sz, brow, nb);
                    for (mf_intp r = 0; r < rb; r++) {
                        float a = mf_flush(mf_dec1(f, (const char *)A + (i0 + r) * lda * sz, p));
                        float *c = acc[r];
                        if (bsafe && mf_gemm_safe(a)) {
                            for (mf_intp j = 0; j < nb; j++) {
                                c[j] = mf_flush(c[j] + a * brow[j]);
                            }
                        }
                        else {
                            for (mf_intp j = 0; j < nb; j++) {
                                c[j] = step_any(c[j], a, brow[j]);
                            }
                        }
                    }
                }
            }
            if (ep != NULL) {
                mf_gemm_finish(ep, i0, j0, rb, nb, &acc[0][0], SER_NB);
                continue;
            }
            for (mf_intp r = 0; r < rb; r++) {
                for (mf_intp j = 0; j < nb; j++) {
                    C[(i0 + r) * ldc + j0 + j] = acc[r][j];
                }
            }
        }
    }
}
