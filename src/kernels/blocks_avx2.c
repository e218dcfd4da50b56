/*
 * AVX2 inner loops of the block-scaled kernels (blocks.h): the same float32
 * operations in the same order as the serial loops in blocks.c, eight lanes
 * at a time, so bit-identical (tests/test_blocks.py compares the levels).
 * Compiled with -mavx2 and called only after the run-time CPU check.
 */
#include <immintrin.h>
#include "blocks.h"

static inline uint32_t
hmax_epu32(__m256i v)
{
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return (uint32_t)_mm_cvtsi128_si32(m);
}

static void
avx2_amax(const float *x, mf_intp nblocks, int B, uint32_t *out)
{
    const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF);
    for (mf_intp b = 0; b < nblocks; b++) {
        const __m256i *p = (const __m256i *)(x + b * B);
        __m256i m = _mm256_and_si256(_mm256_loadu_si256(p), mask);
        for (int i = 1; i < B / 8; i++) {
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256(p + i), mask));
        }
        out[b] = hmax_epu32(m);
    }
}

static void
avx2_scale_clamp(const float *x, mf_intp nblocks, int B, const float *mul, float lim, float *out)
{
    const __m256 hi = _mm256_set1_ps(lim), lo = _mm256_set1_ps(-lim);
    for (mf_intp b = 0; b < nblocks; b++) {
        const __m256 vm = _mm256_set1_ps(mul[b]);
        for (int i = 0; i < B; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + b * B + i), vm);
            v = _mm256_min_ps(v, hi);        /* v < lim ? v : lim */
            v = _mm256_max_ps(v, lo);        /* v > -lim ? v : -lim */
            _mm256_storeu_ps(out + b * B + i, v);
        }
    }
}

static void
avx2_mxint8(const float *x, mf_intp n, float mul, int8_t *out)
{
    const __m256 vm = _mm256_set1_ps(mul), s64 = _mm256_set1_ps(64.0f);
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (mf_intp i = 0; i < n; i += 32) {
        __m256i q[4];
        for (int j = 0; j < 4; j++) {
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), vm), s64);
            v = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
            v = _mm256_max_ps(_mm256_min_ps(v, hi), lo);
            q[j] = _mm256_cvttps_epi32(v);
        }
        __m256i ab = _mm256_packs_epi32(q[0], q[1]);
        __m256i cd = _mm256_packs_epi32(q[2], q[3]);
        __m256i r = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), perm);
        _mm256_storeu_si256((__m256i *)(out + i), r);
    }
}

static void
avx2_pack4(const uint8_t *c, mf_intp n, uint8_t *out)
{
    const __m256i w = _mm256_set1_epi16(0x1001);   /* bytes (1, 16): c0 + 16 c1 */
    mf_intp i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256i a = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(c + i)), w);
        __m256i b = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(c + i + 32)), w);
        __m256i r = _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(out + i / 2), r);
    }
    for (; i + 1 < n; i += 2) {
        out[i / 2] = (uint8_t)((c[i] & 0xFu) | (c[i + 1] << 4));
    }
}

static void
avx2_unpack4(const uint8_t *c, mf_intp n, const float *lut, float *out)
{
    /* the eight magnitudes; the sign (code bit 3) goes to float bit 31 */
    const __m256 mag = _mm256_loadu_ps(lut);
    const __m128i low = _mm_set1_epi8(0x0F);
    mf_intp i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(c + i / 2));
        __m128i lo = _mm_and_si128(b, low);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        __m128i codes = _mm_unpacklo_epi8(lo, hi);            /* 16 codes in order */
        for (int h = 0; h < 2; h++) {
            __m256i k = _mm256_cvtepu8_epi32(h ? _mm_srli_si128(codes, 8) : codes);
            __m256 v = _mm256_permutevar8x32_ps(mag, k);      /* uses k & 7 */
            __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(k, 3), 31);
            v = _mm256_or_ps(v, _mm256_castsi256_ps(sign));
            _mm256_storeu_ps(out + i + 8 * h, v);
        }
    }
    for (; i + 1 < n; i += 2) {
        out[i] = lut[c[i / 2] & 0xFu];
        out[i + 1] = lut[c[i / 2] >> 4];
    }
}

static void
avx2_mul2(float *o, mf_intp nblocks, int B, const float *a, float b)
{
    const __m256 vb = _mm256_set1_ps(b);
    for (mf_intp k = 0; k < nblocks; k++) {
        const __m256 va = _mm256_set1_ps(a[k]);
        for (int i = 0; i < B; i += 8) {
            float *p = o + k * B + i;
            _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p), va), vb));
        }
    }
}

static void
avx2_int8_dec(const int8_t *c, mf_intp n, float mul, float *o)
{
    const __m256 vm = _mm256_set1_ps(mul), k = _mm256_set1_ps(0.015625f);
    for (mf_intp i = 0; i < n; i += 8) {
        __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(c + i)));
        __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), k), vm);
        _mm256_storeu_ps(o + i, v);
    }
}

static uint32_t
avx2_finite_amax(const float *x, mf_intp n)
{
    const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    mf_intp i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), mask);
        __m256i b = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8)), mask);
        /* inf and NaN patterns (>= 0x7F800000, as signed too) count as 0 */
        a = _mm256_andnot_si256(_mm256_cmpgt_epi32(a, _mm256_sub_epi32(inf, _mm256_set1_epi32(1))), a);
        b = _mm256_andnot_si256(_mm256_cmpgt_epi32(b, _mm256_sub_epi32(inf, _mm256_set1_epi32(1))), b);
        m0 = _mm256_max_epu32(m0, a);
        m1 = _mm256_max_epu32(m1, b);
    }
    uint32_t m = hmax_epu32(_mm256_max_epu32(m0, m1));
    const uint32_t *u = (const uint32_t *)x;
    for (; i < n; i++) {
        uint32_t a = u[i] & 0x7FFFFFFFu;
        a = a < 0x7F800000u ? a : 0u;
        m = a > m ? a : m;
    }
    return m;
}

const mf_block_ops mf_block_ops_avx2 = {
    avx2_amax, avx2_scale_clamp, avx2_mxint8, avx2_pack4, avx2_unpack4, avx2_mul2,
    avx2_int8_dec, avx2_finite_amax,
};
