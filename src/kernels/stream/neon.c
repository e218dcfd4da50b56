/*
 * neon kernels (aarch64 Advanced SIMD, every aarch64 CPU): decode, encode,
 * the fused binary operations, sum and dot for bfloat16 and every
 * float8/float6/float4 format; decode for the integer formats (their other
 * kernels are serial).
 *
 * The algorithms of avx2.c (see there and avx512.c), four float32 lanes per
 * vector: integer bit manipulations for the codecs, bit selects (BSL) for
 * the fixups.  The kernels of the small formats are compiled once per
 * special-value rule.  The loops are body.h's; this file has the registers
 * and the primitives.  Tails shorter than a vector go to the serial kernels
 * (decode, encode, binary) or through a small buffer padded with values that
 * leave the sums unchanged (sum, dot), so nothing reads or writes past the
 * ends and no padding lane raises a flag.
 *
 * Which NaN an operation returns depends on its operand order (Arm returns
 * the first signalling, then the first quiet NaN operand; FMLA looks at the
 * addend first): the float operations are written in assembly, in the
 * operand order of the serial kernels as gcc compiles them for aarch64, so
 * the compiler cannot commute them.  Runs under the caller's FPCR (Linux and
 * macOS start threads with round to nearest, no flush to zero, and NumPy
 * does not change it), like the serial kernels.
 */
#include <arm_neon.h>
#include "../kernels.h"
#include "../scalar_ops.h"
#include "../simd_params.h"
#include "../stats/stats.h"

#define MF_INLINE static inline __attribute__((always_inline))
#define U32(x) vdupq_n_u32((uint32_t)(x))
#define S32(x) vdupq_n_s32((int32_t)(x))
#define F32(x) vreinterpretq_f32_u32(x)
#define BITS(x) vreinterpretq_u32_f32(x)

typedef struct {
    uint32x4_t dec_keep, dec_spec_lim, dec_inf_lim, maxfin;
    int32x4_t dec_shl, dec_sra_neg, drop_neg, dec_shl_neg;
    uint32x4_t dec_adj, dec_adj_sub;
    uint32x4_t min_normal_m1, round_bias, exp_adj, sub_cbits, sbit;
    float32x4_t sub_c;
    uint32x4_t big_code, nan_xor;
    uint32x4_t keep_mask, big_val;      /* convert's fused loop (enc_small_w) */
} regsn;

MF_INLINE void
regs_init(regsn *r, const mf_simd_params *p)
{
    r->dec_keep = U32(p->dec_keep);
    r->dec_spec_lim = U32(p->dec_spec_lim);
    r->dec_inf_lim = U32(p->dec_inf_lim);
    r->maxfin = U32(p->maxfin);
    r->dec_shl = S32(p->dec_shl);
    r->dec_shl_neg = S32(-p->dec_shl);
    r->dec_sra_neg = S32(-p->dec_sra);
    r->drop_neg = S32(-p->drop);
    r->dec_adj = U32(p->dec_adj);
    r->dec_adj_sub = U32(p->dec_adj_sub);
    r->min_normal_m1 = U32(p->min_normal_bits - 1u);
    r->round_bias = U32(p->round_bias);
    r->exp_adj = U32(p->exp_adj);
    r->sub_cbits = U32(p->sub_cbits);
    r->sub_c = F32(r->sub_cbits);
    r->sbit = U32(p->sbit);
    r->big_code = U32(p->big_code);
    r->nan_xor = U32(p->nan_xor);
    r->keep_mask = U32(~((1u << p->drop) - 1u));
    /* big_code's value: the largest finite one where big lanes saturate,
     * else not finite (any NaN: the fused loop then leaves the block) */
    r->big_val = U32(p->big_code <= p->maxfin ? (p->big_code << p->mant_shift) + p->dec_adj
                                              : 0x7FC00000u);
}

/* ------------------------------------------------------- ordered float ops */

#define ASM_OP(INSN, R, A, B) \
    __asm__(INSN " %0.4s, %1.4s, %2.4s" : "=w"(R) : "w"(A), "w"(B))

MF_INLINE float32x4_t
op_v(mf_binary_op op, float32x4_t a, float32x4_t b)
{
    float32x4_t r;
    switch (op) {
        case MF_OP_ADD: ASM_OP("fadd", r, a, b); break;
        case MF_OP_SUB: ASM_OP("fsub", r, a, b); break;
        case MF_OP_MUL: ASM_OP("fmul", r, a, b); break;
        case MF_OP_DIV: ASM_OP("fdiv", r, a, b); break;
        /* one operand (b unused) */
        case MF_OP_FLOOR: r = vrndmq_f32(a); break;
        case MF_OP_CEIL: r = vrndpq_f32(a); break;
        case MF_OP_TRUNC: r = vrndq_f32(a); break;
        case MF_OP_RINT: r = vrndnq_f32(a); break;
        case MF_OP_SQRT: r = vsqrtq_f32(a); break;
        default: ASM_OP("fdiv", r, vdupq_n_f32(1.0f), a); break;
    }
    return r;
}

MF_INLINE float32x4_t
add_v(float32x4_t a, float32x4_t b)
{
    float32x4_t r;
    ASM_OP("fadd", r, a, b);
    return r;
}

/* acc + a * b (FMLA: the addend's NaN first, then a's, then b's) */
MF_INLINE float32x4_t
fma_acc(float32x4_t a, float32x4_t b, float32x4_t acc)
{
    __asm__("fmla %0.4s, %1.4s, %2.4s" : "+w"(acc) : "w"(a), "w"(b));
    return acc;
}

/* total + x with total the first operand, as serial */
MF_INLINE double
add_total(double total, float x)
{
    double xd = (double)x, r;
    __asm__("fadd %d0, %d1, %d2" : "=w"(r) : "w"(total), "w"(xd));
    return r;
}

/* ------------------------------------------------------- decode, 4 lanes */

MF_INLINE float32x4_t
dec_bf16(uint16x4_t codes)
{
    return F32(vshll_n_u16(codes, 16));
}

MF_INLINE float32x4_t
dec_small(const regsn *r, uint32x4_t c, mf_simd_path path)
{
    uint32x4_t t = vshlq_u32(c, r->dec_shl);
    uint32x4_t x = vandq_u32(vreinterpretq_u32_s32(vshlq_s32(vreinterpretq_s32_u32(t), r->dec_sra_neg)),
                             r->dec_keep);
    uint32x4_t xa = vandq_u32(x, U32(0x7FFFFFFFu));
    uint32x4_t ksub = vcltq_u32(xa, U32(0x00800000u));
    uint32x4_t y = vaddq_u32(xa, vbslq_u32(ksub, r->dec_adj_sub, r->dec_adj));
    float32x4_t v = vsubq_f32(F32(y), F32(vandq_u32(ksub, r->dec_adj_sub)));
    uint32x4_t vb = vorrq_u32(BITS(v), veorq_u32(x, xa));
    if (path == MF_SIMD_SMALL_IEEE || path == MF_SIMD_SMALL_FN) {
        uint32x4_t spec = U32(0x7FC00000u);
        if (path == MF_SIMD_SMALL_IEEE) {
            spec = vbslq_u32(vceqq_u32(xa, r->dec_inf_lim), U32(0x7F800000u), spec);
        }
        spec = vorrq_u32(spec, vandq_u32(x, U32(0x80000000u)));
        vb = vbslq_u32(vcgtq_u32(xa, r->dec_spec_lim), spec, vb);
    }
    if (path == MF_SIMD_SMALL_FNUZ) {
        vb = vbslq_u32(vceqq_u32(t, U32(0x80000000u)), U32(0xFFC00000u), vb);
    }
    return F32(vb);
}

MF_INLINE float32x4_t
dec_e8m0(uint32x4_t c)
{
    uint32x4_t v = vshlq_n_u32(c, 23);
    v = vbslq_u32(vceqq_u32(c, U32(0)), U32(0x00400000u), v);
    v = vbslq_u32(vceqq_u32(c, U32(0xFFu)), U32(0x7FC00000u), v);
    return F32(v);
}

MF_INLINE float32x4_t
dec_int(const regsn *r, uint32x4_t c, mf_simd_path path)
{
    uint32x4_t t = vshlq_u32(c, r->dec_shl);
    if (path == MF_SIMD_SINT) {
        return vcvtq_f32_s32(vshlq_s32(vreinterpretq_s32_u32(t), r->dec_shl_neg));
    }
    return vcvtq_f32_u32(vshlq_u32(t, r->dec_shl_neg));
}

/* 4 codes (0..255, one per lane) -> float32 */
MF_INLINE float32x4_t
dec4(const regsn *r, mf_simd_path path, uint32x4_t c)
{
    if (path == MF_SIMD_E8M0) {
        return dec_e8m0(c);
    }
    if (path == MF_SIMD_SINT || path == MF_SIMD_UINT) {
        return dec_int(r, c, path);
    }
    return dec_small(r, c, path);
}

/* 16 byte codes -> 4 vectors of 4 lanes */
MF_INLINE void
widen16(uint8x16_t b, uint32x4_t c[4])
{
    uint16x8_t lo = vmovl_u8(vget_low_u8(b)), hi = vmovl_u8(vget_high_u8(b));
    c[0] = vmovl_u16(vget_low_u16(lo));
    c[1] = vmovl_u16(vget_high_u16(lo));
    c[2] = vmovl_u16(vget_low_u16(hi));
    c[3] = vmovl_u16(vget_high_u16(hi));
}

/* ------------------------------------------------------- encode, 4 lanes */

MF_INLINE uint32x4_t
enc_bf16(float32x4_t x, uint32x4_t *ovf)
{
    uint32x4_t u = BITS(x);
    uint32x4_t hi = vshrq_n_u32(u, 16);
    uint32x4_t lsb = vandq_u32(hi, U32(1));
    uint32x4_t res = vshrq_n_u32(vaddq_u32(vaddq_u32(u, U32(0x7FFFu)), lsb), 16);
    uint32x4_t au = vandq_u32(u, U32(0x7FFFFFFFu));
    uint32x4_t knan = vcgtq_u32(au, U32(0x7F800000u));
    uint32x4_t nanv = vorrq_u32(vandq_u32(hi, U32(0x8000u)), U32(0x7FC0u));
    res = vbslq_u32(knan, nanv, res);
    /* finite values in [0x7F7F8000, 0x7F800000) round to inf */
    *ovf = vorrq_u32(*ovf, vandq_u32(vcgtq_u32(au, U32(0x7F7F7FFFu)),
                                     vcleq_u32(au, U32(0x7F7FFFFFu))));
    return res;
}

/* the codes of 4 float32 values; with w (convert's fused loop), also the
 * values they decode to where x is finite (avx2.c's enc_small_w) */
MF_INLINE uint32x4_t
enc_small_w(const regsn *r, float32x4_t x, uint32x4_t *ovf, mf_simd_path path, float32x4_t *w)
{
    uint32x4_t u = BITS(x);
    uint32x4_t au = vandq_u32(u, U32(0x7FFFFFFFu));
    uint32x4_t neg = vreinterpretq_u32_s32(vshrq_n_s32(vreinterpretq_s32_u32(u), 31));
    uint32x4_t lsb = vandq_u32(vshlq_u32(au, r->drop_neg), U32(1));
    uint32x4_t rn = vaddq_u32(vaddq_u32(au, r->round_bias), lsb);
    uint32x4_t cn = vsubq_u32(vshlq_u32(rn, r->drop_neg), r->exp_adj);
    /* every lane but NaN ones (zeroed: a signalling NaN must raise nothing) */
    uint32x4_t knan = vcgtq_u32(au, U32(0x7F800000u));
    float32x4_t t = vaddq_f32(F32(vbicq_u32(au, knan)), r->sub_c);
    uint32x4_t cs = vsubq_u32(BITS(t), r->sub_cbits);
    uint32x4_t knorm = vcgtq_u32(au, r->min_normal_m1);
    uint32x4_t code = vbslq_u32(knorm, cn, cs);
    /* overflow, inf and NaN lanes are big: the overflow code, signed
     * (codes compare as signed integers, as in avx2.c) */
    uint32x4_t kbig = vcgtq_s32(vreinterpretq_s32_u32(code), vreinterpretq_s32_u32(r->maxfin));
    code = vbslq_u32(kbig, r->big_code, code);
    if (w != NULL) {
        uint32x4_t wa = vbslq_u32(knorm, vandq_u32(rn, r->keep_mask),
                                  BITS(vsubq_f32(t, r->sub_c)));
        wa = vbslq_u32(kbig, r->big_val, wa);
        *w = F32(vorrq_u32(wa, vandq_u32(u, U32(0x80000000u))));
    }
    uint32x4_t sgn = vandq_u32(neg, r->sbit);
    if (path == MF_SIMD_SMALL_FNUZ) {
        sgn = vbicq_u32(sgn, vceqq_u32(code, U32(0)));
    }
    uint32x4_t res = vorrq_u32(code, sgn);
    if (path == MF_SIMD_SMALL_IEEE) {
        res = vorrq_u32(res, vandq_u32(knan, r->nan_xor));
    }
    else if (path == MF_SIMD_SMALL_NONE) {
        res = vbslq_u32(knan, vbicq_u32(r->sbit, res), res);
    }
    if (ovf != NULL) {
        *ovf = vorrq_u32(*ovf, vbicq_u32(kbig, vcgtq_u32(au, U32(0x7F7FFFFFu))));
    }
    return res;
}

MF_INLINE uint32x4_t
enc_small(const regsn *r, float32x4_t x, uint32x4_t *ovf, mf_simd_path path)
{
    return enc_small_w(r, x, ovf, path, NULL);
}

MF_INLINE uint32x4_t
enc_e8m0(float32x4_t x, uint32x4_t *ovf)
{
    uint32x4_t u = BITS(x);
    uint32x4_t au = vandq_u32(u, U32(0x7FFFFFFFu));
    uint32x4_t code = vshrq_n_u32(vaddq_u32(au, U32(0x400000u)), 23);
    uint32x4_t ksub = vcltq_u32(au, U32(0x00800000u));
    uint32x4_t csub = vandq_u32(vcgtq_u32(au, U32(0x005FFFFFu)), U32(1));
    code = vbslq_u32(ksub, csub, code);
    int32x4_t su = vreinterpretq_s32_u32(u);
    uint32x4_t kgood = vandq_u32(vcgtq_s32(su, S32(0)), vcltq_s32(su, S32(0x7F800000)));
    *ovf = vorrq_u32(*ovf, vandq_u32(kgood, vceqq_u32(code, U32(0xFFu))));
    return vbslq_u32(kgood, code, U32(0xFFu));
}

MF_INLINE uint32x4_t
enc_v(const regsn *r, mf_simd_path path, float32x4_t x, uint32x4_t *ovf)
{
    return path == MF_SIMD_E8M0 ? enc_e8m0(x, ovf) : enc_small(r, x, ovf, path);
}

/* four vectors of codes (0..255) -> 16 bytes in order */
MF_INLINE uint8x16_t
pack16b(uint32x4_t c0, uint32x4_t c1, uint32x4_t c2, uint32x4_t c3)
{
    uint16x8_t lo = vcombine_u16(vmovn_u32(c0), vmovn_u32(c1));
    uint16x8_t hi = vcombine_u16(vmovn_u32(c2), vmovn_u32(c3));
    return vcombine_u8(vmovn_u16(lo), vmovn_u16(hi));
}

MF_INLINE int
any_set(uint32x4_t v)
{
    return vmaxvq_u32(v) != 0;
}

/* ------------------------------------------------------- body.h's primitives */

#define MF_ISA(name) mf_neon_##name
#define VL 4
#define DEC8_VECS 4
#define BODY_STREAM 0
#define BODY_SMALL_BY_RULE 1
#define BODY_INT_PATHS 1
typedef regsn regs_t;
typedef float32x4_t vf_t;
typedef uint32x4_t vi_t;
typedef uint32x4_t ovf_t;
typedef uint32x4_t bovf_t;

MF_INLINE uint32x4_t
ovf_none(void)
{
    return U32(0);
}

#define ovf_any any_set
#define bovf_none ovf_none

MF_INLINE void
bovf_merge(uint32x4_t *ovf, uint32x4_t b)
{
    *ovf = vorrq_u32(*ovf, b);
}

MF_INLINE float32x4_t
load_f(const float *p)
{
    return vld1q_f32(p);
}

MF_INLINE void
store_f(float *p, float32x4_t v, int stream)
{
    vst1q_f32(p, v);
}

MF_INLINE float32x4_t
splat_f(float x)
{
    return vdupq_n_f32(x);
}

/* column maxima, minima (body.h's col_op): FMAX and FMIN return a NaN
 * when either operand is one */
MF_INLINE float32x4_t
maxn_v(float32x4_t a, float32x4_t x)
{
    return vmaxq_f32(a, x);
}

MF_INLINE float32x4_t
minn_v(float32x4_t a, float32x4_t x)
{
    return vminq_f32(a, x);
}

MF_INLINE void
dec_bf16_2(const uint16_t *s, float32x4_t v[2])
{
    uint16x8_t c = vld1q_u16(s);
    v[0] = dec_bf16(vget_low_u16(c));
    v[1] = dec_bf16(vget_high_u16(c));
}

MF_INLINE void
dec8_n(const regsn *r, mf_simd_path path, const uint8_t *s, float32x4_t v[4])
{
    uint32x4_t c[4];
    widen16(vld1q_u8(s), c);
    for (int q = 0; q < 4; q++) {
        v[q] = dec4(r, path, c[q]);
    }
}

MF_INLINE uint32x4_t
enc_bf16_v(const regsn *r, float32x4_t x, uint32x4_t *ovf)
{
    return enc_bf16(x, ovf);
}

MF_INLINE void
store_codes4(uint8_t *d, const uint32x4_t c[4], int stream)
{
    vst1q_u8(d, pack16b(c[0], c[1], c[2], c[3]));
}

MF_INLINE void
store_bf16_2(uint16_t *d, uint32x4_t h0, uint32x4_t h1, int stream)
{
    vst1q_u16(d, vcombine_u16(vmovn_u32(h0), vmovn_u32(h1)));
}

/* ------------------------------------------------------- sum, dot */

/* lanes[j] = lanes[j] + lanes[j + w] for w = 16, 8, 4, 2, 1 (serial's
 * lanes_combine); v[q] holds lanes 4q..4q+3 */
MF_INLINE float
combine32(float32x4_t v[8])
{
    for (int q = 0; q < 4; q++) {
        v[q] = add_v(v[q], v[q + 4]);
    }
    v[0] = add_v(v[0], v[2]);
    v[1] = add_v(v[1], v[3]);
    v[0] = add_v(v[0], v[1]);
    /* w = 2, 1: two-lane and scalar adds, so no lane computes (and raises
     * a flag for) a sum serial does not */
    float32x2_t lo = vget_low_f32(v[0]), hi = vget_high_f32(v[0]), s2;
    __asm__("fadd %0.2s, %1.2s, %2.2s" : "=w"(s2) : "w"(lo), "w"(hi));
    float x0 = vget_lane_f32(s2, 0), x1 = vget_lane_f32(s2, 1), s1;
    __asm__("fadd %s0, %s1, %s2" : "=w"(s1) : "w"(x0), "w"(x1));
    return s1;
}

/* ------------------------------------------------------- cast with error */

/* convert's fused loop (body.h): four values per vector, the float64 lanes
 * in pairs (e[0]: lanes 0-1, ... e[3]: lanes 6-7); vector q of a group of
 * four starts at an element index that is 4 (q % 2) modulo 8, so it fills
 * lanes 4 (q % 2) to 4 (q % 2) + 3 */
#define HAVE_CAST_ERR
typedef struct {
    float64x2_t e[4], r[4];
    uint32x4_t zy, zx;         /* lanes counting w == 0, v == 0 */
} err_acc_t;

MF_INLINE void
err_init(err_acc_t *acc)
{
    for (int q = 0; q < 4; q++) {
        acc->e[q] = acc->r[q] = vdupq_n_f64(0.0);
    }
    acc->zy = acc->zx = vdupq_n_u32(0);
}

MF_INLINE void
err_store(const err_acc_t *acc, double le[8], double lr[8], int64_t *zy, int64_t *zx)
{
    for (int q = 0; q < 4; q++) {
        vst1q_f64(le + 2 * q, acc->e[q]);
        vst1q_f64(lr + 2 * q, acc->r[q]);
    }
    *zy = (int64_t)vaddlvq_u32(acc->zy);
    *zx = (int64_t)vaddlvq_u32(acc->zx);
}

MF_INLINE float32x4_t
load_src(int skind, const void *x, mf_intp i)
{
    if (skind == MF_CE_F32) {
        return vld1q_f32((const float *)x + i);
    }
    uint16x4_t c = vld1_u16((const uint16_t *)x + i);
    return skind == MF_CE_BF16 ? dec_bf16(c) : vcvt_f32_f16(vreinterpret_f16_u16(c));
}

MF_INLINE float32x4_t
bf16_value(uint32x4_t h)
{
    return F32(vshlq_n_u32(h, 16));
}

MF_INLINE void
err_acc(float32x4_t v, float32x4_t w, err_acc_t *acc, int q)
{
    float64x2_t *acc_e = acc->e + 2 * (q % 2), *acc_r = acc->r + 2 * (q % 2);
    float32x4_t e = vsubq_f32(w, v);
    float64x2_t el = vcvt_f64_f32(vget_low_f32(e)), eh = vcvt_high_f64_f32(e);
    float64x2_t xl = vcvt_f64_f32(vget_low_f32(v)), xh = vcvt_high_f64_f32(v);
    acc_e[0] = vfmaq_f64(acc_e[0], el, el);
    acc_e[1] = vfmaq_f64(acc_e[1], eh, eh);
    acc_r[0] = vfmaq_f64(acc_r[0], xl, xl);
    acc_r[1] = vfmaq_f64(acc_r[1], xh, xh);
    /* a lane equal to zero compares as all ones: -1 */
    acc->zy = vsubq_u32(acc->zy, vceqzq_f32(w));
    acc->zx = vsubq_u32(acc->zx, vceqzq_f32(v));
}

/* IEEE float16 (NumPy's float16 casts): FCVTN under the caller's FPCR
 * (round to nearest even), eight values a step; a NaN made the quiet NaN of
 * its sign that mf_enc1 gives (the instruction keeps the payload); overflow
 * found from the value (finite and at least 65520, which rounds past
 * 65504); FPSR's flags put back as they were (the instruction raises
 * underflow, invalid and inexact, which mf_enc1 does not) */
#define ENC_F16_RUN enc_f16_run
MF_INLINE uint32x4_t
f16_ovf(float32x4_t x)
{
    uint32x4_t a = vandq_u32(BITS(x), U32(0x7FFFFFFFu));
    return vandq_u32(vcgtq_u32(a, U32(0x477FEFFFu)), vcltq_u32(a, U32(0x7F800000u)));
}

MF_INLINE mf_intp
enc_f16_run(const float *src, uint16_t *d, mf_intp n, int stream, int *ovf)
{
    (void)stream;
    uint64_t fpsr;
    __asm__ volatile("mrs %0, fpsr" : "=r"(fpsr) : : "memory");
    uint32x4_t o = U32(0);
    mf_intp i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t x0 = vld1q_f32(src + i), x1 = vld1q_f32(src + i + 4);
        uint16x8_t h = vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(x0), x1));
        uint16x8_t nan = vcgtq_u16(vandq_u16(h, vdupq_n_u16(0x7FFF)), vdupq_n_u16(0x7C00));
        uint16x8_t canon = vorrq_u16(vandq_u16(h, vdupq_n_u16(0x8000)), vdupq_n_u16(0x7E00));
        vst1q_u16(d + i, vbslq_u16(nan, canon, h));
        o = vorrq_u32(o, vorrq_u32(f16_ovf(x0), f16_ovf(x1)));
    }
    __asm__ volatile("msr fpsr, %0" : : "r"(fpsr) : "memory");
    *ovf |= vmaxvq_u32(o) != 0;
    return i;
}

/* and back: FCVTL (exact), a NaN made the quiet NaN of its sign (as
 * mf_decode_f32), FPSR's flags put back (a signaling NaN raises invalid) */
#define DEC_F16_RUN dec_f16_run
MF_INLINE float32x4_t
dec_f16_fix(float32x4_t x)
{
    uint32x4_t u = BITS(x);
    uint32x4_t nan = vcgtq_u32(vandq_u32(u, U32(0x7FFFFFFFu)), U32(0x7F800000u));
    uint32x4_t canon = vorrq_u32(vandq_u32(u, U32(0x80000000u)), U32(0x7FC00000u));
    return F32(vbslq_u32(nan, canon, u));
}

MF_INLINE mf_intp
dec_f16_run(const uint16_t *s, float *d, mf_intp n, int stream)
{
    (void)stream;
    uint64_t fpsr;
    __asm__ volatile("mrs %0, fpsr" : "=r"(fpsr) : : "memory");
    mf_intp i = 0;
    for (; i + 8 <= n; i += 8) {
        float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(s + i));
        vst1q_f32(d + i, dec_f16_fix(vcvt_f32_f16(vget_low_f16(h))));
        vst1q_f32(d + i + 4, dec_f16_fix(vcvt_high_f32_f16(h)));
    }
    __asm__ volatile("msr fpsr, %0" : : "r"(fpsr) : "memory");
    return i;
}

#include "body.h"

#define PW_NAME mf_neon_pairwise_f32
#define PW_DECODE mf_neon_decode_f32
#include "pairwise.h"

#define AE_NAME8 mf_neon_arg_extreme8
#define AE_NAME16 mf_neon_arg_extreme16
#include "argext.h"

#define KY_NAME8 mf_neon_keyed8
#define KY_NAME16 mf_neon_keyed16
#include "keyed.h"

/* 16 codes through the table's low (R) and high (F) bytes, 64 entries a
 * TBL/TBX of four registers: an index past a quarter's range leaves the
 * lane as it was (the subtraction wraps the lower indices past 63) */
uint32_t
mf_neon_lut8(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n)
{
    uint8_t lo[256], hi[256];
    for (int c = 0; c < 256; c++) {
        lo[c] = (uint8_t)t[c];
        hi[c] = (uint8_t)(t[c] >> 8);
    }
    uint8x16x4_t R[4], F[4];
    for (int k = 0; k < 4; k++) {
        R[k] = vld1q_u8_x4(lo + 64 * k);
        F[k] = vld1q_u8_x4(hi + 64 * k);
    }
    uint8x16_t acc = vdupq_n_u8(0);
    mf_intp i = 0;
    for (; i + 16 <= n; i += 16) {
        const uint8x16_t idx = vld1q_u8(in + i);
        const uint8x16_t i1 = vsubq_u8(idx, vdupq_n_u8(64)), i2 = vsubq_u8(idx, vdupq_n_u8(128));
        const uint8x16_t i3 = vsubq_u8(idx, vdupq_n_u8(192));
        uint8x16_t r = vqtbl4q_u8(R[0], idx), f = vqtbl4q_u8(F[0], idx);
        r = vqtbx4q_u8(r, R[1], i1);
        f = vqtbx4q_u8(f, F[1], i1);
        r = vqtbx4q_u8(r, R[2], i2);
        f = vqtbx4q_u8(f, F[2], i2);
        r = vqtbx4q_u8(r, R[3], i3);
        f = vqtbx4q_u8(f, F[3], i3);
        acc = vorrq_u8(acc, f);
        vst1q_u8(out + i, r);
    }
    uint8_t a[16];
    vst1q_u8(a, acc);
    uint32_t hit = 0;
    for (int k = 0; k < 16; k++) {
        hit |= a[k];
    }
    for (; i < n; i++) {
        hit |= hi[in[i]];
        out[i] = lo[in[i]];
    }
    return hit;
}

/*
 * float64 -> float32 rounded to odd, 2 at a time: FCVTXN is that rounding
 * (an overflow gives the largest float32, as the serial step; a value below
 * float32's subnormals its lowest code); NaN lanes the quiet NaN of their
 * sign.  FPSR is put back after the loop (FCVTXN raises inexact, underflow,
 * overflow; the serial step raises nothing); under FPCR.FZ (a float32
 * subnormal result flushed), the serial step.
 */
void
mf_neon_f64_to_f32_odd(const double *src, float *dst, mf_intp n)
{
    uint64_t fpcr, fpsr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    if (fpcr & (1u << 24)) {
        for (mf_intp i = 0; i < n; i++) {
            dst[i] = mf_f64_to_f32_odd(src[i]);
        }
        return;
    }
    __asm__ volatile("mrs %0, fpsr" : "=r"(fpsr) : : "memory");
    mf_intp i = 0;
    for (; i + 2 <= n; i += 2) {
        const float64x2_t x = vld1q_f64(src + i);
        const uint64x2_t xi = vreinterpretq_u64_f64(x);
        uint32x2_t r = vreinterpret_u32_f32(vcvtx_f32_f64(x));
        const uint32x2_t knan = vmovn_u64(vcgtq_u64(vandq_u64(xi, vdupq_n_u64(0x7FFFFFFFFFFFFFFFull)),
                                                   vdupq_n_u64(0x7FF0000000000000ull)));
        const uint32x2_t nanv = vorr_u32(vand_u32(vshrn_n_u64(xi, 32), vdup_n_u32(0x80000000u)),
                                         vdup_n_u32(0x7FC00000u));
        r = vbsl_u32(knan, nanv, r);
        vst1_f32(dst + i, vreinterpret_f32_u32(r));
    }
    __asm__ volatile("msr fpsr, %0" : : "r"(fpsr) : "memory");
    for (; i < n; i++) {
        dst[i] = mf_f64_to_f32_odd(src[i]);
    }
}

const mf_kernels mf_kernels_neon = {
    .name = "neon",
    .decode_f32 = mf_neon_decode_f32,
    .encode_f32 = mf_neon_encode_f32,
    .binary = mf_neon_binary,
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
    .gemm_f32acc = mf_neon_gemm_f32acc,
    .stats_f32 = mf_neon_stats_f32,
    .cast_err = mf_neon_cast_err,
};
