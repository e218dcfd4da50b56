/*
 * avx512 GEMM with float32 accumulation: emulates VDPBF16PS (the canonical
 * semantics of serial.c) with AVX-512 FMA under MXCSR FTZ|DAZ.  A and B
 * are packed as float32 with each k pair swapped (2q + 1 first, then 2q, an
 * odd k padded with zeros), so a plain FMA chain over the packed slots is
 * the canonical order.  12 x 32 register tile, 24 zmm accumulators.
 */
#include <immintrin.h>
#include "../kernels.h"
#include "loops.h"

#define F_MR 12
#define F_NR 32

static void
kernel_12x32(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc)
{
    const float *a = (const float *)ap;
    const float *b = (const float *)bp;
#define LOADC(i) __m512 c##i##0 = _mm512_loadu_ps(c + (i) * ldc), \
                        c##i##1 = _mm512_loadu_ps(c + (i) * ldc + 16);
    LOADC(0) LOADC(1) LOADC(2) LOADC(3) LOADC(4) LOADC(5)
    LOADC(6) LOADC(7) LOADC(8) LOADC(9) LOADC(10) LOADC(11)
#undef LOADC
    for (mf_intp s = 0; s < 2 * kq; s++) {
        __m512 b0 = _mm512_load_ps(b);
        __m512 b1 = _mm512_load_ps(b + 16);
#define ROW(i) { __m512 ai = _mm512_set1_ps(a[i]); \
                 c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0); \
                 c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1); }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
        ROW(6) ROW(7) ROW(8) ROW(9) ROW(10) ROW(11)
#undef ROW
        a += F_MR;
        b += F_NR;
    }
#define STOREC(i) _mm512_storeu_ps(c + (i) * ldc, c##i##0); \
                  _mm512_storeu_ps(c + (i) * ldc + 16, c##i##1);
    STOREC(0) STOREC(1) STOREC(2) STOREC(3) STOREC(4) STOREC(5)
    STOREC(6) STOREC(7) STOREC(8) STOREC(9) STOREC(10) STOREC(11)
#undef STOREC
}

static const mf_gemm_ops f32_ops = {
    .MR = F_MR,
    .NR = F_NR,
    .KC = 128,
    .MC = 192,
    .NC = 2048,
    .pair_bytes = 8,
    .pack_a = mf_gemm_pack_a_f32,
    .pack_b = mf_gemm_pack_b_f32,
    .kernel = kernel_12x32,
    .small = mf_gemm_small,
    .ftz_daz = 1,
};

void
mf_avx512_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                      const void *A, mf_intp lda, const void *B, mf_intp ldb,
                      float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_run(&f32_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}
