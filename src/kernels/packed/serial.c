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
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include "../../core/codec.h"
#include "../kernels.h"
#include "../blocks/blocks.h"

/* R(): round a float32 to the format of `rnd` (bfloat16 or float16: a
 * sign, an exponent field, `drop` fewer significand bits than float32),
 * nearest even, as the codec does (mf_enc1_ovf), but without leaving
 * float32: on the bits in the format's normal range (the carry of a
 * rounding up moves into the exponent, and past the largest finite value
 * into the infinity's bits), by adding a power of two whose ulp is the
 * format's smallest subnormal below it.  NaN becomes the quiet NaN of its
 * sign, as the codec's bfloat16 does; an overflow becomes inf, the
 * references' value too. */
typedef struct {
    int on;              /* 0: float32, R is the identity */
    int drop;            /* significand bits float32 has more */
    uint32_t min_normal; /* bits of the format's smallest normal */
    uint32_t max_bits;   /* bits of its largest finite value */
    float tiny;          /* 2^(emin - mant_bits + 23) (0 where emin is float32's) */
} rounder;

static rounder
rounder_of(const mf_format *f)
{
    rounder r = {0, 0, 0, 0, 0.0f};
    if (f == NULL) {
        return r;
    }
    const int emin = mf_emin(f);
    r.on = 1;
    r.drop = 23 - f->mant_bits;
    r.min_normal = (uint32_t)(emin + 127) << 23;
    r.max_bits = mf_f32_bits(mf_decode_f32(f, mf_max_finite_mag(f)));
    r.tiny = emin > -126 ? mf_bits_f32((uint32_t)(emin - f->mant_bits + 23 + 127) << 23) : 0.0f;
    return r;
}

static inline float
round_to(const rounder *r, float x)
{
    if (!r->on) {
        return x;
    }
    uint32_t u = mf_f32_bits(x);
    uint32_t sign = u & 0x80000000u, au = u ^ sign;
    if (au > 0x7F800000u) {
        return mf_bits_f32(sign | 0x7FC00000u);
    }
    if (au >= r->min_normal || r->tiny == 0.0f) {
        uint32_t q = au + ((1u << (r->drop - 1)) - 1u) + ((au >> r->drop) & 1u);
        q &= ~((1u << r->drop) - 1u);
        au = q > r->max_bits ? 0x7F800000u : q;
    }
    else {
        /* t lies in [tiny, 2 tiny]: the subtraction is exact */
        au = mf_f32_bits((mf_bits_f32(au) + r->tiny) - r->tiny);
    }
    return mf_bits_f32(sign | au);
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

/* the codes of one row as float32, offset subtracted; whole words at a time
 * where no field straddles two (bits dividing 32), the fields' widths as
 * constants the compiler can unroll */
#define WHOLE_WORDS(B)                                                              \
    for (; j + 32 / (B) <= k; j += 32 / (B)) {                                      \
        uint32_t x = w[j / (32 / (B))];                                             \
        for (int t = 0; t < 32 / (B); t++) {                                        \
            o[j + t] = (float)((int32_t)((x >> (t * (B))) & ((1u << (B)) - 1u)) - off); \
        }                                                                           \
    }

static void
unpack_row(const uint32_t *w, mf_intp k, int bits, int32_t off, float *o)
{
    mf_intp j = 0;
    switch (bits) {
        case 1: WHOLE_WORDS(1) break;
        case 2: WHOLE_WORDS(2) break;
        case 4: WHOLE_WORDS(4) break;
        case 8: WHOLE_WORDS(8) break;
        default: break;
    }
    const uint32_t mask = (1u << bits) - 1u;
    for (; j < k; j++) {
        o[j] = (float)((int32_t)field(w, j, bits, mask) - off);
    }
}

void
mf_unpack_affine(const uint32_t *words, mf_intp ldw, mf_intp rows, mf_intp k, int bits,
                 mf_intp group, const float *s, const float *z, mf_intp lds,
                 mf_affine_kind kind, int32_t offset, const mf_format *rnd,
                 float *out, mf_intp ldo)
{
    const mf_intp groups = (k + group - 1) / group;
    const rounder rr = rounder_of(rnd);
    const rounder *R = &rr;
    const int32_t off = kind == MF_AFFINE_ZP ? offset : 0;
    for (mf_intp r = 0; r < rows; r++) {
        const float *sr = s + r * lds;
        const float *zr = z != NULL ? z + r * lds : NULL;
        float *o = out + r * ldo;
        unpack_row(words + r * ldw, k, bits, off, o);
        for (mf_intp g = 0; g < groups; g++) {
            const mf_intp j0 = g * group;
            const mf_intp j1 = k - j0 < group ? k : j0 + group;
            const float sg = sr[g];
            const float zg = zr != NULL ? zr[g] : 0.0f;
            /* the codes are small integers, exact in every scale dtype */
            if (kind == MF_AFFINE_ZP && !R->on) {
                /* compressed-tensors: (q - zp) * s, q = u - offset */
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = (o[j] - zg) * sg;
                }
            }
            else if (kind == MF_AFFINE_ZP) {
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = round_to(R, round_to(R, o[j] - zg) * sg);
                }
            }
            else if (!R->on) {
                /* MLX affine: s * u + b, no FMA */
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = sg * o[j] + zg;
                }
            }
            else {
                for (mf_intp j = j0; j < j1; j++) {
                    o[j] = round_to(R, round_to(R, sg * o[j]) + zg);
                }
            }
        }
    }
}

/* ---- packed e2m1 (MXFP4, NVFP4) with a float32 scale per block ---- */

/* one row: k values of e2m1 codes c times s[j / block] into o: the level's
 * unpack4 and mul2 (SIMD) over the whole blocks, scalar for a ragged end
 * (and for a block that is not a multiple of 8, which mul2 does not take) */
static void
e2m1_row(const uint8_t *c, mf_intp k, mf_intp block, const float *s, float *o)
{
    const float *lut = mf_lut8[MF_FLOAT4_E2M1FN];       /* the format table's values */
    const mf_intp nfull = block % 8 == 0 && block <= INT_MAX ? k / block : 0;
    const mf_intp kfull = nfull * block;
    if (kfull > 0) {
        mf_kb->unpack4(c, kfull, lut, o);
        mf_kb->mul2(o, nfull, (int)block, s, 1.0f);      /* (o * s) * 1: exact */
    }
    for (mf_intp j = kfull; j < k; j++) {
        o[j] = lut[(c[j / 2] >> (4 * (j & 1))) & 15u] * s[j / block];
    }
}

/* out[j, r] (or out16[j, r], bfloat16 codes rounded once): tiles of 8
 * stored rows by the level's unpack4t8 / unpack4t8h (decoded, scaled and
 * transposed in registers), over the columns up to a multiple of 8 when a
 * block holds whole groups of 8; the rest scalar */
static void
e2m1_transposed(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k, mf_intp block,
                const float *s, mf_intp lds, float *out, uint16_t *out16, mf_intp ldo)
{
    const float *lut = mf_lut8[MF_FLOAT4_E2M1FN];
    const mf_format *bf16 = mf_fmt(MF_BFLOAT16);
    const mf_intp r8 = block % 8 == 0 && block <= INT_MAX ? rows / 8 * 8 : 0, k8 = k / 8 * 8;
    for (mf_intp r0 = 0; r0 < r8 && k8 > 0; r0 += 8) {
        if (out16 != NULL) {
            mf_kb->unpack4t8h(codes + r0 * ldc, ldc, k8, (int)block, lut, s + r0 * lds, lds,
                              out16 + r0, ldo);
        }
        else {
            mf_kb->unpack4t8(codes + r0 * ldc, ldc, k8, (int)block, lut, s + r0 * lds, lds,
                             out + r0, ldo);
        }
    }
    for (mf_intp j = 0; j < k; j++) {
        for (mf_intp r = j < k8 ? r8 : 0; r < rows; r++) {
            const unsigned code = (codes[r * ldc + j / 2] >> (4 * (j & 1))) & 0xFu;
            const float x = lut[code] * s[r * lds + j / block];
            if (out16 != NULL) {
                out16[j * ldo + r] = (uint16_t)mf_encode_f32(bf16, x);
            }
            else {
                out[j * ldo + r] = x;
            }
        }
    }
}

void
mf_unpack_e2m1(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k, mf_intp block,
               const float *s, mf_intp lds, float *out, mf_intp ldo, int transposed)
{
    if (!transposed) {
        for (mf_intp r = 0; r < rows; r++) {
            e2m1_row(codes + r * ldc, k, block, s + r * lds, out + r * ldo);
        }
        return;
    }
    e2m1_transposed(codes, ldc, rows, k, block, s, lds, out, NULL, ldo);
}

/* The same values as mf_unpack_e2m1, each rounded once to bfloat16 (the
 * cast's rounding) into out (uint16 codes): transposed tiles by the level's
 * unpack4t8h; rows decoded into float32 pieces of whole blocks, then the
 * level's bfloat16 encode.  Returns -1 where the row scratch cannot be
 * allocated (nothing else fails). */
int
mf_unpack_e2m1_bf16(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k, mf_intp block,
                    const float *s, mf_intp lds, uint16_t *out, mf_intp ldo, int transposed)
{
    const mf_format *bf16 = mf_fmt(MF_BFLOAT16);
    if (!transposed) {
        /* pieces of about 2048 values (whole blocks), cache-resident */
        const mf_intp w = block >= 2048 ? block : 2048 / block * block;
        float *buf = malloc((size_t)(w < k ? w : k) * sizeof(float));
        if (buf == NULL) {
            return -1;
        }
        for (mf_intp r = 0; r < rows; r++) {
            for (mf_intp j0 = 0; j0 < k; j0 += w) {
                const mf_intp n = k - j0 < w ? k - j0 : w;
                e2m1_row(codes + r * ldc + j0 / 2, n, block, s + r * lds + j0 / block, buf);
                mf_k->encode_f32(bf16, buf, out + r * ldo + j0, n);
            }
        }
        free(buf);
        return 0;
    }
    e2m1_transposed(codes, ldc, rows, k, block, s, lds, NULL, out, ldo);
    return 0;
}

/* The sum of the squares (float64) of the finite float32 values
 * lut[code] * s that mf_unpack_e2m1 gives: convert's reference sum where
 * the cast to bfloat16 is exact.  A block whose scale is a normal power of
 * two of at most 2^125 gives exact products, none beyond float32's range
 * (6 * 2^125 < 2^128), so its sum is s^2 times the sum of its codes' squared
 * magnitudes (the level's e2m1_sq, in integers: exact); other blocks go
 * value by value. */
double
mf_e2m1_ref2(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k, mf_intp block,
             const float *s, mf_intp lds)
{
    const float *lut = mf_lut8[MF_FLOAT4_E2M1FN];
    double total = 0.0;
    for (mf_intp r = 0; r < rows; r++) {
        const uint8_t *c = codes + r * ldc;
        const float *sr = s + r * lds;
        for (mf_intp j0 = 0, jb = 0; j0 < k; j0 += block, jb++) {   /* no division */
            const mf_intp j1 = k - j0 < block ? k : j0 + block;
            const float sc = sr[jb];
            const uint32_t e = (mf_f32_bits(sc) >> 23) & 0xFFu;
            if ((mf_f32_bits(sc) & 0x7FFFFFu) == 0 && e >= 1 && e <= 252) {
                /* the level's e2m1_sq: 4 * the squared magnitudes, in integers */
                const double q = 0.25 * (double)mf_kb->e2m1_sq(c + j0 / 2, (j1 - j0) / 2);
                total += q * ((double)sc * (double)sc);
            }
            else {
                for (mf_intp j = j0; j < j1; j++) {
                    const float x = lut[(c[j / 2] >> (4 * (j & 1))) & 15u] * sc;
                    if (fabsf(x) <= FLT_MAX) {
                        total += (double)x * (double)x;
                    }
                }
            }
        }
    }
    return total;
}
