/*
 * Serial kernels: the oracle every SIMD level is compared against, and the
 * code that runs where no SIMD level applies (the compiler may still
 * auto-vectorise it, e.g. NEON on aarch64).
 */
#include <string.h>
#include <math.h>
#include "../kernels.h"
#include "../scalar_ops.h"
#include "../nan_order.h"

float mf_lut8[MF_NUM_FORMATS][256];

void
mf_init_luts(void)
{
    for (int id = 0; id < MF_NUM_FORMATS; id++) {
        const mf_format *f = &mf_formats[id];
        if (f->itemsize != 1) {
            continue;
        }
        for (uint32_t c = 0; c < 256; c++) {
            /* codes above the format's width alias their low bits */
            mf_lut8[id][c] = mf_decode_f32(f, c & mf_code_mask(f));
        }
    }
}

void
mf_serial_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n)
{
    if (f->id == MF_BFLOAT16) {
        /* memcpy loads: NumPy hands unaligned bfloat16 data to the kernels
         * (a typed uint16_t load there is UB; UBSan found it) */
        const char *s = (const char *)src;
        for (mf_intp i = 0; i < n; i++) {
            uint16_t c;
            memcpy(&c, s + 2 * i, 2);
            uint32_t u = (uint32_t)c << 16;
            memcpy(dst + i, &u, 4);
        }
        return;
    }
    if (f->itemsize == 1) {
        const uint8_t *s = (const uint8_t *)src;
        const float *lut = mf_lut8[f->id];
        for (mf_intp i = 0; i < n; i++) {
            dst[i] = lut[s[i]];
        }
        return;
    }
    for (mf_intp i = 0; i < n; i++) {
        dst[i] = mf_dec1(f, src, i);
    }
}

void
mf_serial_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    if (f->id == MF_BFLOAT16) {
        char *d = (char *)dst;     /* may be unaligned: memcpy stores */
        int ovf = 0;
        for (mf_intp i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, src + i, 4);
            uint32_t au = u & 0x7FFFFFFFu;
            uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
            ovf |= ((r & 0x7FFFu) == 0x7F80u) & (au < 0x7F800000u);
            uint16_t c = (uint16_t)((au > 0x7F800000u) ? (((u >> 16) & 0x8000u) | 0x7FC0u) : r);
            memcpy(d + 2 * i, &c, 2);
        }
        if (ovf) {
            mf_raise_overflow();
        }
        return;
    }
    int ovf = 0;
    for (mf_intp i = 0; i < n; i++) {
        mf_enc1_store(f, dst, i, src[i], &ovf);
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

static inline float
apply_op(mf_binary_op op, float a, float b)
{
    switch (op) {
        case MF_OP_ADD: return mf_ordered2(a, b, a + b);
        case MF_OP_SUB: return mf_ordered2(a, b, a - b);
        case MF_OP_MUL: return mf_ordered2(a, b, a * b);
        case MF_OP_DIV: return mf_ordered2(a, b, a / b);
        /* one operand: a NaN's is the one that comes out */
        case MF_OP_FLOOR: return floorf(a);
        case MF_OP_CEIL: return ceilf(a);
        case MF_OP_TRUNC: return truncf(a);
        case MF_OP_RINT: return rintf(a);
        case MF_OP_SQRT: return sqrtf(a);
        default: return 1.0f / a;
    }
}

void
mf_serial_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
              void *out, mf_intp n)
{
    float fa[256], fb[256];
    for (mf_intp start = 0; start < n; start += 256) {
        mf_intp len = n - start < 256 ? n - start : 256;
        mf_serial_decode_f32(f, (const char *)a + start * f->itemsize, fa, len);
        mf_serial_decode_f32(f, (const char *)b + start * f->itemsize, fb, len);
        for (mf_intp i = 0; i < len; i++) {
            fa[i] = apply_op(op, fa[i], fb[i]);
        }
        mf_serial_encode_f32(f, fa, (char *)out + start * f->itemsize, len);
    }
}

/* lanes[j] + lanes[j + w] for w = 16, 8, 4, 2, 1.  Which of the two is
 * the first operand (the NaN returned when both are NaNs) is the order the
 * SIMD levels use: on x86 the upper lane for w >= 4 and the lower one for
 * w = 2, 1; on Arm the lower one throughout. */
static inline float
lanes_combine(float *lanes)
{
    for (int w = MF_SUM_LANES / 2; w >= 1; w /= 2) {
        for (int j = 0; j < w; j++) {
            lanes[j] = (!MF_NAN_SIGNALING_FIRST && w >= 4) ? mf_add_ord(lanes[j + w], lanes[j])
                                                           : mf_add_ord(lanes[j], lanes[j + w]);
        }
    }
    return lanes[0];
}

double
mf_serial_sum(const mf_format *f, const void *src, mf_intp n)
{
    double total = -0.0;
    float buf[MF_SUM_LANES];
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        float lanes[MF_SUM_LANES];
        for (int j = 0; j < MF_SUM_LANES; j++) {
            lanes[j] = -0.0f;
        }
        const char *base = (const char *)src + start * f->itemsize;
        for (mf_intp i = 0; i < len; i += MF_SUM_LANES) {
            mf_intp m = len - i < MF_SUM_LANES ? len - i : MF_SUM_LANES;
            mf_serial_decode_f32(f, base + i * f->itemsize, buf, m);
            for (mf_intp j = 0; j < m; j++) {
                lanes[j] = mf_add_ord(lanes[j], buf[j]);
            }
        }
        total = mf_add_ord_d(total, (double)lanes_combine(lanes));
    }
    return total;
}

double
mf_serial_dot(const mf_format *f, const void *a, const void *b, mf_intp n)
{
    double total = -0.0;
    float ba[MF_SUM_LANES], bb[MF_SUM_LANES];
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        float lanes[MF_SUM_LANES];
        for (int j = 0; j < MF_SUM_LANES; j++) {
            lanes[j] = -0.0f;
        }
        const char *pa = (const char *)a + start * f->itemsize;
        const char *pb = (const char *)b + start * f->itemsize;
        for (mf_intp i = 0; i < len; i += MF_SUM_LANES) {
            mf_intp m = len - i < MF_SUM_LANES ? len - i : MF_SUM_LANES;
            mf_serial_decode_f32(f, pa + i * f->itemsize, ba, m);
            mf_serial_decode_f32(f, pb + i * f->itemsize, bb, m);
            for (mf_intp j = 0; j < m; j++) {
                lanes[j] = mf_fma_ord(ba[j], bb[j], lanes[j]);
            }
        }
        total = mf_add_ord_d(total, (double)lanes_combine(lanes));
    }
    return total;
}

/* column sums (op 0), maxima (1) and minima (2) of rows in order: sums
 * with the hardware's NaN rule (mf_add_ord); maxima and minima as NumPy's
 * float32 loop's scalar steps (`a >= x || a != a ? a : x`, `a <= x || ...`:
 * the first NaN stays) */
static void
serial_columns(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
               mf_intp n, int op)
{
    float x[MF_SUM_LANES];
    for (mf_intp j = 0; j < n; j += MF_SUM_LANES) {
        mf_intp m = n - j < MF_SUM_LANES ? n - j : MF_SUM_LANES;
        for (mf_intp i = 0; i < nrows; i++) {
            mf_serial_decode_f32(f, rows[i] + j * f->itemsize, x, m);
            for (mf_intp c = 0; c < m; c++) {
                float a = acc[j + c];
                if (op == 0) {
                    acc[j + c] = mf_add_ord(a, x[c]);
                }
                else {
                    int keep = (op == 2 ? a <= x[c] : a >= x[c]) || a != a;
                    acc[j + c] = keep ? a : x[c];
                }
            }
        }
    }
}

void
mf_serial_colsum_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                     mf_intp n)
{
    serial_columns(f, rows, nrows, acc, n, 0);
}

void
mf_serial_colmax_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                     mf_intp n, int is_min)
{
    serial_columns(f, rows, nrows, acc, n, is_min ? 2 : 1);
}

void
mf_serial_dot_cols(const mf_format *f, const float *v, const void *B, mf_intp ldb, mf_intp n,
                   mf_intp m, double *out, float *scratch)
{
    (void)scratch;
    for (mf_intp j = 0; j < m; j++) {
        const char *col = (const char *)B + j * f->itemsize;
        double total = -0.0;
        for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
            mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
            float lanes[MF_SUM_LANES];
            for (int L = 0; L < MF_SUM_LANES; L++) {
                lanes[L] = -0.0f;
            }
            for (mf_intp i = 0; i < len; i++) {
                float x;
                mf_serial_decode_f32(f, col + (start + i) * ldb, &x, 1);
                lanes[i % MF_SUM_LANES] = mf_fma_ord(x, v[start + i], lanes[i % MF_SUM_LANES]);
            }
            total = mf_add_ord_d(total, (double)lanes_combine(lanes));
        }
        out[j] = total;
    }
}

void
mf_serial_sum_rows(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                   double *out)
{
    for (mf_intp i = 0; i < nrows; i++) {
        out[i] = mf_serial_sum(f, rows[i], n);
    }
}

#define PW_NAME mf_serial_pairwise_f32
#define PW_DECODE mf_serial_decode_f32
#include "pairwise.h"

#define AE_NAME8 mf_serial_arg_extreme8
#define AE_NAME16 mf_serial_arg_extreme16
#include "argext.h"

#define KY_NAME8 mf_serial_keyed8
#define KY_NAME16 mf_serial_keyed16
#include "keyed.h"

uint32_t
mf_serial_lut8(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n)
{
    uint32_t hit = 0;
    for (mf_intp i = 0; i < n; i++) {
        const uint16_t e = t[in[i]];
        hit |= e;
        out[i] = (uint8_t)e;
    }
    return hit >> 8;
}

const mf_kernels mf_kernels_serial = {
    .name = "serial",
    .decode_f32 = mf_serial_decode_f32,
    .encode_f32 = mf_serial_encode_f32,
    .binary = mf_serial_binary,
    .pairwise_f32 = mf_serial_pairwise_f32,
    .arg_extreme8 = mf_serial_arg_extreme8,
    .arg_extreme16 = mf_serial_arg_extreme16,
    .keyed8 = mf_serial_keyed8,
    .keyed16 = mf_serial_keyed16,
    .lut8 = mf_serial_lut8,
    .colsum_f32 = mf_serial_colsum_f32,
    .colmax_f32 = mf_serial_colmax_f32,
    .sum = mf_serial_sum,
    .sum_rows = mf_serial_sum_rows,
    .dot = mf_serial_dot,
    .dot_cols = mf_serial_dot_cols,
    .gemm_f32acc = mf_serial_gemm_f32acc,
    .stats_f32 = mf_serial_stats_f32,
};
