/*
 * avx512 level of inspect's statistics block kernel (kernels.h): the eight
 * float64 lanes of the serial kernel are one 512-bit register, so a vector
 * of eight values costs one conversion and one add per sum where avx2 needs
 * two of each; min and max stay in eight float32 lanes.  Bit-identical to
 * mf_serial_stats_f32.  Only blocks whose values (and round trip) are all
 * finite are done here -- nearly every block of a checkpoint; a block with
 * an inf or a NaN is left to the avx2 kernel and its masked loops.
 */
#include <immintrin.h>
#include <math.h>
#include "stats.h"

/*
 * W (1 or 2) windows of n values each, in lockstep: each window's chains
 * are its own (the serial kernel's lanes), but two windows' chains are
 * independent, and the float64 adds of one window alone wait on their
 * latency.  Returns 0 where a window has a value (or a round trip) that is
 * not finite: nothing is stored then, and the caller takes the windows one
 * by one (the avx2 kernel's masked loops).
 */
MF_REAL_STACK static inline __attribute__((always_inline)) int
stats_w(const int W, mf_stats_block *const *s, const float *const *x, const float *const *y,
        double rel, mf_intp n, int moments)
{
    const __m256 vinf = _mm256_set1_ps(INFINITY), vninf = _mm256_set1_ps(-INFINITY);
    const __m256 vabs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    mf_intp n8 = n - n % 8;
    __m256 lo[2], hi[2];
    __m512d s1[2];
    for (int w = 0; w < W; w++) {
        lo[w] = vinf;
        hi[w] = vninf;
        s1[w] = _mm512_setzero_pd();
    }
    /* no masks: NaN leaves min_ps/max_ps's second operand (the lane) as it
     * is and makes the sum NaN, an inf shows in min or max -- checked below */
    for (mf_intp i = 0; i < (moments ? n8 : 0); i += 8) {
        for (int w = 0; w < W; w++) {
            __m256 v = _mm256_loadu_ps(x[w] + i);
            lo[w] = _mm256_min_ps(v, lo[w]);
            hi[w] = _mm256_max_ps(v, hi[w]);
            s1[w] = _mm512_add_pd(s1[w], _mm512_cvtps_pd(v));
        }
    }
    if (moments) {
        for (int w = 0; w < W; w++) {
            __m256 m = _mm256_max_ps(_mm256_and_ps(lo[w], vabs), _mm256_and_ps(hi[w], vabs));
            if (_mm256_movemask_ps(_mm256_cmp_ps(m, vinf, _CMP_LT_OQ)) != 0xFF
                    || _mm512_cmp_pd_mask(s1[w], s1[w], _CMP_UNORD_Q) != 0) {
                return 0;
            }
        }
    }
    double mean[2];
    for (int w = 0; w < W; w++) {
        float mn[8], mx[8];
        double l1[8];
        _mm256_storeu_ps(mn, lo[w]);
        _mm256_storeu_ps(mx, hi[w]);
        _mm512_storeu_pd(l1, s1[w]);
        mean[w] = mf_stats_finish_first(s[w], x[w], n8, n, mn, mx, l1, 0, n8);
    }

    const __m512d vrel = _mm512_set1_pd(rel);
    const __m512d dabs = _mm512_castsi512_pd(_mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll));
    const __m256 zero = _mm256_setzero_ps();
    const __m512i one64 = _mm512_set1_epi64(1);
    const __m256i minus1 = _mm256_set1_epi32(-1);
    __m512d vmean[2], s2[2], e2[2], r2[2];
    __m256i czy[2], czx[2];
    __m512i cgt[2];
    for (int w = 0; w < W; w++) {
        vmean[w] = _mm512_set1_pd(mean[w]);
        s2[w] = e2[w] = r2[w] = _mm512_setzero_pd();
        czy[w] = czx[w] = _mm256_setzero_si256();
        cgt[w] = _mm512_setzero_si512();
    }
    if (y[0] == NULL) {
        for (mf_intp i = 0; i < n8; i += 8) {
            for (int w = 0; w < W; w++) {
                __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x[w] + i)), vmean[w]);
                s2[w] = _mm512_add_pd(s2[w], _mm512_mul_pd(d, d));
            }
        }
    }
    else {
        /* no per-value check for infs and NaNs: with x finite, a square of
         * float32 values (at most 2^256) never overflows float64, so r2 is
         * not finite exactly when an x is not, and e2 when a round trip is
         * not (or y - x overflowed float32: left to the avx2 kernel too) */
        for (mf_intp i = 0; i < n8; i += 8) {
            for (int w = 0; w < W; w++) {
                __m256 v = _mm256_loadu_ps(x[w] + i);
                __m256 u = _mm256_loadu_ps(y[w] + i);
                __m512d xd = _mm512_cvtps_pd(v);
                __m512d ed = _mm512_cvtps_pd(_mm256_sub_ps(u, v));
                if (moments) {
                    __m512d d = _mm512_sub_pd(xd, vmean[w]);
                    s2[w] = _mm512_add_pd(s2[w], _mm512_mul_pd(d, d));
                    czy[w] = _mm256_mask_sub_epi32(czy[w], _mm256_cmp_ps_mask(u, zero, _CMP_EQ_OQ),
                                                   czy[w], minus1);
                    czx[w] = _mm256_mask_sub_epi32(czx[w], _mm256_cmp_ps_mask(v, zero, _CMP_EQ_OQ),
                                                   czx[w], minus1);
                    __mmask8 gt = _mm512_cmp_pd_mask(_mm512_and_pd(ed, dabs),
                                                     _mm512_mul_pd(_mm512_and_pd(xd, dabs), vrel),
                                                     _CMP_GT_OQ);
                    cgt[w] = _mm512_mask_add_epi64(cgt[w], gt, cgt[w], one64);
                }
                /* squares of float32 values are exact in float64: the FMA
                 * rounds once, as the multiply-then-add does */
                r2[w] = _mm512_fmadd_pd(xd, xd, r2[w]);
                e2[w] = _mm512_fmadd_pd(ed, ed, e2[w]);
            }
        }
        for (int w = 0; w < W; w++) {
            const __m512d dinf = _mm512_set1_pd(INFINITY);
            if (_mm512_cmp_pd_mask(_mm512_and_pd(e2[w], dabs), dinf, _CMP_LT_OQ) != 0xFF
                    || _mm512_cmp_pd_mask(_mm512_and_pd(r2[w], dabs), dinf, _CMP_LT_OQ) != 0xFF) {
                return 0;
            }
        }
    }
    for (int w = 0; w < W; w++) {
        double l2[8], le[8], lr[8];
        _mm512_storeu_pd(l2, s2[w]);
        _mm512_storeu_pd(le, e2[w]);
        _mm512_storeu_pd(lr, r2[w]);
        int32_t zy[8], zx[8];
        _mm256_storeu_si256((__m256i *)zy, czy[w]);
        _mm256_storeu_si256((__m256i *)zx, czx[w]);
        int64_t tzy = 0, tzx = 0;
        for (int j = 0; j < 8; j++) {
            tzy += zy[j];
            tzx += zx[j];
        }
        mf_stats_finish_second(s[w], x[w], y[w], n8, n, mean[w], rel, l2, le, lr, 0, tzy, tzx,
                               _mm512_reduce_add_epi64(cgt[w]));
    }
    return 1;
}

MF_REAL_STACK void
mf_avx512_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel, mf_intp n,
                    int moments)
{
    if (!stats_w(1, &s, &x, &y, rel, n, moments)) {
        mf_avx2_stats_f32(s, x, y, rel, n, moments);
    }
}

MF_REAL_STACK void
mf_avx512_stats_f32_2(mf_stats_block *const *s, const float *const *x, const float *const *y,
                      double rel, mf_intp n, int moments)
{
    if (!stats_w(2, s, x, y, rel, n, moments)) {
        mf_avx512_stats_f32(s[0], x[0], y[0], rel, n, moments);
        mf_avx512_stats_f32(s[1], x[1], y[1], rel, n, moments);
    }
}
