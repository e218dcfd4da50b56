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

MF_REAL_STACK void
mf_avx512_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel, mf_intp n,
                    int moments)
{
    const __m256 vinf = _mm256_set1_ps(INFINITY), vninf = _mm256_set1_ps(-INFINITY);
    const __m256 vabs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    mf_intp n8 = n - n % 8;
    __m256 lo = vinf, hi = vninf;
    __m512d s1 = _mm512_setzero_pd();
    /* no masks: NaN leaves min_ps/max_ps's second operand (the lane) as it
     * is and makes the sum NaN, an inf shows in min or max -- checked below */
    for (mf_intp i = 0; i < (moments ? n8 : 0); i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        lo = _mm256_min_ps(v, lo);
        hi = _mm256_max_ps(v, hi);
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(v));
    }
    if (moments) {
        __m256 m = _mm256_max_ps(_mm256_and_ps(lo, vabs), _mm256_and_ps(hi, vabs));
        if (_mm256_movemask_ps(_mm256_cmp_ps(m, vinf, _CMP_LT_OQ)) != 0xFF
                || _mm512_cmp_pd_mask(s1, s1, _CMP_UNORD_Q) != 0) {
            mf_avx2_stats_f32(s, x, y, rel, n, moments);
            return;
        }
    }
    float mn[8], mx[8];
    double l1[8];
    _mm256_storeu_ps(mn, lo);
    _mm256_storeu_ps(mx, hi);
    _mm512_storeu_pd(l1, s1);
    double mean = mf_stats_finish_first(s, x, n8, n, mn, mx, l1, 0, n8);

    const __m512d vmean = _mm512_set1_pd(mean), vrel = _mm512_set1_pd(rel);
    const __m512d dabs = _mm512_castsi512_pd(_mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll));
    const __m256 zero = _mm256_setzero_ps();
    __m512d s2 = _mm512_setzero_pd(), e2 = _mm512_setzero_pd(), r2 = _mm512_setzero_pd();
    __m256i czy = _mm256_setzero_si256(), czx = _mm256_setzero_si256();
    __m512i cgt = _mm512_setzero_si512();
    const __m512i one64 = _mm512_set1_epi64(1);
    if (y == NULL) {
        for (mf_intp i = 0; i < n8; i += 8) {
            __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), vmean);
            s2 = _mm512_add_pd(s2, _mm512_mul_pd(d, d));
        }
    }
    else {
        __mmask8 bad = 0;
        for (mf_intp i = 0; i < n8; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m256 w = _mm256_loadu_ps(y + i);
            bad |= (__mmask8)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(w, vabs), vinf,
                                                              _CMP_NLT_UQ));
            if (!moments) {
                bad |= (__mmask8)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(v, vabs), vinf,
                                                                  _CMP_NLT_UQ));
            }
            __m512d xd = _mm512_cvtps_pd(v);
            __m512d ed = _mm512_cvtps_pd(_mm256_sub_ps(w, v));
            if (moments) {
                __m512d d = _mm512_sub_pd(xd, vmean);
                s2 = _mm512_add_pd(s2, _mm512_mul_pd(d, d));
                czy = _mm256_sub_epi32(czy, _mm256_castps_si256(_mm256_cmp_ps(w, zero, _CMP_EQ_OQ)));
                czx = _mm256_sub_epi32(czx, _mm256_castps_si256(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ)));
                __mmask8 gt = _mm512_cmp_pd_mask(_mm512_and_pd(ed, dabs),
                                                 _mm512_mul_pd(_mm512_and_pd(xd, dabs), vrel),
                                                 _CMP_GT_OQ);
                cgt = _mm512_mask_add_epi64(cgt, gt, cgt, one64);
            }
            /* squares of float32 values are exact in float64: the FMA
             * rounds once, as the multiply-then-add does */
            r2 = _mm512_fmadd_pd(xd, xd, r2);
            e2 = _mm512_fmadd_pd(ed, ed, e2);
        }
        if (bad) {
            mf_avx2_stats_f32(s, x, y, rel, n, moments);
            return;
        }
    }
    double l2[8], le[8], lr[8];
    _mm512_storeu_pd(l2, s2);
    _mm512_storeu_pd(le, e2);
    _mm512_storeu_pd(lr, r2);
    int32_t zy[8], zx[8];
    _mm256_storeu_si256((__m256i *)zy, czy);
    _mm256_storeu_si256((__m256i *)zx, czx);
    int64_t tzy = 0, tzx = 0;
    for (int j = 0; j < 8; j++) {
        tzy += zy[j];
        tzx += zx[j];
    }
    mf_stats_finish_second(s, x, y, n8, n, mean, rel, l2, le, lr, 0, tzy, tzx,
                           _mm512_reduce_add_epi64(cgt));
}
