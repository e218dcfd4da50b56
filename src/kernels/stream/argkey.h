/*
 * The key of argext.h's argmax / argmin of 8- and 16-bit sign-magnitude
 * codes: a code's value order as a signed integer (the magnitude, negated
 * for a negative code: -0 and +0 both 0), `nan` for a NaN (a magnitude
 * above lim).  Shared with src/numpy/sort.c, which checks at import, for
 * every code of a format, that this key orders it as its order key does
 * before it lets the kernels scan that format.  Masks, not conditionals,
 * which GCC does not vectorize.
 */
#ifndef MF_ARGKEY_H
#define MF_ARGKEY_H

#include <stdint.h>

#define MF_ARGKEY(P, U, S, SMAX)                                                        \
    static inline S                                                                    \
    P##_key(U c, S lim, S nan)                                                         \
    {                                                                                  \
        const S x = (S)c;                                                              \
        const S mag = (S)(x & SMAX);                                                   \
        const S neg = (S)(x >> (8 * sizeof(S) - 1));                   /* 0 or -1 */   \
        const S k = (S)((mag ^ neg) - neg);                                            \
        const S isnan = (S)-(S)(mag > lim);                            /* 0 or -1 */   \
        return (S)((k & ~isnan) | (nan & isnan));                                      \
    }

MF_ARGKEY(ae8, uint8_t, int8_t, INT8_MAX)
MF_ARGKEY(ae16, uint16_t, int16_t, INT16_MAX)

#undef MF_ARGKEY

#endif
