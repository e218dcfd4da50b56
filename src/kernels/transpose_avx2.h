/*
 * An 8 x 8 transpose of 32-bit lanes in AVX2 registers, shared by the block
 * kernels (gpt-oss's transposed e2m1 tiles) and the gemm's matrix-vector
 * kernel.  Include only from files compiled for AVX2.
 */
#ifndef MF_TRANSPOSE_AVX2_H
#define MF_TRANSPOSE_AVX2_H

#include <immintrin.h>

/* transposes 8 rows of 8 floats: row j of the result is column j of r */
static inline __attribute__((always_inline)) void
mf_transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

#endif
