/*
 * Which NaN a float operation returns, written out for the serial kernels.
 *
 * IEEE 754 leaves unspecified which NaN comes out of an operation with NaN
 * operands, and C compilers treat + and * as commutative: gcc 12, gcc 13
 * and clang each order the operands of `a * b`, `lane += x` and fmaf
 * differently, and the hardware returns the NaN of the operand it meets
 * first.  The SIMD levels pin their operand order in assembly (x86.h,
 * neon.c); the serial kernels, their oracle, compute each operation in C and
 * then choose the NaN by the rule of the hardware they run on, so the oracle
 * gives the same bits whatever compiled it:
 *
 *   x86-64   the first NaN operand, quieted (the first source operand);
 *            fused multiply-add (vfmadd231: acc + a * b): a's, b's, acc's.
 *   AArch64  the first signaling NaN operand, quieted, else the first quiet
 *            one; FMLA (acc + a * b): acc's, a's, b's, and a quiet acc
 *            with a * b = inf * 0 gives the default NaN.
 *
 * An operation without NaN operands is left to the hardware: the default
 * NaN of inf - inf or 0 * inf does not depend on operand order.  The
 * operation itself is always computed, so it raises the same flags.
 */
#ifndef MF_NAN_ORDER_H
#define MF_NAN_ORDER_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__aarch64__) || defined(__arm__)
#define MF_NAN_SIGNALING_FIRST 1
#else
#define MF_NAN_SIGNALING_FIRST 0
#endif

static inline uint32_t
mf_no_bits32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float
mf_no_quiet32(float x)
{
    uint32_t u = mf_no_bits32(x) | 0x00400000u;
    memcpy(&x, &u, 4);
    return x;
}

static inline int
mf_no_snan32(float x)
{
    return x != x && !(mf_no_bits32(x) & 0x00400000u);
}

/* r = a op b for a commutative-looking op (+, -, *, /), a first */
static inline float
mf_ordered2(float a, float b, float r)
{
    if (r == r || (a == a && b == b)) {
        return r;
    }
    if (MF_NAN_SIGNALING_FIRST && !mf_no_snan32(a) && mf_no_snan32(b)) {
        return mf_no_quiet32(b);
    }
    return mf_no_quiet32(a != a ? a : b);
}

static inline float
mf_add_ord(float a, float b)
{
    return mf_ordered2(a, b, a + b);
}

static inline int
mf_no_snan64(double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return x != x && !(u & 0x0008000000000000ull);
}

/* total + x in double, total first */
static inline double
mf_add_ord_d(double total, double x)
{
    double r = total + x;
    if (r == r || (total == total && x == x)) {
        return r;
    }
    double p = total != total ? total : x;
    if (MF_NAN_SIGNALING_FIRST && !mf_no_snan64(total) && mf_no_snan64(x)) {
        p = x;
    }
    uint64_t u;
    memcpy(&u, &p, 8);
    u |= 0x0008000000000000ull;
    memcpy(&p, &u, 8);
    return p;
}

/* a + b in double with a the first operand of the instruction (on x86 the
 * first NaN operand is the one returned; elsewhere mf_add_ord_d's rule, a
 * first): sums that must give the same NaN wherever they are added up
 * (parallel.c's block totals, umath's run sums and their reproductions) */
static inline double
mf_add_first(double a, double b)
{
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    __asm__("addsd %[b], %[r]" : [r] "+x"(a) : [b] "x"(b));
    return a;
#else
    return mf_add_ord_d(a, b);
#endif
}

/* acc + a * b, fused */
static inline float
mf_fma_ord(float a, float b, float acc)
{
    float r = fmaf(a, b, acc);
    if (r == r || (a == a && b == b && acc == acc)) {
        return r;
    }
#if MF_NAN_SIGNALING_FIRST
    if (mf_no_snan32(acc)) return mf_no_quiet32(acc);
    if (mf_no_snan32(a)) return mf_no_quiet32(a);
    if (mf_no_snan32(b)) return mf_no_quiet32(b);
    if (acc != acc) {
        if ((isinf(a) && b == 0.0f) || (a == 0.0f && isinf(b))) {
            return r;   /* the default NaN, as FMLA gives */
        }
        return acc;
    }
    return a != a ? a : b;
#else
    return mf_no_quiet32(a != a ? a : b != b ? b : acc);
#endif
}

#endif
