/*
 * The scale arithmetic of the block-scaled kernels (blocks.h), shared by the
 * serial loops (serial.c) and the fused SIMD ones (avx2.c) so that
 * every level computes a block's scale with the same C code.
 */
#ifndef MF_BLOCKS_SCALE_H
#define MF_BLOCKS_SCALE_H

#include "blocks.h"
#include "../../core/codec.h"

/* floor(log2 |v|) of a positive finite float32 given by its bits */
static inline int
flog2_bits(uint32_t b)
{
    uint32_t field = b >> 23;
    if (field) {
        return (int)field - 127;
    }
    return -149 + (31 - __builtin_clz(b));   /* subnormal: b = m, v = m * 2^-149 */
}

/* ceil(log2 |v|) of a positive finite float32 */
static inline int
clog2_bits(uint32_t b)
{
    int e = flog2_bits(b);
    int pow2 = (b >> 23) ? (b & 0x7FFFFFu) == 0 : (b & (b - 1u)) == 0;
    return e + !pow2;
}

/* the float32 2^e for -149 <= e <= 127, exactly */
static inline float
pow2f(int e)
{
    if (e >= -126) {
        return mf_bits_f32((uint32_t)(e + 127) << 23);
    }
    return mf_bits_f32(1u << (e + 149));
}

/* E8M0 scale code of a finite block with largest magnitude bits `ab` */
static inline uint32_t
mx_scale_code(const mf_block_params *p, uint32_t ab)
{
    if (ab >= 0x7F800000u) {
        return 0xFFu;                      /* inf or NaN in the block: the NaN scale */
    }
    if (ab == 0) {
        return 0u;                         /* log2(0) = -inf, clamped to 2^-127 */
    }
    int e;
    switch (p->mode) {
        case MF_SCALE_CEIL:
            e = clog2_bits(ab) - p->emax;
            break;
        case MF_SCALE_EVEN: {
            /* round amax half-up to the element's mantissa bits first */
            uint32_t r = ab + (1u << (23 - p->elem_mbits - 1));
            e = ((r >> 23) ? (int)(r >> 23) - 127 : flog2_bits(ab)) - p->emax;
            break;
        }
        case MF_SCALE_RCEIL: {
            float d = mf_bits_f32(ab) / p->elem_max;
            uint32_t db = mf_f32_bits(d);
            e = db ? clog2_bits(db) : -127;
            break;
        }
        case MF_SCALE_FLOOR:
        default:
            e = flog2_bits(ab) - p->emax;
            break;
    }
    if (e < -127) {
        e = -127;
    }
    if (e > 127) {
        e = 127;
    }
    return (uint32_t)(e + 127);
}

#endif
