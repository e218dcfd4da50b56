/*
 * neon_bf16 GEMM (FEAT_BF16): the canonical chain of serial.c with
 * BFMLALT then BFMLALB by element, on bfloat16 pairs packed as for
 * VDPBF16PS (one uint32 per row or column and k pair, the even index in the
 * low half, see mf_gemm_pack_a_pairs).  BFMLALT/BFMLALB widen one bfloat16
 * of each pair and do an ordinary float32 fused multiply-add: the odd
 * member first, then the even one is the canonical order.  Under FPCR.FZ
 * with the driver's FPSR.UFC check, as neon.c.
 *
 * BFDOT and BFMMLA are not used: without FEAT_EBF16 they round their sums
 * to odd and do not fuse the products (2^24 + 1 gives 2^24 + 2), so they
 * cannot give the oracle's bits (docs/design.md).
 * 8 x 12 tile: 24 accumulators, 2 A and 3 B vectors of eight bfloat16.
 */
#include <arm_neon.h>
#include "../kernels.h"
#include "loops.h"

#define B_MR 8
#define B_NR 12

static void
kernel_bf16_8x12(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc,
                 const void *pf, mf_intp npf)
{
    mf_gemm_pf pfs = mf_gemm_pf_start(pf, npf, kq);
    const bfloat16_t *a = (const bfloat16_t *)ap;
    const bfloat16_t *b = (const bfloat16_t *)bp;
#define LOADC(i) float32x4_t c##i##0 = vld1q_f32(c + (i) * ldc), \
                             c##i##1 = vld1q_f32(c + (i) * ldc + 4), \
                             c##i##2 = vld1q_f32(c + (i) * ldc + 8);
    LOADC(0) LOADC(1) LOADC(2) LOADC(3) LOADC(4) LOADC(5) LOADC(6) LOADC(7)
#undef LOADC
    for (mf_intp q = 0; q < kq; q++) {
        mf_gemm_pf_step(&pfs);
        /* 4 columns' pairs per B vector, 4 rows' pairs per A vector */
        bfloat16x8_t b0 = vld1q_bf16(b), b1 = vld1q_bf16(b + 8), b2 = vld1q_bf16(b + 16);
        bfloat16x8_t a0 = vld1q_bf16(a), a1 = vld1q_bf16(a + 8);
#define ROW(i, AV, L) c##i##0 = vbfmlaltq_laneq_f32(c##i##0, b0, AV, 2 * (L) + 1); \
                      c##i##1 = vbfmlaltq_laneq_f32(c##i##1, b1, AV, 2 * (L) + 1); \
                      c##i##2 = vbfmlaltq_laneq_f32(c##i##2, b2, AV, 2 * (L) + 1); \
                      c##i##0 = vbfmlalbq_laneq_f32(c##i##0, b0, AV, 2 * (L)); \
                      c##i##1 = vbfmlalbq_laneq_f32(c##i##1, b1, AV, 2 * (L)); \
                      c##i##2 = vbfmlalbq_laneq_f32(c##i##2, b2, AV, 2 * (L));
        ROW(0, a0, 0) ROW(1, a0, 1) ROW(2, a0, 2) ROW(3, a0, 3)
        ROW(4, a1, 0) ROW(5, a1, 1) ROW(6, a1, 2) ROW(7, a1, 3)
#undef ROW
        a += 2 * B_MR;
        b += 2 * B_NR;
    }
#define STOREC(i) vst1q_f32(c + (i) * ldc, c##i##0); vst1q_f32(c + (i) * ldc + 4, c##i##1); \
                  vst1q_f32(c + (i) * ldc + 8, c##i##2);
    STOREC(0) STOREC(1) STOREC(2) STOREC(3) STOREC(4) STOREC(5) STOREC(6) STOREC(7)
#undef STOREC
}

static const mf_gemm_ops bf16_ops = {
    .MR = B_MR,
    .NR = B_NR,
    .KC = 256,
    .MC = 120,
    .NC = 2040,
    .pair_bytes = 4,
    .pack_a = mf_gemm_pack_a_pairs,
    .pack_b = mf_gemm_pack_b_pairs,
    .kernel = kernel_bf16_8x12,
    .store_bf16 = mf_gemm_store_bf16,
    .small = mf_gemm_small,
    .ftz_daz = 1,
};

void
mf_neon_bf16_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                         const void *A, mf_intp lda, const void *B, mf_intp ldb,
                         float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_run(&bf16_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}
