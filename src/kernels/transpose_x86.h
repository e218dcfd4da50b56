/*
 * Transposes of 32-bit lanes in registers: 8 x 8 in AVX2 (the block
 * kernels' transposed e2m1 tiles, the AVX2 gemm's matrix-vector kernel) and
 * 16 x 16 in AVX-512 (the AVX512_BF16 gemm's A panels, the AVX-512
 * matrix-vector kernel).  Include only from files compiled for AVX2; the
 * 16 x 16 one is there where AVX-512F is.
 */
#ifndef MF_TRANSPOSE_X86_H
#define MF_TRANSPOSE_X86_H

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

#ifdef __AVX512F__
/* 16 x 16 transpose of dwords: r[i] = row i in, column i out */
static inline __attribute__((always_inline)) void
mf_transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* u[4g + j], 128-bit lane L: rows 4g..4g+3 of column 4L + j; then a
     * 4 x 4 transpose of the lanes (this order keeps fewer registers live
     * than pairing lanes 0, 2 and 1, 3 first: the matrix-vector kernel, with
     * 8 accumulators beside the 16 rows, ran 1.5-1.9x slower with that one) */
    for (int j = 0; j < 4; j++) {
        __m512i x0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);        /* lanes 0, 1 */
        __m512i x1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);        /* lanes 2, 3 */
        __m512i x2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
        __m512i x3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
        r[j] = _mm512_shuffle_i32x4(x0, x2, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(x0, x2, 0xDD);
        r[8 + j] = _mm512_shuffle_i32x4(x1, x3, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(x1, x3, 0xDD);
    }
}
#endif

#endif
