/*
 * avx2 level of inspect's statistics block kernel (kernels.h): the serial
 * kernel's lanes, eight float32 lanes for min/max and two times four
 * float64 lanes for the sums, so the results are bit-identical to
 * mf_serial_stats_f32.  The tail (n % 8 values) goes into the same lanes in
 * scalar code.
 */
#include <immintrin.h>
#include <math.h>
#include "stats.h"

static inline int64_t
hsum_epi32(__m256i v)
{
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    int64_t s = 0;
    for (int j = 0; j < 8; j++) {
        s += t[j];
    }
    return s;
}

typedef struct {
    __m256 bad;
    __m256d e2a, e2b, r2a, r2b, s2a, s2b;
    __m256i czy, czx, cgt;
} tacc;

/* the target columns without masks (and the centred squares with
 * with_m2); t->bad has a lane set where an x or y was not finite */
static inline __attribute__((always_inline)) void
target_fast(tacc *t, const float *x, const float *y, mf_intp n8, __m256d vmean, __m256d vrel,
            const int with_m2, const int with_counts)
{
    const __m256 vinf = _mm256_set1_ps(INFINITY), zero = _mm256_setzero_ps();
    const __m256 vabs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256d dabs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
    tacc a = *t;
    for (mf_intp i = 0; i < n8; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 w = _mm256_loadu_ps(y + i);
        a.bad = _mm256_or_ps(a.bad, _mm256_cmp_ps(_mm256_and_ps(w, vabs), vinf, _CMP_NLT_UQ));
        if (!with_m2) {
            a.bad = _mm256_or_ps(a.bad, _mm256_cmp_ps(_mm256_and_ps(v, vabs), vinf, _CMP_NLT_UQ));
        }
        if (with_counts) {
            a.czy = _mm256_sub_epi32(a.czy, _mm256_castps_si256(_mm256_cmp_ps(w, zero, _CMP_EQ_OQ)));
            a.czx = _mm256_sub_epi32(a.czx, _mm256_castps_si256(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ)));
        }
        __m256 e = _mm256_sub_ps(w, v);
        __m256d ea = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
        __m256d eb = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
        __m256d xa = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d xb = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        if (with_m2) {
            __m256d da = _mm256_sub_pd(xa, vmean), db = _mm256_sub_pd(xb, vmean);
            a.s2a = _mm256_add_pd(a.s2a, _mm256_mul_pd(da, da));
            a.s2b = _mm256_add_pd(a.s2b, _mm256_mul_pd(db, db));
        }
        a.r2a = _mm256_add_pd(a.r2a, _mm256_mul_pd(xa, xa));
        a.r2b = _mm256_add_pd(a.r2b, _mm256_mul_pd(xb, xb));
        a.e2a = _mm256_add_pd(a.e2a, _mm256_mul_pd(ea, ea));
        a.e2b = _mm256_add_pd(a.e2b, _mm256_mul_pd(eb, eb));
        if (with_counts) {
            __m256d gta = _mm256_cmp_pd(_mm256_and_pd(ea, dabs),
                                        _mm256_mul_pd(_mm256_and_pd(xa, dabs), vrel), _CMP_GT_OQ);
            __m256d gtb = _mm256_cmp_pd(_mm256_and_pd(eb, dabs),
                                        _mm256_mul_pd(_mm256_and_pd(xb, dabs), vrel), _CMP_GT_OQ);
            a.cgt = _mm256_sub_epi64(a.cgt, _mm256_castpd_si256(gta));
            a.cgt = _mm256_sub_epi64(a.cgt, _mm256_castpd_si256(gtb));
        }
    }
    *t = a;
}

void
mf_avx2_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel, mf_intp n,
                  int moments)
{
    const __m256 vinf = _mm256_set1_ps(INFINITY), vninf = _mm256_set1_ps(-INFINITY);
    const __m256 vabs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256d dabs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
    __m256 lo = vinf, hi = vninf;
    __m256d s1a = _mm256_setzero_pd(), s1b = _mm256_setzero_pd();
    __m256i cnan = _mm256_setzero_si256(), cfin = _mm256_setzero_si256();
    mf_intp n8 = n - n % 8;
    /* Values are nearly always all finite: a first try without masks (NaN
     * leaves min_ps/max_ps's second operand, the lane, unchanged and makes
     * the sum NaN; an inf shows in min or max), which gives the masked
     * loop's lanes exactly when every value is finite.  Without moments the
     * target loop checks x itself. */
    for (mf_intp i = 0; i < (moments ? n8 : 0); i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        lo = _mm256_min_ps(v, lo);
        hi = _mm256_max_ps(v, hi);
        s1a = _mm256_add_pd(s1a, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        s1b = _mm256_add_pd(s1b, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    __m256d chk = _mm256_add_pd(s1a, s1b);
    int vec_finite = !moments ||
        (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_max_ps(_mm256_and_ps(lo, vabs), _mm256_and_ps(hi, vabs)),
                                         vinf, _CMP_LT_OQ)) == 0xFF
         && _mm256_movemask_pd(_mm256_cmp_pd(chk, chk, _CMP_ORD_Q)) == 0xF);
    if (vec_finite) {
        cfin = _mm256_set1_epi32((int)(n8 / 8));
    }
    else {
        lo = vinf;
        hi = vninf;
        s1a = s1b = _mm256_setzero_pd();
    }
    for (mf_intp i = 0; i < (vec_finite ? 0 : n8); i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 f = _mm256_cmp_ps(_mm256_and_ps(v, vabs), vinf, _CMP_LT_OQ);
        cnan = _mm256_sub_epi32(cnan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        cfin = _mm256_sub_epi32(cfin, _mm256_castps_si256(f));
        /* min_ps(a, b) = a < b ? a : b: the serial kernel's order */
        lo = _mm256_min_ps(_mm256_blendv_ps(vinf, v, f), lo);
        hi = _mm256_max_ps(_mm256_blendv_ps(vninf, v, f), hi);
        __m256 vf = _mm256_and_ps(v, f);
        s1a = _mm256_add_pd(s1a, _mm256_cvtps_pd(_mm256_castps256_ps128(vf)));
        s1b = _mm256_add_pd(s1b, _mm256_cvtps_pd(_mm256_extractf128_ps(vf, 1)));
    }
    float mn[8], mx[8];
    double l1[8];
    _mm256_storeu_ps(mn, lo);
    _mm256_storeu_ps(mx, hi);
    _mm256_storeu_pd(l1, s1a);
    _mm256_storeu_pd(l1 + 4, s1b);
    double mean = mf_stats_finish_first(s, x, n8, n, mn, mx, l1, hsum_epi32(cnan),
                                        hsum_epi32(cfin));

    const __m256d vmean = _mm256_set1_pd(mean), vrel = _mm256_set1_pd(rel);
    __m256d s2a = _mm256_setzero_pd(), s2b = _mm256_setzero_pd();
    __m256d e2a = _mm256_setzero_pd(), e2b = _mm256_setzero_pd();
    __m256d r2a = _mm256_setzero_pd(), r2b = _mm256_setzero_pd();
    __m256i cover = _mm256_setzero_si256(), czy = _mm256_setzero_si256();
    __m256i czx = _mm256_setzero_si256(), cgt = _mm256_setzero_si256();
    const __m256 zero = _mm256_setzero_ps();
    if (vec_finite && y == NULL) {
        for (mf_intp i = 0; i < n8; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m256d da = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vmean);
            __m256d db = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vmean);
            s2a = _mm256_add_pd(s2a, _mm256_mul_pd(da, da));
            s2b = _mm256_add_pd(s2b, _mm256_mul_pd(db, db));
        }
    }
    else if (vec_finite) {
        /* the target loop below, fused (x converted once) */
    }
    else {
        for (mf_intp i = 0; i < n8; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            __m256 f = _mm256_cmp_ps(_mm256_and_ps(v, vabs), vinf, _CMP_LT_OQ);
            /* float32 masks widened to float64 masks: sign-extend each lane */
            __m256i fi = _mm256_castps_si256(f);
            __m256d ma = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(fi)));
            __m256d mb = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(fi, 1)));
            __m256d da = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vmean), ma);
            __m256d db = _mm256_and_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vmean), mb);
            s2a = _mm256_add_pd(s2a, _mm256_mul_pd(da, da));
            s2b = _mm256_add_pd(s2b, _mm256_mul_pd(db, db));
        }
    }
    int masked = y != NULL;
    if (y != NULL && vec_finite) {
        /* every x finite: try without masks, keep the result if every y is
         * finite too (the masked loop's lanes, exactly) */
        tacc t = {zero, _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                  _mm256_setzero_pd(), s2a, s2b, czy, czx, cgt};
        if (moments) {
            target_fast(&t, x, y, n8, vmean, vrel, 1, 1);
        }
        else {
            target_fast(&t, x, y, n8, vmean, vrel, 0, 0);
        }
        s2a = t.s2a;
        s2b = t.s2b;
        masked = _mm256_movemask_ps(t.bad) != 0;
        if (!masked) {
            e2a = t.e2a; e2b = t.e2b; r2a = t.r2a; r2b = t.r2b;
            czy = t.czy; czx = t.czx; cgt = t.cgt;
        }
    }
    for (mf_intp i = 0; i < (masked ? n8 : 0); i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 f = _mm256_cmp_ps(_mm256_and_ps(v, vabs), vinf, _CMP_LT_OQ);
        __m256d fa = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d fb = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        {
            __m256 w = _mm256_loadu_ps(y + i);
            __m256 g = _mm256_and_ps(f, _mm256_cmp_ps(_mm256_and_ps(w, vabs), vinf, _CMP_LT_OQ));
            cover = _mm256_sub_epi32(cover, _mm256_castps_si256(_mm256_andnot_ps(g, f)));
            czy = _mm256_sub_epi32(czy, _mm256_castps_si256(
                      _mm256_and_ps(g, _mm256_cmp_ps(w, zero, _CMP_EQ_OQ))));
            czx = _mm256_sub_epi32(czx, _mm256_castps_si256(
                      _mm256_and_ps(g, _mm256_cmp_ps(v, zero, _CMP_EQ_OQ))));
            __m256i gi = _mm256_castps_si256(g);
            __m256d ga = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(gi)));
            __m256d gb = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(gi, 1)));
            __m256 e = _mm256_and_ps(_mm256_sub_ps(w, v), g);
            __m256d ea = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
            __m256d eb = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
            __m256d xa = _mm256_and_pd(fa, ga), xb = _mm256_and_pd(fb, gb);
            r2a = _mm256_add_pd(r2a, _mm256_mul_pd(xa, xa));
            r2b = _mm256_add_pd(r2b, _mm256_mul_pd(xb, xb));
            e2a = _mm256_add_pd(e2a, _mm256_mul_pd(ea, ea));
            e2b = _mm256_add_pd(e2b, _mm256_mul_pd(eb, eb));
            __m256d gta = _mm256_cmp_pd(_mm256_and_pd(ea, dabs),
                                        _mm256_mul_pd(_mm256_and_pd(xa, dabs), vrel), _CMP_GT_OQ);
            __m256d gtb = _mm256_cmp_pd(_mm256_and_pd(eb, dabs),
                                        _mm256_mul_pd(_mm256_and_pd(xb, dabs), vrel), _CMP_GT_OQ);
            cgt = _mm256_sub_epi64(cgt, _mm256_castpd_si256(gta));
            cgt = _mm256_sub_epi64(cgt, _mm256_castpd_si256(gtb));
        }
    }
    double l2[8], le[8], lr[8];
    _mm256_storeu_pd(l2, s2a);
    _mm256_storeu_pd(l2 + 4, s2b);
    _mm256_storeu_pd(le, e2a);
    _mm256_storeu_pd(le + 4, e2b);
    _mm256_storeu_pd(lr, r2a);
    _mm256_storeu_pd(lr + 4, r2b);
    int64_t g4[4];
    _mm256_storeu_si256((__m256i *)g4, cgt);
    mf_stats_finish_second(s, x, y, n8, n, mean, rel, l2, le, lr, hsum_epi32(cover),
                           hsum_epi32(czy), hsum_epi32(czx), g4[0] + g4[1] + g4[2] + g4[3]);
}
