/*
 * neon_bf16 level (aarch64 with FEAT_BF16, Armv8.6): the neon kernels, the
 * GEMM of gemm_neon_bf16.c (BFMLALT/BFMLALB), and BFCVTN for float32 ->
 * bfloat16 where it gives the serial kernels' bits and flags:
 *
 *  - BFCVTN rounds to nearest even and keeps subnormals (FPCR.FZ = 0, as
 *    Linux and macOS start threads): the bits of the serial encode for
 *    every non-NaN input.  A NaN becomes the default NaN 0x7FC0: NaN lanes
 *    take (sign | 0x7FC0) as serial does.
 *  - Flags: BFCVTN raises overflow where serial raises it (rounding to
 *    inf), but also invalid (signalling NaN), underflow and inexact, which
 *    the serial encode does not.  The encode restores FPSR after the loop
 *    and raises overflow if BFCVTN did.  In add and subtract the float32
 *    operation can never raise underflow (a sum with a subnormal result is
 *    exact) nor produce a signalling NaN, so there only the underflow flag
 *    BFCVTN raised is dropped; multiply and divide keep the integer rounding
 *    of the neon level (their float32 result may underflow by itself).
 */
#include <arm_neon.h>
#include "../kernels.h"
#include "../scalar_ops.h"

#define MF_INLINE static inline __attribute__((always_inline))

static inline uint64_t get_fpsr(void) { uint64_t v; __asm__ __volatile__("mrs %0, fpsr" : "=r"(v)); return v; }
static inline void set_fpsr(uint64_t v) { __asm__ __volatile__("msr fpsr, %0" : : "r"(v) : "memory"); }
#define FPSR_OFC (1u << 2)
#define FPSR_UFC (1u << 3)

/* 8 float32 -> 8 bfloat16 codes, serial's bits (NaN: sign | 0x7FC0) */
MF_INLINE uint16x8_t
cvt8(float32x4_t x0, float32x4_t x1)
{
    bfloat16x8_t h = vcvtq_high_bf16_f32(vcvtq_low_bf16_f32(x0), x1);
    uint16x8_t hi = vcombine_u16(vshrn_n_u32(vreinterpretq_u32_f32(x0), 16),
                                 vshrn_n_u32(vreinterpretq_u32_f32(x1), 16));
    uint16x8_t ok = vcombine_u16(vmovn_u32(vceqq_f32(x0, x0)), vmovn_u32(vceqq_f32(x1, x1)));
    uint16x8_t nanv = vorrq_u16(vandq_u16(hi, vdupq_n_u16(0x8000u)), vdupq_n_u16(0x7FC0u));
    return vbslq_u16(ok, vreinterpretq_u16_bf16(h), nanv);
}

void
mf_neon_bf16_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    if (f->id != MF_BFLOAT16 || n < 8) {
        mf_neon_encode_f32(f, src, dst, n);
        return;
    }
    uint16_t *d = (uint16_t *)dst;
    uint64_t fpsr = get_fpsr();
    set_fpsr(0);
    mf_intp i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_u16(d + i, cvt8(vld1q_f32(src + i), vld1q_f32(src + i + 4)));
    }
    int ovf = (get_fpsr() & FPSR_OFC) != 0;
    set_fpsr(fpsr);
    if (i < n) {
        mf_serial_encode_f32(f, src + i, d + i, n - i);
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

#define ASM_OP(INSN, R, A, B) \
    __asm__(INSN " %0.4s, %1.4s, %2.4s" : "=w"(R) : "w"(A), "w"(B))

MF_INLINE void
addsub_bf16(int sub, const uint16_t *a, const uint16_t *b, uint16_t *out, mf_intp n)
{
    for (mf_intp i = 0; i + 8 <= n; i += 8) {
        uint16x8_t ca = vld1q_u16(a + i), cb = vld1q_u16(b + i);
        float32x4_t a0 = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(ca), 16));
        float32x4_t a1 = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(ca), 16));
        float32x4_t b0 = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(cb), 16));
        float32x4_t b1 = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(cb), 16));
        float32x4_t r0, r1;
        if (sub) {
            ASM_OP("fsub", r0, a0, b0);
            ASM_OP("fsub", r1, a1, b1);
        }
        else {
            ASM_OP("fadd", r0, a0, b0);
            ASM_OP("fadd", r1, a1, b1);
        }
        vst1q_u16(out + i, cvt8(r0, r1));
    }
}

void
mf_neon_bf16_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                    void *out, mf_intp n)
{
    if (f->id != MF_BFLOAT16 || (op != MF_OP_ADD && op != MF_OP_SUB) || n < 8) {
        mf_neon_binary(op, f, a, b, out, n);
        return;
    }
    uint64_t fpsr = get_fpsr();
    mf_intp body = n / 8 * 8;
    if (op == MF_OP_ADD) {
        addsub_bf16(0, (const uint16_t *)a, (const uint16_t *)b, (uint16_t *)out, body);
    }
    else {
        addsub_bf16(1, (const uint16_t *)a, (const uint16_t *)b, (uint16_t *)out, body);
    }
    /* keep every flag but an underflow raised here (only BFCVTN can) */
    set_fpsr(get_fpsr() & ~(uint64_t)(FPSR_UFC & ~fpsr));
    if (body < n) {
        mf_serial_binary(op, f, (const uint16_t *)a + body, (const uint16_t *)b + body,
                         (uint16_t *)out + body, n - body);
    }
}

const mf_kernels mf_kernels_neon_bf16 = {
    .name = "neon_bf16",
    .decode_f32 = mf_neon_decode_f32,
    .encode_f32 = mf_neon_bf16_encode_f32,
    .binary = mf_neon_bf16_binary,
    .pairwise_f32 = mf_neon_pairwise_f32,
    .arg_extreme8 = mf_neon_arg_extreme8,
    .arg_extreme16 = mf_neon_arg_extreme16,
    .keyed8 = mf_neon_keyed8,
    .keyed16 = mf_neon_keyed16,
    .lut8 = mf_neon_lut8,
    .f64_to_f32_odd = mf_neon_f64_to_f32_odd,
    .colsum_f32 = mf_neon_colsum_f32,
    .colmax_f32 = mf_neon_colmax_f32,
    .sum = mf_neon_sum,
    .sum_rows = mf_neon_sum_rows,
    .dot = mf_neon_dot,
    .dot_cols = mf_neon_dot_cols,
    .gemm_f32acc = mf_neon_bf16_gemm_f32acc,
    .stats_f32 = mf_neon_stats_f32,
    .cast_err = mf_neon_cast_err,
};
