/*
 * maximum / minimum / clip of 8- and 16-bit sign-magnitude codes (the
 * formats argext.h scans) by their keys, without decoding: written once in
 * plain C and included by each level's file, which defines KY_NAME8 and
 * KY_NAME16 first (the compiler vectorizes the loops with that level's
 * flags; every level computes the same integers).
 *
 * KY_NAME16(op, lim, a, sa, b, sb, c, sc, r, n) (KY_NAME8 alike) puts into
 * r[i], i < n, the operand that NumPy's float32 loop of np.maximum /
 * np.minimum (op MF_KEYED_MAX / MF_KEYED_MIN, operands a and b) or np.clip
 * (MF_KEYED_CLIP: a between b and c, as min(max(a, b), c)) returns, by
 * comparing argkey.h's keys (-0 and +0 both 0).  Of two operands with equal
 * keys it takes the second (max(a, b) is a > b ? a : b), which is the same
 * code unless they are zeros of different signs.  The strides are in
 * elements (0: a scalar).  It returns nonzero if an operand is a NaN or,
 * unless op has MF_KEYED_TIES, two compared operands are zeros: the caller
 * computes such a block NumPy's way, and r is then not all set.
 * MF_KEYED_TIES is the caller's word that NumPy's loop also returns the
 * second of two equal zeros (loops.c checks that once, on NumPy's loop).
 * The usual calls, an array and a scalar (ReLU), two contiguous arrays, an
 * array between two scalars, have loops of their own; the flag accumulates
 * in the codes' width so that they vectorize.
 */
#include <stdint.h>
#include "argkey.h"

#define KY_DEFINE(NAME, P, U, S, SMAX)                                                  \
    int                                                                                 \
    NAME(int op, S lim, const U *a, mf_intp sa, const U *b, mf_intp sb, const U *c,     \
         mf_intp sc, U *r, mf_intp n)                                                   \
    {                                                                                   \
        const S nan = (S)SMAX;                                                          \
        /* 1: zero ties are flagged; 0: they take the second operand */                 \
        const U zf = (U)((op & MF_KEYED_TIES) == 0);                                    \
        U sp = 0;                                                                       \
        op &= ~MF_KEYED_TIES;                                                           \
        if (op == MF_KEYED_CLIP && sa == 1 && sb == 0 && sc == 0) {                     \
            /* an array between two scalars */                                          \
            const U lo = b[0], hi = c[0];                                               \
            const S kl = P##_key(lo, lim, nan), kh = P##_key(hi, lim, nan);             \
            if (kl == nan || kh == nan || (zf && (kl | kh) == 0)) {                     \
                return 1;                                                               \
            }                                                                           \
            for (mf_intp i = 0; i < n; i++) {                                           \
                const S kx = P##_key(a[i], lim, nan);                                   \
                sp |= (U)((kx == nan) | ((((kx | kl) == 0) | ((kx | kh) == 0)) & zf));  \
                const U m = kx > kl ? a[i] : lo;                                        \
                const S km = kx > kl ? kx : kl;                                         \
                r[i] = km < kh ? m : hi;                                                \
            }                                                                           \
        }                                                                               \
        else if (op == MF_KEYED_CLIP) {                                                 \
            for (mf_intp i = 0; i < n; i++) {                                           \
                const U x = a[i * sa], lo = b[i * sb], hi = c[i * sc];                  \
                const S kx = P##_key(x, lim, nan), kl = P##_key(lo, lim, nan);          \
                const S kh = P##_key(hi, lim, nan);                                     \
                sp |= (U)((kx == nan) | (kl == nan) | (kh == nan)                       \
                          | ((((kx | kl) == 0) | ((kx | kh) == 0) | ((kl | kh) == 0))   \
                             & zf));                                                    \
                const U m = kx > kl ? x : lo;                                           \
                const S km = kx > kl ? kx : kl;                                         \
                r[i] = km < kh ? m : hi;                                                \
            }                                                                           \
        }                                                                               \
        else if (sa == 1 && sb == 0) {       /* an array and a scalar (ReLU) */         \
            const U y = b[0];                                                           \
            const S ky = P##_key(y, lim, nan);                                          \
            if (ky == nan) {                                                            \
                return 1;                                                               \
            }                                                                           \
            if (op == MF_KEYED_MAX) {                                                   \
                for (mf_intp i = 0; i < n; i++) {                                       \
                    const S kx = P##_key(a[i], lim, nan);                               \
                    sp |= (U)((kx == nan) | (((kx | ky) == 0) & zf));                   \
                    r[i] = kx > ky ? a[i] : y;                                          \
                }                                                                       \
            }                                                                           \
            else {                                                                      \
                for (mf_intp i = 0; i < n; i++) {                                       \
                    const S kx = P##_key(a[i], lim, nan);                               \
                    sp |= (U)((kx == nan) | (((kx | ky) == 0) & zf));                   \
                    r[i] = kx < ky ? a[i] : y;                                          \
                }                                                                       \
            }                                                                           \
        }                                                                               \
        else if (sa == 1 && sb == 1) {       /* two contiguous arrays */                \
            const int want_max = op == MF_KEYED_MAX;                                    \
            for (mf_intp i = 0; i < n; i++) {                                           \
                const S kx = P##_key(a[i], lim, nan), ky = P##_key(b[i], lim, nan);     \
                sp |= (U)((kx == nan) | (ky == nan) | (((kx | ky) == 0) & zf));         \
                r[i] = (want_max ? kx > ky : kx < ky) ? a[i] : b[i];                    \
            }                                                                           \
        }                                                                               \
        else {                                                                          \
            const int want_max = op == MF_KEYED_MAX;                                    \
            for (mf_intp i = 0; i < n; i++) {                                           \
                const U x = a[i * sa], y = b[i * sb];                                   \
                const S kx = P##_key(x, lim, nan), ky = P##_key(y, lim, nan);           \
                sp |= (U)((kx == nan) | (ky == nan) | (((kx | ky) == 0) & zf));         \
                r[i] = (want_max ? kx > ky : kx < ky) ? x : y;                          \
            }                                                                           \
        }                                                                               \
        return sp != 0;                                                                 \
    }

KY_DEFINE(KY_NAME8, ae8, uint8_t, int8_t, INT8_MAX)
KY_DEFINE(KY_NAME16, ae16, uint16_t, int16_t, INT16_MAX)

#undef KY_DEFINE
