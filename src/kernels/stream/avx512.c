/*
 * avx512 kernels (AVX-512 F/BW/VL/DQ): decode, encode, the fused binary
 * operations, sum and dot for bfloat16 and every float8/float6/float4 format;
 * decode for the integer formats (their other kernels are serial).
 *
 * Every kernel returns exactly what the serial kernel returns (serial.c,
 * scalar_ops.h), raises the same floating-point flags, and reads and writes
 * through unaligned loads and stores; tails use masked loads, stores and
 * arithmetic (masked-off lanes raise no flags).
 *
 *   decode  bfloat16: code << 16.  Small formats and integers: serial's own
 *           table mf_lut8, whose float32 values all have a zero low half,
 *           held as bfloat16 patterns in four registers and looked up 32
 *           codes at a time with word permutes (vpermi2w); 8-bit formats
 *           look up the magnitude and OR in the sign, the fnuz NaN is fixed.
 *           e8m0: code << 23 with compares for codes 0 and 0xFF.
 *   encode  bfloat16: round to nearest even on the float32 bits, NaN fixup.
 *           Small formats: mf_enc1 in every lane: RNE on the float32 bits in
 *           the format's normal range, an FPU add of a power of two in its
 *           subnormal range, then the overflow/NaN/inf/fnuz fixups by mask.
 *   sum/dot the canonical order of kernels.h: lanes 0..15 and 16..31 of the
 *           32 lanes are two registers, combined by halving.
 *   Outputs of 8 MB and more are written with non-temporal stores.
 * The loops are body.h's; this file has the registers, the primitives and
 * the masked tails.
 *
 * Operand order matters for which NaN a float operation returns when both
 * operands are NaNs (x86 returns the first source), which decides the sign
 * of the NaN code stored.  The kernels use the serial kernels' order, which
 * serial states explicitly (nan_order.h): a op b with a first, lanes[j] + x
 * with the lane first, fmaf(a, b, lane) preferring a's NaN, then b's, then
 * the lane's, and lanes_combine's own order (combine32).  The operations
 * are written in assembly so that the compiler cannot commute them; the
 * tests check the NaN signs against serial.
 */
#include <immintrin.h>
#include "../kernels.h"
#include "../scalar_ops.h"
#include "../simd_params.h"
#include "../stats/stats.h"

#define MF_INLINE static inline __attribute__((always_inline))


/* ------------------------------------------------------- registers */

typedef struct {
    /* decode: the bfloat16 patterns (float32's top halves) of codes 0..127,
     * 32 per register */
    __m512i lut[4];
    int sign_bit7, fnuz;
    /* encode */
    __m512i maxfin;
    __m128i drop;
    __m512i min_normal, round_bias, exp_adj, sub_cbits, sbit;
    __m512 sub_c;
    __m512i big_code, nan_and, nan_xor;
    int nan_fix;
    __m512i keep_mask, big_val;      /* convert's fused loop (enc_small_w) */
} regs512;

MF_INLINE void
regs_init(regs512 *r, const mf_simd_params *p)
{
    if (p->path == MF_SIMD_SMALL || p->path == MF_SIMD_SINT || p->path == MF_SIMD_UINT) {
        /* every value of these formats has at most 8 significant bits: the
         * low half of its float32 is zero */
        const float *lut = mf_lut8[p->id];
        for (int q = 0; q < 4; q++) {
            __m512i lo = _mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(lut + 32 * q)), 16);
            __m512i hi = _mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(lut + 32 * q + 16)), 16);
            r->lut[q] = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),
                                                 _mm512_packus_epi32(lo, hi));
        }
    }
    r->sign_bit7 = p->sign_bit7;
    r->fnuz = p->fnuz;
    r->maxfin = _mm512_set1_epi32((int)p->maxfin);
    r->drop = _mm_cvtsi32_si128(p->drop);
    r->min_normal = _mm512_set1_epi32((int)p->min_normal_bits);
    r->round_bias = _mm512_set1_epi32((int)p->round_bias);
    r->exp_adj = _mm512_set1_epi32((int)p->exp_adj);
    r->sub_cbits = _mm512_set1_epi32((int)p->sub_cbits);
    r->sub_c = _mm512_castsi512_ps(r->sub_cbits);
    r->sbit = _mm512_set1_epi32((int)p->sbit);
    r->big_code = _mm512_set1_epi32((int)p->big_code);
    r->nan_and = _mm512_set1_epi32((int)p->nan_and);
    r->nan_xor = _mm512_set1_epi32((int)p->nan_xor);
    r->nan_fix = p->nan_fix;
    r->keep_mask = _mm512_set1_epi32((int)~((1u << p->drop) - 1u));
    /* big_code's value: the largest finite one where big lanes saturate,
     * else not finite (any NaN: the fused loop then leaves the block) */
    r->big_val = _mm512_set1_epi32((int)(p->big_code <= p->maxfin
                                         ? (p->big_code << p->mant_shift) + p->dec_adj
                                         : 0x7FC00000u));
}

#define I32(x) _mm512_set1_epi32((int)(x))

/* ------------------------------------------------------- decode, 16 lanes */

MF_INLINE __m512
dec_bf16(__m256i codes)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(codes), 16));
}

MF_INLINE __m512
dec_e8m0(__m512i c)
{
    __m512i v = _mm512_slli_epi32(c, 23);
    v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(c, _mm512_setzero_si512()), I32(0x00400000));
    v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(c, I32(0xFF)), I32(0x7FC00000));
    return _mm512_castsi512_ps(v);
}

#define I16(x) _mm512_set1_epi16((short)(x))

/* 32 byte codes -> float32, elements 0..15 in *v0 and 16..31 in *v1.
 * SMALL: the table mf_lut8 itself, looked up 32 codes at a time in its
 * bfloat16 form (two two-register word permutes for codes 0..127, the sign
 * ORed in, the fnuz NaN fixed).  E8M0: arithmetic. */
MF_INLINE void
dec8x32(const regs512 *r, mf_simd_path path, __m256i bytes, __m512 *v0, __m512 *v1)
{
    if (path == MF_SIMD_E8M0) {
        *v0 = dec_e8m0(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(bytes)));
        *v1 = dec_e8m0(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(bytes, 1)));
        return;
    }
    __m512i w = _mm512_cvtepu8_epi16(bytes);
    /* 128-bit lane L gets elements 4L..4L+3 and 16+4L..16+4L+3, which the
     * unpacks with zero below turn into elements 0..15 and 16..31 */
    w = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), w);
    __m512i lo = _mm512_permutex2var_epi16(r->lut[0], w, r->lut[1]);
    __m512i hi = _mm512_permutex2var_epi16(r->lut[2], w, r->lut[3]);
    __m512i v = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(w, I16(0x40)), lo, hi);
    if (r->sign_bit7) {
        /* v | ((w << 8) & 0x8000) */
        v = _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(w, 8), I16(0x8000), 0xF8);
    }
    if (r->fnuz) {
        v = _mm512_mask_mov_epi16(v, _mm512_cmpeq_epi16_mask(w, I16(0x80)), I16(0xFFC0));
    }
    *v0 = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), v));
    *v1 = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), v));
}

MF_INLINE __mmask32
first32(mf_intp m)
{
    /* the first m (clamped to 0..32) lanes */
    if (m <= 0) {
        return 0;
    }
    return m >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << m) - 1u);
}

/* ------------------------------------------------------- encode, 16 lanes */

/* u + 0x7FFF + the kept bit's lsb: the bfloat16 code rounded to nearest
 * even in the high half, where |x| is below 0x7F7F8000 (where rounding
 * reaches infinity) */
MF_INLINE __m512i
round_bf16_hi(__m512i u)
{
    __mmask16 odd = _mm512_test_epi32_mask(u, I32(0x10000));
    __m512i t = _mm512_add_epi32(u, I32(0x7FFF));
    return _mm512_mask_add_epi32(t, odd, t, I32(1));
}

/* float32 -> bfloat16 codes in the low half of each lane: NaN the quiet NaN
 * of its sign, overflow (a finite value rounding to infinity) in *ovf */
MF_INLINE __m512i
enc_bf16_special(__m512 x, __mmask16 *ovf)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_srli_epi32(round_bf16_hi(u), 16);
    __m512i au = _mm512_and_si512(u, I32(0x7FFFFFFF));
    __mmask16 knan = _mm512_cmpgt_epi32_mask(au, I32(0x7F800000));
    /* (hi & 0x8000) | 0x7FC0 */
    __m512i nanv = _mm512_ternarylogic_epi32(hi, I32(0x8000), I32(0x7FC0), 0xEA);
    r = _mm512_mask_mov_epi32(r, knan, nanv);
    /* finite values in [0x7F7F8000, 0x7F800000) round to inf */
    *ovf |= _mm512_cmplt_epu32_mask(_mm512_sub_epi32(au, I32(0x7F7F8000)), I32(0x8000));
    return r;
}

/* the same, the rounding alone where no lane is that large or a NaN */
MF_INLINE __m512i
enc_bf16(__m512 x, __mmask16 *ovf)
{
    __m512i u = _mm512_castps_si512(x);
    __mmask16 big = _mm512_cmpge_epu32_mask(_mm512_and_si512(u, I32(0x7FFFFFFF)), I32(0x7F7F8000));
    if (__builtin_expect(big != 0, 0)) {
        return enc_bf16_special(x, ovf);
    }
    return _mm512_srli_epi32(round_bf16_hi(u), 16);
}

/* the codes of 16 float32 values.  With w (convert's fused loop), also the
 * values the codes decode to, where x is finite, as avx2.c's enc_small_w
 * gets them: the rounded magnitude out of the encoder's own steps (a normal
 * result's bits with the dropped bits cleared, a subnormal one as t - C),
 * big lanes r->big_val, the sign x's. */
/* masked forms of x86.h's operations, in assembly: a compiler may
 * otherwise compute a masked operation on every lane and blend (clang does),
 * raising flags for the masked-off lanes */
#define ASM_OP_MASKZ(INSN, R, K, A, B) \
    __asm__(INSN " %[b], %[a], %[r]%{%[k]%}%{z%}" : [r] "=v"(R) : [a] "v"(A), [b] "v"(B), [k] "Yk"(K))
/* VRNDSCALEPS with the rounding in imm8's low bits and bit 3 (no inexact):
 * 8 nearest, 9 down, 0xA up, 0xB toward zero (as _MM_FROUND_NO_EXC | mode) */
#define ASM_ROUND_MASKZ(IMM, R, K, A) \
    __asm__("vrndscaleps $" #IMM ", %[a], %[r]%{%[k]%}%{z%}" : [r] "=v"(R) : [a] "v"(A), [k] "Yk"(K))
#define ASM_OP_MERGE(INSN, ACC, K, B) \
    __asm__(INSN " %[b], %[acc], %[acc]%{%[k]%}" : [acc] "+v"(ACC) : [b] "v"(B), [k] "Yk"(K))

MF_INLINE __m512i
enc_small_w(const regs512 *r, __m512 x, __mmask16 *ovf, mf_simd_path path, __m512 *w)
{
    /* MF_SIMD_SMALL: one loop for every rule, the registers' flags decide;
     * a rule fixed by the caller (cast_err's loops) makes them constants,
     * as simd_params.h sets them: a result of 0 drops its sign only in the
     * fnuz rule, and only IEEE formats, whose overflow code is inf, need
     * the NaN step (the other rules' overflow code is their NaN).  The
     * registers' tests had cost a flag test and mask moves through a
     * general register on every vector: cast_err 9.0-9.4 -> 8.2-8.3 ms a
     * 2^24 bf16 -> float8_e4m3fn at one thread (Zen 4) */
    const int fnuz = path == MF_SIMD_SMALL ? r->fnuz : path == MF_SIMD_SMALL_FNUZ;
    const int nan_fix = (path == MF_SIMD_SMALL || path == MF_SIMD_SMALL_NONE) ? r->nan_fix
                                                                              : path == MF_SIMD_SMALL_IEEE;
    __m512i u = _mm512_castps_si512(x);
    __m512i au = _mm512_and_si512(u, I32(0x7FFFFFFF));
    __mmask16 neg = _mm512_movepi32_mask(u);
    /* the format's normal range: round the float32 bits */
    __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(au, r->drop), I32(1));
    __m512i rn = _mm512_add_epi32(_mm512_add_epi32(au, r->round_bias), lsb);
    __m512i cn = _mm512_sub_epi32(_mm512_srl_epi32(rn, r->drop), r->exp_adj);
    /* its subnormal range: the FPU rounds |x| + C (also run, harmlessly, on
     * the other lanes except NaN ones, masked off so that a signaling NaN
     * raises nothing: a NaN is copied, as by NumPy's float16 casts) */
    __mmask16 knan_in = _mm512_cmpgt_epi32_mask(au, I32(0x7F800000));
    __m512 t;
    ASM_OP_MASKZ("vaddps", t, (__mmask16)~knan_in, _mm512_castsi512_ps(au), r->sub_c);
    __m512i cs = _mm512_sub_epi32(_mm512_castps_si512(t), r->sub_cbits);
    __mmask16 knorm = _mm512_cmpge_epi32_mask(au, r->min_normal);
    __m512i code = _mm512_mask_mov_epi32(cs, knorm, cn);
    __mmask16 kbig = _mm512_cmpgt_epi32_mask(code, r->maxfin);
    /* overflow, inf and NaN lanes are big: the overflow code, signed */
    code = _mm512_mask_mov_epi32(code, kbig, r->big_code);
    __mmask16 ksign = neg;
    if (fnuz) {
        ksign = _mm512_mask_cmpneq_epi32_mask(neg, code, _mm512_setzero_si512());
    }
    __m512i res = _mm512_mask_or_epi32(code, ksign, code, r->sbit);
    if (nan_fix) {
        /* (res & nan_and) ^ nan_xor on the NaN lanes */
        __mmask16 knan = _mm512_cmpgt_epi32_mask(au, I32(0x7F800000));
        res = _mm512_mask_ternarylogic_epi32(res, knan, r->nan_and, r->nan_xor, 0x6A);
    }
    if (w != NULL) {
        __m512i wa = _mm512_mask_mov_epi32(_mm512_castps_si512(_mm512_sub_ps(t, r->sub_c)),
                                           knorm, _mm512_and_si512(rn, r->keep_mask));
        wa = _mm512_mask_mov_epi32(wa, kbig, r->big_val);
        *w = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(wa, u, I32(0x80000000), 0xF8));
    }
    /* NaN and inf lanes are big too, but only finite ones overflow */
    if (ovf != NULL) {
        *ovf |= _mm512_mask_cmplt_epi32_mask(kbig, au, I32(0x7F800000));
    }
    return res;
}

MF_INLINE __m512i
enc_small(const regs512 *r, __m512 x, __mmask16 *ovf)
{
    return enc_small_w(r, x, ovf, MF_SIMD_SMALL, NULL);
}

MF_INLINE __m512i
enc_e8m0(__m512 x, __mmask16 *ovf)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i au = _mm512_and_si512(u, I32(0x7FFFFFFF));
    /* normal float32: ties round up (the significand 1 is odd) */
    __m512i code = _mm512_srli_epi32(_mm512_add_epi32(au, I32(0x400000)), 23);
    /* float32 subnormals: 0, or 1 from 1.5 * 2^-127 up */
    __mmask16 ksub = _mm512_cmplt_epi32_mask(au, I32(0x00800000));
    __m512i csub = _mm512_maskz_mov_epi32(_mm512_cmpge_epi32_mask(au, I32(0x00600000)), I32(1));
    code = _mm512_mask_mov_epi32(code, ksub, csub);
    /* positive and finite: 0 < u < inf; the rest (NaN, inf, zero, negative) is
     * NaN.  Integer compares only: a signaling NaN raises nothing. */
    __mmask16 kgood = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(u, I32(1)), I32(0x7F7FFFFF));
    *ovf |= _mm512_mask_cmpeq_epi32_mask(kgood, code, I32(0xFF));
    return _mm512_mask_mov_epi32(I32(0xFF), kgood, code);
}

MF_INLINE __m512i
enc_v(const regs512 *r, mf_simd_path path, __m512 x, __mmask16 *ovf)
{
    return path == MF_SIMD_E8M0 ? enc_e8m0(x, ovf) : enc_small(r, x, ovf);
}

/* four vectors of codes (0..255 in each lane) -> 64 bytes in order */
MF_INLINE __m512i
pack64(__m512i c0, __m512i c1, __m512i c2, __m512i c3)
{
    /* per 128-bit lane L the packs leave c0..c3's elements 4L..4L+3 in
     * dwords 4L..4L+3; gather dword 4L + q to position 4q + L */
    __m512i p = _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
    return _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), p);
}

/* ------------------------------------------------------- stores */

/* the split into streamed and ordinary segments: stream_split (simd_params.h);
 * the kernels loop over the segments with one call of their inner loop (a
 * run-time `stream` flag) so that it is compiled once */

MF_INLINE void
store_ps(float *p, __m512 v, int stream)
{
    if (stream) {
        _mm512_stream_ps(p, v);
    }
    else {
        _mm512_storeu_ps(p, v);
    }
}

MF_INLINE void
store_si(void *p, __m512i v, int stream)
{
    if (stream) {
        _mm512_stream_si512((__m512i *)p, v);
    }
    else {
        _mm512_storeu_si512(p, v);
    }
}

/* 32 bfloat16 codes from two vectors of codes (0..0xFFFF in each lane) */
MF_INLINE __m512i
pack32x16(__m512i lo, __m512i hi)
{
    /* packus works per 128-bit lane: restore the order after */
    __m512i packed = _mm512_packus_epi32(lo, hi);
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), packed);
}

MF_INLINE __mmask16
first16(mf_intp m)
{
    /* the first m (clamped to 0..16) lanes */
    if (m <= 0) {
        return 0;
    }
    return m >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << m) - 1u);
}

/* ------------------------------------------------------- ordered float ops */

typedef __m512 vf_t;
#define X86_ROUND(a, mode) _mm512_roundscale_ps(a, (mode) | _MM_FROUND_NO_EXC)
#define X86_SQRT(a) _mm512_sqrt_ps(a)
#define X86_ONE _mm512_set1_ps(1.0f)
#include "x86.h"

MF_INLINE __m512
op512_mask(mf_binary_op op, __mmask16 k, __m512 a, __m512 b)
{
    __m512 r;
    switch (op) {
        case MF_OP_ADD: ASM_OP_MASKZ("vaddps", r, k, a, b); break;
        case MF_OP_SUB: ASM_OP_MASKZ("vsubps", r, k, a, b); break;
        case MF_OP_MUL: ASM_OP_MASKZ("vmulps", r, k, a, b); break;
        case MF_OP_DIV: ASM_OP_MASKZ("vdivps", r, k, a, b); break;
        case MF_OP_FLOOR: ASM_ROUND_MASKZ(0x9, r, k, a); break;
        case MF_OP_CEIL: ASM_ROUND_MASKZ(0xA, r, k, a); break;
        case MF_OP_TRUNC: ASM_ROUND_MASKZ(0xB, r, k, a); break;
        case MF_OP_RINT: ASM_ROUND_MASKZ(0x8, r, k, a); break;
        case MF_OP_SQRT:
            __asm__("vsqrtps %[a], %[r]%{%[k]%}%{z%}" : [r] "=v"(r) : [a] "v"(a), [k] "Yk"(k));
            break;
        default: ASM_OP_MASKZ("vdivps", r, k, X86_ONE, a); break;
    }
    return r;
}

MF_INLINE __m512
add512_merge(__m512 acc, __mmask16 k, __m512 b)
{
    ASM_OP_MERGE("vaddps", acc, k, b);
    return acc;
}

/* ------------------------------------------------------- body.h's primitives */

#define MF_ISA(name) mf_avx512_##name
#define VL 16
#define DEC8_VECS 2
#define BODY_STREAM 1
/* one loop for every rule (the table lookup and the masked fixups read the
 * rule from the registers), the integers' values in the table too */
#define BODY_SMALL_BY_RULE 0
#define BODY_INT_PATHS 0
typedef regs512 regs_t;
typedef __m512i vi_t;
typedef __mmask16 ovf_t;
typedef __mmask16 bovf_t;

MF_INLINE __mmask16
ovf_none(void)
{
    return 0;
}

MF_INLINE int
ovf_any(__mmask16 ovf)
{
    return ovf != 0;
}

#define bovf_none ovf_none

MF_INLINE void
bovf_merge(__mmask16 *ovf, __mmask16 b)
{
    *ovf |= b;
}

MF_INLINE __m512
load_f(const float *p)
{
    return _mm512_loadu_ps(p);
}

#define store_f store_ps

MF_INLINE __m512
splat_f(float x)
{
    return _mm512_set1_ps(x);
}

/* column maxima, minima (body.h's col_op): x's NaN replaces the lane, an
 * a that is NaN stays (MAXPS returns its second source when unordered) */
MF_INLINE __m512
maxn_v(__m512 a, __m512 x)
{
    return _mm512_mask_mov_ps(_mm512_max_ps(x, a), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

MF_INLINE __m512
minn_v(__m512 a, __m512 x)
{
    return _mm512_mask_mov_ps(_mm512_min_ps(x, a), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

MF_INLINE void
dec_bf16_2(const uint16_t *s, __m512 v[2])
{
    __m512i c = _mm512_loadu_si512((const void *)s);
    v[0] = dec_bf16(_mm512_castsi512_si256(c));
    v[1] = dec_bf16(_mm512_extracti64x4_epi64(c, 1));
}

MF_INLINE void
dec8_n(const regs512 *r, mf_simd_path path, const uint8_t *s, __m512 v[2])
{
    dec8x32(r, path, _mm256_loadu_si256((const __m256i *)s), &v[0], &v[1]);
}

/* column sums of narrow rows: 16 codes from element i, as float32, the
 * sums of up to 16 vectors in registers */
#define COLSUM_REG_VECS 16
#define COLSUM_DEC1 colsum_dec1
MF_INLINE __m512
colsum_dec1(const regs512 *r, mf_simd_path path, const void *src, mf_intp i)
{
    if (path == MF_SIMD_BF16) {
        return dec_bf16(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i)));
    }
    __m512 v0, v1;
    dec8x32(r, path, _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)((const uint8_t *)src + i))),
            &v0, &v1);
    return v0;
}

MF_INLINE __m512i
enc_bf16_v(const regs512 *r, __m512 x, __mmask16 *ovf)
{
    return enc_bf16(x, ovf);
}

MF_INLINE void
store_codes4(uint8_t *d, const __m512i c[4], int stream)
{
    store_si(d, pack64(c[0], c[1], c[2], c[3]), stream);
}

MF_INLINE void
store_bf16_2(uint16_t *d, __m512i lo, __m512i hi, int stream)
{
    store_si(d, pack32x16(lo, hi), stream);
}

/* ------------------------------------------------------- masked tails */

#define DEC_BF16_TAIL dec_bf16_tail
MF_INLINE mf_intp
dec_bf16_tail(const uint16_t *s, float *dst, mf_intp i, mf_intp n)
{
    for (; i < n; i += 16) {
        __mmask16 k = first16(n - i);
        _mm512_mask_storeu_ps(dst + i, k, dec_bf16(_mm256_maskz_loadu_epi16(k, s + i)));
    }
    return n;
}

#define DEC8_TAIL dec8_tail
MF_INLINE mf_intp
dec8_tail(const regs512 *r, mf_simd_path path, const uint8_t *s, float *dst, mf_intp i, mf_intp n)
{
    if (i < n) {
        __m512 v0, v1;
        __mmask32 k = first32(n - i);
        dec8x32(r, path, _mm256_maskz_loadu_epi8(k, s + i), &v0, &v1);
        _mm512_mask_storeu_ps(dst + i, (__mmask16)k, v0);
        _mm512_mask_storeu_ps(dst + i + 16, (__mmask16)(k >> 16), v1);
    }
    return n;
}

#define ENC_BF16_TAIL enc_bf16_tail
MF_INLINE mf_intp
enc_bf16_tail(const regs512 *r, const float *src, uint16_t *d, mf_intp i, mf_intp n,
              __mmask16 *ovf)
{
    for (; i < n; i += 16) {
        __mmask16 k = first16(n - i), o = 0;
        __m512i c = enc_bf16_v(r, _mm512_maskz_loadu_ps(k, src + i), &o);
        *ovf |= o & k;
        _mm512_mask_cvtepi32_storeu_epi16(d + i, k, c);
    }
    return n;
}

#define ENC8_TAIL enc8_tail
MF_INLINE mf_intp
enc8_tail(const regs512 *r, mf_simd_path path, const float *src, uint8_t *d, mf_intp i, mf_intp n,
          __mmask16 *ovf)
{
    for (; i < n; i += 16) {
        __mmask16 k = first16(n - i), o = 0;
        __m512i c = enc_v(r, path, _mm512_maskz_loadu_ps(k, src + i), &o);
        *ovf |= o & k;
        _mm512_mask_cvtepi32_storeu_epi8(d + i, k, c);
    }
    return n;
}

/* 32 bfloat16 pairs in place (as avx2.c's): the even codes shifted up and
 * the odd ones masked are their float32 values, and the two results go
 * back the same way, with no widening, packing or permuting shuffles.
 * The results are rounded by the integer addition alone (round_bf16_hi),
 * as enc_bf16 does where its check lets it; a pair with a larger
 * magnitude (VRANGEPS: the larger magnitude of the two, the other value
 * where one is a NaN) or a NaN (an unordered comparison) goes through
 * enc_bf16_special whole.  Both comparisons are quiet and the operation's
 * results are never signalling NaNs, so they raise no flag. */
#define HAVE_BINARY_BF16_2
MF_INLINE void
binary_bf16_2(mf_binary_op op, const regs512 *r, const uint16_t *a, const uint16_t *b,
              uint16_t *out, __mmask16 *ovf, int stream)
{
    (void)r;
    const __m512i hi16 = I32(0xFFFF0000u);
    __m512i ca = _mm512_loadu_si512((const void *)a);
    __m512i cb = _mm512_loadu_si512((const void *)b);
    __m512 ev = op_v(op, _mm512_castsi512_ps(_mm512_slli_epi32(ca, 16)),
                     _mm512_castsi512_ps(_mm512_slli_epi32(cb, 16)));
    __m512 od = op_v(op, _mm512_castsi512_ps(_mm512_and_si512(ca, hi16)),
                     _mm512_castsi512_ps(_mm512_and_si512(cb, hi16)));
    __m512i te = round_bf16_hi(_mm512_castps_si512(ev));
    __m512i to = round_bf16_hi(_mm512_castps_si512(od));
    /* the even codes in the low halves, the odd ones in the high: A | (B & C) */
    __m512i c = _mm512_ternarylogic_epi32(_mm512_srli_epi32(te, 16), to, hi16, 0xF8);
    __mmask16 big = _mm512_cmp_ps_mask(_mm512_range_ps(ev, od, 0x0B),
                                       _mm512_castsi512_ps(I32(0x7F7F8000)), _CMP_NLT_UQ);
    __mmask16 nan = _mm512_cmp_ps_mask(ev, od, _CMP_UNORD_Q);
    if (__builtin_expect(!_kortestz_mask16_u8(big, nan), 0)) {
        c = _mm512_or_si512(enc_bf16_special(ev, ovf),
                            _mm512_slli_epi32(enc_bf16_special(od, ovf), 16));
    }
    store_si(out, c, stream);
}

/* IEEE float16 (NumPy's float16 casts): VCVTPS2PH, round to nearest even,
 * as avx2.c's enc_f16_run, the tail masked */
#define ENC_F16_RUN enc_f16_run
MF_INLINE __m256i
enc_f16_16(__m512 x, __mmask16 *ovf)
{
    __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    __mmask16 nan = _mm256_cmpgt_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                           _mm256_set1_epi16(0x7C00));
    __m256i canon = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)),
                                    _mm256_set1_epi16(0x7E00));
    __m512i a = _mm512_and_si512(_mm512_castps_si512(x), I32(0x7FFFFFFF));
    *ovf |= _mm512_mask_cmpgt_epi32_mask(_mm512_cmplt_epi32_mask(a, I32(0x7F800000)), a,
                                         I32(0x477FEFFF));
    return _mm256_mask_mov_epi16(h, nan, canon);
}

MF_INLINE mf_intp
enc_f16_run(const float *src, uint16_t *d, mf_intp n, int stream, int *ovf)
{
    const unsigned int csr = mxcsr_save();
    __mmask16 o = 0;
    mf_intp i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i h0 = enc_f16_16(_mm512_loadu_ps(src + i), &o);
        __m256i h1 = enc_f16_16(_mm512_loadu_ps(src + i + 16), &o);
        store_si(d + i, _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1), stream);
    }
    for (; i < n; i += 16) {
        __mmask16 k = first16(n - i), ok = 0;
        __m256i h = enc_f16_16(_mm512_maskz_loadu_ps(k, src + i), &ok);
        o |= ok & k;
        _mm256_mask_storeu_epi16(d + i, k, h);
    }
    mxcsr_restore(csr);
    *ovf |= o != 0;
    return n;
}

/* and back: VCVTPH2PS, as avx2.c's dec_f16_run, the tail masked */
#define DEC_F16_RUN dec_f16_run
MF_INLINE __m512
dec_f16_16(__m256i h)
{
    __m512i u = _mm512_castps_si512(_mm512_cvtph_ps(h));
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, I32(0x7FFFFFFF)), I32(0x7F800000));
    return _mm512_castsi512_ps(_mm512_mask_ternarylogic_epi32(u, nan, I32(0x80000000u),
                                                              I32(0x7FC00000), 0xEA));
}

MF_INLINE mf_intp
dec_f16_run(const uint16_t *s, float *d, mf_intp n, int stream)
{
    const unsigned int csr = mxcsr_save();
    mf_intp i = 0;
    for (; i + 16 <= n; i += 16) {
        store_ps(d + i, dec_f16_16(_mm256_loadu_si256((const __m256i *)(s + i))), stream);
    }
    if (i < n) {
        __mmask16 k = first16(n - i);
        _mm512_mask_storeu_ps(d + i, k, dec_f16_16(_mm256_maskz_loadu_epi16(k, s + i)));
    }
    mxcsr_restore(csr);
    return n;
}

#define BINARY_BF16_TAIL binary_bf16_tail
MF_INLINE mf_intp
binary_bf16_tail(mf_binary_op op, const regs512 *r, const uint16_t *pa, const uint16_t *pb,
                 uint16_t *po, mf_intp i, mf_intp n, __mmask16 *ovf)
{
    for (; i < n; i += 16) {
        __mmask16 k = first16(n - i), o = 0;
        __m512 x = dec_bf16(_mm256_maskz_loadu_epi16(k, pa + i));
        __m512 y = dec_bf16(_mm256_maskz_loadu_epi16(k, pb + i));
        __m512i c = enc_bf16_v(r, op512_mask(op, k, x, y), &o);
        *ovf |= o & k;
        _mm512_mask_cvtepi32_storeu_epi16(po + i, k, c);
    }
    return n;
}

#define BINARY8_TAIL binary8_tail
MF_INLINE mf_intp
binary8_tail(mf_binary_op op, const regs512 *r, mf_simd_path path, const uint8_t *pa,
             const uint8_t *pb, uint8_t *po, mf_intp i, mf_intp n, __mmask16 *ovf)
{
    __m512 x0, x1, y0, y1;
    for (; i < n; i += 32) {
        __mmask32 k = first32(n - i);
        __mmask16 k0 = (__mmask16)k, k1 = (__mmask16)(k >> 16), o0 = 0, o1 = 0;
        dec8x32(r, path, _mm256_maskz_loadu_epi8(k, pa + i), &x0, &x1);
        dec8x32(r, path, _mm256_maskz_loadu_epi8(k, pb + i), &y0, &y1);
        __m512i c0 = enc_v(r, path, op512_mask(op, k0, x0, y0), &o0);
        __m512i c1 = enc_v(r, path, op512_mask(op, k1, x1, y1), &o1);
        *ovf |= (o0 & k0) | (o1 & k1);
        _mm512_mask_cvtepi32_storeu_epi8(po + i, k0, c0);
        _mm512_mask_cvtepi32_storeu_epi8(po + i + 16, k1, c1);
    }
    return n;
}

/* ------------------------------------------------------- sum, dot */

/* lanes[j] += lanes[j + w] for w = 16, 8, then combine8 (x86.h) */
MF_INLINE float
combine32(const __m512 acc[2])
{
    __m512 s16 = add_v(acc[1], acc[0]);
    return combine8(add256(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s16), 1)),
                           _mm512_castps512_ps256(s16)));
}

MF_INLINE __m512
fma_acc_mask(__m512 a, __m512 b, __m512 acc, __mmask16 k)
{
    __asm__("vfmadd231ps %[b], %[a], %[acc]%{%[k]%}" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b), [k] "Yk"(k));
    return acc;
}

/* the codes from element i of a block for the live lanes k (the others
 * decode code 0) */
MF_INLINE void
load_dec32_mask(const regs512 *r, mf_simd_path path, const void *src, mf_intp i, __mmask32 k,
                __m512 v[2])
{
    if (path == MF_SIMD_BF16) {
        __m512i c = _mm512_maskz_loadu_epi16(k, (const uint16_t *)src + i);
        v[0] = dec_bf16(_mm512_castsi512_si256(c));
        v[1] = dec_bf16(_mm512_extracti64x4_epi64(c, 1));
        return;
    }
    dec8x32(r, path, _mm256_maskz_loadu_epi8(k, (const uint8_t *)src + i), &v[0], &v[1]);
}

/* sum and dot of bfloat16: 32 codes as their even and odd elements (a
 * shift and a mask; the widening of dec_bf16_2 runs on the shuffle unit,
 * which bounded the dot at about 4 codes a cycle on a Zen 4), and the
 * lanes so filled (indices 0, 2, .., 30 and 1, 3, .., 31 of each 32) put
 * back in index order */
#define HAVE_DEC_BF16_EO
MF_INLINE void
dec_bf16_eo(const uint16_t *s, __m512 v[2])
{
    __m512i c = _mm512_loadu_si512((const void *)s);
    v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(c, 16));
    v[1] = _mm512_castsi512_ps(_mm512_and_si512(c, _mm512_set1_epi32((int)0xFFFF0000u)));
}

MF_INLINE void
eo_lanes(__m512 acc[2])
{
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                         15, 31);
    __m512 e = acc[0], o = acc[1];
    acc[0] = _mm512_permutex2var_ps(e, lo, o);
    acc[1] = _mm512_permutex2var_ps(e, hi, o);
}

/* a block's last len - i < 32 values into the live lanes only */
#define SUM_TAIL sum_tail
MF_INLINE void
sum_tail(const regs512 *r, mf_simd_path path, const void *src, mf_intp i, mf_intp len,
         __m512 acc[2])
{
    __mmask32 k = first32(len - i);
    __m512 v[2];
    load_dec32_mask(r, path, src, i, k, v);
    acc[0] = add512_merge(acc[0], (__mmask16)k, v[0]);
    acc[1] = add512_merge(acc[1], (__mmask16)(k >> 16), v[1]);
}

#define DOT_TAIL dot_tail
MF_INLINE void
dot_tail(const regs512 *r, mf_simd_path path, const void *a, const void *b, mf_intp i,
         mf_intp len, __m512 acc[2])
{
    __mmask32 k = first32(len - i);
    __m512 x[2], y[2];
    load_dec32_mask(r, path, a, i, k, x);
    load_dec32_mask(r, path, b, i, k, y);
    acc[0] = fma_acc_mask(x[0], y[0], acc[0], (__mmask16)k);
    acc[1] = fma_acc_mask(x[1], y[1], acc[1], (__mmask16)(k >> 16));
}

/* ------------------------------------------------------- cast with error */

/* convert's fused loop (body.h): the eight float64 lanes of err2 and ref2
 * in one register each; a vector's elements 0-7 and then 8-15 go into lanes
 * 0-7, in that order (kernels.h: element i to lane i % 8).  zy, zx: lanes
 * counting w == 0 and v == 0 (convert's zeros; a pass of their own over the
 * codes and x was 7% of convert's time) */
#define HAVE_CAST_ERR
typedef struct {
    __m512d e, r;
    __m512i zy, zx;
} err_acc_t;

MF_INLINE void
err_init(err_acc_t *acc)
{
    acc->e = acc->r = _mm512_setzero_pd();
    acc->zy = acc->zx = _mm512_setzero_si512();
}

MF_INLINE void
err_store(const err_acc_t *acc, double le[8], double lr[8], int64_t *zy, int64_t *zx)
{
    _mm512_storeu_pd(le, acc->e);
    _mm512_storeu_pd(lr, acc->r);
    *zy = _mm512_reduce_add_epi32(acc->zy);
    *zx = _mm512_reduce_add_epi32(acc->zx);
}

MF_INLINE __m512
load_src(int skind, const void *x, mf_intp i)
{
    if (skind == MF_CE_F32) {
        return _mm512_loadu_ps((const float *)x + i);
    }
    __m256i c = _mm256_loadu_si256((const __m256i *)((const uint16_t *)x + i));
    return skind == MF_CE_BF16 ? dec_bf16(c) : _mm512_cvtph_ps(c);
}

MF_INLINE void
err_acc(__m512 v, __m512 w, err_acc_t *acc, int q)
{
    (void)q;
    __m512 e = _mm512_sub_ps(w, v);
    __m512d ea = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
    __m512d eb = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    __m512d xa = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d xb = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    /* a float32 value's square is exact in float64: the FMA rounds once */
    acc->e = _mm512_fmadd_pd(ea, ea, acc->e);
    acc->e = _mm512_fmadd_pd(eb, eb, acc->e);
    acc->r = _mm512_fmadd_pd(xa, xa, acc->r);
    acc->r = _mm512_fmadd_pd(xb, xb, acc->r);
    const __m512i one = _mm512_set1_epi32(1);
    acc->zy = _mm512_mask_add_epi32(acc->zy, _mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_EQ_OQ),
                                    acc->zy, one);
    acc->zx = _mm512_mask_add_epi32(acc->zx, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ),
                                    acc->zx, one);
}

/* the float32 value of enc_bf16's codes (in the low halves) */
MF_INLINE __m512
bf16_value(__m512i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

#include "body.h"

#define PW_NAME mf_avx512_pairwise_f32
#define PW_DECODE mf_avx512_decode_f32
#include "pairwise.h"

#define AE_NAME8 mf_avx512_arg_extreme8
#define AE_NAME16 mf_avx512_arg_extreme16
#include "argext.h"

#define KY_NAME8 mf_avx512_keyed8
#define KY_NAME16 mf_avx512_keyed16
#include "keyed.h"

/* 32 codes (zero-extended to words) through a table of 256 words in eight
 * registers: VPERMT2W looks up 64 entries by the index's low 6 bits, bits 6
 * and 7 choose among the four results (AVX-512BW) */
MF_INLINE __m512i
lut256_w(const __m512i T[8], __m512i idx)
{
    __m512i r0 = _mm512_permutex2var_epi16(T[0], idx, T[1]);
    __m512i r1 = _mm512_permutex2var_epi16(T[2], idx, T[3]);
    __m512i r2 = _mm512_permutex2var_epi16(T[4], idx, T[5]);
    __m512i r3 = _mm512_permutex2var_epi16(T[6], idx, T[7]);
    __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
    __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    __m512i lo = _mm512_mask_mov_epi16(r0, b6, r1);
    __m512i hi = _mm512_mask_mov_epi16(r2, b6, r3);
    return _mm512_mask_mov_epi16(lo, b7, hi);
}

uint32_t
mf_avx512_lut8(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n)
{
    __m512i T[8];
    for (int k = 0; k < 8; k++) {
        T[k] = _mm512_loadu_si512((const void *)(t + 32 * k));
    }
    __m512i acc = _mm512_setzero_si512();
    mf_intp i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i idx = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(in + i)));
        __m512i r = lut256_w(T, idx);
        acc = _mm512_or_si512(acc, r);
        _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtepi16_epi8(r));
    }
    if (i < n) {
        const __mmask32 m = (__mmask32)((1ull << (n - i)) - 1);
        __m512i idx = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, in + i));
        __m512i r = _mm512_maskz_mov_epi16(m, lut256_w(T, idx));
        acc = _mm512_or_si512(acc, r);
        _mm256_mask_storeu_epi8(out + i, m, _mm512_cvtepi16_epi8(r));
    }
    const uint32_t w = (uint32_t)_mm512_reduce_or_epi32(acc);
    return ((w | (w >> 16)) & 0xFFFFu) >> 8;
}

/*
 * float64 -> float32 rounded to odd, 8 at a time: VCVTPD2PS toward zero with
 * exceptions suppressed (embedded rounding: the MXCSR mode does not apply),
 * back to float64 (exact), the lowest bit set where the bits differ; NaN
 * lanes the quiet NaN of their sign, as the serial step.  A truncation to a
 * float32 subnormal is flushed under MXCSR.FTZ: then the serial step.
 */
void
mf_avx512_f64_to_f32_odd(const double *src, float *dst, mf_intp n)
{
    if (_mm_getcsr() & 0x8000u) {
        for (mf_intp i = 0; i < n; i++) {
            dst[i] = mf_f64_to_f32_odd(src[i]);
        }
        return;
    }
    const __m512i absm = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
    const __m512i inf = _mm512_set1_epi64(0x7FF0000000000000ll);
    for (mf_intp i = 0; i < n; i += 8) {
        const __mmask8 m = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
        const __m512d x = _mm512_maskz_loadu_pd(m, src + i);
        const __m512i xi = _mm512_castpd_si512(x);
        const __m256 t = _mm512_cvt_roundpd_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m512i back = _mm512_castpd_si512(_mm512_cvtps_pd(t));
        __m256i r = _mm256_castps_si256(t);
        r = _mm256_mask_or_epi32(r, _mm512_cmpneq_epi64_mask(xi, back), r, _mm256_set1_epi32(1));
        const __mmask8 knan = _mm512_cmpgt_epu64_mask(_mm512_and_si512(xi, absm), inf);
        const __m256i sign = _mm256_and_si256(_mm512_cvtepi64_epi32(_mm512_srli_epi64(xi, 32)),
                                              _mm256_set1_epi32((int)0x80000000u));
        r = _mm256_mask_or_epi32(r, knan, sign, _mm256_set1_epi32(0x7FC00000));
        _mm256_mask_storeu_epi32(dst + i, m, r);
    }
}

const mf_kernels mf_kernels_avx512 = {
    .name = "avx512",
    .decode_f32 = mf_avx512_decode_f32,
    .encode_f32 = mf_avx512_encode_f32,
    .binary = mf_avx512_binary,
    .pairwise_f32 = mf_avx512_pairwise_f32,
    .arg_extreme8 = mf_avx512_arg_extreme8,
    .arg_extreme16 = mf_avx512_arg_extreme16,
    .keyed8 = mf_avx512_keyed8,
    .keyed16 = mf_avx512_keyed16,
    .lut8 = mf_avx512_lut8,
    .f64_to_f32_odd = mf_avx512_f64_to_f32_odd,
    .colsum_f32 = mf_avx512_colsum_f32,
    .colmax_f32 = mf_avx512_colmax_f32,
    .sum = mf_avx512_sum,
    .sum_rows = mf_avx512_sum_rows,
    .dot = mf_avx512_dot,
    .dot_cols = mf_avx512_dot_cols,
    .gemm_f32acc = mf_avx512_gemm_f32acc,
    .gemm_f32acc_bt = mf_avx512_gemm_f32acc_bt,
    .gemm_thin_cols = mf_avx512_gemm_thin_cols,
    .stats_f32 = mf_avx512_stats_f32,
    .stats_f32_2 = mf_avx512_stats_f32_2,
    .cast_err = mf_avx512_cast_err,
};
