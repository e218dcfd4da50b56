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
#define _GNU_SOURCE 1
#include <float.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <math.h>
#include <string.h>
#include "blocks.h"
#include "blocks_scale.h"
#include "../codec.h"
#include "scalar_ops.h"
#include "parallel.h"

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

/* ---- the serial inner loops (the oracle of blocks_avx2.c) */

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
serial_int8_dec(const int8_t *c, mf_intp n, float mul, float *o)
{
    for (mf_intp i = 0; i < n; i++) {
        o[i] = ((float)c[i] * 0.015625f) * mul;
    }
}

const mf_block_ops mf_block_ops_serial = {
    serial_amax, serial_scale_clamp, serial_mxint8, serial_pack4, serial_unpack4, serial_mul2,
    serial_int8_dec, serial_finite_amax, NULL,
};

static const mf_block_ops *
block_ops(void)
{
#ifdef MF_HAVE_AVX2
    if (mf_active_level >= MF_LEVEL_AVX2) {
        return &mf_block_ops_avx2;
    }
#endif
    return &mf_block_ops_serial;
}

float
mf_finite_amax(const float *x, mf_intp n)
{
    return mf_bits_f32(block_ops()->finite_amax(x, n));
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
                           j->k, lo, hi, j->s_dec, j->out + r * j->k);
        }
        else {
            quantize_row(j->p, j->ops, j->x + r * j->k, j->k, lo, hi, j->codes + r * j->crow,
                         j->scales + r * j->nblocks, buf, cbuf, amax, mul);
        }
    }
}

static void *
block_thread_main(void *arg)
{
    run_block_job((const block_job *)arg);
    return NULL;
}

static int block_threads_override = 0;   /* tests: _block_threads(n) */

/* minifloat.get_num_threads() (MINIFLOAT_NUM_THREADS, else the CPUs this
 * process may use), unless a test fixed a count */
static int
block_max_threads(void)
{
    int t = block_threads_override > 0 ? block_threads_override : mf_get_num_threads();
    return t < 1 ? 1 : (t > 64 ? 64 : t);
}

int
mf_block_set_threads(int n)
{
    int prev = block_max_threads();
    if (n >= 1) {
        block_threads_override = n > 64 ? 64 : n;
    }
    return prev;
}

/* split the blocks of all rows evenly; every block's result is the same
 * whatever the split */
static void
run_blocks(block_job *base, mf_intp rows)
{
    mf_intp total = rows * base->nblocks;
    mf_intp elems = rows * base->k;
    int T = block_max_threads();
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
    block_job jobs[64];
    pthread_t tids[64];
    int started[64] = {0};
    for (int t = 0; t < T; t++) {
        jobs[t] = *base;
        jobs[t].g0 = total * t / T;
        jobs[t].g1 = total * (t + 1) / T;
    }
    for (int t = 1; t < T; t++) {
        started[t] = pthread_create(&tids[t], NULL, block_thread_main, &jobs[t]) == 0;
        if (!started[t]) {
            run_block_job(&jobs[t]);          /* no thread: do it here */
        }
    }
    run_block_job(&jobs[0]);
    for (int t = 1; t < T; t++) {
        if (started[t]) {
            pthread_join(tids[t], NULL);
        }
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
    j.ops = block_ops();
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
    j.ops = block_ops();
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

/* blocks [blo, bhi) of one row */
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
            (n == B ? ops->int8_dec : serial_int8_dec)((const int8_t *)c + j0, n, m, o + j0);
        }
        return;
    }
    if (fp4) {
        mf_intp jf = jhi < kfull ? jhi : kfull;          /* whole blocks: SIMD */
        if (jf > jlo) {
            ops->unpack4(c + jlo / 2, jf - jlo, lut4, o + jlo);
        }
        for (mf_intp j = jf > jlo ? jf : jlo; j < jhi; j++) {
            o[j] = lut4[(c[j / 2] >> (4 * (j & 1))) & 0xFu];
        }
    }
    else {
        mf_k->decode_f32(p->elem, c + jlo, o + jlo, jhi - jlo);
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
        ops->mul2(o + b0 * B, nf, B, mul, m2);
        if (nf < nb) {
            mul2_1(o + (b0 + nf) * B, k - (b0 + nf) * B, mul[nf], m2);
        }
    }
}
