/*
 * argmax / argmin of 8- and 16-bit sign-magnitude codes (the float8 formats
 * whose codes order as sign and magnitude do, bfloat16), written once in
 * plain C and included by each level's file (serial.c, avx2.c, avx512.c,
 * neon.c), which defines AE_NAME8 and AE_NAME16 first: the compiler
 * vectorizes the loops with that level's flags, and every level computes
 * the same integers.
 *
 * AE_NAME16(c, n, lim, want_max) (AE_NAME8 alike) is NumPy's argmax
 * (argmin) of the n codes at c: the index of the first NaN (a magnitude
 * above lim) if there is one, else of the first largest (smallest) value.
 * The codes are scanned in blocks of AE_BLOCK.  A block's pass takes the
 * largest and the smallest of a cheap key, x ^ ((x >> 15) & 0x7FFF) of the
 * code x as a signed integer: the magnitude for a sign of 0, -1 - magnitude
 * for a sign of 1, which orders the numbers as their values but for -0
 * (-1) below +0 (0), and puts a NaN above lim or below -1 - lim.  Three
 * vector operations a vector, both extremes at once (argmax needs the
 * smallest to see a NaN of sign 1, argmin the largest for one of sign 0).
 * A block with a NaN: the first NaN's index is the answer.  Else the
 * block's extreme, made canonical (argkey.h's key: -1 -> 0, so -0 ties
 * with +0), is compared with the best so far, and only where it is better
 * is its first index looked up: argkey.h's key, AE_CHUNK codes at a time,
 * then one by one in the chunk that has it.
 */
#include <stdint.h>
#include "argkey.h"

#define AE_BLOCK 1024
#define AE_CHUNK 32

/* AE_DEFINE(NAME, P, U, S, SMIN, SMAX): the function NAME for codes of
 * type U, keys of type S, and its helpers */
#define AE_DEFINE(NAME, P, U, S, SMIN, SMAX)                                            \
    /* the first i < n with (c[i] & mask) == want (there is one; bounded */             \
    /* all the same, so another thread writing the array mid-call cannot */             \
    /* make it read past the block) */                                                  \
    static inline mf_intp                                                               \
    P##_find(const U *c, mf_intp n, U mask, U want)                                     \
    {                                                                                   \
        mf_intp i = 0;                                                                  \
        for (; i + AE_CHUNK <= n; i += AE_CHUNK) {                                      \
            int hit = 0;                                                                \
            for (int j = 0; j < AE_CHUNK; j++) {                                        \
                hit |= (U)(c[i + j] & mask) == want;                                    \
            }                                                                           \
            if (hit) {                                                                  \
                break;                                                                  \
            }                                                                           \
        }                                                                               \
        while (i < n - 1 && (U)(c[i] & mask) != want) {                                 \
            i++;                                                                        \
        }                                                                               \
        return i;                                                                       \
    }                                                                                   \
                                                                                        \
    /* the first i < n whose magnitude is above lim (there is one; bounded) */          \
    static inline mf_intp                                                               \
    P##_find_nan(const U *c, mf_intp n, S lim)                                          \
    {                                                                                   \
        mf_intp i = 0;                                                                  \
        while (i < n - 1 && (S)(c[i] & SMAX) <= lim) {                                  \
            i++;                                                                        \
        }                                                                               \
        return i;                                                                       \
    }                                                                                   \
                                                                                        \
    mf_intp                                                                             \
    NAME(const U *c, mf_intp n, S lim, int want_max)                                    \
    {                                                                                   \
        const S low = (S)(-1 - lim);              /* cheap keys below: NaN */           \
        S best = 0;                                                                     \
        mf_intp ind = 0;                                                                \
        for (mf_intp b0 = 0; b0 < n; b0 += AE_BLOCK) {                                  \
            const mf_intp len = n - b0 < AE_BLOCK ? n - b0 : AE_BLOCK;                  \
            const U *cb = c + b0;                                                       \
            S hi = (S)SMIN, lo = (S)SMAX;                                               \
            for (mf_intp i = 0; i < len; i++) {                                         \
                const S x = (S)cb[i];                                                   \
                const S k = (S)(x ^ ((S)(x >> (8 * sizeof(S) - 1)) & (S)SMAX));         \
                hi = k > hi ? k : hi;                                                   \
                lo = k < lo ? k : lo;                                                   \
            }                                                                           \
            if (hi > lim || lo < low) {                                                 \
                return b0 + P##_find_nan(cb, len, lim);                                 \
            }                                                                           \
            S m = want_max ? hi : lo;                                                   \
            m = (S)(m < 0 ? m + 1 : m);                /* canonical: argkey.h's */      \
            if (b0 == 0 || (want_max ? m > best : m < best)) {                          \
                /* the first code of that value: +0 or -0 for 0, else its code */       \
                const U mask = m == 0 ? (U)SMAX : (U)~(U)0;                             \
                const U want = m >= 0 ? (U)m : (U)((U)SMIN | (U)-m);                    \
                ind = b0 + P##_find(cb, len, mask, want);                               \
                best = m;                                                               \
            }                                                                           \
        }                                                                               \
        return ind;                                                                     \
    }

AE_DEFINE(AE_NAME8, ae8, uint8_t, int8_t, INT8_MIN, INT8_MAX)
AE_DEFINE(AE_NAME16, ae16, uint16_t, int16_t, INT16_MIN, INT16_MAX)

#undef AE_DEFINE
#undef AE_BLOCK
#undef AE_CHUNK
