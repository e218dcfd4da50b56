/*
 * The ordered float operations of the x86 levels (avx2.c, avx512.c), for
 * their float32 vector type vf_t (defined before this file is included).
 *
 * They are written in assembly: which NaN an operation returns when both
 * operands are NaNs (x86 returns the first source's) decides the sign of the
 * NaN code stored, and the compiler may otherwise swap the operands of a
 * commutative intrinsic.  ASM_OP(INSN, r, a, b) is "INSN b, a, r" in AT&T
 * order, i.e. r = a op b with a the first source.  ("v" is any vector
 * register the level has: xmm/ymm 0-15 without AVX-512.)
 */
#ifndef MF_STREAM_X86_H
#define MF_STREAM_X86_H

/* MXCSR around a loop of conversion instructions (VCVTPS2PH, VCVTPH2PS)
 * that raise flags the serial codec does not: saved before the loop, put
 * back after its stores (the barriers keep the stores between the two) */
static inline unsigned int
mxcsr_save(void)
{
    const unsigned int csr = _mm_getcsr();
    __asm__ volatile("" : : : "memory");
    return csr;
}

static inline void
mxcsr_restore(unsigned int csr)
{
    __asm__ volatile("" : : : "memory");
    _mm_setcsr(csr);
}

#define ASM_OP(INSN, R, A, B) \
    __asm__(INSN " %[b], %[a], %[r]" : [r] "=v"(R) : [a] "v"(A), [b] "v"(B))

MF_INLINE vf_t
op_v(mf_binary_op op, vf_t a, vf_t b)
{
    vf_t r;
    switch (op) {
        case MF_OP_ADD: ASM_OP("vaddps", r, a, b); break;
        case MF_OP_SUB: ASM_OP("vsubps", r, a, b); break;
        case MF_OP_MUL: ASM_OP("vmulps", r, a, b); break;
        case MF_OP_DIV: ASM_OP("vdivps", r, a, b); break;
        /* one operand (b unused); the level's X86_ROUND, X86_SQRT, X86_ONE */
        case MF_OP_FLOOR: r = X86_ROUND(a, _MM_FROUND_TO_NEG_INF); break;
        case MF_OP_CEIL: r = X86_ROUND(a, _MM_FROUND_TO_POS_INF); break;
        case MF_OP_TRUNC: r = X86_ROUND(a, _MM_FROUND_TO_ZERO); break;
        case MF_OP_RINT: r = X86_ROUND(a, _MM_FROUND_TO_NEAREST_INT); break;
        case MF_OP_SQRT: r = X86_SQRT(a); break;
        default: ASM_OP("vdivps", r, X86_ONE, a); break;
    }
    return r;
}

MF_INLINE vf_t
add_v(vf_t a, vf_t b)
{
    vf_t r;
    ASM_OP("vaddps", r, a, b);
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

/* lanes = a * b + lanes as the serial kernel computes it (nan_order.h):
 * a's NaN first, then b's, then the lane's */
MF_INLINE vf_t
fma_acc(vf_t a, vf_t b, vf_t acc)
{
    __asm__("vfmadd231ps %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
    return acc;
}

/* total + x with total the first source, as serial */
MF_INLINE double
add_total(double total, float x)
{
    double xd = (double)x;
    __asm__("vaddsd %[b], %[a], %[r]" : [r] "=v"(total) : [a] "v"(total), [b] "v"(xd));
    return total;
}

/*
 * The end of combine32 (body.h's sum lanes by halving): lanes[j] +=
 * lanes[j + w] for w = 4, 2, 1 on the eight lanes left.  Which operand comes
 * first only matters when both are NaNs of different signs; the serial
 * lanes_combine adds with the upper lanes as the first source for
 * w = 16, 8, 4 and the lower lanes first for w = 2, 1 (the order gcc 12
 * gave it when it was left to the compiler; now written out there).
 */
MF_INLINE float
combine8(__m256 s8)
{
    __m128 s4 = add128(_mm256_extractf128_ps(s8, 1), _mm256_castps256_ps128(s8));
    /* lanes 2, 3 of both operands zero, as in serial: no lane may raise a
     * flag serial does not (doubling a large lane would overflow) */
    __m128 s2 = add128(_mm_castsi128_ps(_mm_move_epi64(_mm_castps_si128(s4))),
                       _mm_movehl_ps(_mm_setzero_ps(), s4));
    __m128 s1 = add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

/* after a loop of non-temporal stores */
MF_INLINE void
stream_fence(void)
{
    _mm_sfence();
}

#endif
