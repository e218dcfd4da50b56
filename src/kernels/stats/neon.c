/*
 * neon level of inspect's statistics block kernel (kernels.h): the serial
 * kernel's lanes, two float32x4 for min/max and four float64x2 for each
 * sum (value i in lane i % 8), so the results are bit-identical to
 * mf_serial_stats_f32.  Both NEON levels use it.  The tail (n % 8 values)
 * goes into the same lanes in scalar code.
 *
 * As at avx2, the first pass over x assumes every value is finite (no
 * masks: a NaN leaves the compare-and-select min/max unchanged and makes
 * the sum NaN, an inf shows in min or max) and is redone with masks when
 * that fails.  min/max are a compare and a select, not FMIN/FMAX, which
 * would order -0 before +0 where the serial `x < m ? x : m` does not.
 */
#include <arm_neon.h>
#include <math.h>
#include "stats.h"

#define F64(q) vreinterpretq_f64_u64(q)
#define U64(q) vreinterpretq_u64_f64(q)

/* eight float32 values (a: 0-3, b: 4-7) as the four float64 lane pairs */
static inline __attribute__((always_inline)) void
widen8(float32x4_t a, float32x4_t b, float64x2_t d[4])
{
    d[0] = vcvt_f64_f32(vget_low_f32(a));
    d[1] = vcvt_high_f64_f32(a);
    d[2] = vcvt_f64_f32(vget_low_f32(b));
    d[3] = vcvt_high_f64_f32(b);
}

/* four float32 lane masks as two float64 lane masks (sign-extended) */
static inline __attribute__((always_inline)) void
widen_mask(uint32x4_t m, uint64x2_t *lo, uint64x2_t *hi)
{
    int32x4_t s = vreinterpretq_s32_u32(m);
    *lo = vreinterpretq_u64_s64(vmovl_s32(vget_low_s32(s)));
    *hi = vreinterpretq_u64_s64(vmovl_high_s32(s));
}

static inline __attribute__((always_inline)) float32x4_t
and_ps(float32x4_t v, uint32x4_t m)
{
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), m));
}

static inline void
store8(double *l, const float64x2_t q[4])
{
    for (int k = 0; k < 4; k++) {
        vst1q_f64(l + 2 * k, q[k]);
    }
}

void
mf_neon_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel, mf_intp n,
                  int moments)
{
    const float32x4_t vinf = vdupq_n_f32(INFINITY), vninf = vdupq_n_f32(-INFINITY);
    const float32x4_t zero = vdupq_n_f32(0.0f);
    float32x4_t lo[2] = {vinf, vinf}, hi[2] = {vninf, vninf};
    float64x2_t s1[4], s2[4], e2[4], r2[4], d[4];
    for (int k = 0; k < 4; k++) {
        s1[k] = s2[k] = e2[k] = r2[k] = vdupq_n_f64(0.0);
    }
    uint32x4_t cnan = vdupq_n_u32(0), cfin = vdupq_n_u32(0);
    mf_intp n8 = n - n % 8;

    /* min, max, sum: unmasked first (without moments nothing of it is used) */
    for (mf_intp i = 0; i < (moments ? n8 : 0); i += 8) {
        float32x4_t v[2] = {vld1q_f32(x + i), vld1q_f32(x + i + 4)};
        for (int h = 0; h < 2; h++) {
            lo[h] = vbslq_f32(vcltq_f32(v[h], lo[h]), v[h], lo[h]);
            hi[h] = vbslq_f32(vcgtq_f32(v[h], hi[h]), v[h], hi[h]);
        }
        widen8(v[0], v[1], d);
        for (int k = 0; k < 4; k++) {
            s1[k] = vaddq_f64(s1[k], d[k]);
        }
    }
    int vec_finite = 1;
    if (moments) {
        uint32x4_t fin = vandq_u32(vandq_u32(vcaltq_f32(lo[0], vinf), vcaltq_f32(lo[1], vinf)),
                                   vandq_u32(vcaltq_f32(hi[0], vinf), vcaltq_f32(hi[1], vinf)));
        uint64x2_t ord = vdupq_n_u64(~0ull);
        for (int k = 0; k < 4; k++) {
            ord = vandq_u64(ord, vceqq_f64(s1[k], s1[k]));
        }
        vec_finite = vminvq_u32(fin) != 0 && (vgetq_lane_u64(ord, 0) & vgetq_lane_u64(ord, 1)) != 0;
    }
    if (vec_finite) {
        cfin = vdupq_n_u32((uint32_t)(n8 / 4));      /* summed over four lanes: n8 */
    }
    else {
        lo[0] = lo[1] = vinf;
        hi[0] = hi[1] = vninf;
        for (int k = 0; k < 4; k++) {
            s1[k] = vdupq_n_f64(0.0);
        }
    }
    for (mf_intp i = 0; i < (vec_finite ? 0 : n8); i += 8) {
        float32x4_t v[2] = {vld1q_f32(x + i), vld1q_f32(x + i + 4)}, vf[2];
        for (int h = 0; h < 2; h++) {
            uint32x4_t f = vcaltq_f32(v[h], vinf);
            cnan = vsubq_u32(cnan, vmvnq_u32(vceqq_f32(v[h], v[h])));
            cfin = vsubq_u32(cfin, f);
            float32x4_t vl = vbslq_f32(f, v[h], vinf), vh = vbslq_f32(f, v[h], vninf);
            lo[h] = vbslq_f32(vcltq_f32(vl, lo[h]), vl, lo[h]);
            hi[h] = vbslq_f32(vcgtq_f32(vh, hi[h]), vh, hi[h]);
            vf[h] = and_ps(v[h], f);
        }
        widen8(vf[0], vf[1], d);
        for (int k = 0; k < 4; k++) {
            s1[k] = vaddq_f64(s1[k], d[k]);
        }
    }
    float mn[8], mx[8];
    double l1[8];
    vst1q_f32(mn, lo[0]);
    vst1q_f32(mn + 4, lo[1]);
    vst1q_f32(mx, hi[0]);
    vst1q_f32(mx + 4, hi[1]);
    store8(l1, s1);
    double mean = mf_stats_finish_first(s, x, n8, n, mn, mx, l1, (int64_t)vaddvq_u32(cnan),
                                        (int64_t)vaddvq_u32(cfin));
    const float64x2_t vmean = vdupq_n_f64(mean), vrel = vdupq_n_f64(rel);

    /* centred squares: unmasked when every value was finite */
    for (mf_intp i = 0; i < (moments ? n8 : 0); i += 8) {
        float32x4_t v[2] = {vld1q_f32(x + i), vld1q_f32(x + i + 4)};
        widen8(v[0], v[1], d);
        uint64x2_t m[4];
        if (!vec_finite) {
            widen_mask(vcaltq_f32(v[0], vinf), &m[0], &m[1]);
            widen_mask(vcaltq_f32(v[1], vinf), &m[2], &m[3]);
        }
        for (int k = 0; k < 4; k++) {
            float64x2_t c = vsubq_f64(d[k], vmean);
            if (!vec_finite) {
                c = F64(vandq_u64(U64(c), m[k]));
            }
            s2[k] = vaddq_f64(s2[k], vmulq_f64(c, c));
        }
    }

    /* the target columns: a value counts where it and its round trip are
     * finite (g) */
    uint32x4_t cover = vdupq_n_u32(0), czy = vdupq_n_u32(0), czx = vdupq_n_u32(0);
    uint64x2_t cgt = vdupq_n_u64(0);
    for (mf_intp i = 0; i < (y != NULL ? n8 : 0); i += 8) {
        float32x4_t v[2] = {vld1q_f32(x + i), vld1q_f32(x + i + 4)};
        float32x4_t w[2] = {vld1q_f32(y + i), vld1q_f32(y + i + 4)};
        float32x4_t e[2], xg[2];
        for (int h = 0; h < 2; h++) {
            uint32x4_t f = vcaltq_f32(v[h], vinf);
            uint32x4_t g = vandq_u32(f, vcaltq_f32(w[h], vinf));
            cover = vsubq_u32(cover, vbicq_u32(f, g));
            czy = vsubq_u32(czy, vandq_u32(g, vceqq_f32(w[h], zero)));
            czx = vsubq_u32(czx, vandq_u32(g, vceqq_f32(v[h], zero)));
            e[h] = and_ps(vsubq_f32(w[h], v[h]), g);
            xg[h] = and_ps(v[h], g);
        }
        float64x2_t ed[4], xd[4];
        widen8(e[0], e[1], ed);
        widen8(xg[0], xg[1], xd);
        for (int k = 0; k < 4; k++) {
            r2[k] = vaddq_f64(r2[k], vmulq_f64(xd[k], xd[k]));
            e2[k] = vaddq_f64(e2[k], vmulq_f64(ed[k], ed[k]));
            uint64x2_t gt = vcgtq_f64(vabsq_f64(ed[k]), vmulq_f64(vabsq_f64(xd[k]), vrel));
            cgt = vsubq_u64(cgt, gt);
        }
    }
    double l2[8], le[8], lr[8];
    store8(l2, s2);
    store8(le, e2);
    store8(lr, r2);
    mf_stats_finish_second(s, x, y, n8, n, mean, rel, l2, le, lr, (int64_t)vaddvq_u32(cover),
                           (int64_t)vaddvq_u32(czy), (int64_t)vaddvq_u32(czx),
                           (int64_t)vaddvq_u64(cgt));
}
