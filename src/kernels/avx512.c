/*
 * avx512 kernels.  Entries not yet written here use the serial kernel.
 */
#include "kernels.h"

void
mf_avx512_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n)
{
    mf_serial_decode_f32(f, src, dst, n);
}

void
mf_avx512_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    mf_serial_encode_f32(f, src, dst, n);
}

void
mf_avx512_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                void *out, mf_intp n)
{
    mf_serial_binary(op, f, a, b, out, n);
}

double
mf_avx512_sum(const mf_format *f, const void *src, mf_intp n)
{
    return mf_serial_sum(f, src, n);
}

double
mf_avx512_dot(const mf_format *f, const void *a, const void *b, mf_intp n)
{
    return mf_serial_dot(f, a, b, n);
}

const mf_kernels mf_kernels_avx512 = {
    .name = "avx512",
    .decode_f32 = mf_avx512_decode_f32,
    .encode_f32 = mf_avx512_encode_f32,
    .binary = mf_avx512_binary,
    .sum = mf_avx512_sum,
    .dot = mf_avx512_dot,
    .gemm_f32acc = mf_avx512_gemm_f32acc,
};
