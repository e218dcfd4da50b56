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
 * fnuz, none) so that only the rule's fixups are in the loops.  Tails shorter than a vector go to the
 * serial kernels (decode, encode, binary) or through a small buffer padded
 * with values that leave the sums unchanged (sum, dot), so nothing reads or
 * writes past the ends and no padding lane raises a flag.  Loads and stores
 * are unaligned.
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
#include <math.h>
#include <string.h>

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

#define ASM_OP(INSN, R, A, B) \
    __asm__(INSN " %[b], %[a], %[r]" : [r] "=x"(R) : [a] "x"(A), [b] "x"(B))

MF_INLINE __m256
op256(mf_binary_op op, __m256 a, __m256 b)
{
    __m256 r;
    switch (op) {
        case MF_OP_ADD: ASM_OP("vaddps", r, a, b); break;
        case MF_OP_SUB: ASM_OP("vsubps", r, a, b); break;
        case MF_OP_MUL: ASM_OP("vmulps", r, a, b); break;
        default:        ASM_OP("vdivps", r, a, b); break;
    }
    return r;
}

MF_INLINE __m256
add256(__m256 a, __m256 b)
{
    __m256 r;
    ASM_OP("vaddps", r, a, b);
    return r;
}

MF_INLINE __m128
add128(__m128 a, __m128 b)
{
    __m128 r;
    ASM_OP("vaddps", r, a, b);
    return r;
}

MF_INLINE __m128
add_ss(__m128 a, __m128 b)
{
    __m128 r;
    ASM_OP("vaddss", r, a, b);
    return r;
}

/* lanes = fmaf(a, b, lanes) as the serial kernel computes it: a * b + acc
 * with a's NaN first, then b's, then acc's (gcc 12 passes the product's
 * operands to glibc's fmaf swapped, and glibc's FMA version prefers its
 * second argument's NaN) */
MF_INLINE __m256
fma_acc(__m256 a, __m256 b, __m256 acc)
{
    __asm__("vfmadd231ps %[b], %[a], %[acc]" : [acc] "+x"(acc) : [a] "x"(a), [b] "x"(b));
    return acc;
}

/* total + x with total the first source, as serial */
MF_INLINE double
add_total(double total, float x)
{
    double xd = (double)x;
    __asm__("vaddsd %[b], %[a], %[r]" : [r] "=x"(total) : [a] "x"(total), [b] "x"(xd));
    return total;
}

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
enc_bf16_hi(const regs256 *r, __m256 x, __m256i *ovf_min)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), K(ONE));
    __m256i res = _mm256_add_epi32(_mm256_add_epi32(u, K(RB16)), lsb);
    __m256i au = _mm256_and_si256(u, K(ABS));
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
enc8(const regs256 *r, mf_simd_path path, __m256 x, __m256i *ovf)
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

/* CALL(path) for every path with a SIMD kernel (the SMALL ones by rule) */
#define FOR_PATH(p, CALL, OTHERWISE)                                                   \
    switch ((p).small_path) {                                                         \
        case MF_SIMD_BF16:       CALL(MF_SIMD_BF16); break;                           \
        case MF_SIMD_E8M0:       CALL(MF_SIMD_E8M0); break;                           \
        case MF_SIMD_SMALL_IEEE: CALL(MF_SIMD_SMALL_IEEE); break;                     \
        case MF_SIMD_SMALL_FN:   CALL(MF_SIMD_SMALL_FN); break;                       \
        case MF_SIMD_SMALL_FNUZ: CALL(MF_SIMD_SMALL_FNUZ); break;                     \
        case MF_SIMD_SMALL_NONE: CALL(MF_SIMD_SMALL_NONE); break;                     \
        default:                 OTHERWISE; break;                                    \
    }

/* ------------------------------------------------------- decode_f32 */

/* the codes of whole vectors -> float32; returns how many were done.  With
 * `stream`, n is a multiple of 64 and dst 64-byte aligned. */
MF_INLINE mf_intp
decode_run(const regs256 *r, mf_simd_path path, const void *src, float *dst, mf_intp n, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (; i + 16 <= n; i += 16) {
            __m256i c = _mm256_loadu_si256((const __m256i *)(s + i));
            store_ps(dst + i, dec_bf16(_mm256_castsi256_si128(c)), stream);
            store_ps(dst + i + 8, dec_bf16(_mm256_extracti128_si256(c, 1)), stream);
        }
        return i;
    }
    const uint8_t *s = (const uint8_t *)src;
    for (; i + 16 <= n; i += 16) {
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i));
        store_ps(dst + i, dec8(r, path, c), stream);
        store_ps(dst + i + 8, dec8(r, path, _mm_unpackhi_epi64(c, c)), stream);
    }
    return i;
}

MF_INLINE void
decode_path(const regs256 *r, mf_simd_path path, const mf_format *f, const void *src, float *dst,
            mf_intp n)
{
    mf_intp isz = f->itemsize;
    segments sg = stream_split(dst, 4, n, 64);
    for (int q = 0; q < sg.count; q++) {
        const char *s = (const char *)src + sg.start[q] * isz;
        float *d = dst + sg.start[q];
        mf_intp done = decode_run(r, path, s, d, sg.len[q], sg.stream[q]);
        if (sg.stream[q]) {
            _mm_sfence();
        }
        if (done < sg.len[q]) {
            mf_serial_decode_f32(f, s + done * isz, d + done, sg.len[q] - done);
        }
    }
}

void
mf_avx2_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs256 r;
    regs_init(&r, &p);
#define CALL(PATH) decode_path(&r, PATH, f, src, dst, n)
    if (p.path == MF_SIMD_SINT) {
        CALL(MF_SIMD_SINT);
        return;
    }
    if (p.path == MF_SIMD_UINT) {
        CALL(MF_SIMD_UINT);
        return;
    }
    FOR_PATH(p, CALL, mf_serial_decode_f32(f, src, dst, n))
#undef CALL
}

/* ------------------------------------------------------- encode_f32 */

/* whole vectors of float32 -> codes; returns how many were done, ORs the
 * overflowed lanes into *ovf.  With `stream`, n is a multiple of 64 and dst
 * 64-byte aligned. */
MF_INLINE mf_intp
encode_run(const regs256 *r, mf_simd_path path, const float *src, void *dst, mf_intp n,
           __m256i *ovf, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        /* the inputs are loaded as (0-3, 8-11) and (4-7, 12-15), so that the
         * in-lane pack puts the 16 codes in order (no lane-crossing permute) */
        uint16_t *d = (uint16_t *)dst;
        __m256i ovf_min = _mm256_set1_epi32(0x7FFFFFFF);
        for (; i + 16 <= n; i += 16) {
            __m256 x0 = _mm256_loadu2_m128(src + i + 8, src + i);
            __m256 x1 = _mm256_loadu2_m128(src + i + 12, src + i + 4);
            __m256i c0 = _mm256_srli_epi32(enc_bf16_hi(r, x0, &ovf_min), 16);
            __m256i c1 = _mm256_srli_epi32(enc_bf16_hi(r, x1, &ovf_min), 16);
            store_si(d + i, _mm256_packus_epi32(c0, c1), stream);
        }
        if (bf16_ovf_any(ovf_min)) {
            *ovf = _mm256_set1_epi32(-1);
        }
        return i;
    }
    uint8_t *d = (uint8_t *)dst;
    for (; i + 32 <= n; i += 32) {
        __m256i c0 = enc8(r, path, _mm256_loadu_ps(src + i), ovf);
        __m256i c1 = enc8(r, path, _mm256_loadu_ps(src + i + 8), ovf);
        __m256i c2 = enc8(r, path, _mm256_loadu_ps(src + i + 16), ovf);
        __m256i c3 = enc8(r, path, _mm256_loadu_ps(src + i + 24), ovf);
        store_si(d + i, pack32(c0, c1, c2, c3), stream);
    }
    for (; i + 8 <= n; i += 8) {
        __m256i c = enc8(r, path, _mm256_loadu_ps(src + i), ovf);
        _mm_storel_epi64((__m128i *)(d + i), pack8(c));
    }
    return i;
}

MF_INLINE void
encode_path(const regs256 *r, mf_simd_path path, const mf_format *f, const float *src, void *dst,
            mf_intp n)
{
    mf_intp osz = f->itemsize;
    __m256i ovf = _mm256_setzero_si256();
    segments sg = stream_split(dst, osz, n, 64);
    for (int q = 0; q < sg.count; q++) {
        const float *s = src + sg.start[q];
        char *d = (char *)dst + sg.start[q] * osz;
        mf_intp done = encode_run(r, path, s, d, sg.len[q], &ovf, sg.stream[q]);
        if (sg.stream[q]) {
            _mm_sfence();
        }
        if (done < sg.len[q]) {
            mf_serial_encode_f32(f, s + done, d + done * osz, sg.len[q] - done);
        }
    }
    if (!_mm256_testz_si256(ovf, ovf)) {
        mf_raise_overflow();
    }
}

void
mf_avx2_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs256 r;
    regs_init(&r, &p);
#define CALL(PATH) encode_path(&r, PATH, f, src, dst, n)
    FOR_PATH(p, CALL, mf_serial_encode_f32(f, src, dst, n))
#undef CALL
}

/* ------------------------------------------------------- cast with error */

/* convert's fused loop (kernels.h, cast_err): the source values are loaded
 * as float32 (bfloat16 and float16 codes widened in registers), encoded to
 * the target with the value each code decodes to (enc_small_w), and e = w -
 * v, e^2 and v^2 go into the float64 lanes (lo: elements 0-3 of a vector,
 * hi: 4-7).  A float32 value's square is exact in float64, so the FMA
 * rounds once, as the documented multiply-then-add does. */
MF_INLINE __m256
load_src8(int skind, const void *x, mf_intp i)
{
    if (skind == MF_CE_F32) {
        return _mm256_loadu_ps((const float *)x + i);
    }
    __m128i c = _mm_loadu_si128((const __m128i *)((const uint16_t *)x + i));
    return skind == MF_CE_BF16 ? dec_bf16(c) : _mm256_cvtph_ps(c);
}

MF_INLINE void
err_acc(__m256 v, __m256 w, __m256d acc[4])
{
    __m256 e = _mm256_sub_ps(w, v);
    __m256d ea = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
    __m256d eb = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
    __m256d xa = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d xb = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    acc[0] = _mm256_fmadd_pd(ea, ea, acc[0]);
    acc[1] = _mm256_fmadd_pd(eb, eb, acc[1]);
    acc[2] = _mm256_fmadd_pd(xa, xa, acc[2]);
    acc[3] = _mm256_fmadd_pd(xb, xb, acc[3]);
}

/* whole vectors: returns how many values were done */
MF_INLINE mf_intp
cast_err_run(const regs256 *r, int skind, mf_simd_path path, const void *x, void *dst, mf_intp n,
             __m256d acc[4])
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        const __m256i hi16 = _mm256_set1_epi32((int)0xFFFF0000u);
        __m256i ovf_min = _mm256_setzero_si256();      /* not reported: the caller drops flags */
        uint16_t *d = (uint16_t *)dst;
        for (; i + 16 <= n; i += 16) {
            __m256 v0 = load_src8(skind, x, i), v1 = load_src8(skind, x, i + 8);
            __m256i h0 = enc_bf16_hi(r, v0, &ovf_min), h1 = enc_bf16_hi(r, v1, &ovf_min);
            err_acc(v0, _mm256_castsi256_ps(_mm256_and_si256(h0, hi16)), acc);
            err_acc(v1, _mm256_castsi256_ps(_mm256_and_si256(h1, hi16)), acc);
            /* packus works within 128-bit lanes: 0-3 8-11 4-7 12-15, reordered */
            __m256i p = _mm256_packus_epi32(_mm256_srli_epi32(h0, 16), _mm256_srli_epi32(h1, 16));
            _mm256_storeu_si256((__m256i *)(d + i), _mm256_permute4x64_epi64(p, 0xD8));
        }
        return i;
    }
    uint8_t *d = (uint8_t *)dst;
    for (; i + 32 <= n; i += 32) {
        __m256i c[4];
        for (int q = 0; q < 4; q++) {
            __m256 v = load_src8(skind, x, i + 8 * q), w;
            c[q] = enc_small_w(r, v, NULL, path, &w);
            err_acc(v, w, acc);
        }
        _mm256_storeu_si256((__m256i *)(d + i), pack32(c[0], c[1], c[2], c[3]));
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = load_src8(skind, x, i), w;
        __m256i c = enc_small_w(r, v, NULL, path, &w);
        err_acc(v, w, acc);
        _mm_storel_epi64((__m128i *)(d + i), pack8(c));
    }
    return i;
}

#define CAST_ERR_RUN(SK, PATH) done = cast_err_run(&r, SK, PATH, xs, codes, n, acc)

int
mf_avx2_cast_err(mf_stats_block *s, const mf_format *src, const void *x, const mf_format *tgt,
                 void *codes, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(tgt);
    if (p.path != MF_SIMD_BF16 && p.path != MF_SIMD_SMALL) {
        return 0;
    }
    regs256 r;
    regs_init(&r, &p);
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()};
    float xb[MF_STATS_BLOCK];
    const void *xs;
    int skind = mf_cast_err_source(src, x, n, xb, mf_avx2_decode_f32, &xs);
    mf_intp done = 0;
    MF_CAST_ERR_DISPATCH(skind, p.small_path, CAST_ERR_RUN)
    double le[8], lr[8];
    _mm256_storeu_pd(le, acc[0]);
    _mm256_storeu_pd(le + 4, acc[1]);
    _mm256_storeu_pd(lr, acc[2]);
    _mm256_storeu_pd(lr + 4, acc[3]);
    return mf_cast_err_finish(s, le, lr, xs == xb ? NULL : src, xs, tgt, codes, done, n);
}
#undef CAST_ERR_RUN

/* ------------------------------------------------------- binary */

/* whole vectors of pairs; returns how many were done.  With `stream`, n is
 * a multiple of 64 and out 64-byte aligned. */
MF_INLINE mf_intp
binary_run(mf_binary_op op, const regs256 *r, mf_simd_path path, const void *a, const void *b,
           void *out, mf_intp n, __m256i *ovf, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        /* 16 codes in place: the even ones shifted up and the odd ones
         * masked are their float32 values; the two results go back the same
         * way, with no widening or packing shuffles */
        const uint16_t *pa = (const uint16_t *)a, *pb = (const uint16_t *)b;
        uint16_t *po = (uint16_t *)out;
        const __m256i hi16 = _mm256_set1_epi32((int)0xFFFF0000u);
        __m256i ovf_min = _mm256_set1_epi32(0x7FFFFFFF);
        for (; i + 16 <= n; i += 16) {
            __m256i ca = _mm256_loadu_si256((const __m256i *)(pa + i));
            __m256i cb = _mm256_loadu_si256((const __m256i *)(pb + i));
            __m256 ev = op256(op, _mm256_castsi256_ps(_mm256_slli_epi32(ca, 16)),
                              _mm256_castsi256_ps(_mm256_slli_epi32(cb, 16)));
            __m256 od = op256(op, _mm256_castsi256_ps(_mm256_and_si256(ca, hi16)),
                              _mm256_castsi256_ps(_mm256_and_si256(cb, hi16)));
            __m256i ce = _mm256_srli_epi32(enc_bf16_hi(r, ev, &ovf_min), 16);
            __m256i co = _mm256_and_si256(enc_bf16_hi(r, od, &ovf_min), hi16);
            store_si(po + i, _mm256_or_si256(ce, co), stream);
        }
        if (bf16_ovf_any(ovf_min)) {
            *ovf = _mm256_set1_epi32(-1);
        }
        return i;
    }
    const uint8_t *pa = (const uint8_t *)a, *pb = (const uint8_t *)b;
    uint8_t *po = (uint8_t *)out;
    for (; i + 32 <= n; i += 32) {
        __m256i c[4];
        for (int q = 0; q < 2; q++) {
            __m128i ca = _mm_loadu_si128((const __m128i *)(pa + i + 16 * q));
            __m128i cb = _mm_loadu_si128((const __m128i *)(pb + i + 16 * q));
            __m256 r0 = op256(op, dec8(r, path, ca), dec8(r, path, cb));
            __m256 r1 = op256(op, dec8(r, path, _mm_unpackhi_epi64(ca, ca)),
                              dec8(r, path, _mm_unpackhi_epi64(cb, cb)));
            c[2 * q] = enc8(r, path, r0, ovf);
            c[2 * q + 1] = enc8(r, path, r1, ovf);
        }
        store_si(po + i, pack32(c[0], c[1], c[2], c[3]), stream);
    }
    for (; i + 8 <= n; i += 8) {
        __m128i ca = _mm_loadl_epi64((const __m128i *)(pa + i));
        __m128i cb = _mm_loadl_epi64((const __m128i *)(pb + i));
        __m256i c = enc8(r, path, op256(op, dec8(r, path, ca), dec8(r, path, cb)), ovf);
        _mm_storel_epi64((__m128i *)(po + i), pack8(c));
    }
    return i;
}

MF_INLINE void
binary_path(mf_binary_op op, const regs256 *r, mf_simd_path path, const mf_format *f,
            const void *a, const void *b, void *out, mf_intp n)
{
    mf_intp sz = f->itemsize;
    __m256i ovf = _mm256_setzero_si256();
    segments sg = stream_split(out, sz, n, 64);
    for (int q = 0; q < sg.count; q++) {
        mf_intp at = sg.start[q] * sz, len = sg.len[q];
        const char *ca = (const char *)a + at, *cb = (const char *)b + at;
        char *co = (char *)out + at;
        mf_intp done = binary_run(op, r, path, ca, cb, co, len, &ovf, sg.stream[q]);
        if (sg.stream[q]) {
            _mm_sfence();
        }
        if (done < len) {
            mf_serial_binary(op, f, ca + done * sz, cb + done * sz, co + done * sz, len - done);
        }
    }
    if (!_mm256_testz_si256(ovf, ovf)) {
        mf_raise_overflow();
    }
}

#define BINARY_PATH(PATH)                                                                  \
    switch (op) {                                                                         \
        case MF_OP_ADD: binary_path(MF_OP_ADD, &r, PATH, f, a, b, out, n); break;         \
        case MF_OP_SUB: binary_path(MF_OP_SUB, &r, PATH, f, a, b, out, n); break;         \
        case MF_OP_MUL: binary_path(MF_OP_MUL, &r, PATH, f, a, b, out, n); break;         \
        default:        binary_path(MF_OP_DIV, &r, PATH, f, a, b, out, n); break;         \
    }

void
mf_avx2_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
               void *out, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs256 r;
    regs_init(&r, &p);
    FOR_PATH(p, BINARY_PATH, mf_serial_binary(op, f, a, b, out, n))
}

/* ------------------------------------------------------- sum, dot */

/*
 * lanes[j] += lanes[j + w] for w = 16, 8, 4, 2, 1, in the serial kernel's
 * operand order (see avx512.c): upper lanes first for w = 16, 8, 4, lower
 * lanes first for w = 2, 1.
 */
MF_INLINE float
combine32(__m256 l0, __m256 l1, __m256 l2, __m256 l3)
{
    __m256 a = add256(l2, l0);
    __m256 b = add256(l3, l1);
    __m256 s8 = add256(b, a);
    __m128 s4 = add128(_mm256_extractf128_ps(s8, 1), _mm256_castps256_ps128(s8));
    /* lanes 2, 3 of both operands zero, as in serial: no lane may raise a
     * flag serial does not (doubling a large lane would overflow) */
    __m128 s2 = add128(_mm_castsi128_ps(_mm_move_epi64(_mm_castps_si128(s4))),
                       _mm_movehl_ps(_mm_setzero_ps(), s4));
    __m128 s1 = add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

/* 8 codes starting at element i, as float32 */
MF_INLINE __m256
load_dec(const regs256 *r, mf_simd_path path, const void *src, mf_intp i)
{
    if (path == MF_SIMD_BF16) {
        return dec_bf16(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
    }
    return dec8(r, path, _mm_loadl_epi64((const __m128i *)((const uint8_t *)src + i)));
}

/* the last m < 32 codes of a block, decoded by the serial kernel into 32
 * lanes; the lanes past m hold `pad` */
MF_INLINE void
load_tail(const mf_format *f, const void *src, mf_intp i, mf_intp m, float pad, __m256 v[4])
{
    float buf[MF_SUM_LANES];
    for (int j = 0; j < MF_SUM_LANES; j++) {
        buf[j] = pad;
    }
    mf_serial_decode_f32(f, (const char *)src + i * f->itemsize, buf, m);
    for (int q = 0; q < 4; q++) {
        v[q] = _mm256_loadu_ps(buf + 8 * q);
    }
}

MF_INLINE float
sum_block(const regs256 *r, mf_simd_path path, const mf_format *f, const void *src, mf_intp len)
{
    __m256 acc[4];
    for (int q = 0; q < 4; q++) {
        acc[q] = _mm256_set1_ps(-0.0f);
    }
    mf_intp i = 0;
    for (; i + 32 <= len; i += 32) {
        for (int q = 0; q < 4; q++) {
            acc[q] = add256(acc[q], load_dec(r, path, src, i + 8 * q));
        }
    }
    if (i < len) {
        /* -0.0 leaves every lane as it is */
        __m256 v[4];
        load_tail(f, src, i, len - i, -0.0f, v);
        for (int q = 0; q < 4; q++) {
            acc[q] = add256(acc[q], v[q]);
        }
    }
    return combine32(acc[0], acc[1], acc[2], acc[3]);
}

MF_INLINE float
dot_block(const regs256 *r, mf_simd_path path, const mf_format *f, const void *a, const void *b,
          mf_intp len)
{
    __m256 acc[4];
    for (int q = 0; q < 4; q++) {
        acc[q] = _mm256_set1_ps(-0.0f);
    }
    mf_intp i = 0;
    for (; i + 32 <= len; i += 32) {
        for (int q = 0; q < 4; q++) {
            acc[q] = fma_acc(load_dec(r, path, a, i + 8 * q), load_dec(r, path, b, i + 8 * q), acc[q]);
        }
    }
    if (i < len) {
        /* padding products are (-0) * (+0) = -0: every lane stays as it is */
        __m256 va[4], vb[4];
        load_tail(f, a, i, len - i, -0.0f, va);
        load_tail(f, b, i, len - i, 0.0f, vb);
        for (int q = 0; q < 4; q++) {
            acc[q] = fma_acc(va[q], vb[q], acc[q]);
        }
    }
    return combine32(acc[0], acc[1], acc[2], acc[3]);
}

MF_INLINE double
sum_path(const regs256 *r, mf_simd_path path, const mf_format *f, const void *src, mf_intp n)
{
    double total = -0.0;
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        total = add_total(total, sum_block(r, path, f, (const char *)src + start * f->itemsize, len));
    }
    return total;
}

MF_INLINE double
dot_path(const regs256 *r, mf_simd_path path, const mf_format *f, const void *a, const void *b,
         mf_intp n)
{
    double total = -0.0;
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        total = add_total(total, dot_block(r, path, f, (const char *)a + start * f->itemsize,
                                           (const char *)b + start * f->itemsize, len));
    }
    return total;
}

double
mf_avx2_sum(const mf_format *f, const void *src, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs256 r;
    regs_init(&r, &p);
    double s = 0.0;
#define CALL(PATH) s = sum_path(&r, PATH, f, src, n)
    FOR_PATH(p, CALL, s = mf_serial_sum(f, src, n))
#undef CALL
    return s;
}

double
mf_avx2_dot(const mf_format *f, const void *a, const void *b, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs256 r;
    regs_init(&r, &p);
    double s = 0.0;
#define CALL(PATH) s = dot_path(&r, PATH, f, a, b, n)
    FOR_PATH(p, CALL, s = mf_serial_dot(f, a, b, n))
#undef CALL
    return s;
}

const mf_kernels mf_kernels_avx2 = {
    .name = "avx2",
    .decode_f32 = mf_avx2_decode_f32,
    .encode_f32 = mf_avx2_encode_f32,
    .binary = mf_avx2_binary,
    .sum = mf_avx2_sum,
    .dot = mf_avx2_dot,
    .gemm_f32acc = mf_avx2_gemm_f32acc,
    .stats_f32 = mf_avx2_stats_f32,
    .cast_err = mf_avx2_cast_err,
};
