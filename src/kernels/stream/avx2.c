/*
 * avx2 kernels (AVX2, FMA): decode, encode, the fused binary operations, sum
 * and dot for bfloat16 and every float8/float6/float4 format; decode for the
 * integer formats (their other kernels are serial).
 *
 * The algorithms of avx512.c (see there), eight lanes at a time, with blends
 * instead of mask registers, except the small formats' decode, which is
 * arithmetic here: the magnitude shifted into float32's exponent/mantissa
 * position and its exponent rebiased, subnormal codes as 2^emin (1 + f) -
 * 2^emin, the sign ORed in, NaN/inf codes fixed with compares.  The kernels
 * of the small formats are compiled once per special-value rule (IEEE, fn,
 * fnuz, none) so that only the rule's fixups are in the loops.  The loops
 * are body.h's; this file has the registers and the primitives.  Tails
 * shorter than a vector go to the serial kernels (decode, encode, binary) or
 * through a small buffer padded with values that leave the sums unchanged
 * (sum, dot), so nothing reads or writes past the ends and no padding lane
 * raises a flag.  Loads and stores are unaligned.
 *
 * As in avx512.c, the float operations whose operand order decides which NaN
 * comes out (x86 returns the first source's NaN) are written in assembly, in
 * the serial kernels' order.
 */
#include <immintrin.h>
#include "../kernels.h"
#include "../scalar_ops.h"
#include "../simd_params.h"
#include "../stats/stats.h"

#define MF_INLINE static inline __attribute__((always_inline))
#define I32(x) _mm256_set1_epi32((int)(x))

/* ------------------------------------------------------- registers */

/* Constants live in the register struct: gcc otherwise rebuilds some of
 * them in every loop iteration when it runs out of the 16 ymm registers. */
enum {
    K_QNAN, K_INF, K_SIGN, K_ABS, K_NEGQNAN,          /* float32 bit patterns */
    K_MAXF, K_MIN_NORMAL,
    K_ONE, K_RB16,                                    /* bfloat16 encode */
    K_E8_ZERO, K_FF, K_HALF_ULP, K_E8_SUB_HALF_M1,    /* e8m0 */
    NK
};
#define K(name) (r->k[K_##name])

typedef struct {
    __m256i dec_keep, dec_spec_lim, dec_inf_lim, maxfin;
    __m128i dec_shl, dec_sra, drop;
    __m256i dec_adj, dec_adj_sub;
    __m256i min_normal_m1, round_bias, exp_adj, sub_cbits, sbit;
    __m256 sub_c;
    __m256i big_code, nan_xor;
    __m256i keep_mask, big_val;      /* convert's fused loop (enc_small_w) */
    __m256i k[NK];
} regs256;

MF_INLINE void
regs_init(regs256 *r, const mf_simd_params *p)
{
    r->dec_keep = I32(p->dec_keep);
    r->dec_spec_lim = I32(p->dec_spec_lim);
    r->dec_inf_lim = I32(p->dec_inf_lim);
    r->maxfin = I32(p->maxfin);
    r->dec_shl = _mm_cvtsi32_si128(p->dec_shl);
    r->dec_sra = _mm_cvtsi32_si128(p->dec_sra);
    r->drop = _mm_cvtsi32_si128(p->drop);
    r->dec_adj = I32(p->dec_adj);
    r->dec_adj_sub = I32(p->dec_adj_sub);
    r->min_normal_m1 = I32(p->min_normal_bits - 1u);
    r->round_bias = I32(p->round_bias);
    r->exp_adj = I32(p->exp_adj);
    r->sub_cbits = I32(p->sub_cbits);
    r->sub_c = _mm256_castsi256_ps(r->sub_cbits);
    r->sbit = I32(p->sbit);
    r->big_code = I32(p->big_code);
    r->nan_xor = I32(p->nan_xor);
    r->keep_mask = I32(~((1u << p->drop) - 1u));
    /* big_code's value: the largest finite one where big lanes saturate,
     * else not finite (any NaN: the fused loop then leaves the block) */
    r->big_val = I32(p->big_code <= p->maxfin ? (p->big_code << p->mant_shift) + p->dec_adj
                                              : 0x7FC00000u);
    r->k[K_QNAN] = _mm256_set1_epi32((int)0x7FC00000u);
    r->k[K_INF] = _mm256_set1_epi32((int)0x7F800000u);
    r->k[K_SIGN] = _mm256_set1_epi32((int)0x80000000u);
    r->k[K_ABS] = _mm256_set1_epi32((int)0x7FFFFFFFu);
    r->k[K_NEGQNAN] = _mm256_set1_epi32((int)0xFFC00000u);
    r->k[K_E8_ZERO] = _mm256_set1_epi32((int)0x00400000u);
    r->k[K_FF] = _mm256_set1_epi32((int)0xFFu);
    r->k[K_ONE] = _mm256_set1_epi32((int)1);
    r->k[K_RB16] = _mm256_set1_epi32((int)0x7FFFu);
    r->k[K_MAXF] = _mm256_set1_epi32((int)0x7F7FFFFFu);
    r->k[K_HALF_ULP] = _mm256_set1_epi32((int)0x400000u);
    r->k[K_MIN_NORMAL] = _mm256_set1_epi32((int)0x00800000u);
    r->k[K_E8_SUB_HALF_M1] = _mm256_set1_epi32((int)0x005FFFFFu);
}

MF_INLINE __m256i
blendv(__m256i a, __m256i b, __m256i mask)
{
    /* mask lanes are all ones or all zeros */
    return _mm256_blendv_epi8(a, b, mask);
}

/* ------------------------------------------------------- ordered float ops */

typedef __m256 vf_t;
#define X86_ROUND(a, mode) _mm256_round_ps(a, (mode) | _MM_FROUND_NO_EXC)
#define X86_SQRT(a) _mm256_sqrt_ps(a)
#define X86_ONE _mm256_set1_ps(1.0f)
#include "x86.h"

/* ------------------------------------------------------- decode, 8 lanes */

MF_INLINE __m256
dec_bf16(__m128i codes)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(codes), 16));
}

/* path: MF_SIMD_SMALL_<rule>, a constant: the rule's fixups compile in */
MF_INLINE __m256
dec_small(const regs256 *r, __m256i c, mf_simd_path path)
{
    /* sign to bit 31 (the bits above the format's width drop out), the
     * magnitude to float32's exponent/mantissa position */
    __m256i t = _mm256_sll_epi32(c, r->dec_shl);
    __m256i x = _mm256_and_si256(_mm256_sra_epi32(t, r->dec_sra), r->dec_keep);
    __m256i xa = _mm256_and_si256(x, K(ABS));
    /* normal codes: rebias the exponent.  Subnormal codes (exponent 0):
     * 2^emin (1 + f) - 2^emin, exact.  (Multiplying the bits as a float32
     * by 2^(127 - bias) would be one operation, but on float32 subnormals,
     * which costs an assist on many CPUs.) */
    __m256i ksub = _mm256_cmpgt_epi32(K(MIN_NORMAL), xa);
    __m256i y = _mm256_add_epi32(xa, blendv(r->dec_adj, r->dec_adj_sub, ksub));
    __m256 v = _mm256_sub_ps(_mm256_castsi256_ps(y),
                             _mm256_castsi256_ps(_mm256_and_si256(ksub, r->dec_adj_sub)));
    v = _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_xor_si256(x, xa)));
    if (path == MF_SIMD_SMALL_IEEE || path == MF_SIMD_SMALL_FN) {
        __m256i spec = K(QNAN);
        if (path == MF_SIMD_SMALL_IEEE) {
            spec = blendv(spec, K(INF), _mm256_cmpeq_epi32(xa, r->dec_inf_lim));
        }
        spec = _mm256_or_si256(spec, _mm256_and_si256(x, K(SIGN)));
        v = _mm256_castsi256_ps(blendv(_mm256_castps_si256(v), spec, _mm256_cmpgt_epi32(xa, r->dec_spec_lim)));
    }
    if (path == MF_SIMD_SMALL_FNUZ) {
        v = _mm256_castsi256_ps(blendv(_mm256_castps_si256(v), K(NEGQNAN),
                                       _mm256_cmpeq_epi32(t, K(SIGN))));
    }
    return v;
}

MF_INLINE __m256
dec_e8m0(const regs256 *r, __m256i c)
{
    __m256i v = _mm256_slli_epi32(c, 23);
    v = blendv(v, K(E8_ZERO), _mm256_cmpeq_epi32(c, _mm256_setzero_si256()));
    v = blendv(v, K(QNAN), _mm256_cmpeq_epi32(c, K(FF)));
    return _mm256_castsi256_ps(v);
}

/* integers: the code's bits of the format's width, sign-extended or not */
MF_INLINE __m256
dec_int(const regs256 *r, __m256i c, mf_simd_path path)
{
    __m256i t = _mm256_sll_epi32(c, r->dec_shl);
    t = (path == MF_SIMD_SINT) ? _mm256_sra_epi32(t, r->dec_shl) : _mm256_srl_epi32(t, r->dec_shl);
    return _mm256_cvtepi32_ps(t);
}

/* 8 byte codes (the low 8 bytes of `bytes`) -> float32 */
MF_INLINE __m256
dec8(const regs256 *r, mf_simd_path path, __m128i bytes)
{
    __m256i c = _mm256_cvtepu8_epi32(bytes);
    if (path == MF_SIMD_E8M0) {
        return dec_e8m0(r, c);
    }
    if (path == MF_SIMD_SINT || path == MF_SIMD_UINT) {
        return dec_int(r, c, path);
    }
    return dec_small(r, c, path);
}

/* ------------------------------------------------------- encode, 8 lanes */

/*
 * bfloat16 codes of 8 float32 values (round to nearest even; a NaN becomes
 * the quiet NaN of its sign), in the upper 16 bits of each lane (the lower
 * bits are left over), for the encode loop and the binary loop's even/odd
 * lanes.  Overflowed lanes are kept as the minimum of
 * |x| + 0x00808000 over the lanes (see bf16_ovf_any): finite values that
 * round to inf, [0x7F7F8000, 0x7F800000), are exactly those below
 * INT32_MIN + 0x8000 as signed integers.
 */
MF_INLINE __m256i
enc_bf16_v(const regs256 *r, __m256 x, __m256i *ovf_min)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), K(ONE));
    __m256i res = _mm256_add_epi32(_mm256_add_epi32(u, K(RB16)), lsb);
    __m256i au = _mm256_and_si256(u, K(ABS));
    /* the NaN and overflow steps only for a vector that needs them: |x| at
     * or above 0x7F7F8000 (the smallest magnitude that rounds to inf) */
    __m256i big = _mm256_cmpgt_epi32(au, _mm256_set1_epi32(0x7F7F7FFF));
    if (__builtin_expect(_mm256_testz_si256(big, big), 1)) {
        return res;
    }
    __m256i knan = _mm256_cmpgt_epi32(au, K(INF));
    __m256i nanv = _mm256_or_si256(_mm256_and_si256(u, K(SIGN)), K(QNAN));
    *ovf_min = _mm256_min_epi32(*ovf_min, _mm256_add_epi32(au, _mm256_set1_epi32(0x00808000)));
    return blendv(res, nanv, knan);
}

MF_INLINE int
bf16_ovf_any(__m256i ovf_min)
{
    __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(0x80000000u + 0x8000u)), ovf_min);
    return !_mm256_testz_si256(k, k);
}

/* the codes of 8 float32 values.  With w (convert's fused loop), also the
 * values the codes decode to, where x is finite: the rounded magnitude
 * comes out of the encoder's own steps (a normal result's bits with the
 * dropped bits cleared, a subnormal one as t - C), big lanes decode to
 * r->big_val; the sign is x's (a zero's sign does not matter there). */
MF_INLINE __m256i
enc_small_w(const regs256 *r, __m256 x, __m256i *ovf, mf_simd_path path, __m256 *w)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i au = _mm256_and_si256(u, K(ABS));
    __m256i neg = _mm256_srai_epi32(u, 31);
    __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(au, r->drop), K(ONE));
    __m256i rn = _mm256_add_epi32(_mm256_add_epi32(au, r->round_bias), lsb);
    __m256i cn = _mm256_sub_epi32(_mm256_srl_epi32(rn, r->drop), r->exp_adj);
    /* see avx512.c: run on every lane but NaN ones (zeroed: a signaling NaN
     * must raise nothing) */
    __m256i knan_in = _mm256_cmpgt_epi32(au, K(INF));
    __m256 t = _mm256_add_ps(_mm256_castsi256_ps(_mm256_andnot_si256(knan_in, au)), r->sub_c);
    __m256i cs = _mm256_sub_epi32(_mm256_castps_si256(t), r->sub_cbits);
    __m256i knorm = _mm256_cmpgt_epi32(au, r->min_normal_m1);
    __m256i code = blendv(cs, cn, knorm);
    /* overflow, inf and NaN lanes are big: the overflow code, signed */
    __m256i kbig = _mm256_cmpgt_epi32(code, r->maxfin);
    code = blendv(code, r->big_code, kbig);
    if (w != NULL) {
        __m256i wa = blendv(_mm256_castps_si256(_mm256_sub_ps(t, r->sub_c)),
                            _mm256_and_si256(rn, r->keep_mask), knorm);
        wa = blendv(wa, r->big_val, kbig);
        *w = _mm256_castsi256_ps(_mm256_or_si256(wa, _mm256_and_si256(u, K(SIGN))));
    }
    __m256i sgn = _mm256_and_si256(neg, r->sbit);
    if (path == MF_SIMD_SMALL_FNUZ) {
        sgn = _mm256_andnot_si256(_mm256_cmpeq_epi32(code, _mm256_setzero_si256()), sgn);
    }
    __m256i res = _mm256_or_si256(code, sgn);
    if (path == MF_SIMD_SMALL_IEEE) {
        /* NaN: the quiet bit on top of inf */
        __m256i knan = _mm256_cmpgt_epi32(au, K(INF));
        res = _mm256_or_si256(res, _mm256_and_si256(knan, r->nan_xor));
    }
    else if (path == MF_SIMD_SMALL_NONE) {
        /* NaN: the zero of the other sign */
        __m256i knan = _mm256_cmpgt_epi32(au, K(INF));
        res = blendv(res, _mm256_andnot_si256(res, r->sbit), knan);
    }
    if (ovf != NULL) {
        *ovf = _mm256_or_si256(*ovf, _mm256_andnot_si256(_mm256_cmpgt_epi32(au, K(MAXF)), kbig));
    }
    return res;
}

MF_INLINE __m256i
enc_small(const regs256 *r, __m256 x, __m256i *ovf, mf_simd_path path)
{
    return enc_small_w(r, x, ovf, path, NULL);
}

MF_INLINE __m256i
enc_e8m0(const regs256 *r, __m256 x, __m256i *ovf)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i au = _mm256_and_si256(u, K(ABS));
    __m256i code = _mm256_srli_epi32(_mm256_add_epi32(au, K(HALF_ULP)), 23);
    __m256i ksub = _mm256_cmpgt_epi32(K(MIN_NORMAL), au);
    __m256i csub = _mm256_and_si256(_mm256_cmpgt_epi32(au, K(E8_SUB_HALF_M1)), K(ONE));
    code = blendv(code, csub, ksub);
    /* 0 < u < inf as signed integers: positive and finite (NaNs and
     * negatives fail it); integer compares raise nothing for a signaling NaN */
    __m256i kgood = _mm256_and_si256(_mm256_cmpgt_epi32(u, _mm256_setzero_si256()),
                                     _mm256_cmpgt_epi32(K(INF), u));
    *ovf = _mm256_or_si256(*ovf, _mm256_and_si256(kgood, _mm256_cmpeq_epi32(code, K(FF))));
    return blendv(K(FF), code, kgood);
}

MF_INLINE __m256i
enc_v(const regs256 *r, mf_simd_path path, __m256 x, __m256i *ovf)
{
    return path == MF_SIMD_E8M0 ? enc_e8m0(r, x, ovf) : enc_small(r, x, ovf, path);
}

/* four vectors of codes (0..255 in each lane) -> 32 bytes in order */
MF_INLINE __m256i
pack32(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* one vector of codes (0..255) -> 8 bytes in order, in the low 64 bits */
MF_INLINE __m128i
pack8(__m256i c)
{
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    return _mm_packus_epi16(w, w);
}

/* ------------------------------------------------------- stores */

/* the split into streamed and ordinary segments: stream_split (simd_params.h) */

MF_INLINE void
store_ps(float *p, __m256 v, int stream)
{
    if (stream) {
        _mm256_stream_ps(p, v);
    }
    else {
        _mm256_storeu_ps(p, v);
    }
}

MF_INLINE void
store_si(void *p, __m256i v, int stream)
{
    if (stream) {
        _mm256_stream_si256((__m256i *)p, v);
    }
    else {
        _mm256_storeu_si256((__m256i *)p, v);
    }
}

/* ------------------------------------------------------- body.h's primitives */

#define MF_ISA(name) mf_avx2_##name
#define VL 8
#define DEC8_VECS 2
#define BODY_STREAM 1
#define BODY_SMALL_BY_RULE 1
#define BODY_INT_PATHS 1
typedef regs256 regs_t;
typedef __m256i vi_t;
typedef __m256i ovf_t;      /* overflowed lanes all ones */
typedef __m256i bovf_t;     /* enc_bf16_v's minimum (see bf16_ovf_any) */

MF_INLINE __m256i
ovf_none(void)
{
    return _mm256_setzero_si256();
}

MF_INLINE int
ovf_any(__m256i ovf)
{
    return !_mm256_testz_si256(ovf, ovf);
}

MF_INLINE __m256i
bovf_none(void)
{
    return _mm256_set1_epi32(0x7FFFFFFF);
}

MF_INLINE void
bovf_merge(__m256i *ovf, __m256i ovf_min)
{
    if (bf16_ovf_any(ovf_min)) {
        *ovf = _mm256_set1_epi32(-1);
    }
}

MF_INLINE __m256
load_f(const float *p)
{
    return _mm256_loadu_ps(p);
}

#define store_f store_ps

MF_INLINE __m256
splat_f(float x)
{
    return _mm256_set1_ps(x);
}

/* column maxima, minima (body.h's col_op): x's NaN replaces the lane, an
 * a that is NaN stays (MAXPS returns its second source when unordered) */
MF_INLINE __m256
maxn_v(__m256 a, __m256 x)
{
    return _mm256_blendv_ps(_mm256_max_ps(x, a), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

MF_INLINE __m256
minn_v(__m256 a, __m256 x)
{
    return _mm256_blendv_ps(_mm256_min_ps(x, a), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* two widening loads (fewer instructions than a load and an extract) */
MF_INLINE void
dec_bf16_2(const uint16_t *s, __m256 v[2])
{
    v[0] = dec_bf16(_mm_loadu_si128((const __m128i *)s));
    v[1] = dec_bf16(_mm_loadu_si128((const __m128i *)(s + 8)));
}

MF_INLINE void
dec8_n(const regs256 *r, mf_simd_path path, const uint8_t *s, __m256 v[2])
{
    __m128i c = _mm_loadu_si128((const __m128i *)s);
    v[0] = dec8(r, path, c);
    v[1] = dec8(r, path, _mm_unpackhi_epi64(c, c));
}

/* sum and dot: 8 codes starting at element i, as float32 (a widening load
 * each, fewer instructions than the decode loop's loads and extracts) */
#define HAVE_LOAD_DEC
MF_INLINE __m256
load_dec(const regs256 *r, mf_simd_path path, const void *src, mf_intp i)
{
    if (path == MF_SIMD_BF16) {
        return dec_bf16(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
    }
    return dec8(r, path, _mm_loadl_epi64((const __m128i *)((const uint8_t *)src + i)));
}

/* column sums of narrow rows: one vector of codes */
#define COLSUM_DEC1 load_dec

MF_INLINE void
store_codes4(uint8_t *d, const __m256i c[4], int stream)
{
    store_si(d, pack32(c[0], c[1], c[2], c[3]), stream);
}

/* two vectors of enc_bf16_v's codes (in the upper halves), in order */
MF_INLINE void
store_bf16_2(uint16_t *d, __m256i h0, __m256i h1, int stream)
{
    /* packus works within 128-bit lanes: 0-3 8-11 4-7 12-15, reordered */
    __m256i p = _mm256_packus_epi32(_mm256_srli_epi32(h0, 16), _mm256_srli_epi32(h1, 16));
    store_si(d, _mm256_permute4x64_epi64(p, 0xD8), stream);
}

MF_INLINE __m256
bf16_value(__m256i h)
{
    return _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* the encode loop's 16 values, loaded as (0-3, 8-11) and (4-7, 12-15) so
 * that the in-lane pack puts the 16 codes in order (no lane-crossing
 * permute) */
#define HAVE_ENC_BF16_2
MF_INLINE void
enc_bf16_2(const regs256 *r, const float *src, uint16_t *d, __m256i *ovf_min, int stream)
{
    __m256 x0 = _mm256_loadu2_m128(src + 8, src);
    __m256 x1 = _mm256_loadu2_m128(src + 12, src + 4);
    __m256i c0 = _mm256_srli_epi32(enc_bf16_v(r, x0, ovf_min), 16);
    __m256i c1 = _mm256_srli_epi32(enc_bf16_v(r, x1, ovf_min), 16);
    store_si(d, _mm256_packus_epi32(c0, c1), stream);
}

/* 16 bfloat16 pairs in place: the even codes shifted up and the odd ones
 * masked are their float32 values; the two results go back the same way,
 * with no widening or packing shuffles.  The results are rounded by the
 * integer addition alone (enc_bf16_v's, without its NaN and overflow
 * steps), which is enc_bf16_v's code wherever |x| is below 0x7F7F8000; a
 * pair with a larger magnitude or a NaN goes through enc_bf16_v whole. */
#define HAVE_BINARY_BF16_2
MF_INLINE void
binary_bf16_2(mf_binary_op op, const regs256 *r, const uint16_t *a, const uint16_t *b,
              uint16_t *out, __m256i *ovf_min, int stream)
{
    const __m256i hi16 = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256i ca = _mm256_loadu_si256((const __m256i *)a);
    __m256i cb = _mm256_loadu_si256((const __m256i *)b);
    __m256 ev = op_v(op, _mm256_castsi256_ps(_mm256_slli_epi32(ca, 16)),
                     _mm256_castsi256_ps(_mm256_slli_epi32(cb, 16)));
    __m256 od = op_v(op, _mm256_castsi256_ps(_mm256_and_si256(ca, hi16)),
                     _mm256_castsi256_ps(_mm256_and_si256(cb, hi16)));
    __m256i ue = _mm256_castps_si256(ev), uo = _mm256_castps_si256(od);
    __m256i te = _mm256_add_epi32(_mm256_add_epi32(ue, K(RB16)),
                                  _mm256_and_si256(_mm256_srli_epi32(ue, 16), K(ONE)));
    __m256i to = _mm256_add_epi32(_mm256_add_epi32(uo, K(RB16)),
                                  _mm256_and_si256(_mm256_srli_epi32(uo, 16), K(ONE)));
    __m256i c = _mm256_or_si256(_mm256_srli_epi32(te, 16), _mm256_and_si256(to, hi16));
    __m256i big = _mm256_cmpgt_epi32(_mm256_max_epi32(_mm256_and_si256(ue, K(ABS)),
                                                      _mm256_and_si256(uo, K(ABS))),
                                     _mm256_set1_epi32(0x7F7F7FFF));
    if (__builtin_expect(!_mm256_testz_si256(big, big), 0)) {
        c = _mm256_or_si256(_mm256_srli_epi32(enc_bf16_v(r, ev, ovf_min), 16),
                            _mm256_and_si256(enc_bf16_v(r, od, ovf_min), hi16));
    }
    store_si(out, c, stream);
}

/* after the loops of four vectors of byte codes: single vectors */
#define ENC8_TAIL enc8_tail
MF_INLINE mf_intp
enc8_tail(const regs256 *r, mf_simd_path path, const float *src, uint8_t *d, mf_intp i, mf_intp n,
          __m256i *ovf)
{
    for (; i + 8 <= n; i += 8) {
        __m256i c = enc_v(r, path, _mm256_loadu_ps(src + i), ovf);
        _mm_storel_epi64((__m128i *)(d + i), pack8(c));
    }
    return i;
}

#define BINARY8_TAIL binary8_tail
MF_INLINE mf_intp
binary8_tail(mf_binary_op op, const regs256 *r, mf_simd_path path, const uint8_t *pa,
             const uint8_t *pb, uint8_t *po, mf_intp i, mf_intp n, __m256i *ovf)
{
    for (; i + 8 <= n; i += 8) {
        __m128i ca = _mm_loadl_epi64((const __m128i *)(pa + i));
        __m128i cb = _mm_loadl_epi64((const __m128i *)(pb + i));
        __m256i c = enc_v(r, path, op_v(op, dec8(r, path, ca), dec8(r, path, cb)), ovf);
        _mm_storel_epi64((__m128i *)(po + i), pack8(c));
    }
    return i;
}

/* IEEE float16 (NumPy's float16 casts): F16C's VCVTPS2PH, round to nearest
 * even, sixteen values a step; a NaN made the quiet NaN of its sign that
 * mf_enc1 gives (the instruction keeps the payload); overflow found from
 * the value (finite and at least 65520, which rounds past 65504); MXCSR's
 * flags put back as they were (the instruction raises underflow, invalid
 * and inexact, which mf_enc1 does not) */
#define ENC_F16_RUN enc_f16_run
MF_INLINE __m128i
enc_f16_8(__m256 x, __m256i *ovf)
{
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)),
                                  _mm_set1_epi16(0x7C00));
    __m128i canon = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)),
                                 _mm_set1_epi16(0x7E00));
    __m256i a = _mm256_and_si256(_mm256_castps_si256(x), I32(0x7FFFFFFF));
    *ovf = _mm256_or_si256(*ovf, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, I32(0x7F7FFFFF)),
                                                     _mm256_cmpgt_epi32(a, I32(0x477FEFFF))));
    return _mm_blendv_epi8(h, canon, nan);
}

MF_INLINE mf_intp
enc_f16_run(const float *src, uint16_t *d, mf_intp n, int stream, int *ovf)
{
    const unsigned int csr = mxcsr_save();
    __m256i o = _mm256_setzero_si256();
    mf_intp i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i h0 = enc_f16_8(_mm256_loadu_ps(src + i), &o);
        __m128i h1 = enc_f16_8(_mm256_loadu_ps(src + i + 8), &o);
        store_si(d + i, _mm256_set_m128i(h1, h0), stream);
    }
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *)(d + i), enc_f16_8(_mm256_loadu_ps(src + i), &o));
    }
    mxcsr_restore(csr);
    *ovf |= !_mm256_testz_si256(o, o);
    return i;
}

/* and back: VCVTPH2PS (exact), a NaN made the quiet NaN of its sign (as
 * mf_decode_f32), MXCSR's flags put back (a signaling NaN raises invalid) */
#define DEC_F16_RUN dec_f16_run
MF_INLINE __m256
dec_f16_8(__m128i h)
{
    __m256i u = _mm256_castps_si256(_mm256_cvtph_ps(h));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, I32(0x7FFFFFFF)), I32(0x7F800000));
    __m256i canon = _mm256_or_si256(_mm256_and_si256(u, I32(0x80000000u)), I32(0x7FC00000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(u, canon, nan));
}

MF_INLINE mf_intp
dec_f16_run(const uint16_t *s, float *d, mf_intp n, int stream)
{
    const unsigned int csr = mxcsr_save();
    mf_intp i = 0;
    for (; i + 16 <= n; i += 16) {
        store_ps(d + i, dec_f16_8(_mm_loadu_si128((const __m128i *)(s + i))), stream);
        store_ps(d + i + 8, dec_f16_8(_mm_loadu_si128((const __m128i *)(s + i + 8))), stream);
    }
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(d + i, dec_f16_8(_mm_loadu_si128((const __m128i *)(s + i))));
    }
    mxcsr_restore(csr);
    return i;
}

/* lanes[j] += lanes[j + w] for w = 16, 8, then combine8 (x86.h) */
/* sum and dot of bfloat16: 16 codes as their even and odd elements (a
 * shift and a mask instead of a widening shuffle), and the lanes so filled
 * put back in index order (body.h) */
#define HAVE_DEC_BF16_EO
MF_INLINE void
dec_bf16_eo(const uint16_t *s, __m256 v[2])
{
    __m256i c = _mm256_loadu_si256((const __m256i *)s);
    v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(c, 16));
    v[1] = _mm256_castsi256_ps(_mm256_and_si256(c, _mm256_set1_epi32((int)0xFFFF0000u)));
}

MF_INLINE void
eo_lanes(__m256 acc[4])
{
    for (int q = 0; q < 4; q += 2) {
        /* lo: elements 0..3 | 8..11 of these 16, hi: 4..7 | 12..15 */
        __m256 lo = _mm256_unpacklo_ps(acc[q], acc[q + 1]);
        __m256 hi = _mm256_unpackhi_ps(acc[q], acc[q + 1]);
        acc[q] = _mm256_permute2f128_ps(lo, hi, 0x20);
        acc[q + 1] = _mm256_permute2f128_ps(lo, hi, 0x31);
    }
}

MF_INLINE float
combine32(const __m256 l[4])
{
    __m256 a = add_v(l[2], l[0]);
    __m256 b = add_v(l[3], l[1]);
    return combine8(add_v(b, a));
}

/* ------------------------------------------------------- cast with error */

/* convert's fused loop (body.h): the float64 lanes of err2 and ref2, lo:
 * elements 0-3 of a vector, hi: 4-7 */
#define HAVE_CAST_ERR
typedef struct {
    __m256d e_lo, e_hi, r_lo, r_hi;
    __m256i zy, zx;            /* lanes counting w == 0, v == 0 */
} err_acc_t;

MF_INLINE void
err_init(err_acc_t *acc)
{
    acc->e_lo = acc->e_hi = acc->r_lo = acc->r_hi = _mm256_setzero_pd();
    acc->zy = acc->zx = _mm256_setzero_si256();
}

/* the eight counts' total (each at most a block's values: no overflow) */
MF_INLINE int64_t
count_lanes(__m256i c)
{
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}

MF_INLINE void
err_store(const err_acc_t *acc, double le[8], double lr[8], int64_t *zy, int64_t *zx)
{
    _mm256_storeu_pd(le, acc->e_lo);
    _mm256_storeu_pd(le + 4, acc->e_hi);
    _mm256_storeu_pd(lr, acc->r_lo);
    _mm256_storeu_pd(lr + 4, acc->r_hi);
    *zy = count_lanes(acc->zy);
    *zx = count_lanes(acc->zx);
}

MF_INLINE __m256
load_src(int skind, const void *x, mf_intp i)
{
    if (skind == MF_CE_F32) {
        return _mm256_loadu_ps((const float *)x + i);
    }
    __m128i c = _mm_loadu_si128((const __m128i *)((const uint16_t *)x + i));
    return skind == MF_CE_BF16 ? dec_bf16(c) : _mm256_cvtph_ps(c);
}

/* a vector is all eight lanes: q does not matter */
MF_INLINE void
err_acc(__m256 v, __m256 w, err_acc_t *acc, int q)
{
    (void)q;
    __m256 e = _mm256_sub_ps(w, v);
    __m256d ea = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
    __m256d eb = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
    __m256d xa = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d xb = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    acc->e_lo = _mm256_fmadd_pd(ea, ea, acc->e_lo);
    acc->e_hi = _mm256_fmadd_pd(eb, eb, acc->e_hi);
    acc->r_lo = _mm256_fmadd_pd(xa, xa, acc->r_lo);
    acc->r_hi = _mm256_fmadd_pd(xb, xb, acc->r_hi);
    /* a lane equal to zero compares as all ones: -1 */
    acc->zy = _mm256_sub_epi32(acc->zy, _mm256_castps_si256(_mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_EQ_OQ)));
    acc->zx = _mm256_sub_epi32(acc->zx, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ)));
}

#define CAST_ERR8_TAIL cast_err8_tail
MF_INLINE mf_intp
cast_err8_tail(const regs256 *r, int skind, mf_simd_path path, const void *x, uint8_t *d,
               mf_intp i, mf_intp n, err_acc_t *acc)
{
    for (; i + 8 <= n; i += 8) {
        __m256 v = load_src(skind, x, i), w;
        __m256i c = enc_small_w(r, v, NULL, path, &w);
        err_acc(v, w, acc, 0);
        _mm_storel_epi64((__m128i *)(d + i), pack8(c));
    }
    return i;
}

#include "body.h"

#define PW_NAME mf_avx2_pairwise_f32
#define PW_DECODE mf_avx2_decode_f32
#include "pairwise.h"

#define AE_NAME8 mf_avx2_arg_extreme8
#define AE_NAME16 mf_avx2_arg_extreme16
#include "argext.h"

#define KY_NAME8 mf_avx2_keyed8
#define KY_NAME16 mf_avx2_keyed16
#include "keyed.h"

const mf_kernels mf_kernels_avx2 = {
    .name = "avx2",
    .decode_f32 = mf_avx2_decode_f32,
    .encode_f32 = mf_avx2_encode_f32,
    .binary = mf_avx2_binary,
    .pairwise_f32 = mf_avx2_pairwise_f32,
    .arg_extreme8 = mf_avx2_arg_extreme8,
    .arg_extreme16 = mf_avx2_arg_extreme16,
    .keyed8 = mf_avx2_keyed8,
    .keyed16 = mf_avx2_keyed16,
    .lut8 = mf_serial_lut8,         /* no byte permute wider than 16 entries */
    .colsum_f32 = mf_avx2_colsum_f32,
    .colmax_f32 = mf_avx2_colmax_f32,
    .sum = mf_avx2_sum,
    .sum_rows = mf_avx2_sum_rows,
    .dot = mf_avx2_dot,
    .dot_cols = mf_avx2_dot_cols,
    .gemm_f32acc = mf_avx2_gemm_f32acc,
    .gemm_f32acc_bt = mf_avx2_gemm_f32acc_bt,
    .gemm_thin_cols = mf_avx2_gemm_thin_cols,
    .stats_f32 = mf_avx2_stats_f32,
    .cast_err = mf_avx2_cast_err,
};
