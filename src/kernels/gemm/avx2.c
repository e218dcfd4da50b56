/*
 * avx2 GEMM with float32 accumulation: emulates VDPBF16PS (the canonical
 * semantics of serial.c) with FMA under MXCSR FTZ|DAZ, on float32
 * operands packed with each k pair swapped (see avx512.c).  6 x 16
 * register tile, 12 ymm accumulators.
 */
#include <immintrin.h>
#include "../kernels.h"
#include "loops.h"

#define F_MR 6
#define F_NR 16

static void
kernel_6x16(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc)
{
    const float *a = (const float *)ap;
    const float *b = (const float *)bp;
#define LOADC(i) __m256 c##i##0 = _mm256_loadu_ps(c + (i) * ldc), \
                        c##i##1 = _mm256_loadu_ps(c + (i) * ldc + 8);
    LOADC(0) LOADC(1) LOADC(2) LOADC(3) LOADC(4) LOADC(5)
#undef LOADC
    /* unrolled: the loop's counter and pointer updates are a fifth of the
     * instructions of one step otherwise; B is fetched ahead of use */
#pragma GCC unroll 4
    for (mf_intp s = 0; s < 2 * kq; s++) {
        _mm_prefetch((const char *)(b + 8 * F_NR), _MM_HINT_T0);
        __m256 b0 = _mm256_load_ps(b);
        __m256 b1 = _mm256_load_ps(b + 8);
#define ROW(i) { __m256 ai = _mm256_broadcast_ss(a + (i)); \
                 c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0); \
                 c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1); }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
        a += F_MR;
        b += F_NR;
    }
#define STOREC(i) _mm256_storeu_ps(c + (i) * ldc, c##i##0); \
                  _mm256_storeu_ps(c + (i) * ldc + 8, c##i##1);
    STOREC(0) STOREC(1) STOREC(2) STOREC(3) STOREC(4) STOREC(5)
#undef STOREC
}

static const mf_gemm_ops f32_ops = {
    .MR = F_MR,
    .NR = F_NR,
    .KC = 256,
    .MC = 120,
    .NC = 2048,
    .pair_bytes = 8,
    .pack_a = mf_gemm_pack_a_f32,
    .pack_b = mf_gemm_pack_b_f32,
    .kernel = kernel_6x16,
    .small = mf_gemm_small,
    .ftz_daz = 1,
};

void
mf_avx2_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                    const void *A, mf_intp lda, const void *B, mf_intp ldb,
                    float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_run(&f32_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}
