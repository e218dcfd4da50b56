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
 *
 * Operand order matters for which NaN a float operation returns when both
 * operands are NaNs (x86 returns the first source), which decides the sign
 * of the NaN code stored.  The kernels use the order of the serial kernels
 * as gcc 12 compiles them: a op b with a first, lanes[j] + x with the lane
 * first, fmaf(a, b, lane) preferring a's NaN, then b's, then the lane's,
 * and lanes_combine's own order (combine32).  The operations are written in
 * assembly so that the compiler cannot commute them; the tests check the
 * NaN signs against serial.  (The serial order itself is a compiler choice:
 * IEEE 754 leaves the NaN of a NaN-NaN operation unspecified.)
 */
#include <immintrin.h>
#include "../kernels.h"
#include "../scalar_ops.h"
#include "../simd_params.h"

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

/* float32 -> bfloat16 codes in the low half of each lane */
MF_INLINE __m512i
enc_bf16(__m512 x, __mmask16 *ovf)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(hi, I32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, I32(0x7FFF)), lsb), 16);
    __m512i au = _mm512_and_si512(u, I32(0x7FFFFFFF));
    __mmask16 knan = _mm512_cmpgt_epi32_mask(au, I32(0x7F800000));
    /* (hi & 0x8000) | 0x7FC0 */
    __m512i nanv = _mm512_ternarylogic_epi32(hi, I32(0x8000), I32(0x7FC0), 0xEA);
    r = _mm512_mask_mov_epi32(r, knan, nanv);
    /* finite values in [0x7F7F8000, 0x7F800000) round to inf */
    *ovf |= _mm512_cmplt_epu32_mask(_mm512_sub_epi32(au, I32(0x7F7F8000)), I32(0x8000));
    return r;
}

MF_INLINE __m512i
enc_small(const regs512 *r, __m512 x, __mmask16 *ovf)
{
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
    __m512 t = _mm512_maskz_add_ps((__mmask16)~knan_in, _mm512_castsi512_ps(au), r->sub_c);
    __m512i cs = _mm512_sub_epi32(_mm512_castps_si512(t), r->sub_cbits);
    __mmask16 knorm = _mm512_cmpge_epi32_mask(au, r->min_normal);
    __m512i code = _mm512_mask_mov_epi32(cs, knorm, cn);
    __mmask16 kbig = _mm512_cmpgt_epi32_mask(code, r->maxfin);
    /* overflow, inf and NaN lanes are big: the overflow code, signed */
    code = _mm512_mask_mov_epi32(code, kbig, r->big_code);
    __mmask16 ksign = neg;
    if (r->fnuz) {
        ksign = _mm512_mask_cmpneq_epi32_mask(neg, code, _mm512_setzero_si512());
    }
    __m512i res = _mm512_mask_or_epi32(code, ksign, code, r->sbit);
    if (r->nan_fix) {
        /* (res & nan_and) ^ nan_xor on the NaN lanes */
        __mmask16 knan = _mm512_cmpgt_epi32_mask(au, I32(0x7F800000));
        res = _mm512_mask_ternarylogic_epi32(res, knan, r->nan_and, r->nan_xor, 0x6A);
    }
    /* NaN and inf lanes are big too, but only finite ones overflow */
    *ovf |= _mm512_mask_cmplt_epi32_mask(kbig, au, I32(0x7F800000));
    return res;
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
enc8(const regs512 *r, mf_simd_path path, __m512 x, __mmask16 *ovf)
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

/* ------------------------------------------------------- decode_f32 */

/* n codes -> float32; with `stream`, n is a multiple of 64 and dst 64-byte aligned */
MF_INLINE void
decode_run(const regs512 *r, mf_simd_path path, const void *src, float *dst, mf_intp n, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (; i + 32 <= n; i += 32) {
            __m512i c = _mm512_loadu_si512((const void *)(s + i));
            store_ps(dst + i, dec_bf16(_mm512_castsi512_si256(c)), stream);
            store_ps(dst + i + 16, dec_bf16(_mm512_extracti64x4_epi64(c, 1)), stream);
        }
        for (; i < n; i += 16) {
            __mmask16 k = first16(n - i);
            _mm512_mask_storeu_ps(dst + i, k, dec_bf16(_mm256_maskz_loadu_epi16(k, s + i)));
        }
        return;
    }
    const uint8_t *s = (const uint8_t *)src;
    __m512 v0, v1;
    for (; i + 32 <= n; i += 32) {
        dec8x32(r, path, _mm256_loadu_si256((const __m256i *)(s + i)), &v0, &v1);
        store_ps(dst + i, v0, stream);
        store_ps(dst + i + 16, v1, stream);
    }
    if (i < n) {
        __mmask32 k = first32(n - i);
        dec8x32(r, path, _mm256_maskz_loadu_epi8(k, s + i), &v0, &v1);
        _mm512_mask_storeu_ps(dst + i, (__mmask16)k, v0);
        _mm512_mask_storeu_ps(dst + i + 16, (__mmask16)(k >> 16), v1);
    }
}

MF_INLINE void
decode_path(const regs512 *r, mf_simd_path path, mf_intp isz, const void *src, float *dst, mf_intp n)
{
    segments sg = stream_split(dst, 4, n, 64);
    for (int q = 0; q < sg.count; q++) {
        mf_intp at = sg.start[q];
        decode_run(r, path, (const char *)src + at * isz, dst + at, sg.len[q], sg.stream[q]);
        if (sg.stream[q]) {
            _mm_sfence();
        }
    }
}

void
mf_avx512_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs512 r;
    regs_init(&r, &p);
    switch (p.path) {
        case MF_SIMD_BF16:  decode_path(&r, MF_SIMD_BF16, 2, src, dst, n); break;
        case MF_SIMD_SMALL: decode_path(&r, MF_SIMD_SMALL, 1, src, dst, n); break;
        case MF_SIMD_E8M0:  decode_path(&r, MF_SIMD_E8M0, 1, src, dst, n); break;
        /* the integers' values are in mf_lut8 too */
        case MF_SIMD_SINT:
        case MF_SIMD_UINT:  decode_path(&r, MF_SIMD_SMALL, 1, src, dst, n); break;
        default:            mf_serial_decode_f32(f, src, dst, n); break;
    }
}

/* ------------------------------------------------------- encode_f32 */

/* n float32 -> codes; returns the lanes that overflowed.  With `stream`, n
 * is a multiple of 64 and dst 64-byte aligned. */
MF_INLINE __mmask16
encode_run(const regs512 *r, mf_simd_path path, const float *src, void *dst, mf_intp n, int stream)
{
    mf_intp i = 0;
    __mmask16 ovf = 0;
    if (path == MF_SIMD_BF16) {
        uint16_t *d = (uint16_t *)dst;
        for (; i + 32 <= n; i += 32) {
            __m512i lo = enc_bf16(_mm512_loadu_ps(src + i), &ovf);
            __m512i hi = enc_bf16(_mm512_loadu_ps(src + i + 16), &ovf);
            store_si(d + i, pack32x16(lo, hi), stream);
        }
        for (; i < n; i += 16) {
            __mmask16 k = first16(n - i), o = 0;
            __m512i c = enc_bf16(_mm512_maskz_loadu_ps(k, src + i), &o);
            ovf |= o & k;
            _mm512_mask_cvtepi32_storeu_epi16(d + i, k, c);
        }
        return ovf;
    }
    uint8_t *d = (uint8_t *)dst;
    for (; i + 64 <= n; i += 64) {
        __m512i c0 = enc8(r, path, _mm512_loadu_ps(src + i), &ovf);
        __m512i c1 = enc8(r, path, _mm512_loadu_ps(src + i + 16), &ovf);
        __m512i c2 = enc8(r, path, _mm512_loadu_ps(src + i + 32), &ovf);
        __m512i c3 = enc8(r, path, _mm512_loadu_ps(src + i + 48), &ovf);
        store_si(d + i, pack64(c0, c1, c2, c3), stream);
    }
    for (; i < n; i += 16) {
        __mmask16 k = first16(n - i), o = 0;
        __m512i c = enc8(r, path, _mm512_maskz_loadu_ps(k, src + i), &o);
        ovf |= o & k;
        _mm512_mask_cvtepi32_storeu_epi8(d + i, k, c);
    }
    return ovf;
}

MF_INLINE void
encode_path(const regs512 *r, mf_simd_path path, mf_intp osz, const float *src, void *dst, mf_intp n)
{
    segments sg = stream_split(dst, osz, n, 64);
    __mmask16 ovf = 0;
    for (int q = 0; q < sg.count; q++) {
        mf_intp at = sg.start[q];
        ovf |= encode_run(r, path, src + at, (char *)dst + at * osz, sg.len[q], sg.stream[q]);
        if (sg.stream[q]) {
            _mm_sfence();
        }
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

void
mf_avx512_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs512 r;
    regs_init(&r, &p);
    switch (p.path) {
        case MF_SIMD_BF16:  encode_path(&r, MF_SIMD_BF16, 2, src, dst, n); break;
        case MF_SIMD_SMALL: encode_path(&r, MF_SIMD_SMALL, 1, src, dst, n); break;
        case MF_SIMD_E8M0:  encode_path(&r, MF_SIMD_E8M0, 1, src, dst, n); break;
        default:            mf_serial_encode_f32(f, src, dst, n); break;
    }
}

/* ------------------------------------------------------- ordered float ops */

/*
 * The float operations whose operand order decides which NaN comes out are
 * written in assembly: the compiler may otherwise swap the operands of a
 * commutative intrinsic.  OPx(b, a) is "op b, a, r" in AT&T order, i.e.
 * r = a op b with a the first source.
 */
#define ASM_OP(INSN, R, A, B) \
    __asm__(INSN " %[b], %[a], %[r]" : [r] "=v"(R) : [a] "v"(A), [b] "v"(B))
#define ASM_OP_MASKZ(INSN, R, K, A, B) \
    __asm__(INSN " %[b], %[a], %[r]%{%[k]%}%{z%}" : [r] "=v"(R) : [a] "v"(A), [b] "v"(B), [k] "Yk"(K))
#define ASM_OP_MERGE(INSN, ACC, K, B) \
    __asm__(INSN " %[b], %[acc], %[acc]%{%[k]%}" : [acc] "+v"(ACC) : [b] "v"(B), [k] "Yk"(K))

MF_INLINE __m512
op512(mf_binary_op op, __m512 a, __m512 b)
{
    __m512 r;
    switch (op) {
        case MF_OP_ADD: ASM_OP("vaddps", r, a, b); break;
        case MF_OP_SUB: ASM_OP("vsubps", r, a, b); break;
        case MF_OP_MUL: ASM_OP("vmulps", r, a, b); break;
        default:        ASM_OP("vdivps", r, a, b); break;
    }
    return r;
}

MF_INLINE __m512
op512_mask(mf_binary_op op, __mmask16 k, __m512 a, __m512 b)
{
    __m512 r;
    switch (op) {
        case MF_OP_ADD: ASM_OP_MASKZ("vaddps", r, k, a, b); break;
        case MF_OP_SUB: ASM_OP_MASKZ("vsubps", r, k, a, b); break;
        case MF_OP_MUL: ASM_OP_MASKZ("vmulps", r, k, a, b); break;
        default:        ASM_OP_MASKZ("vdivps", r, k, a, b); break;
    }
    return r;
}

MF_INLINE __m512
add512(__m512 a, __m512 b)
{
    __m512 r;
    ASM_OP("vaddps", r, a, b);
    return r;
}

MF_INLINE __m512
add512_merge(__m512 acc, __mmask16 k, __m512 b)
{
    ASM_OP_MERGE("vaddps", acc, k, b);
    return acc;
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

/* ------------------------------------------------------- binary */

/* n pairs; returns the lanes that overflowed.  With `stream`, n is a
 * multiple of 64 and out 64-byte aligned. */
MF_INLINE __mmask16
binary_run(mf_binary_op op, const regs512 *r, mf_simd_path path, const void *a, const void *b,
           void *out, mf_intp n, int stream)
{
    mf_intp i = 0;
    __mmask16 ovf = 0;
    if (path == MF_SIMD_BF16) {
        const uint16_t *pa = (const uint16_t *)a, *pb = (const uint16_t *)b;
        uint16_t *po = (uint16_t *)out;
        for (; i + 32 <= n; i += 32) {
            __m512i ca = _mm512_loadu_si512((const void *)(pa + i));
            __m512i cb = _mm512_loadu_si512((const void *)(pb + i));
            __m512 r0 = op512(op, dec_bf16(_mm512_castsi512_si256(ca)), dec_bf16(_mm512_castsi512_si256(cb)));
            __m512 r1 = op512(op, dec_bf16(_mm512_extracti64x4_epi64(ca, 1)),
                              dec_bf16(_mm512_extracti64x4_epi64(cb, 1)));
            __m512i lo = enc_bf16(r0, &ovf);
            __m512i hi = enc_bf16(r1, &ovf);
            store_si(po + i, pack32x16(lo, hi), stream);
        }
        for (; i < n; i += 16) {
            __mmask16 k = first16(n - i), o = 0;
            __m512 x = dec_bf16(_mm256_maskz_loadu_epi16(k, pa + i));
            __m512 y = dec_bf16(_mm256_maskz_loadu_epi16(k, pb + i));
            __m512i c = enc_bf16(op512_mask(op, k, x, y), &o);
            ovf |= o & k;
            _mm512_mask_cvtepi32_storeu_epi16(po + i, k, c);
        }
        return ovf;
    }
    const uint8_t *pa = (const uint8_t *)a, *pb = (const uint8_t *)b;
    uint8_t *po = (uint8_t *)out;
    __m512 x0, x1, y0, y1;
    for (; i + 64 <= n; i += 64) {
        __m512i c[4];
        for (int q = 0; q < 2; q++) {
            dec8x32(r, path, _mm256_loadu_si256((const __m256i *)(pa + i + 32 * q)), &x0, &x1);
            dec8x32(r, path, _mm256_loadu_si256((const __m256i *)(pb + i + 32 * q)), &y0, &y1);
            c[2 * q] = enc8(r, path, op512(op, x0, y0), &ovf);
            c[2 * q + 1] = enc8(r, path, op512(op, x1, y1), &ovf);
        }
        store_si(po + i, pack64(c[0], c[1], c[2], c[3]), stream);
    }
    for (; i < n; i += 32) {
        __mmask32 k = first32(n - i);
        __mmask16 k0 = (__mmask16)k, k1 = (__mmask16)(k >> 16), o0 = 0, o1 = 0;
        dec8x32(r, path, _mm256_maskz_loadu_epi8(k, pa + i), &x0, &x1);
        dec8x32(r, path, _mm256_maskz_loadu_epi8(k, pb + i), &y0, &y1);
        __m512i c0 = enc8(r, path, op512_mask(op, k0, x0, y0), &o0);
        __m512i c1 = enc8(r, path, op512_mask(op, k1, x1, y1), &o1);
        ovf |= (o0 & k0) | (o1 & k1);
        _mm512_mask_cvtepi32_storeu_epi8(po + i, k0, c0);
        _mm512_mask_cvtepi32_storeu_epi8(po + i + 16, k1, c1);
    }
    return ovf;
}

MF_INLINE void
binary_path(mf_binary_op op, const regs512 *r, mf_simd_path path, mf_intp sz, const void *a,
            const void *b, void *out, mf_intp n)
{
    segments sg = stream_split(out, sz, n, 64);
    __mmask16 ovf = 0;
    for (int q = 0; q < sg.count; q++) {
        mf_intp at = sg.start[q] * sz;
        ovf |= binary_run(op, r, path, (const char *)a + at, (const char *)b + at, (char *)out + at,
                          sg.len[q], sg.stream[q]);
        if (sg.stream[q]) {
            _mm_sfence();
        }
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

#define BINARY_PATH(PATH, SZ)                                                              \
    switch (op) {                                                                         \
        case MF_OP_ADD: binary_path(MF_OP_ADD, &r, PATH, SZ, a, b, out, n); break;        \
        case MF_OP_SUB: binary_path(MF_OP_SUB, &r, PATH, SZ, a, b, out, n); break;        \
        case MF_OP_MUL: binary_path(MF_OP_MUL, &r, PATH, SZ, a, b, out, n); break;        \
        default:        binary_path(MF_OP_DIV, &r, PATH, SZ, a, b, out, n); break;        \
    }

void
mf_avx512_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                 void *out, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs512 r;
    regs_init(&r, &p);
    switch (p.path) {
        case MF_SIMD_BF16:  BINARY_PATH(MF_SIMD_BF16, 2) break;
        case MF_SIMD_SMALL: BINARY_PATH(MF_SIMD_SMALL, 1) break;
        case MF_SIMD_E8M0:  BINARY_PATH(MF_SIMD_E8M0, 1) break;
        default:            mf_serial_binary(op, f, a, b, out, n); break;
    }
}

/* ------------------------------------------------------- sum, dot */

/*
 * lanes[j] += lanes[j + w] for w = 16, 8, 4, 2, 1.  Which operand comes
 * first only matters when both are NaNs of different signs.  The serial
 * lanes_combine, as gcc 12 -O2 vectorises it, adds with the upper lanes as
 * the first source for w = 16, 8, 4 and the lower lanes first for w = 2, 1;
 * the same order here.
 */
MF_INLINE float
combine32(__m512 lo, __m512 hi)
{
    __m512 s16 = add512(hi, lo);
    __m256 s8 = add256(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s16), 1)),
                       _mm512_castps512_ps256(s16));
    __m128 s4 = add128(_mm256_extractf128_ps(s8, 1), _mm256_castps256_ps128(s8));
    /* lanes 2, 3 of both operands zero, as in serial: no lane may raise a
     * flag serial does not (doubling a large lane would overflow) */
    __m128 s2 = add128(_mm_castsi128_ps(_mm_move_epi64(_mm_castps_si128(s4))),
                       _mm_movehl_ps(_mm_setzero_ps(), s4));
    __m128 s1 = add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

/* total + x with total the first source, as serial */
MF_INLINE double
add_total(double total, float x)
{
    double xd = (double)x;
    __asm__("vaddsd %[b], %[a], %[r]" : [r] "=v"(total) : [a] "v"(total), [b] "v"(xd));
    return total;
}

/* the 32 codes from element i of a run as float32 (v0: the first 16) */
MF_INLINE void
load_dec32(const regs512 *r, mf_simd_path path, const void *src, mf_intp i, __m512 *v0, __m512 *v1)
{
    if (path == MF_SIMD_BF16) {
        __m512i c = _mm512_loadu_si512((const void *)((const uint16_t *)src + i));
        *v0 = dec_bf16(_mm512_castsi512_si256(c));
        *v1 = dec_bf16(_mm512_extracti64x4_epi64(c, 1));
        return;
    }
    dec8x32(r, path, _mm256_loadu_si256((const __m256i *)((const uint8_t *)src + i)), v0, v1);
}

/* the same for the live lanes k (the others decode code 0) */
MF_INLINE void
load_dec32_mask(const regs512 *r, mf_simd_path path, const void *src, mf_intp i, __mmask32 k,
                __m512 *v0, __m512 *v1)
{
    if (path == MF_SIMD_BF16) {
        __m512i c = _mm512_maskz_loadu_epi16(k, (const uint16_t *)src + i);
        *v0 = dec_bf16(_mm512_castsi512_si256(c));
        *v1 = dec_bf16(_mm512_extracti64x4_epi64(c, 1));
        return;
    }
    dec8x32(r, path, _mm256_maskz_loadu_epi8(k, (const uint8_t *)src + i), v0, v1);
}

/* the sum of one block (len <= MF_SUM_BLOCK) in the 32-lane order */
MF_INLINE float
sum_block(const regs512 *r, mf_simd_path path, const void *src, mf_intp len)
{
    __m512 acc0 = _mm512_set1_ps(-0.0f), acc1 = _mm512_set1_ps(-0.0f), v0, v1;
    mf_intp i = 0;
    for (; i + 32 <= len; i += 32) {
        load_dec32(r, path, src, i, &v0, &v1);
        acc0 = add512(acc0, v0);
        acc1 = add512(acc1, v1);
    }
    if (i < len) {
        __mmask32 k = first32(len - i);
        load_dec32_mask(r, path, src, i, k, &v0, &v1);
        acc0 = add512_merge(acc0, (__mmask16)k, v0);
        acc1 = add512_merge(acc1, (__mmask16)(k >> 16), v1);
    }
    return combine32(acc0, acc1);
}

/* lanes = fmaf(a, b, lanes) as the serial kernel computes it: a * b + acc
 * with a's NaN first, then b's, then acc's (gcc 12 passes the product's
 * operands to glibc's fmaf swapped, and glibc's FMA version prefers its
 * second argument's NaN) */
MF_INLINE __m512
fma_acc(__m512 a, __m512 b, __m512 acc)
{
    __asm__("vfmadd231ps %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
    return acc;
}

MF_INLINE __m512
fma_acc_mask(__m512 a, __m512 b, __m512 acc, __mmask16 k)
{
    __asm__("vfmadd231ps %[b], %[a], %[acc]%{%[k]%}" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b), [k] "Yk"(k));
    return acc;
}

MF_INLINE float
dot_block(const regs512 *r, mf_simd_path path, const void *a, const void *b, mf_intp len)
{
    __m512 acc0 = _mm512_set1_ps(-0.0f), acc1 = _mm512_set1_ps(-0.0f), x0, x1, y0, y1;
    mf_intp i = 0;
    for (; i + 32 <= len; i += 32) {
        load_dec32(r, path, a, i, &x0, &x1);
        load_dec32(r, path, b, i, &y0, &y1);
        acc0 = fma_acc(x0, y0, acc0);
        acc1 = fma_acc(x1, y1, acc1);
    }
    if (i < len) {
        __mmask32 k = first32(len - i);
        load_dec32_mask(r, path, a, i, k, &x0, &x1);
        load_dec32_mask(r, path, b, i, k, &y0, &y1);
        acc0 = fma_acc_mask(x0, y0, acc0, (__mmask16)k);
        acc1 = fma_acc_mask(x1, y1, acc1, (__mmask16)(k >> 16));
    }
    return combine32(acc0, acc1);
}

MF_INLINE double
sum_path(const regs512 *r, mf_simd_path path, const mf_format *f, const void *src, mf_intp n)
{
    double total = -0.0;
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        total = add_total(total, sum_block(r, path, (const char *)src + start * f->itemsize, len));
    }
    return total;
}

MF_INLINE double
dot_path(const regs512 *r, mf_simd_path path, const mf_format *f, const void *a, const void *b,
         mf_intp n)
{
    double total = -0.0;
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        total = add_total(total, dot_block(r, path, (const char *)a + start * f->itemsize,
                                           (const char *)b + start * f->itemsize, len));
    }
    return total;
}

double
mf_avx512_sum(const mf_format *f, const void *src, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs512 r;
    regs_init(&r, &p);
    switch (p.path) {
        case MF_SIMD_BF16:
            return sum_path(&r, MF_SIMD_BF16, f, src, n);
        case MF_SIMD_SMALL:
            return sum_path(&r, MF_SIMD_SMALL, f, src, n);
        case MF_SIMD_E8M0:
            return sum_path(&r, MF_SIMD_E8M0, f, src, n);
        default:
            return mf_serial_sum(f, src, n);
    }
}

double
mf_avx512_dot(const mf_format *f, const void *a, const void *b, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs512 r;
    regs_init(&r, &p);
    switch (p.path) {
        case MF_SIMD_BF16:
            return dot_path(&r, MF_SIMD_BF16, f, a, b, n);
        case MF_SIMD_SMALL:
            return dot_path(&r, MF_SIMD_SMALL, f, a, b, n);
        case MF_SIMD_E8M0:
            return dot_path(&r, MF_SIMD_E8M0, f, a, b, n);
        default:
            return mf_serial_dot(f, a, b, n);
    }
}

const mf_kernels mf_kernels_avx512 = {
    .name = "avx512",
    .decode_f32 = mf_avx512_decode_f32,
    .encode_f32 = mf_avx512_encode_f32,
    .binary = mf_avx512_binary,
    .sum = mf_avx512_sum,
    .dot = mf_avx512_dot,
    .gemm_f32acc = mf_avx512_gemm_f32acc,
    .stats_f32 = mf_avx2_stats_f32,
    .cast_err = mf_avx2_cast_err,
};
