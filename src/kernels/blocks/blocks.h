/*
 * Block-scaled formats (OCP MX v1.0: MXFP8, MXFP6, MXFP4, MXINT8; NVIDIA
 * NVFP4): quantize and dequantize kernels.  docs/formats.md states the rules
 * and where each comes from.
 *
 * The element codes are made by the active level's encode_f32/decode_f32
 * kernels (kernels.h: a serial oracle and SIMD levels, bit-exact), so a
 * block kernel is exactly as exact as the casts; the scale arithmetic here
 * is plain C, the same at every level.
 *
 * Layout: x is row-major (rows, k) float32; every row is cut into
 * ceil(k / block) blocks, the last one padded with +0 (the padding takes
 * no part in the amax and its codes are +0).  codes are row-major (rows,
 * kp) bytes, kp = blocks * block, or (rows, kp / 2) for float4 (two codes
 * a byte, element 2j in the low nibble); scales are (rows, blocks) codes.
 */
#ifndef MF_BLOCKS_H
#define MF_BLOCKS_H

#include "../kernels.h"

typedef enum {
    MF_BLOCK_MX = 0,       /* E8M0 scale, float element */
    MF_BLOCK_MXINT8 = 1,   /* E8M0 scale, int8 element with an implied 2^-6 */
    MF_BLOCK_NV = 2,       /* E4M3 scale under an FP32 tensor scale, float4 element */
} mf_block_kind;

typedef enum {
    MF_SCALE_FLOOR = 0,    /* the spec: 2^(floor(log2 amax) - emax_elem) */
    MF_SCALE_CEIL = 1,     /* 2^(ceil(log2 amax) - emax_elem) */
    MF_SCALE_EVEN = 2,     /* amax rounded to the element's precision, then floor */
    MF_SCALE_RCEIL = 3,    /* 2^ceil(log2(amax / max_elem)), amax / max_elem in float32 */
} mf_scale_mode;

typedef struct {
    mf_block_kind kind;
    const mf_format *elem;   /* the element format (NULL for MXINT8) */
    int block;               /* elements per block */
    int emax;                /* exponent of the element's largest power of two */
    float elem_max;          /* the element's largest finite value */
    int elem_mbits;          /* mantissa bits (MXINT8: 6) */
    mf_scale_mode mode;
    float s_enc;             /* NVFP4 tensor encode scale (TransformerEngine's S_enc) */
} mf_block_params;

/*
 * The inner loops, one table per instruction set (serial.c, avx2.c; avx512.c
 * builds avx2.c again with the AVX-512 flags), chosen
 * with the kernel level (dispatch.c); every entry computes the same float32 operations in the
 * same order at every level, so the results are bit-identical.  n and the
 * block size B are multiples of 8.
 */
typedef struct {
    /* out[b] = largest |x| bit pattern (sign cleared) of block b */
    void (*amax)(const float *x, mf_intp nblocks, int B, uint32_t *out);
    /* out[i] = clamp(x[i] * mul[i / B], -lim, lim) for nblocks blocks of B */
    void (*scale_clamp)(const float *x, mf_intp nblocks, int B, const float *mul, float lim,
                        float *out);
    /* out[i] = clamp(round_even((x[i] * mul) * 64), -127, 127) */
    void (*mxint8)(const float *x, mf_intp n, float mul, int8_t *out);
    /* out[j] = c[2j] | c[2j+1] << 4 (codes < 16) */
    void (*pack4)(const uint8_t *c, mf_intp n, uint8_t *out);
    /* out[2j], out[2j+1] = lut[c[j] & 15], lut[c[j] >> 4] */
    void (*unpack4)(const uint8_t *c, mf_intp n, const float *lut, float *out);
    /* o[i] = (o[i] * a[i / B]) * b for nblocks blocks of B */
    void (*mul2)(float *o, mf_intp nblocks, int B, const float *a, float b);
    /* an 8-row tile of packed e2m1 codes (row r at c + r * ldc, element 2j in
     * the low nibble of byte j), transposed: out[j * ldo + r] =
     * lut[code(r, j)] * s[r * lds + j / B] for r < 8, j < k (k a multiple of 8;
     * B here is any multiple of 8, not only the formats' block sizes) */
    void (*unpack4t8)(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut,
                      const float *s, mf_intp lds, float *out, mf_intp ldo);
    /* o[i] = ((float)c[i] * 2^-6) * mul */
    void (*int8_dec)(const int8_t *c, mf_intp n, float mul, float *o);
    /* largest finite |x| bit pattern of x[0, n) (0 if none) */
    uint32_t (*finite_amax)(const float *x, mf_intp n);
    /* NULL, or a whole quantize of nblocks full blocks in one pass over x
     * (MX float elements and NVFP4): scales[b] and the codes (float4 packed;
     * codes points at the first block's), bit-identical to what serial.c's
     * separate passes (amax, scales, scale_clamp, the cast, pack4) give */
    void (*quantize_blocks)(const mf_block_params *p, const float *x, mf_intp nblocks,
                            uint8_t *codes, uint8_t *scales);
    /* unpack4t8 into bfloat16: out[j * ldo + r] = the bfloat16 code of the
     * same float32 product, rounded once (the cast's rounding: to nearest
     * even, overflow to inf, NaN to the quiet NaN of its sign) */
    void (*unpack4t8h)(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut,
                       const float *s, mf_intp lds, uint16_t *out, mf_intp ldo);
    /* the sum over n bytes of packed e2m1 codes of 4 * (m(lo)^2 + m(hi)^2),
     * m the codes' magnitudes (multiples of 1/2, so the terms are integers) */
    uint64_t (*e2m1_sq)(const uint8_t *c, mf_intp n);
    /* NULL, or quantize then dequantize nblocks full blocks (MX with float
     * elements, NVFP4) in one pass: y[i] = the value of x[i]'s element code
     * times its block's scale (times s_dec for NVFP4), bit for bit what
     * quantize_blocks, unpack4 (or the element decode) and mul2 give,
     * without the codes in between */
    void (*round_trip)(const mf_block_params *p, const float *x, mf_intp nblocks, float s_dec,
                       float *y);
    /* NULL, or finite_amax of n bfloat16 codes at c (any alignment), read as
     * they are: a code's float32 bits are the code shifted up, so the
     * largest finite magnitude's bits are the largest code magnitude below
     * 0x7F80, shifted */
    uint32_t (*finite_amax_bf16)(const void *c, mf_intp n);
} mf_block_ops;

extern const mf_block_ops mf_block_ops_serial;
#ifdef MF_HAVE_AVX2
extern const mf_block_ops mf_block_ops_avx2;
#endif
#ifdef MF_HAVE_AVX512
extern const mf_block_ops mf_block_ops_avx512;
#endif
/* the active level's (set with mf_k by mf_set_level, dispatch.c) */
extern const mf_block_ops *mf_kb;

/* Quantize rows [0, rows) of x; returns 0 (no failure is possible). */
void mf_block_quantize(const mf_block_params *p, const float *x, mf_intp rows, mf_intp k,
                       uint8_t *codes, uint8_t *scales);
/* out (rows, k) float32 = code * scale (* tensor decode scale s_dec for NVFP4) */
void mf_block_dequantize(const mf_block_params *p, const uint8_t *codes, const uint8_t *scales,
                         mf_intp rows, mf_intp k, float s_dec, float *out);
/* Quantize and dequantize blocks [0, nb) of a row of k elements starting at
 * x, on the calling thread, into y[0, min(nb * B, k)): the values
 * mf_block_dequantize gives after mf_block_quantize.  nb * B is at most
 * MF_BLOCK_RUN_MAX. */
#define MF_BLOCK_RUN_MAX 4096
void mf_block_round_trip(const mf_block_params *p, const float *x, mf_intp k, mf_intp nb,
                         float s_dec, float *y);
/* the parameters of _core's block entry points checked and filled in
 * (bindings/block_formats.c); -1 with a Python error set if they are bad */
int mf_block_params_from(mf_block_params *p, int kind, int elem_id, int block, int mode,
                         double s_enc);
/* largest |x| over the finite elements of x (0 if none) */
float mf_finite_amax(const float *x, mf_intp n);
/* the same of n codes of the float format f (decoded exactly, a tile at a
 * time: no float32 copy of the values) */
float mf_finite_amax_codes(const mf_format *f, const void *x, mf_intp n);
/* C (M x N, row-major float32) = A @ B for a block-scaled A (M rows of K,
 * blocked along K: codes/scales as mf_block_quantize writes them) and B given
 * as its N columns, each blocked along K the same way (b quantized with
 * axis=0), ts_a / ts_b the NVFP4 tensor decode scales (1 for MX): both
 * dequantized exactly into bfloat16 (without the tensor scales), the
 * bfloat16 GEMM (gemm_f32acc), then C = (float)(acc * ((double)ts_a * ts_b))
 * when a tensor scale is not 1; NaN results as +qNaN.  Returns 0, or -1 if
 * memory ran out (nothing written). */
int mf_block_matmul(const mf_block_params *pa, const uint8_t *ca, const uint8_t *sa, float ts_a,
                    const mf_block_params *pb, const uint8_t *cb, const uint8_t *sb, float ts_b,
                    mf_intp M, mf_intp N, mf_intp K, float *C);

#endif
