/*
 * Integer codes packed into 32-bit words, with a scale per group of columns
 * (kernels.h, mf_unpack_affine): the int4/int8 weights of compressed-tensors'
 * pack-quantized format and of MLX's affine quantization.
 *
 * Both references compute in the scale's dtype, one rounding per operation;
 * R() below rounds a float32 result to that dtype.  The float32 results
 * here are those roundings widened, so they are the references' values bit
 * for bit: a product or a sum of two bfloat16 (float16) values computed in
 * float32 and then rounded is the correctly rounded bfloat16 (float16) result,
 * since float32 has more than 2p + 2 bits (no double-rounding error).
 *
 * This is the serial oracle; it reads only the words a row's k fields
 * occupy, so a ragged last word (k * bits not a multiple of 32) and a ragged
 * last group (group not dividing k) are handled by bounds, never by reading
 * padding that may not be there.
 */
#include "../scalar_ops.h"

static inline float
round_to(const mf_format *r, float x)
{
    if (r == NULL) {
        return x;
    }
    int ovf = 0;      /* an overflow to inf is the reference's value too */
    return mf_dec_code(r, mf_enc1_ovf(r, x, &ovf));
}

/* field j of a row: bits [j * bits, j * bits + bits) of its words, lowest
 * bits first; a field may straddle two words when 32 % bits != 0 */
static inline uint32_t
field(const uint32_t *w, mf_intp j, int bits, uint32_t mask)
{
    mf_intp bit = j * bits;
    mf_intp i = bit >> 5;
    int sh = (int)(bit & 31);
    uint32_t u = w[i] >> sh;
    if (sh + bits > 32) {
        u |= w[i + 1] << (32 - sh);
    }
    return u & mask;
}

void
mf_unpack_affine(const uint32_t *words, mf_intp ldw, mf_intp rows, mf_intp k, int bits,
                 mf_intp group, const float *s, const float *z, mf_intp lds,
                 mf_affine_kind kind, int32_t offset, const mf_format *rnd,
                 float *out, mf_intp ldo)
{
    const uint32_t mask = bits >= 32 ? 0xFFFFFFFFu : (1u << bits) - 1u;
    const mf_intp groups = (k + group - 1) / group;
    for (mf_intp r = 0; r < rows; r++) {
        const uint32_t *w = words + r * ldw;
        const float *sr = s + r * lds;
        const float *zr = z != NULL ? z + r * lds : NULL;
        float *o = out + r * ldo;
        for (mf_intp g = 0; g < groups; g++) {
            const mf_intp j0 = g * group;
            const mf_intp j1 = k - j0 < group ? k : j0 + group;
            const float sg = sr[g];
            const float zg = zr != NULL ? zr[g] : 0.0f;
            if (kind == MF_AFFINE_ZP) {
                /* compressed-tensors: (q - zp) * s, q = u - offset */
                for (mf_intp j = j0; j < j1; j++) {
                    float q = (float)((int32_t)field(w, j, bits, mask) - offset);
                    o[j] = round_to(rnd, round_to(rnd, q - zg) * sg);
                }
            }
            else {
                /* MLX affine: s * u + b, no FMA */
                for (mf_intp j = j0; j < j1; j++) {
                    float u = (float)field(w, j, bits, mask);
                    o[j] = round_to(rnd, round_to(rnd, sg * u) + zg);
                }
            }
        }
    }
}
