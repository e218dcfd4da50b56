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
#include "../transpose_x86.h"

#define F_MR 12
#define F_NR 32

static void
kernel_12x32(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc, const void *pf,
             mf_intp npf)
{
    mf_gemm_pf pfs = mf_gemm_pf_start(pf, npf, 2 * kq);
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
        mf_gemm_pf_step(&pfs);
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

/* 16 rows in the lanes, NC (<= 8) columns of B: a row's k pairs are 32-bit
 * lanes of its codes, so 16 rows x 16 pairs transposed give each pair's two
 * members for the 16 rows (odd index: the high half, masked; even: shifted
 * up), and each column's chain adds the odd member first.  Ragged rows load
 * zeros and are not stored; the last pairs of a row (k not a multiple of
 * 32) are gathered, an odd k's pad being +0 * +0 as in the oracle.  acc:
 * the 16 rows' results, row stride nb, at column j0 (b's columns too). */
/* gemv16_cols's step for the one pair at k index p (an odd k's last pair
 * padded with +0 * +0, as in the oracle) */
static inline __attribute__((always_inline)) void
gemv16_pair(const int NC, int nr, mf_intp p, mf_intp k, const uint16_t *a, mf_intp lda,
            const float *b, mf_intp nb, __m512 *c)
{
    uint32_t ev[16], od[16];
    for (int i = 0; i < 16; i++) {
        ev[i] = i < nr ? (uint32_t)a[i * lda + p] << 16 : 0u;
        od[i] = i < nr && p + 1 < k ? (uint32_t)a[i * lda + p + 1] << 16 : 0u;
    }
    const __m512 odd = _mm512_castsi512_ps(_mm512_loadu_si512(od));
    const __m512 even = _mm512_castsi512_ps(_mm512_loadu_si512(ev));
    for (int j = 0; j < NC; j++) {
        const float bo = p + 1 < k ? b[(p + 1) * nb + j] : 0.0f;
        c[j] = _mm512_fmadd_ps(odd, _mm512_set1_ps(bo), c[j]);
        c[j] = _mm512_fmadd_ps(even, _mm512_set1_ps(b[p * nb + j]), c[j]);
    }
}

static inline __attribute__((always_inline)) void
gemv16_cols(const int NC, int nr, mf_intp k, const uint16_t *a, mf_intp lda, const float *b,
            mf_intp nb, float *acc)
{
    const __m512i hi_mask = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512 c[8];
    for (int j = 0; j < NC; j++) {
        float t0[16] = {0};
        for (int i = 0; i < nr; i++) {
            t0[i] = acc[i * nb + j];
        }
        c[j] = _mm512_loadu_ps(t0);
    }
    /* NumPy's large arrays start 16 bytes past a cache line: a block's
     * 64-byte row loads would each span two lines (10-13% slower).  Where
     * every row starts at the same even offset, the pairs up to the next
     * line go first, one at a time (in their order: the same chains) */
    mf_intp p = 0, head = 0;
    if (((uintptr_t)a & 3) == 0 && (lda * 2) % 64 == 0) {
        head = (mf_intp)((64 - ((uintptr_t)a & 63)) & 63) / 2;
        head = head < k ? head : 0;
    }
    for (; p < head; p += 2) {
        gemv16_pair(NC, nr, p, k, a, lda, b, nb, c);
    }
    for (; p + 32 <= k; p += 32) {
        __m512i t[16];
        for (int i = 0; i < 16; i++) {
            t[i] = i < nr ? _mm512_loadu_si512(a + i * lda + p) : _mm512_setzero_si512();
        }
        mf_transpose16(t);
        for (int q = 0; q < 16; q++) {
            const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(t[q], hi_mask));
            const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(t[q], 16));
            const float *bo = b + (p + 2 * q + 1) * nb, *be = b + (p + 2 * q) * nb;
            for (int j = 0; j < NC; j++) {
                c[j] = _mm512_fmadd_ps(odd, _mm512_set1_ps(bo[j]), c[j]);
                c[j] = _mm512_fmadd_ps(even, _mm512_set1_ps(be[j]), c[j]);
            }
        }
    }
    for (; p < k; p += 2) {
        gemv16_pair(NC, nr, p, k, a, lda, b, nb, c);
    }
    for (int j = 0; j < NC; j++) {
        float t0[16];
        _mm512_storeu_ps(t0, c[j]);
        for (int i = 0; i < nr; i++) {
            acc[i * nb + j] = t0[i];
        }
    }
}

void
mf_avx512_gemv_bf16(mf_intp rows, mf_intp k, const uint16_t *A, mf_intp lda, const float *b,
                    mf_intp nb, float *acc)
{
    for (mf_intp r0 = 0; r0 < rows; r0 += 16) {
        const int nr = rows - r0 < 16 ? (int)(rows - r0) : 16;
        for (mf_intp j0 = 0; j0 < nb; j0 += 8) {
            const uint16_t *a = A + r0 * lda;
            float *o = acc + r0 * nb + j0;
            switch (nb - j0 < 8 ? (int)(nb - j0) : 8) {
                case 1: gemv16_cols(1, nr, k, a, lda, b + j0, nb, o); break;
                case 2: gemv16_cols(2, nr, k, a, lda, b + j0, nb, o); break;
                case 3: gemv16_cols(3, nr, k, a, lda, b + j0, nb, o); break;
                case 4: gemv16_cols(4, nr, k, a, lda, b + j0, nb, o); break;
                case 5: gemv16_cols(5, nr, k, a, lda, b + j0, nb, o); break;
                case 6: gemv16_cols(6, nr, k, a, lda, b + j0, nb, o); break;
                case 7: gemv16_cols(7, nr, k, a, lda, b + j0, nb, o); break;
                default: gemv16_cols(8, nr, k, a, lda, b + j0, nb, o); break;
            }
        }
    }
}

/* gevm.h's vector: 16 lanes, 8 vectors of columns a block */
typedef __m512 gv_t;
#define GV_L 16
#define GV_NV 8
static inline gv_t gv_zero(void) { return _mm512_setzero_ps(); }
static inline gv_t gv_set1(float x) { return _mm512_set1_ps(x); }
static inline gv_t gv_fma(gv_t a, gv_t b, gv_t c) { return _mm512_fmadd_ps(a, b, c); }
static inline gv_t gv_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void gv_storeu(float *p, gv_t v) { _mm512_storeu_ps(p, v); }
static inline gv_t
gv_bf16(const uint16_t *p)
{
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
#include "gevm.h"

void
mf_avx512_gevm_bf16(int rows, mf_intp k, const uint16_t *A, mf_intp lda, const uint16_t *B,
                    mf_intp ldb, mf_intp n, float *acc, mf_intp na)
{
    gevm_rows(rows, k, A, lda, B, ldb, n, acc, na);
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
    /* the A packer's [q][slot][MR] panels with MR := NR are pack_b's */
    .pack_bt = mf_gemm_pack_a_f32,
    .kernel = kernel_12x32,
    .store_bf16 = mf_gemm_store_bf16,
    .small = mf_gemm_small,
    .ftz_daz = 1,
    .gemv = mf_avx512_gemv_bf16,
    .gevm = mf_avx512_gevm_bf16,
};

void
mf_avx512_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                      const void *A, mf_intp lda, const void *B, mf_intp ldb,
                      float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_run(&f32_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}

int
mf_avx512_gemm_f32acc_bt(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                         const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                         float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    return mf_gemm_run_bt(&f32_ops, f, m, n, k, A, lda, Bt, ldbt, C, ldc, ep);
}

int
mf_avx512_gemm_thin_cols(const mf_format *f)
{
    return mf_gemm_thin_cols(&f32_ops, f);
}
