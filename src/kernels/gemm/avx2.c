/*
 * avx2 GEMM with float32 accumulation: emulates VDPBF16PS (the canonical
 * semantics of serial.c) with FMA under MXCSR FTZ|DAZ, on float32
 * operands packed with each k pair swapped (see avx512.c).  6 x 16
 * register tile, 12 ymm accumulators.
 */
#include <immintrin.h>
#include "../kernels.h"
#include "loops.h"
#include "../transpose_x86.h"

#define F_MR 6
#define F_NR 16

static void
kernel_6x16(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc,
            const void *pf, mf_intp npf)
{
    mf_gemm_pf pfs = mf_gemm_pf_start(pf, npf, 2 * kq);
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
        mf_gemm_pf_step(&pfs);
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

/* gemv8_cols's step for the one pair at k index p (an odd k's last pair
 * padded with +0 * +0) */
static inline __attribute__((always_inline)) void
gemv8_pair(const int NC, int nr, mf_intp p, mf_intp k, const uint16_t *a, mf_intp lda,
           const float *b, mf_intp nb, __m256 *c)
{
    uint32_t ev[8], od[8];
    for (int i = 0; i < 8; i++) {
        ev[i] = i < nr ? (uint32_t)a[i * lda + p] << 16 : 0u;
        od[i] = i < nr && p + 1 < k ? (uint32_t)a[i * lda + p + 1] << 16 : 0u;
    }
    const __m256 odd = _mm256_loadu_ps((const float *)od);
    const __m256 even = _mm256_loadu_ps((const float *)ev);
    for (int j = 0; j < NC; j++) {
        const float bo = p + 1 < k ? b[(p + 1) * nb + j] : 0.0f;
        c[j] = _mm256_fmadd_ps(odd, _mm256_set1_ps(bo), c[j]);
        c[j] = _mm256_fmadd_ps(even, _mm256_set1_ps(b[p * nb + j]), c[j]);
    }
}

/* 8 rows in the lanes, NC (<= 4) columns, as avx512.c's gemv16_cols:
 * 8 rows x 8 k pairs transposed, the odd member of each pair added first */
static inline __attribute__((always_inline)) void
gemv8_cols(const int NC, int nr, mf_intp k, const uint16_t *a, mf_intp lda, const float *b,
           mf_intp nb, float *acc)
{
    const __m256i hi_mask = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 c[4];
    for (int j = 0; j < NC; j++) {
        float t0[8] = {0};
        for (int i = 0; i < nr; i++) {
            t0[i] = acc[i * nb + j];
        }
        c[j] = _mm256_loadu_ps(t0);
    }
    /* rows that all start at the same even offset in 32 bytes: the pairs
     * up to the boundary first (as avx512.c's gemv16_cols: no split loads) */
    mf_intp p = 0, head = 0;
    if (((uintptr_t)a & 3) == 0 && (lda * 2) % 32 == 0) {
        head = (mf_intp)((32 - ((uintptr_t)a & 31)) & 31) / 2;
        head = head < k ? head : 0;
    }
    for (; p < head; p += 2) {
        gemv8_pair(NC, nr, p, k, a, lda, b, nb, c);
    }
    for (; p + 16 <= k; p += 16) {
        __m256 t[8];
        for (int i = 0; i < 8; i++) {
            t[i] = i < nr ? _mm256_loadu_ps((const float *)(a + i * lda + p)) : _mm256_setzero_ps();
        }
        mf_transpose8(t);
        for (int q = 0; q < 8; q++) {
            const __m256i u = _mm256_castps_si256(t[q]);
            const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(u, hi_mask));
            const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
            const float *bo = b + (p + 2 * q + 1) * nb, *be = b + (p + 2 * q) * nb;
            for (int j = 0; j < NC; j++) {
                c[j] = _mm256_fmadd_ps(odd, _mm256_set1_ps(bo[j]), c[j]);
                c[j] = _mm256_fmadd_ps(even, _mm256_set1_ps(be[j]), c[j]);
            }
        }
    }
    for (; p < k; p += 2) {
        gemv8_pair(NC, nr, p, k, a, lda, b, nb, c);
    }
    for (int j = 0; j < NC; j++) {
        float t0[8];
        _mm256_storeu_ps(t0, c[j]);
        for (int i = 0; i < nr; i++) {
            acc[i * nb + j] = t0[i];
        }
    }
}

static void
gemv_8(mf_intp rows, mf_intp k, const uint16_t *A, mf_intp lda, const float *b, mf_intp nb,
       float *acc)
{
    for (mf_intp r0 = 0; r0 < rows; r0 += 8) {
        const int nr = rows - r0 < 8 ? (int)(rows - r0) : 8;
        for (mf_intp j0 = 0; j0 < nb; j0 += 4) {
            const uint16_t *a = A + r0 * lda;
            float *o = acc + r0 * nb + j0;
            switch (nb - j0 < 4 ? (int)(nb - j0) : 4) {
                case 1: gemv8_cols(1, nr, k, a, lda, b + j0, nb, o); break;
                case 2: gemv8_cols(2, nr, k, a, lda, b + j0, nb, o); break;
                case 3: gemv8_cols(3, nr, k, a, lda, b + j0, nb, o); break;
                default: gemv8_cols(4, nr, k, a, lda, b + j0, nb, o); break;
            }
        }
    }
}

/* gevm.h's vector: 8 lanes, 4 vectors of columns a block (16 ymm) */
typedef __m256 gv_t;
#define GV_L 8
#define GV_NV 4
static inline gv_t gv_zero(void) { return _mm256_setzero_ps(); }
static inline gv_t gv_set1(float x) { return _mm256_set1_ps(x); }
static inline gv_t gv_fma(gv_t a, gv_t b, gv_t c) { return _mm256_fmadd_ps(a, b, c); }
static inline gv_t gv_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void gv_storeu(float *p, gv_t v) { _mm256_storeu_ps(p, v); }
static inline gv_t
gv_bf16(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
#include "gevm.h"

static const mf_gemm_ops f32_ops = {
    .MR = F_MR,
    .NR = F_NR,
    .KC = 256,
    .MC = 120,
    .NC = 2048,
    .pair_bytes = 8,
    .pack_a = mf_gemm_pack_a_f32,
    .pack_b = mf_gemm_pack_b_f32,
    /* the A packer's [q][slot][MR] panels with MR := NR are pack_b's */
    .pack_bt = mf_gemm_pack_a_f32,
    .kernel = kernel_6x16,
    .store_bf16 = mf_gemm_store_bf16,
    .small = mf_gemm_small,
    .ftz_daz = 1,
    .gemv = gemv_8,
    .gevm = gevm_rows,
};

void
mf_avx2_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                    const void *A, mf_intp lda, const void *B, mf_intp ldb,
                    float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_run(&f32_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}

int
mf_avx2_gemm_f32acc_bt(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                       const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                       float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    return mf_gemm_run_bt(&f32_ops, f, m, n, k, A, lda, Bt, ldbt, C, ldc, ep);
}

int
mf_avx2_gemm_thin_cols(const mf_format *f)
{
    return mf_gemm_thin_cols(&f32_ops, f);
}
