/*
 * Pieces shared by the serial gemm (serial.c), the SIMD driver (driver.c)
 * and the levels' small-product loop (loops.h): the bfloat16 shortcut of the
 * epilogue.  Portable C, vectorised with the flags of the file that
 * includes it.
 */
#ifndef MF_GEMM_COMMON_H
#define MF_GEMM_COMMON_H

#include <stdint.h>
#include "../kernels.h"

/* or v into *p from several threads (the SIMD builds, GCC or Clang, are the
 * only ones with threads) */
#if defined(__GNUC__) || defined(__clang__)
#define MF_ATOMIC_OR(p, v) ((void)__atomic_fetch_or((p), (v), __ATOMIC_RELAXED))
#else
#define MF_ATOMIC_OR(p, v) ((void)(*(p) |= (v)))
#endif

/* the bfloat16 shortcut of the epilogue (see kernels.h).  A row is rounded
 * in one plain pass that only notes whether any value is that large (its
 * magnitude rounds to infinity or is infinite or NaN); only such a row goes
 * through the exact loop again, for the NaN codes and the flags.  (The one
 * exact loop with the flags in every lane vectorised to masked blends: 6%
 * of a stack of 128 x 256 @ 256 x 128 products on Zen 4.) */
static void
mf_gemm_store_bf16(const mf_gemm_epilogue *ep, mf_intp i0, mf_intp j0, mf_intp rows,
                   mf_intp cols, const float *vals, mf_intp ldv)
{
    uint32_t any_nan = 0, any_inf = 0, any_ovf = 0;
    for (mf_intp i = 0; i < rows; i++) {
        const uint32_t *row = (const uint32_t *)(vals + i * ldv);
        uint16_t *dst = (uint16_t *)(ep->bf16_out + (i0 + i) * ep->bf16_rs) + j0;
        uint32_t large = 0;
        for (mf_intp j = 0; j < cols; j++) {
            uint32_t u = row[j];
            dst[j] = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
            large |= (uint32_t)((u & 0x7FFFFFFFu) >= 0x7F7F8000u);
        }
        if (!large) {
            continue;
        }
        for (mf_intp j = 0; j < cols; j++) {
            uint32_t u = row[j];
            uint32_t a = u & 0x7FFFFFFFu;
            uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
            uint32_t isnan = a > 0x7F800000u;
            any_nan |= isnan;
            any_inf |= a == 0x7F800000u;
            any_ovf |= ((r & 0x7FFFu) == 0x7F80u) & (a < 0x7F800000u);
            dst[j] = (uint16_t)(isnan ? 0x7FC0u : r);
        }
    }
    int fl = (any_nan ? 1 : 0) | (any_inf ? 2 : 0) | (any_ovf ? 4 : 0);
    if (fl) {
        MF_ATOMIC_OR(ep->bf16_flags, fl);
    }
}

static inline void
mf_gemm_finish(const mf_gemm_epilogue *ep, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols,
               float *vals, mf_intp ldv)
{
    if (ep->bf16_out != NULL) {
        mf_gemm_store_bf16(ep, i0, j0, rows, cols, vals, ldv);
    }
    else {
        ep->fn(ep->ctx, i0, j0, rows, cols, vals, ldv);
    }
}

#endif
