/*
 * neon GEMM with float32 accumulation: the canonical chain of serial.c
 * (VDPBF16PS order, DAZ/FTZ) with FMLA by element under FPCR.FZ, on float32
 * operands packed with each k pair swapped (odd index first, see
 * mf_gemm_pack_a_f32); the driver checks FPSR.UFC after each block and
 * recomputes blocks where FZ flushed before rounding (driver.c).
 * 8 x 12 register tile: 24 accumulators, 2 A and 3 B vectors of the 32.
 */
#include <arm_neon.h>
#include "../kernels.h"
#include "loops.h"

#define F_MR 8
#define F_NR 12

static void
kernel_8x12(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc,
            const void *pf, mf_intp npf)
{
    mf_gemm_pf pfs = mf_gemm_pf_start(pf, npf, 2 * kq);
    const float *a = (const float *)ap;
    const float *b = (const float *)bp;
#define LOADC(i) float32x4_t c##i##0 = vld1q_f32(c + (i) * ldc), \
                             c##i##1 = vld1q_f32(c + (i) * ldc + 4), \
                             c##i##2 = vld1q_f32(c + (i) * ldc + 8);
    LOADC(0) LOADC(1) LOADC(2) LOADC(3) LOADC(4) LOADC(5) LOADC(6) LOADC(7)
#undef LOADC
    for (mf_intp s = 0; s < 2 * kq; s++) {
        mf_gemm_pf_step(&pfs);
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
        float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
#define ROW(i, AV, L) c##i##0 = vfmaq_laneq_f32(c##i##0, b0, AV, L); \
                      c##i##1 = vfmaq_laneq_f32(c##i##1, b1, AV, L); \
                      c##i##2 = vfmaq_laneq_f32(c##i##2, b2, AV, L);
        ROW(0, a0, 0) ROW(1, a0, 1) ROW(2, a0, 2) ROW(3, a0, 3)
        ROW(4, a1, 0) ROW(5, a1, 1) ROW(6, a1, 2) ROW(7, a1, 3)
#undef ROW
        a += F_MR;
        b += F_NR;
    }
#define STOREC(i) vst1q_f32(c + (i) * ldc, c##i##0); vst1q_f32(c + (i) * ldc + 4, c##i##1); \
                  vst1q_f32(c + (i) * ldc + 8, c##i##2);
    STOREC(0) STOREC(1) STOREC(2) STOREC(3) STOREC(4) STOREC(5) STOREC(6) STOREC(7)
#undef STOREC
}

static const mf_gemm_ops f32_ops = {
    .MR = F_MR,
    .NR = F_NR,
    .KC = 256,
    .MC = 120,
    .NC = 2040,
    .pair_bytes = 8,
    .pack_a = mf_gemm_pack_a_f32,
    .pack_b = mf_gemm_pack_b_f32,
    .kernel = kernel_8x12,
    .store_bf16 = mf_gemm_store_bf16,
    .small = mf_gemm_small,
    .ftz_daz = 1,
};

void
mf_neon_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                    const void *A, mf_intp lda, const void *B, mf_intp ldb,
                    float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_run(&f32_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}
