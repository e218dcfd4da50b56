/*
 * Serial GEMM with float32 accumulation: the oracle of every gemm kernel.
 */
#include <math.h>
#include "kernels.h"
#include "scalar_ops.h"

void
mf_serial_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                   const void *A, mf_intp lda, const void *B, mf_intp ldb,
                   float *C, mf_intp ldc)
{
    enum { NB = 256 };
    float brow[NB];
    for (mf_intp j0 = 0; j0 < n; j0 += NB) {
        mf_intp nb = n - j0 < NB ? n - j0 : NB;
        for (mf_intp i = 0; i < m; i++) {
            float *c = C + i * ldc + j0;
            for (mf_intp p = 0; p < k; p++) {
                float a = mf_dec1(f, A, i * lda + p);
                mf_serial_decode_f32(f, (const char *)B + (p * ldb + j0) * f->itemsize, brow, nb);
                for (mf_intp j = 0; j < nb; j++) {
                    c[j] = fmaf(a, brow[j], c[j]);
                }
            }
        }
    }
}

