/*
 * AVX2 inner loops of the block-scaled kernels (blocks.h): the same float32
 * operations in the same order as the serial loops in serial.c, eight lanes
 * at a time, so bit-identical (tests/test_blocks.py compares the levels).
 * Compiled with -mavx2 and called only after the run-time CPU check; built
 * a second time with the AVX-512 flags by avx512.c, where the steps under
 * #ifdef __AVX512F__ take sixteen lanes.
 */
#include <float.h>
#include <string.h>
#include <immintrin.h>
#include "blocks.h"
#include "scale.h"
#include "../simd_params.h"
#include "../transpose_x86.h"

#define MF_INLINE static inline __attribute__((always_inline))

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

/* columns j..j+7 of an 8-row tile of packed e2m1 codes, decoded and scaled:
 * v[i] holds column j + i of rows 0..7 (unpack4t8's values).  A row's 8
 * codes from one 32-bit load: lane i shifted right by 4i; the magnitude from
 * the low 3 bits (permutevar8x32), the sign from bit 3; s points at the
 * block scale of row 0 for these columns. */
MF_INLINE void
e2m1_tile8(const uint8_t *c, mf_intp ldc, mf_intp j, __m256 mag, const float *s, mf_intp lds,
           __m256 v[8])
{
    const __m256i shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    for (int r = 0; r < 8; r++) {
        uint32_t w;
        memcpy(&w, c + r * ldc + j / 2, 4);
        __m256i code = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), shift);
        __m256 m = _mm256_permutevar8x32_ps(mag, code);
        __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(code, 3), 31);
        m = _mm256_or_ps(m, _mm256_castsi256_ps(sign));
        v[r] = _mm256_mul_ps(m, _mm256_set1_ps(s[r * lds]));
    }
    mf_transpose8(v);
}

/* 8 float32 -> 8 bfloat16 codes, the cast's rounding: to nearest even (the
 * carry of a finite value past the largest one gives inf), NaN -> 0x7FC0
 * with its sign */
MF_INLINE __m128i
bf16_round8(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)),
                                                   lsb), 16);
    const __m256i nan = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
        _mm256_set1_epi32(0x7FC0));
    r = _mm256_blendv_epi8(r, nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
    /* lanes < 2^16: pack within each 128-bit half, then the halves together */
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    return _mm256_castsi256_si128(p);
}

/* unpack4t8 (out float32) and unpack4t8h (bf16: out uint16) in one loop */
MF_INLINE void
e2m1_tiles(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut, const float *s,
           mf_intp lds, void *out, mf_intp ldo, const int bf16)
{
    const __m256 mag = _mm256_loadu_ps(lut);
    /* the block index j / B counted, not divided (B is a multiple of 8) */
    for (mf_intp j = 0, jb = 0, left = B; j < k; j += 8) {
        __m256 v[8];
        e2m1_tile8(c, ldc, j, mag, s + jb, lds, v);
        if ((left -= 8) == 0) {
            jb++;
            left = B;
        }
        for (int i = 0; i < 8; i++) {
            if (bf16) {
                _mm_storeu_si128((__m128i *)((uint16_t *)out + (j + i) * ldo), bf16_round8(v[i]));
            }
            else {
                _mm256_storeu_ps((float *)out + (j + i) * ldo, v[i]);
            }
        }
    }
}

static void
avx2_unpack4t8(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut,
               const float *s, mf_intp lds, float *out, mf_intp ldo)
{
    e2m1_tiles(c, ldc, k, B, lut, s, lds, out, ldo, 0);
}

static void
avx2_unpack4t8h(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut,
                const float *s, mf_intp lds, uint16_t *out, mf_intp ldo)
{
    e2m1_tiles(c, ldc, k, B, lut, s, lds, out, ldo, 1);
}

static uint64_t
avx2_e2m1_sq(const uint8_t *c, mf_intp n)
{
    /* each nibble's magnitude (its low 3 bits) looks up 4 * m^2 (pshufb),
     * the bytes summed by psadbw into 64-bit lanes */
    const __m256i sq = _mm256_setr_epi8(0, 1, 4, 9, 16, 36, 64, (char)144, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0, 1, 4, 9, 16, 36, 64, (char)144, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i seven = _mm256_set1_epi8(7), zero = _mm256_setzero_si256();
    __m256i acc = zero;
    mf_intp i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(c + i));
        const __m256i lo = _mm256_shuffle_epi8(sq, _mm256_and_si256(b, seven));
        const __m256i hi = _mm256_shuffle_epi8(sq, _mm256_and_si256(_mm256_srli_epi16(b, 4), seven));
        acc = _mm256_add_epi64(acc, _mm256_add_epi64(_mm256_sad_epu8(lo, zero),
                                                     _mm256_sad_epu8(hi, zero)));
    }
    __m128i a = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    for (; i + 16 <= n; i += 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(c + i));
        const __m128i s7 = _mm256_castsi256_si128(seven), t = _mm256_castsi256_si128(sq);
        const __m128i lo = _mm_shuffle_epi8(t, _mm_and_si128(b, s7));
        const __m128i hi = _mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(b, 4), s7));
        a = _mm_add_epi64(a, _mm_add_epi64(_mm_sad_epu8(lo, _mm_setzero_si128()),
                                           _mm_sad_epu8(hi, _mm_setzero_si128())));
    }
    uint64_t t = (uint64_t)_mm_cvtsi128_si64(a) + (uint64_t)_mm_extract_epi64(a, 1);
    static const uint8_t sq8[8] = {0, 1, 4, 9, 16, 36, 64, 144};
    for (; i < n; i++) {
        t += sq8[c[i] & 7u] + sq8[(c[i] >> 4) & 7u];
    }
    return t;
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


/* ---- the one-pass quantize: amax, scale, scale-and-clamp, round, pack,
 * eight blocks at a time (their scales first, together, then their
 * elements: a block's elements wait on its scale, and eight scales at once
 * keep that wait off the loop).  The element codes come from the cast's
 * rounding (the AVX2 cast's enc_small, the serial cast's mf_enc1)
 * restricted to what quantize feeds it: finite values already clamped to
 * the element's largest finite magnitude, so no overflow, inf or NaN lanes.  The scales: MX from
 * scale.h (the floor rule vectorised), NVFP4 by the float32
 * operations of serial.c. */

typedef struct {
    __m256i abs, one, round_bias, exp_adj, min_normal_m1, sub_cbits, sbit, exp_bits, quantum_adj;
    __m128i drop;
    __m256 sub_c;
} enc_regs;

static void
enc_regs_init(enc_regs *e, const mf_format *f)
{
    mf_simd_params sp = mf_simd_params_of(f);
    e->abs = _mm256_set1_epi32(0x7FFFFFFF);
    e->one = _mm256_set1_epi32(1);
    e->round_bias = _mm256_set1_epi32((int)sp.round_bias);
    e->exp_adj = _mm256_set1_epi32((int)sp.exp_adj);
    e->min_normal_m1 = _mm256_set1_epi32((int)(sp.min_normal_bits - 1u));
    e->sub_cbits = _mm256_set1_epi32((int)sp.sub_cbits);
    e->sub_c = _mm256_castsi256_ps(e->sub_cbits);
    e->sbit = _mm256_set1_epi32((int)sp.sbit);
    e->drop = _mm_cvtsi32_si128(sp.drop);
    e->exp_bits = _mm256_set1_epi32(0x7F800000);
    e->quantum_adj = _mm256_set1_epi32(sp.drop << 23);
}

/* codes (one a 32-bit lane) of finite v with |v| <= the largest finite
 * value: round to nearest even (normal: on the bits; subnormal: by adding
 * C, ulp(C) the smallest subnormal), the sign on top */
MF_INLINE __m256i
enc_clamped(const enc_regs *e, __m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i au = _mm256_and_si256(u, e->abs);
    __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(au, e->drop), e->one);
    __m256i rn = _mm256_add_epi32(_mm256_add_epi32(au, e->round_bias), lsb);
    __m256i cn = _mm256_sub_epi32(_mm256_srl_epi32(rn, e->drop), e->exp_adj);
    __m256 t = _mm256_add_ps(_mm256_castsi256_ps(au), e->sub_c);
    __m256i cs = _mm256_sub_epi32(_mm256_castps_si256(t), e->sub_cbits);
    __m256i code = _mm256_blendv_epi8(cs, cn, _mm256_cmpgt_epi32(au, e->min_normal_m1));
    return _mm256_or_si256(code, _mm256_and_si256(_mm256_srai_epi32(u, 31), e->sbit));
}

/* the value of enc_clamped(e, v)'s code, for v >= 0 (a float32 with the
 * format's precision: what decoding the code gives).  v rounded to the
 * format's quantum at v, q = 2^(e(v) - M) (M mantissa bits) for a normal
 * v, the smallest subnormal below: (v + c) - c with c = 2^23 q, whose ulp
 * is q, rounds to nearest even in the float32 add (c's low bits are zero,
 * so the sum's last bit is the rounded v's) and the subtraction is exact.
 * c's bits are v's exponent field plus (23 - M) << 23, or C's (the
 * subnormal quantum's: ulp(C) the smallest subnormal) where larger, which
 * is where v is below the smallest normal.  The same values as
 * enc_clamped's integer rounding of the bits (v is at most the largest
 * finite value, so c stays far below float32's range). */
MF_INLINE __m256
e4m3_value(const enc_regs *e, __m256 v)
{
    __m256i c = _mm256_add_epi32(_mm256_and_si256(_mm256_castps_si256(v), e->exp_bits),
                                 e->quantum_adj);
    __m256 cf = _mm256_castsi256_ps(_mm256_max_epi32(c, e->sub_cbits));
    return _mm256_sub_ps(_mm256_add_ps(v, cf), cf);
}

/* four vectors of codes (< 256) -> 32 bytes in order */
MF_INLINE __m256i
pack_bytes32(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32 float4 codes (bytes < 16, in order) -> 16 bytes, element 2j low */
MF_INLINE __m128i
pack_nibbles32(__m256i bytes)
{
    __m256i w = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
    __m256i p = _mm256_packus_epi16(w, w);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0)));
}

/* clamp(v * m, -lim, lim) as serial.c's scale_clamp1 */
MF_INLINE __m256
scale_clamp8(__m256 v, __m256 m, __m256 hi, __m256 lo)
{
    return _mm256_max_ps(_mm256_min_ps(_mm256_mul_ps(v, m), hi), lo);
}

/* largest |x| bit patterns of the nb <= 8 blocks of B (16 or 32) at x, one a
 * lane (0 in the lanes past nb): the blocks' maxima, then a transposing
 * reduction, so that the eight amaxes end up in one register */
MF_INLINE __m256i
group_amax(const float *x, int B, int nb)
{
    const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i m[8];
    for (int b = 0; b < 8; b++) {
        m[b] = _mm256_setzero_si256();
        if (b < nb) {
            const __m256i *p = (const __m256i *)(x + b * B);
            __m256i t = _mm256_and_si256(_mm256_loadu_si256(p), mask);
            for (int i = 1; i < B / 8; i++) {
                t = _mm256_max_epu32(t, _mm256_and_si256(_mm256_loadu_si256(p + i), mask));
            }
            m[b] = t;
        }
    }
    __m256i a[4], c[2];
    for (int i = 0; i < 4; i++) {
        a[i] = _mm256_max_epu32(_mm256_unpacklo_epi32(m[2 * i], m[2 * i + 1]),
                                _mm256_unpackhi_epi32(m[2 * i], m[2 * i + 1]));
    }
    for (int i = 0; i < 2; i++) {
        c[i] = _mm256_max_epu32(_mm256_unpacklo_epi64(a[2 * i], a[2 * i + 1]),
                                _mm256_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
    }
    return _mm256_max_epu32(_mm256_permute2x128_si256(c[0], c[1], 0x20),
                            _mm256_permute2x128_si256(c[0], c[1], 0x31));
}

/* lane b of v in every lane */
MF_INLINE __m256
lane_ps(__m256 v, int b)
{
    return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(b));
}

MF_INLINE __m256i
lane_si(__m256i v, int b)
{
    return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(b));
}

/* the nb <= 8 scale codes (one a lane, < 256) to scales[0, nb) */
MF_INLINE void
store_scales(uint8_t *scales, __m256i sc, int nb)
{
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(sc), _mm256_extracti128_si256(sc, 1));
    w = _mm_packus_epi16(w, w);
    if (nb == 8) {
        _mm_storel_epi64((__m128i *)scales, w);
    }
    else {
        uint8_t t[16];
        _mm_storeu_si128((__m128i *)t, w);
        memcpy(scales, t, (size_t)nb);
    }
}

/* MX scale codes of eight blocks from their amax bits (scale.h's
 * mx_scale_code, vectorised for the spec's floor rule) */
MF_INLINE __m256i
mx_scale_floor8(const mf_block_params *p, __m256i ab)
{
    const __m256i c127 = _mm256_set1_epi32(127);
    __m256i field = _mm256_srli_epi32(ab, 23);
    /* subnormal amax: its value as an integer converts exactly */
    __m256i fsub = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(ab)), 23);
    __m256i e = _mm256_blendv_epi8(_mm256_sub_epi32(fsub, _mm256_set1_epi32(127 + 149)),
                                   _mm256_sub_epi32(field, c127),
                                   _mm256_cmpgt_epi32(field, _mm256_setzero_si256()));
    e = _mm256_sub_epi32(e, _mm256_set1_epi32(p->emax));
    e = _mm256_min_epi32(_mm256_max_epi32(e, _mm256_set1_epi32(-127)), c127);
    __m256i code = _mm256_add_epi32(e, c127);
    code = _mm256_andnot_si256(_mm256_cmpeq_epi32(ab, _mm256_setzero_si256()), code);
    return _mm256_blendv_epi8(code, _mm256_set1_epi32(0xFF),
                              _mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x7F7FFFFF)));
}

/* the scales of the nb <= 8 MX blocks at xg, stored; returns the
 * multipliers 1 / 2^(code - 127) = 2^(127 - code) (exact, as pow2f) and
 * sets *ok to the lanes without the NaN scale */
MF_INLINE __m256
mx_group_scales(const mf_block_params *p, const float *xg, int nb, uint8_t *scales, __m256i *ok)
{
    __m256i ab = group_amax(xg, 32, nb);
    __m256i sc;
    if (p->mode == MF_SCALE_FLOOR) {
        sc = mx_scale_floor8(p, ab);
    }
    else {
        uint32_t am[8], c[8];
        _mm256_storeu_si256((__m256i *)am, ab);
        for (int b = 0; b < 8; b++) {
            c[b] = mx_scale_code(p, am[b]);
        }
        sc = _mm256_loadu_si256((const __m256i *)c);
    }
    store_scales(scales, sc, nb);
    *ok = _mm256_xor_si256(_mm256_cmpeq_epi32(sc, _mm256_set1_epi32(0xFF)), _mm256_set1_epi32(-1));
    __m256i mb = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), sc), 23);
    mb = _mm256_blendv_epi8(mb, _mm256_set1_epi32(0x00400000),
                            _mm256_cmpeq_epi32(sc, _mm256_set1_epi32(254)));
    return _mm256_castsi256_ps(mb);
}

/* MX, 32-element blocks, eight at a time: the scales of the next eight
 * before this eight's elements (as quantize_nv) */
static void
quantize_mx(const mf_block_params *p, const float *x, mf_intp nblocks, uint8_t *codes,
            uint8_t *scales)
{
    enc_regs e;
    enc_regs_init(&e, p->elem);
    const int fp4 = p->elem->bits == 4;
    const __m256 hi = _mm256_set1_ps(p->elem_max), lo = _mm256_set1_ps(-p->elem_max);
    if (nblocks <= 0) {
        return;
    }
    __m256i ok;
    __m256 mul = mx_group_scales(p, x, nblocks < 8 ? (int)nblocks : 8, scales, &ok);
    for (mf_intp g = 0; g < nblocks; g += 8) {
        int nb = nblocks - g < 8 ? (int)(nblocks - g) : 8;
        const float *xg = x + g * 32;
        __m256i ok_next = ok;
        __m256 mul_next = mul;
        if (g + 8 < nblocks) {
            mf_intp g2 = g + 8;
            mul_next = mx_group_scales(p, x + g2 * 32, nblocks - g2 < 8 ? (int)(nblocks - g2) : 8,
                                       scales + g2, &ok_next);
        }
        /* lanes with the NaN scale get codes +0 */
        for (int b = 0; b < nb; b++) {
            const float *xb = xg + b * 32;
            const __m256 m = lane_ps(mul, b);
            __m256i q[4];
            for (int i = 0; i < 4; i++) {
                q[i] = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 8 * i), m, hi, lo));
            }
            __m256i bytes = _mm256_and_si256(pack_bytes32(q[0], q[1], q[2], q[3]), lane_si(ok, b));
            if (fp4) {
                _mm_storeu_si128((__m128i *)(codes + (g + b) * 16), pack_nibbles32(bytes));
            }
            else {
                _mm256_storeu_si256((__m256i *)(codes + (g + b) * 32), bytes);
            }
        }
        ok = ok_next;
        mul = mul_next;
    }
}

/* one vector of a round trip: x scaled by m and clamped as quantize does,
 * rounded to the element format and its value taken (the magnitude's, the
 * sign put back: what the code decodes to), +0 where ok is clear, times the
 * block scale's value d */
MF_INLINE __m256
round_trip8(const enc_regs *e, __m256 x, __m256 m, __m256 hi, __m256 lo, __m256 ok, __m256 d)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    __m256 v = scale_clamp8(x, m, hi, lo);
    __m256 val = e4m3_value(e, _mm256_andnot_ps(sign, v));
    return _mm256_mul_ps(_mm256_and_ps(_mm256_or_ps(val, _mm256_and_ps(v, sign)), ok), d);
}

#ifdef __AVX512F__
/* The round trip's element step sixteen lanes wide, where this file is
 * built with the avx512 level's flags (blocks/avx512.c): the same
 * operations as round_trip8, lane for lane. */
typedef struct {
    __m512i exp_bits, quantum_adj, sub_cbits;
} enc_regs16;

static void
enc_regs16_init(enc_regs16 *e16, const enc_regs *e)
{
    e16->exp_bits = _mm512_broadcast_i64x4(e->exp_bits);
    e16->quantum_adj = _mm512_broadcast_i64x4(e->quantum_adj);
    e16->sub_cbits = _mm512_broadcast_i64x4(e->sub_cbits);
}

/* e4m3_value, sixteen lanes */
MF_INLINE __m512
e4m3_value16(const enc_regs16 *e, __m512 v)
{
    __m512i c = _mm512_add_epi32(_mm512_and_si512(_mm512_castps_si512(v), e->exp_bits),
                                 e->quantum_adj);
    __m512 cf = _mm512_castsi512_ps(_mm512_max_epi32(c, e->sub_cbits));
    return _mm512_sub_ps(_mm512_add_ps(v, cf), cf);
}

/* round_trip8, sixteen lanes (ok: all lanes or none) */
MF_INLINE __m512
round_trip16(const enc_regs16 *e, __m512 x, __m512 m, __m512 hi, __m512 lo, __mmask16 ok, __m512 d)
{
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __m512 v = _mm512_max_ps(_mm512_min_ps(_mm512_mul_ps(x, m), hi), lo);
    __m512 val = e4m3_value16(e, _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(v))));
    /* val | (v & sign), +0 where ok is clear (then times d: NaN for the NaN scale) */
    __m512i sv = _mm512_maskz_ternarylogic_epi32(ok, _mm512_castps_si512(val), _mm512_castps_si512(v),
                                                 sign, 0xF8);
    return _mm512_mul_ps(_mm512_castsi512_ps(sv), d);
}

/* the nb <= 8 blocks of B (16 or 32) values at xg into y: each block's
 * multiplier, scale value and ok (lanes of mul, dscale, ok) as vectors of
 * sixteen, and with NV the product times m2 (NVFP4's s_dec), as round_trip_nv
 * and round_trip_mx do eight lanes at a time */
MF_INLINE void
round_trip_blocks16(const enc_regs16 *e, const int B, const int NV, const float *xg, int nb,
                    __m256 mul, __m256 dscale, __m256i ok, __m512 hi, __m512 lo, __m512 m2,
                    float *y)
{
    float mv[8], dv[8];
    int32_t okv[8];
    _mm256_storeu_ps(mv, mul);
    _mm256_storeu_ps(dv, dscale);
    _mm256_storeu_si256((__m256i *)okv, ok);
    for (int b = 0; b < nb; b++) {
        const __m512 m = _mm512_set1_ps(mv[b]), d = _mm512_set1_ps(dv[b]);
        const __mmask16 okb = okv[b] ? (__mmask16)0xFFFF : 0;
        for (int i = 0; i < B; i += 16) {
            __m512 r = round_trip16(e, _mm512_loadu_ps(xg + b * B + i), m, hi, lo, okb, d);
            _mm512_storeu_ps(y + b * B + i, NV ? _mm512_mul_ps(r, m2) : r);
        }
    }
}
#endif

/* the multipliers of the nb <= 8 MX blocks at xg (mx_group_scales), the
 * lanes without the NaN scale (*ok) and the scales' values (*dscale):
 * 2^(code - 127), 2^-127 for code 0, NaN for 0xFF */
MF_INLINE __m256
mx_round_trip_scales(const mf_block_params *p, const float *xg, int nb, __m256i *ok, __m256 *dscale)
{
    uint8_t sc[16] = {0};
    __m256 mul = mx_group_scales(p, xg, nb, sc, ok);
    __m256i codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc));
    __m256i db = _mm256_slli_epi32(codes, 23);
    db = _mm256_blendv_epi8(db, _mm256_set1_epi32(0x00400000),
                            _mm256_cmpeq_epi32(codes, _mm256_setzero_si256()));
    db = _mm256_blendv_epi8(db, _mm256_set1_epi32(0x7FC00000),
                            _mm256_cmpeq_epi32(codes, _mm256_set1_epi32(0xFF)));
    *dscale = _mm256_castsi256_ps(db);
    return mul;
}

/* MX, 32-element blocks: y = dequantize(quantize(x)) without the codes.
 * Each element goes through quantize_mx's scale-and-clamp and rounding;
 * e4m3_value gives the float32 value of the code (its magnitude, the sign
 * put back, as the element's lookup table holds it), +0 in a block with the
 * NaN scale (whose codes are +0); then times the block's scale 2^(code -
 * 127) (0: 2^-127; 0xFF: NaN), as dequantize's mul2 (whose second factor,
 * 1 for MX, changes no bits). */
static void
round_trip_mx(const mf_block_params *p, const float *x, mf_intp nblocks, float *y)
{
    enc_regs e;
    enc_regs_init(&e, p->elem);
    const __m256 hi = _mm256_set1_ps(p->elem_max), lo = _mm256_set1_ps(-p->elem_max);
#ifdef __AVX512F__
    enc_regs16 e16;
    enc_regs16_init(&e16, &e);
    const __m512 hi16 = _mm512_set1_ps(p->elem_max), lo16 = _mm512_set1_ps(-p->elem_max);
    (void)hi;
    (void)lo;
#endif
    if (nblocks <= 0) {
        return;
    }
    __m256i ok;
    __m256 dscale;
    __m256 mul = mx_round_trip_scales(p, x, nblocks < 8 ? (int)nblocks : 8, &ok, &dscale);
    for (mf_intp g = 0; g < nblocks; g += 8) {
        int nb = nblocks - g < 8 ? (int)(nblocks - g) : 8;
        const float *xg = x + g * 32;
        __m256i ok_next = ok;
        __m256 dscale_next = dscale, mul_next = mul;
#ifdef __AVX512F__
        /* the next eight blocks' scales first, as round_trip_nv */
        if (g + 8 < nblocks) {
            mf_intp g2 = g + 8;
            mul_next = mx_round_trip_scales(p, x + g2 * 32, nblocks - g2 < 8 ? (int)(nblocks - g2) : 8,
                                            &ok_next, &dscale_next);
        }
        round_trip_blocks16(&e16, 32, 0, xg, nb, mul, dscale, ok, hi16, lo16, hi16, y + g * 32);
#else
        for (int b = 0; b < nb; b++) {
            const __m256 m = lane_ps(mul, b), d = lane_ps(dscale, b);
            const __m256 okb = _mm256_castsi256_ps(lane_si(ok, b));
            for (int i = 0; i < 32; i += 8) {
                _mm256_storeu_ps(y + (g + b) * 32 + i,
                                 round_trip8(&e, _mm256_loadu_ps(xg + b * 32 + i), m, hi, lo, okb, d));
            }
        }
        if (g + 8 < nblocks) {
            mf_intp g2 = g + 8;
            mul_next = mx_round_trip_scales(p, x + g2 * 32, nblocks - g2 < 8 ? (int)(nblocks - g2) : 8,
                                            &ok_next, &dscale_next);
        }
#endif
        ok = ok_next;
        dscale = dscale_next;
        mul = mul_next;
    }
}

/* NVFP4's scale constants */
typedef struct {
    enc_regs es;                 /* E4M3 */
    __m256i nv_nan, inf;
    __m256 smax, s_dec, sdb_mul, one, fmax;
} nv_regs;

/* the scales of the nb <= 8 blocks at xg: TransformerEngine's S_dec_b =
 * e4m3(min(amax * (S_enc / 6), 448)) stored (unless scales is NULL), and (returned) the multipliers
 * 1 / (S_dec_b * S_dec), at most FLT_MAX, and which blocks are finite (the
 * float32 operations of serial.c) */
MF_INLINE __m256
nv_group_scales_d(const nv_regs *r, const float *xg, int nb, uint8_t *scales, __m256i *fin,
                  __m256 *dec_out)
{
    __m256i ab = group_amax(xg, 16, nb);
    *fin = _mm256_cmpgt_epi32(r->inf, ab);                     /* amax < inf */
    __m256 sdb = _mm256_and_ps(_mm256_mul_ps(_mm256_castsi256_ps(ab), r->sdb_mul),
                               _mm256_castsi256_ps(*fin));
    sdb = _mm256_min_ps(sdb, r->smax);                          /* sdb < smax ? sdb : smax */
    /* S_dec_b's value, as the code decodes: sdb rounded to E4M3 in float32
     * (normal: the dropped bits cleared after the rounding carry;
     * subnormal: (sdb + C) - C, exact) */
    __m256 dec = e4m3_value(&r->es, sdb);
    __m256 rcp = _mm256_div_ps(r->one, _mm256_mul_ps(dec, r->s_dec));
    if (scales != NULL) {
        store_scales(scales, _mm256_blendv_epi8(r->nv_nan, enc_clamped(&r->es, sdb), *fin), nb);
    }
    if (dec_out != NULL) {
        *dec_out = dec;
    }
    return _mm256_min_ps(rcp, r->fmax);                        /* rcp < FLT_MAX ? rcp : FLT_MAX */
}

MF_INLINE __m256
nv_group_scales(const nv_regs *r, const float *xg, int nb, uint8_t *scales, __m256i *fin)
{
    return nv_group_scales_d(r, xg, nb, scales, fin, NULL);
}

static void
nv_regs_init(nv_regs *r, const mf_block_params *p)
{
    const mf_format *e4m3 = mf_fmt(MF_FLOAT8_E4M3FN);
    enc_regs_init(&r->es, e4m3);
    r->nv_nan = _mm256_set1_epi32((int)mf_nan_code(e4m3, 0));
    r->inf = _mm256_set1_epi32(0x7F800000);
    r->smax = _mm256_set1_ps(mf_lut8[MF_FLOAT8_E4M3FN][mf_max_finite_mag(e4m3)]);
    r->s_dec = _mm256_set1_ps(1.0f / p->s_enc);
    r->sdb_mul = _mm256_set1_ps(p->s_enc * (1.0f / 6.0f));
    r->one = _mm256_set1_ps(1.0f);
    r->fmax = _mm256_set1_ps(FLT_MAX);
}

/* NVFP4, 16-element blocks, eight at a time: the scales of the next eight
 * are computed before this eight's elements, so that their dependency chain
 * (amax, reduction, rounding, division) overlaps work already under way */
static void
quantize_nv(const mf_block_params *p, const float *x, mf_intp nblocks, uint8_t *codes,
            uint8_t *scales)
{
    nv_regs r;
    enc_regs e;
    enc_regs_init(&e, p->elem);
    nv_regs_init(&r, p);
    const __m256 hi = _mm256_set1_ps(p->elem_max), lo = _mm256_set1_ps(-p->elem_max);
    if (nblocks <= 0) {
        return;
    }
    __m256i fin;
    __m256 rcp = nv_group_scales(&r, x, nblocks < 8 ? (int)nblocks : 8, scales, &fin);
    for (mf_intp g = 0; g < nblocks; g += 8) {
        int nb = nblocks - g < 8 ? (int)(nblocks - g) : 8;
        const float *xg = x + g * 16;
        __m256i fin_next = fin;
        __m256 rcp_next = rcp;
        if (g + 8 < nblocks) {
            mf_intp g2 = g + 8;
            rcp_next = nv_group_scales(&r, x + g2 * 16, nblocks - g2 < 8 ? (int)(nblocks - g2) : 8,
                                       scales + g2, &fin_next);
        }
        /* the elements, two blocks (32 codes, 16 bytes) at a time; blocks
         * with the NaN scale get codes +0 */
        if (nb == 8 && _mm256_movemask_ps(_mm256_castsi256_ps(fin)) == 0xFF) {
            /* eight finite blocks (the common case): no masking */
            for (int b = 0; b < 8; b += 2) {
                const float *xb = xg + b * 16;
                const __m256 m0 = lane_ps(rcp, b), m1 = lane_ps(rcp, b + 1);
                __m256i q0 = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb), m0, hi, lo));
                __m256i q1 = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 8), m0, hi, lo));
                __m256i q2 = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 16), m1, hi, lo));
                __m256i q3 = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 24), m1, hi, lo));
                _mm_storeu_si128((__m128i *)(codes + (g + b) * 8),
                                 pack_nibbles32(pack_bytes32(q0, q1, q2, q3)));
            }
        }
        else {
            for (int b = 0; b < nb; b += 2) {
                const float *xb = xg + b * 16;
                const __m256 m0 = lane_ps(rcp, b), m1 = lane_ps(rcp, b + 1);
                __m256i q[4];
                q[0] = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb), m0, hi, lo));
                q[1] = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 8), m0, hi, lo));
                q[0] = _mm256_and_si256(q[0], lane_si(fin, b));
                q[1] = _mm256_and_si256(q[1], lane_si(fin, b));
                if (b + 1 < nb) {
                    q[2] = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 16), m1, hi, lo));
                    q[3] = enc_clamped(&e, scale_clamp8(_mm256_loadu_ps(xb + 24), m1, hi, lo));
                    q[2] = _mm256_and_si256(q[2], lane_si(fin, b + 1));
                    q[3] = _mm256_and_si256(q[3], lane_si(fin, b + 1));
                    _mm_storeu_si128((__m128i *)(codes + (g + b) * 8),
                                     pack_nibbles32(pack_bytes32(q[0], q[1], q[2], q[3])));
                }
                else {
                    __m256i z = _mm256_setzero_si256();
                    _mm_storel_epi64((__m128i *)(codes + (g + b) * 8),
                                     pack_nibbles32(pack_bytes32(q[0], q[1], z, z)));
                }
            }
        }
        fin = fin_next;
        rcp = rcp_next;
    }
}

/* NVFP4, 16-element blocks: y = dequantize(quantize(x)) without the codes:
 * the element's value as in round_trip_mx (+0 in a block with the NaN
 * scale), times the block scale's E4M3 value (the NaN code's value in such
 * a block), times the tensor's decode scale s_dec, as mul2 computes */
static void
round_trip_nv(const mf_block_params *p, const float *x, mf_intp nblocks, float s_dec, float *y)
{
    nv_regs r;
    enc_regs e;
    enc_regs_init(&e, p->elem);
    nv_regs_init(&r, p);
    const __m256 hi = _mm256_set1_ps(p->elem_max), lo = _mm256_set1_ps(-p->elem_max);
    const __m256 nanv = _mm256_set1_ps(mf_lut8[MF_FLOAT8_E4M3FN][mf_nan_code(mf_fmt(MF_FLOAT8_E4M3FN), 0)]);
    const __m256 m2 = _mm256_set1_ps(s_dec);
#ifdef __AVX512F__
    enc_regs16 e16;
    enc_regs16_init(&e16, &e);
    const __m512 hi16 = _mm512_set1_ps(p->elem_max), lo16 = _mm512_set1_ps(-p->elem_max);
    const __m512 m2_16 = _mm512_set1_ps(s_dec);
    (void)hi;
    (void)lo;
    (void)m2;
#endif
    if (nblocks <= 0) {
        return;
    }
    __m256i fin;
    __m256 dec;
    __m256 rcp = nv_group_scales_d(&r, x, nblocks < 8 ? (int)nblocks : 8, NULL, &fin, &dec);
    for (mf_intp g = 0; g < nblocks; g += 8) {
        int nb = nblocks - g < 8 ? (int)(nblocks - g) : 8;
        const float *xg = x + g * 16;
        __m256i fin_next = fin;
        __m256 dec_next = dec, rcp_next = rcp;
        if (g + 8 < nblocks) {
            /* with sixteen lanes (and 32 registers) the next eight blocks'
             * scales are computed before this eight's elements, as in
             * quantize_nv (4096 blocks: 5.3 -> 4.7 ms per 2^24 values, Zen
             * 4); the AVX2 build spills its 16 registers that way (5.6 ->
             * 7.8 ms) and computes them after */
            mf_intp g2 = g + 8;
            int nb2 = nblocks - g2 < 8 ? (int)(nblocks - g2) : 8;
#ifdef __AVX512F__
            rcp_next = nv_group_scales_d(&r, x + g2 * 16, nb2, NULL, &fin_next, &dec_next);
#else
            (void)nb2;
#endif
        }
        dec = _mm256_blendv_ps(nanv, dec, _mm256_castsi256_ps(fin));
#ifdef __AVX512F__
        round_trip_blocks16(&e16, 16, 1, xg, nb, rcp, dec, fin, hi16, lo16, m2_16, y + g * 16);
#else
        for (int b = 0; b < nb; b++) {
            const __m256 m = lane_ps(rcp, b), d = lane_ps(dec, b);
            const __m256 okb = _mm256_castsi256_ps(lane_si(fin, b));
            const float *xb = xg + b * 16;
            float *yb = y + (g + b) * 16;
            _mm256_storeu_ps(yb, _mm256_mul_ps(round_trip8(&e, _mm256_loadu_ps(xb), m, hi, lo, okb, d), m2));
            _mm256_storeu_ps(yb + 8,
                             _mm256_mul_ps(round_trip8(&e, _mm256_loadu_ps(xb + 8), m, hi, lo, okb, d), m2));
        }
        if (g + 8 < nblocks) {
            mf_intp g2 = g + 8;
            rcp_next = nv_group_scales_d(&r, x + g2 * 16, nblocks - g2 < 8 ? (int)(nblocks - g2) : 8,
                                         NULL, &fin_next, &dec_next);
        }
#endif
        fin = fin_next;
        dec = dec_next;
        rcp = rcp_next;
    }
}

static void
avx2_round_trip(const mf_block_params *p, const float *x, mf_intp nblocks, float s_dec, float *y)
{
    if (p->kind == MF_BLOCK_NV) {
        round_trip_nv(p, x, nblocks, s_dec, y);
    }
    else {
        round_trip_mx(p, x, nblocks, y);
    }
}

static void
avx2_quantize_blocks(const mf_block_params *p, const float *x, mf_intp nblocks, uint8_t *codes,
                     uint8_t *scales)
{
    if (p->kind == MF_BLOCK_NV) {
        quantize_nv(p, x, nblocks, codes, scales);
    }
    else {
        quantize_mx(p, x, nblocks, codes, scales);
    }
}

/* finite_amax of bfloat16 codes: 16 a vector, magnitudes at or above
 * 0x7F80 (inf, NaN) zeroed, an unsigned 16-bit max */
static uint32_t
avx2_finite_amax_bf16(const void *c, mf_intp n)
{
    const char *p = (const char *)c;
    const __m256i mag = _mm256_set1_epi16(0x7FFF), lim = _mm256_set1_epi16(0x7F80);
    __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
    mf_intp i = 0;
#ifdef __AVX512BW__
    {
        const __m512i mag16 = _mm512_set1_epi16(0x7FFF), lim16 = _mm512_set1_epi16(0x7F80);
        __m512i z0 = _mm512_setzero_si512(), z1 = _mm512_setzero_si512();
        for (; i + 64 <= n; i += 64) {
            __m512i a = _mm512_and_si512(_mm512_loadu_si512(p + 2 * i), mag16);
            __m512i b = _mm512_and_si512(_mm512_loadu_si512(p + 2 * i + 64), mag16);
            z0 = _mm512_mask_max_epu16(z0, _mm512_cmplt_epu16_mask(a, lim16), z0, a);
            z1 = _mm512_mask_max_epu16(z1, _mm512_cmplt_epu16_mask(b, lim16), z1, b);
        }
        z0 = _mm512_max_epu16(z0, z1);
        m0 = _mm256_max_epu16(_mm512_castsi512_si256(z0), _mm512_extracti64x4_epi64(z0, 1));
    }
#endif
    for (; i + 32 <= n; i += 32) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 2 * i)), mag);
        __m256i b = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(p + 2 * i + 32)), mag);
        m0 = _mm256_max_epu16(m0, _mm256_and_si256(a, _mm256_cmpgt_epi16(lim, a)));
        m1 = _mm256_max_epu16(m1, _mm256_and_si256(b, _mm256_cmpgt_epi16(lim, b)));
    }
    m0 = _mm256_max_epu16(m0, m1);
    __m128i h = _mm_max_epu16(_mm256_castsi256_si128(m0), _mm256_extracti128_si256(m0, 1));
    /* the largest of eight: minpos of the complements */
    uint16_t m = (uint16_t)~_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(h, _mm_set1_epi16(-1))));
    for (; i < n; i++) {
        uint16_t a;
        memcpy(&a, p + 2 * i, 2);
        a &= 0x7FFFu;
        a = a < 0x7F80u ? a : 0;
        m = a > m ? a : m;
    }
    return (uint32_t)m << 16;
}

#ifndef MF_BLOCK_OPS_NAME
#define MF_BLOCK_OPS_NAME mf_block_ops_avx2
#endif
const mf_block_ops MF_BLOCK_OPS_NAME = {
    avx2_amax, avx2_scale_clamp, avx2_mxint8, avx2_pack4, avx2_unpack4, avx2_mul2,
    avx2_unpack4t8, avx2_int8_dec, avx2_finite_amax, avx2_quantize_blocks, avx2_unpack4t8h,
    avx2_e2m1_sq, avx2_round_trip, avx2_finite_amax_bf16,
};
