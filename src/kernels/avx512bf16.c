/*
 * avx512bf16 kernels.  Entries not yet written here use the serial kernel.
 */
#include "kernels.h"

const mf_kernels mf_kernels_avx512bf16 = {
    .name = "avx512bf16",
    .decode_f32 = mf_serial_decode_f32,
    .encode_f32 = mf_serial_encode_f32,
    .binary = mf_serial_binary,
    .sum = mf_serial_sum,
    .dot = mf_serial_dot,
    .gemm_f32acc = mf_serial_gemm_f32acc,
};
