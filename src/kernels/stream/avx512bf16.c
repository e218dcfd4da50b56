/*
 * avx512bf16 level: the avx512 kernels, and the GEMM of gemm_avx512bf16.c
 * (VDPBF16PS).
 */
#include "../kernels.h"

const mf_kernels mf_kernels_avx512bf16 = {
    .name = "avx512bf16",
    .decode_f32 = mf_avx512_decode_f32,
    .encode_f32 = mf_avx512_encode_f32,
    .binary = mf_avx512_binary,
    .pairwise_f32 = mf_avx512_pairwise_f32,
    .arg_extreme8 = mf_avx512_arg_extreme8,
    .arg_extreme16 = mf_avx512_arg_extreme16,
    .keyed8 = mf_avx512_keyed8,
    .keyed16 = mf_avx512_keyed16,
    .lut8 = mf_avx512_lut8,
    .f64_to_f32_odd = mf_avx512_f64_to_f32_odd,
    .colsum_f32 = mf_avx512_colsum_f32,
    .colmax_f32 = mf_avx512_colmax_f32,
    .sum = mf_avx512_sum,
    .sum_rows = mf_avx512_sum_rows,
    .dot = mf_avx512_dot,
    .dot_cols = mf_avx512_dot_cols,
    .gemm_f32acc = mf_avx512bf16_gemm_f32acc,
    .gemm_f32acc_bt = mf_avx512bf16_gemm_f32acc_bt,
    .gemm_thin_cols = mf_avx512bf16_gemm_thin_cols,
    .stats_f32 = mf_avx512_stats_f32,
    .stats_f32_2 = mf_avx512_stats_f32_2,
    .cast_err = mf_avx512_cast_err,
};
