/*
 * Block-scaled quantize / dequantize (see blocks.h and docs/formats.md,
 * "Block-scaled formats").
 *
 * A block's amax is taken on the float32 bit patterns: |x| orders as its
 * bits do, and a block holds an inf or a NaN exactly when its largest
 * magnitude pattern is >= 0x7F800000.  Scales are powers of two (MX) or
 * E4M3 codes (NVFP4); the elements are scaled in float32 and clamped to the
 * element's largest finite value, then rounded to nearest even by the
 * active level's encode_f32 (the cast), which makes this kernel bit-exact
 * across levels whenever the cast is.
 */
#include <float.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include "blocks.h"
#include "scale.h"
#include "../../core/codec.h"
#include "../scalar_ops.h"
#include "../parallel.h"

/* elements scaled at a time (a multiple of every block size) */
#define CHUNK 4096

static inline uint32_t
block_amax_bits(const float *x, int n)
{
    const uint32_t *u = (const uint32_t *)x;
    uint32_t m = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = u[i] & 0x7FFFFFFFu;
        m = a > m ? a : m;
    }
    return m;
}

static uint32_t
serial_finite_amax(const float *x, mf_intp n)
{
    const uint32_t *u = (const uint32_t *)x;
    uint32_t m = 0;
    for (mf_intp i = 0; i < n; i++) {
        uint32_t a = u[i] & 0x7FFFFFFFu;
        a = a < 0x7F800000u ? a : 0u;
        m = a > m ? a : m;
    }
    return m;
}

/* ---- the serial inner loops (the oracle of avx2.c) */

static void
serial_amax(const float *x, mf_intp nblocks, int B, uint32_t *out)
{
    for (mf_intp b = 0; b < nblocks; b++) {
        out[b] = block_amax_bits(x + b * B, B);
    }
}

static inline void
scale_clamp1(const float *x, mf_intp n, float mul, float lim, float *out)
{
    for (mf_intp i = 0; i < n; i++) {
        float v = x[i] * mul;
        v = v < lim ? v : lim;
        v = v > -lim ? v : -lim;
        out[i] = v;
    }
}

static void
serial_scale_clamp(const float *x, mf_intp nblocks, int B, const float *mul, float lim,
                   float *out)
{
    for (mf_intp b = 0; b < nblocks; b++) {
        scale_clamp1(x + b * B, B, mul[b], lim, out + b * B);
    }
}

static void
serial_mxint8(const float *x, mf_intp n, float mul, int8_t *out)
{
    for (mf_intp i = 0; i < n; i++) {
        /* |v| <= 128: adding and taking away 1.5 * 2^23 rounds to nearest even */
        float v = (x[i] * mul) * 64.0f;
        v = (v + 12582912.0f) - 12582912.0f;
        v = v < 127.0f ? v : 127.0f;
        v = v > -127.0f ? v : -127.0f;
        out[i] = (int8_t)v;
    }
}

static void
serial_pack4(const uint8_t *c, mf_intp n, uint8_t *out)
{
    for (mf_intp j = 0; j < n / 2; j++) {
        out[j] = (uint8_t)((c[2 * j] & 0xFu) | (c[2 * j + 1] << 4));
    }
}

static void
serial_unpack4(const uint8_t *c, mf_intp n, const float *lut, float *out)
{
    for (mf_intp j = 0; j < n / 2; j++) {
        out[2 * j] = lut[c[j] & 0xFu];
        out[2 * j + 1] = lut[c[j] >> 4];
    }
}

static inline void
mul2_1(float *o, mf_intp n, float a, float b)
{
    for (mf_intp i = 0; i < n; i++) {
        o[i] = (o[i] * a) * b;
    }
}

static void
serial_mul2(float *o, mf_intp nblocks, int B, const float *a, float b)
{
    for (mf_intp k = 0; k < nblocks; k++) {
        mul2_1(o + k * B, B, a[k], b);
    }
}

static void
serial_unpack4t8(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut,
                 const float *s, mf_intp lds, float *out, mf_intp ldo)
{
    for (mf_intp j = 0; j < k; j++) {
        for (mf_intp r = 0; r < 8; r++) {
            const unsigned code = (c[r * ldc + j / 2] >> (4 * (j & 1))) & 0xFu;
            out[j * ldo + r] = lut[code] * s[r * lds + j / B];
        }
    }
}

static void
serial_unpack4t8h(const uint8_t *c, mf_intp ldc, mf_intp k, int B, const float *lut,
                  const float *s, mf_intp lds, uint16_t *out, mf_intp ldo)
{
    const mf_format *bf16 = mf_fmt(MF_BFLOAT16);
    for (mf_intp j = 0; j < k; j++) {
        for (mf_intp r = 0; r < 8; r++) {
            const unsigned code = (c[r * ldc + j / 2] >> (4 * (j & 1))) & 0xFu;
            out[j * ldo + r] = (uint16_t)mf_encode_f32(bf16, lut[code] * s[r * lds + j / B]);
        }
    }
}

static uint64_t
serial_e2m1_sq(const uint8_t *c, mf_intp n)
{
    /* 4 * m^2 of the magnitudes 0, 1/2, 1, 3/2, 2, 3, 4, 6 */
    static const uint8_t sq[8] = {0, 1, 4, 9, 16, 36, 64, 144};
    uint64_t t = 0;
    for (mf_intp i = 0; i < n; i++) {
        t += sq[c[i] & 7u] + sq[(c[i] >> 4) & 7u];
    }
    return t;
}

static void
serial_int8_dec(const int8_t *c, mf_intp n, float mul, float *o)
{
    for (mf_intp i = 0; i < n; i++) {
        o[i] = ((float)c[i] * 0.015625f) * mul;
    }
}

const mf_block_ops mf_block_ops_serial = {
    serial_amax, serial_scale_clamp, serial_mxint8, serial_pack4, serial_unpack4, serial_mul2,
    serial_unpack4t8, serial_int8_dec, serial_finite_amax, NULL, serial_unpack4t8h,
    serial_e2m1_sq, NULL, NULL,
};

float
mf_finite_amax(const float *x, mf_intp n)
{
    return mf_bits_f32(mf_kb->finite_amax(x, n));
}

/* values per task of mf_finite_amax_codes: tasks taken from a counter by
 * the pool's threads, each task's largest bits merged with an atomic max
 * (a maximum is the same in any order) */
#define AMAX_TASK ((mf_intp)1 << 16)

typedef struct {
    const mf_format *f;
    const char *x;
    mf_intp n, ntasks, next;
    uint32_t m;
} amax_job;

static void
amax_worker(void *ctx, int w)
{
    amax_job *J = (amax_job *)ctx;
    float buf[CHUNK];
    (void)w;
    const int bf16 = J->f->id == MF_BFLOAT16 && mf_kb->finite_amax_bf16 != NULL;
    for (;;) {
        mf_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        mf_intp i1 = (t + 1) * AMAX_TASK < J->n ? (t + 1) * AMAX_TASK : J->n;
        uint32_t m = 0;
        if (bf16) {
            m = mf_kb->finite_amax_bf16(J->x + 2 * t * AMAX_TASK, i1 - t * AMAX_TASK);
        }
        else {
            for (mf_intp i = t * AMAX_TASK; i < i1; i += CHUNK) {
                mf_intp len = i1 - i < CHUNK ? i1 - i : CHUNK;
                mf_k->decode_f32(J->f, J->x + i * J->f->itemsize, buf, len);
                uint32_t b = mf_kb->finite_amax(buf, len);
                m = b > m ? b : m;      /* magnitudes order as their bits */
            }
        }
        uint32_t cur = __atomic_load_n(&J->m, __ATOMIC_RELAXED);
        while (m > cur && !__atomic_compare_exchange_n(&J->m, &cur, m, 0, __ATOMIC_RELAXED,
                                                       __ATOMIC_RELAXED)) {
        }
    }
}

float
mf_finite_amax_codes(const mf_format *f, const void *x, mf_intp n)
{
    amax_job J = {.f = f, .x = (const char *)x, .n = n, .next = 0, .m = 0};
    J.ntasks = (n + AMAX_TASK - 1) / AMAX_TASK;
    int T = mf_get_num_threads();
    if ((mf_intp)T > J.ntasks / 4) {
        T = (int)(J.ntasks / 4);       /* at least four tasks a thread */
    }
    if (T <= 1 || mf_pool_run(amax_worker, &J, T) == 0) {
        amax_worker(&J, 0);
    }
    return mf_bits_f32(J.m);
}

static void
quantize_row(const mf_block_params *p, const mf_block_ops *ops, const float *x, mf_intp k,
             mf_intp blo, mf_intp bhi, uint8_t *codes, uint8_t *scales, float *buf,
             uint8_t *cbuf, uint32_t *amax, float *mul)
{
    const int B = p->block;
    const mf_intp nblocks = (k + B - 1) / B;
    const mf_intp nfull = k / B;
    const mf_format *e4m3 = mf_fmt(MF_FLOAT8_E4M3FN);
    const uint8_t nv_nan = (uint8_t)mf_nan_code(e4m3, 0);
    const float smax = mf_lut8[MF_FLOAT8_E4M3FN][mf_max_finite_mag(e4m3)];
    const float s_dec = 1.0f / p->s_enc;
    const float sdb_mul = p->s_enc * (1.0f / 6.0f);
    (void)nblocks;
    if (ops->quantize_blocks != NULL && p->kind != MF_BLOCK_MXINT8) {
        /* the level's one-pass loop for the whole blocks; the padded tail
         * block (if in range) below */
        mf_intp nf = bhi < nfull ? bhi : nfull;
        if (nf > blo) {
            ops->quantize_blocks(p, x + blo * B, nf - blo,
                                 codes + (p->elem->bits == 4 ? blo * B / 2 : blo * B),
                                 scales + blo);
            blo = nf;
        }
    }
    for (mf_intp b0 = blo; b0 < bhi; b0 += CHUNK / B) {
        mf_intp nb = bhi - b0 < CHUNK / B ? bhi - b0 : CHUNK / B;
        mf_intp nf = nfull - b0 < nb ? nfull - b0 : nb;     /* full blocks in this chunk */
        uint8_t *sc = scales + b0;
        ops->amax(x + b0 * B, nf, B, amax);
        if (nf < nb) {                                       /* the padded tail block */
            amax[nf] = block_amax_bits(x + (b0 + nf) * B, (int)(k - (b0 + nf) * B));
        }
        /* the scales, and the multiplier that takes a block to the element's range */
        if (p->kind == MF_BLOCK_NV) {
            /* TransformerEngine: S_dec_b = e4m3(amax * (S_enc / 6)), saturating
             * (clamping to the largest E4M3 first is the same rounding), by the
             * cast kernel; then 1 / (S_dec_b * S_dec), at most FLT_MAX */
            for (mf_intp b = 0; b < nb; b++) {
                float sdb = amax[b] < 0x7F800000u ? mf_bits_f32(amax[b]) * sdb_mul : 0.0f;
                mul[b] = sdb < smax ? sdb : smax;
            }
            mf_k->encode_f32(e4m3, mul, sc, nb);
            for (mf_intp b = 0; b < nb; b++) {
                float rcp = 1.0f / (mf_lut8[MF_FLOAT8_E4M3FN][sc[b]] * s_dec);
                mul[b] = rcp < FLT_MAX ? rcp : FLT_MAX;
                if (amax[b] >= 0x7F800000u) {
                    sc[b] = nv_nan;
                }
            }
        }
        else {
            for (mf_intp b = 0; b < nb; b++) {
                uint32_t c = mx_scale_code(p, amax[b]);
                sc[b] = (uint8_t)c;
                mul[b] = c == 0xFFu ? 0.0f : pow2f(127 - (int)c);   /* 1 / 2^(c - 127), exact */
            }
        }
        if (p->kind == MF_BLOCK_MXINT8) {
            for (mf_intp b = 0; b < nb; b++) {
                mf_intp j0 = (b0 + b) * B;
                int n = (int)(k - j0 < B ? k - j0 : B);
                int8_t *cb = (int8_t *)codes + j0;
                if (sc[b] == 0xFFu) {
                    memset(cb, 0, (size_t)B);                /* NaN scale: codes 0 */
                }
                else if (n == B) {
                    ops->mxint8(x + j0, B, mul[b], cb);
                }
                else {
                    serial_mxint8(x + j0, n, mul[b], cb);
                    memset(cb + n, 0, (size_t)(B - n));
                }
            }
            continue;
        }
        ops->scale_clamp(x + b0 * B, nf, B, mul, p->elem_max, buf);
        if (nf < nb) {
            mf_intp j0 = (b0 + nf) * B;
            int n = (int)(k - j0);
            scale_clamp1(x + j0, n, mul[nf], p->elem_max, buf + nf * B);
            memset(buf + nf * B + n, 0, sizeof(float) * (size_t)(B - n));
        }
        for (mf_intp b = 0; b < nb; b++) {
            if (sc[b] == (p->kind == MF_BLOCK_NV ? nv_nan : 0xFFu)) {
                memset(buf + b * B, 0, sizeof(float) * (size_t)B);   /* NaN scale: codes +0 */
            }
        }
        mf_intp cnt = nb * B;
        if (p->elem->bits == 4) {
            mf_k->encode_f32(p->elem, buf, cbuf, cnt);
            ops->pack4(cbuf, cnt, codes + b0 * B / 2);
        }
        else {
            mf_k->encode_f32(p->elem, buf, codes + b0 * B, cnt);
        }
    }
}

/* ---- rows x blocks, split over threads for large tensors */

#define MF_BLOCK_THREAD_MIN (1 << 20)    /* elements per thread, at least */

typedef struct {
    const mf_block_params *p;
    const mf_block_ops *ops;
    int dequant;
    mf_intp k, nblocks, crow;
    const float *x;            /* quantize */
    uint8_t *codes, *scales;
    const uint8_t *ccodes, *cscales;   /* dequantize */
    float s_dec;
    float *out;
    mf_intp g0, g1;            /* this job's blocks, counted over all rows */
} block_job;

static void dequantize_row(const mf_block_params *p, const mf_block_ops *ops, const uint8_t *c,
                           const uint8_t *s, mf_intp k, mf_intp blo, mf_intp bhi, float s_dec,
                           float *o);

static void
run_block_job(const block_job *j)
{
    float buf[CHUNK];
    uint8_t cbuf[CHUNK];
    uint32_t amax[CHUNK / 8];
    float mul[CHUNK / 8];
    for (mf_intp r = j->g0 / j->nblocks; r * j->nblocks < j->g1; r++) {
        mf_intp lo = j->g0 - r * j->nblocks, hi = j->g1 - r * j->nblocks;
        lo = lo > 0 ? lo : 0;
        hi = hi < j->nblocks ? hi : j->nblocks;
        if (j->dequant) {
            dequantize_row(j->p, j->ops, j->ccodes + r * j->crow, j->cscales + r * j->nblocks,
                           j->k, lo, hi, j->s_dec, j->out + r * j->k + lo * j->p->block);
        }
        else {
            quantize_row(j->p, j->ops, j->x + r * j->k, j->k, lo, hi, j->codes + r * j->crow,
                         j->scales + r * j->nblocks, buf, cbuf, amax, mul);
        }
    }
}

/* tasks of the shared pool (parallel.h): ranges of blocks, taken from a
 * counter by whichever thread is free */
typedef struct {
    block_job base;
    mf_intp total, ntasks, next;
} block_pool_ctx;

static void
block_pool_fn(void *vctx, int w)
{
    block_pool_ctx *c = (block_pool_ctx *)vctx;
    (void)w;
    for (;;) {
        mf_intp t = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (t >= c->ntasks) {
            break;
        }
        block_job j = c->base;
        j.g0 = c->total * t / c->ntasks;
        j.g1 = c->total * (t + 1) / c->ntasks;
        run_block_job(&j);
    }
}

/* split the blocks of all rows into a few tasks per thread, run on the
 * shared worker pool (or here alone if another call holds it); every
 * block's result is the same whatever the split */
static void
run_blocks(block_job *base, mf_intp rows)
{
    mf_intp total = rows * base->nblocks;
    mf_intp elems = rows * base->k;
    int T = mf_get_num_threads();      /* minifloat.set_num_threads (parallel.h) */
    if ((mf_intp)T > elems / MF_BLOCK_THREAD_MIN) {
        T = (int)(elems / MF_BLOCK_THREAD_MIN);
    }
    if (T > total) {
        T = (int)total;
    }
    if (T <= 1) {
        base->g0 = 0;
        base->g1 = total;
        run_block_job(base);
        return;
    }
    block_pool_ctx c;
    c.base = *base;
    c.total = total;
    c.ntasks = (mf_intp)T * 4 < total ? (mf_intp)T * 4 : total;
    c.next = 0;
    if (mf_pool_run(block_pool_fn, &c, T) == 0) {
        block_pool_fn(&c, 0);
    }
}

void
mf_block_quantize(const mf_block_params *p, const float *x, mf_intp rows, mf_intp k,
                  uint8_t *codes, uint8_t *scales)
{
    const int B = p->block;
    block_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.ops = mf_kb;
    j.k = k;
    j.nblocks = (k + B - 1) / B;
    j.crow = (p->elem && p->elem->bits == 4) ? j.nblocks * B / 2 : j.nblocks * B;
    j.x = x;
    j.codes = codes;
    j.scales = scales;
    run_blocks(&j, rows);
}

void
mf_block_dequantize(const mf_block_params *p, const uint8_t *codes, const uint8_t *scales,
                    mf_intp rows, mf_intp k, float s_dec, float *out)
{
    const int B = p->block;
    block_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.ops = mf_kb;
    j.dequant = 1;
    j.k = k;
    j.nblocks = (k + B - 1) / B;
    j.crow = (p->elem && p->elem->bits == 4) ? j.nblocks * B / 2 : j.nblocks * B;
    j.ccodes = codes;
    j.cscales = scales;
    j.s_dec = s_dec;
    j.out = out;
    run_blocks(&j, rows);
}

/* The round trip of a run of whole blocks, for inspect's fused statistics
 * (kernels/stats/common.c): quantize_row then dequantize_row of blocks
 * [0, nb) of a row of k elements that starts at x (a row's blocks start
 * every B elements from its start, so a run that starts at a block of a
 * longer row is such a row), on this thread, into y[0, min(nb * B, k)).
 * Every block is the one mf_block_quantize and mf_block_dequantize give. */
void
mf_block_round_trip(const mf_block_params *p, const float *x, mf_intp k, mf_intp nb,
                    float s_dec, float *y)
{
    float buf[CHUNK];
    uint8_t cbuf[CHUNK];
    uint32_t amax[CHUNK / 8];
    float mul[CHUNK / 8];
    uint8_t codes[MF_BLOCK_RUN_MAX], scales[MF_BLOCK_RUN_MAX / 2];
    const mf_block_ops *ops = mf_kb;
    mf_intp b0 = 0;
    if (ops->round_trip != NULL && p->kind != MF_BLOCK_MXINT8) {
        /* the whole blocks in one pass; a padded tail block below */
        b0 = k / p->block < nb ? k / p->block : nb;
        ops->round_trip(p, x, b0, s_dec, y);
        if (b0 == nb) {
            return;
        }
    }
    quantize_row(p, ops, x, k, b0, nb, codes, scales, buf, cbuf, amax, mul);
    dequantize_row(p, ops, codes, scales, k, b0, nb, s_dec, y + b0 * p->block);
}

/* blocks [blo, bhi) of one row (of k elements): their elements [blo * B,
 * min(bhi * B, k)) to o[0, ...) */
static void
dequantize_row(const mf_block_params *p, const mf_block_ops *ops, const uint8_t *c,
               const uint8_t *s, mf_intp k, mf_intp blo, mf_intp bhi, float s_dec, float *o)
{
    const int B = p->block;
    const int fp4 = p->elem && p->elem->bits == 4;
    const float *lut4 = fp4 ? mf_lut8[p->elem->id] : NULL;
    const float *lut_e4m3 = mf_lut8[MF_FLOAT8_E4M3FN];
    const mf_intp nfull = k / B, kfull = nfull * B;
    const mf_intp jlo = blo * B, jhi = bhi * B < k ? bhi * B : k;
    float mul[CHUNK / 8];
    if (p->kind == MF_BLOCK_MXINT8) {
        for (mf_intp b = blo; b < bhi; b++) {
            mf_intp j0 = b * B, n = j0 + B < k ? B : k - j0;
            float m = s[b] == 0xFFu ? NAN : pow2f((int)s[b] - 127);
            (n == B ? ops->int8_dec : serial_int8_dec)((const int8_t *)c + j0, n, m, o + (j0 - jlo));
        }
        return;
    }
    if (fp4) {
        mf_intp jf = jhi < kfull ? jhi : kfull;          /* whole blocks: SIMD */
        if (jf > jlo) {
            ops->unpack4(c + jlo / 2, jf - jlo, lut4, o);
        }
        for (mf_intp j = jf > jlo ? jf : jlo; j < jhi; j++) {
            o[j - jlo] = lut4[(c[j / 2] >> (4 * (j & 1))) & 0xFu];
        }
    }
    else {
        mf_k->decode_f32(p->elem, c + jlo, o, jhi - jlo);
    }
    /* NVFP4: code * scale is exact (2 x 4 significant bits), then one
     * rounding for the tensor scale; MX: (code * 2^e) * 1, exact */
    const float m2 = p->kind == MF_BLOCK_NV ? s_dec : 1.0f;
    for (mf_intp b0 = blo; b0 < bhi; b0 += CHUNK / 8) {
        mf_intp nb = bhi - b0 < CHUNK / 8 ? bhi - b0 : CHUNK / 8;
        for (mf_intp b = 0; b < nb; b++) {
            uint8_t sb = s[b0 + b];
            mul[b] = p->kind == MF_BLOCK_NV ? lut_e4m3[sb]
                     : (sb == 0xFFu ? NAN : pow2f((int)sb - 127));
        }
        mf_intp nf = nfull - b0 < nb ? nfull - b0 : nb;
        ops->mul2(o + (b0 * B - jlo), nf, B, mul, m2);
        if (nf < nb) {
            mul2_1(o + ((b0 + nf) * B - jlo), k - (b0 + nf) * B, mul[nf], m2);
        }
    }
}

/* ---- matmul of two block-scaled operands
 *
 * Both operands are dequantized into bfloat16 -- exactly: an MX value is a
 * code of at most 4 significant bits (MXINT8: 7) times a power of two, an
 * NVFP4 value without its tensor scale is a float4 code times an E4M3
 * scale, 2 x 4 significant bits -- A as it is stored (M x K, row-major), B
 * transposed into the K x N layout the GEMM reads; then the bfloat16 GEMM
 * (kernels.h's gemm_f32acc: float32 accumulation, the same chains at every
 * level and thread count) runs with an epilogue that applies the NVFP4
 * tensor scales and stores float32.  NaN results are stored as +qNaN, as
 * np.matmul's float32 output of the bfloat16 GEMM. */

#define BMM_TILE_N 16          /* columns of B (rows of b's codes) per task */
#define BMM_TILE_K 256         /* depth per dequantized tile (a multiple of every block) */

typedef struct {
    const mf_block_params *p;
    const uint8_t *codes, *scales;
    mf_intp rows, k, crow, nblocks;
} bmm_operand;

typedef struct {
    bmm_operand a, b;
    const mf_block_ops *ops;
    uint16_t *A, *Bt;
    mf_intp a_rows_per_task, ntasks_a, ntasks_b, next;
} bmm_prep;

static void
bmm_prep_task(bmm_prep *c, mf_intp t, float *buf, uint16_t *hbuf)
{
    const mf_format *bf16 = mf_fmt(MF_BFLOAT16);
    if (t < c->ntasks_a) {
        const bmm_operand *o = &c->a;
        const int B = o->p->block;
        mf_intp r0 = t * c->a_rows_per_task;
        mf_intp r1 = r0 + c->a_rows_per_task < o->rows ? r0 + c->a_rows_per_task : o->rows;
        for (mf_intp r = r0; r < r1; r++) {
            for (mf_intp b0 = 0; b0 < o->nblocks; b0 += BMM_TILE_K / B) {
                mf_intp b1 = b0 + BMM_TILE_K / B < o->nblocks ? b0 + BMM_TILE_K / B : o->nblocks;
                mf_intp j0 = b0 * B, j1 = b1 * B < o->k ? b1 * B : o->k;
                dequantize_row(o->p, c->ops, o->codes + r * o->crow, o->scales + r * o->nblocks,
                               o->k, b0, b1, 1.0f, buf);
                mf_k->encode_f32(bf16, buf, c->A + r * o->k + j0, j1 - j0);
            }
        }
        return;
    }
    /* b: rows n0.. of its codes are columns of B; tiles of BMM_TILE_N x
     * BMM_TILE_K dequantized, rounded to bfloat16 (exact), transposed */
    const bmm_operand *o = &c->b;
    const int B = o->p->block;
    const mf_intp N = o->rows, K = o->k;
    mf_intp n0 = (t - c->ntasks_a) * BMM_TILE_N;
    int nn = N - n0 < BMM_TILE_N ? (int)(N - n0) : BMM_TILE_N;
    for (mf_intp b0 = 0; b0 < o->nblocks; b0 += BMM_TILE_K / B) {
        mf_intp b1 = b0 + BMM_TILE_K / B < o->nblocks ? b0 + BMM_TILE_K / B : o->nblocks;
        mf_intp j0 = b0 * B, j1 = b1 * B < K ? b1 * B : K;
        mf_intp kk = j1 - j0;
        for (int i = 0; i < nn; i++) {
            mf_intp r = n0 + i;
            dequantize_row(o->p, c->ops, o->codes + r * o->crow, o->scales + r * o->nblocks, K,
                           b0, b1, 1.0f, buf);
            mf_k->encode_f32(bf16, buf, hbuf + i * BMM_TILE_K, kk);
        }
        for (mf_intp j = 0; j < kk; j++) {
            uint16_t *dst = c->Bt + (j0 + j) * N + n0;
            for (int i = 0; i < nn; i++) {
                dst[i] = hbuf[i * BMM_TILE_K + j];
            }
        }
    }
}

static void
bmm_prep_fn(void *vctx, int w)
{
    bmm_prep *c = (bmm_prep *)vctx;
    float buf[BMM_TILE_K];
    uint16_t hbuf[BMM_TILE_N * BMM_TILE_K];
    (void)w;
    for (;;) {
        mf_intp t = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (t >= c->ntasks_a + c->ntasks_b) {
            break;
        }
        bmm_prep_task(c, t, buf, hbuf);
    }
}

typedef struct {
    float *C;
    mf_intp ldc;
    double ts;                 /* the product of the tensor scales */
    int scaled;
} bmm_out;

static void
bmm_epilogue(void *vctx, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols, float *vals,
             mf_intp ldv)
{
    const bmm_out *o = (const bmm_out *)vctx;
    for (mf_intp i = 0; i < rows; i++) {
        const float *v = vals + i * ldv;
        float *c = o->C + (i0 + i) * o->ldc + j0;
        for (mf_intp j = 0; j < cols; j++) {
            float x = o->scaled ? (float)((double)v[j] * o->ts) : v[j];
            uint32_t u = mf_f32_bits(x);
            c[j] = (u & 0x7FFFFFFFu) > 0x7F800000u ? mf_bits_f32(0x7FC00000u) : x;
        }
    }
}

/* the bfloat16 operands' memory, kept between calls (up to BMM_KEEP bytes)
 * to spare the page faults of fresh memory (5% of a 2048^3 call), or a new
 * block when another call holds it */
#define BMM_KEEP ((size_t)64 << 20)
static void *bmm_keep = NULL;
static size_t bmm_keep_size = 0;
static int bmm_keep_busy = 0;

static void *
bmm_buffer(size_t bytes, int *kept)
{
    *kept = __atomic_exchange_n(&bmm_keep_busy, 1, __ATOMIC_ACQUIRE) == 0;
    if (!*kept) {
        return malloc(bytes);
    }
    if (bmm_keep_size < bytes) {
        free(bmm_keep);
        bmm_keep = malloc(bytes);
        bmm_keep_size = bmm_keep ? bytes : 0;
    }
    if (bmm_keep == NULL) {
        __atomic_store_n(&bmm_keep_busy, 0, __ATOMIC_RELEASE);
        *kept = 0;
    }
    return bmm_keep;
}

static void
bmm_release(void *mem, int kept)
{
    if (!kept) {
        free(mem);
        return;
    }
    if (bmm_keep_size > BMM_KEEP) {
        free(bmm_keep);
        bmm_keep = NULL;
        bmm_keep_size = 0;
    }
    __atomic_store_n(&bmm_keep_busy, 0, __ATOMIC_RELEASE);
}

int
mf_block_matmul(const mf_block_params *pa, const uint8_t *ca, const uint8_t *sa, float ts_a,
                const mf_block_params *pb, const uint8_t *cb, const uint8_t *sb, float ts_b,
                mf_intp M, mf_intp N, mf_intp K, float *C)
{
    if (M <= 0 || N <= 0) {
        return 0;
    }
    if (K <= 0) {
        memset(C, 0, sizeof(float) * (size_t)(M * N));
        return 0;
    }
    int kept;
    uint16_t *A = bmm_buffer(sizeof(uint16_t) * (size_t)((M + N) * K), &kept);
    if (A == NULL) {
        return -1;
    }
    uint16_t *Bt = A + M * K;
    bmm_prep c;
    memset(&c, 0, sizeof c);
    c.ops = mf_kb;
    c.A = A;
    c.Bt = Bt;
    const bmm_operand oa = {pa, ca, sa, M, K, 0, (K + pa->block - 1) / pa->block};
    const bmm_operand ob = {pb, cb, sb, N, K, 0, (K + pb->block - 1) / pb->block};
    c.a = oa;
    c.b = ob;
    c.a.crow = (pa->elem && pa->elem->bits == 4) ? c.a.nblocks * pa->block / 2
                                                  : c.a.nblocks * pa->block;
    c.b.crow = (pb->elem && pb->elem->bits == 4) ? c.b.nblocks * pb->block / 2
                                                  : c.b.nblocks * pb->block;
    /* about 64 Ki elements of A per task */
    c.a_rows_per_task = K >= 65536 ? 1 : 65536 / K;
    c.ntasks_a = (M + c.a_rows_per_task - 1) / c.a_rows_per_task;
    c.ntasks_b = (N + BMM_TILE_N - 1) / BMM_TILE_N;
    int T = mf_get_num_threads();
    mf_intp elems = (M + N) * K;
    if ((mf_intp)T > elems / MF_BLOCK_THREAD_MIN) {
        T = (int)(elems / MF_BLOCK_THREAD_MIN);
    }
    if (T <= 1 || mf_pool_run(bmm_prep_fn, &c, T) == 0) {
        bmm_prep_fn(&c, 0);
    }
    bmm_out out = {C, N, (double)ts_a * (double)ts_b, ts_a != 1.0f || ts_b != 1.0f};
    mf_gemm_epilogue ep = {bmm_epilogue, &out, NULL, 0, NULL};
    mf_k->gemm_f32acc(mf_fmt(MF_BFLOAT16), M, N, K, A, K, Bt, N, NULL, 0, &ep);
    bmm_release(A, kept);
    return 0;
}
