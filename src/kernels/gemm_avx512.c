/*
 * avx512 GEMM with float32 accumulation; must match gemm_serial.c bit for bit.
 * Not written yet: the serial kernel.
 */
#include "kernels.h"

void
mf_avx512_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                     const void *A, mf_intp lda, const void *B, mf_intp ldb,
                     float *C, mf_intp ldc)
{
    mf_serial_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc);
}
