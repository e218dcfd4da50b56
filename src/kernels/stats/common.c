/*
 * inspect's statistics kernel, serial (the oracle), and the driver that
 * decodes a chunk into cache-sized float32 blocks for the block kernel of
 * the active level.  The summation order is in kernels.h.
 */
#include <math.h>
#include <string.h>
#include <fenv.h>
#include <stdlib.h>
#include "stats.h"
#include "../parallel.h"
#if !defined(_WIN32)
#include <errno.h>
#include <unistd.h>
#endif

/* Each loop runs over whole groups of MF_STATS_LANES values with the lane
 * as the inner index (so that the compiler may vectorise it: the lanes are
 * independent, nothing is reassociated), then over the tail. */
#define LANE_LOOP(...)                                                                    \
    do {                                                                                  \
        mf_intp n8_ = n - n % MF_STATS_LANES;                                             \
        for (mf_intp i0_ = 0; i0_ < n8_; i0_ += MF_STATS_LANES) {                         \
            for (int j = 0; j < MF_STATS_LANES; j++) {                                    \
                mf_intp i = i0_ + j;                                                      \
                __VA_ARGS__                                                               \
            }                                                                             \
        }                                                                                 \
        for (mf_intp i = n8_; i < n; i++) {                                               \
            int j = (int)(i - n8_);                                                       \
            __VA_ARGS__                                                                   \
        }                                                                                 \
    } while (0)

#define STATS_BODY(T, ABS)                                                               \
    double s1[MF_STATS_LANES], s2[MF_STATS_LANES], e2[MF_STATS_LANES], r2[MF_STATS_LANES]; \
    T lo[MF_STATS_LANES], hi[MF_STATS_LANES];                                             \
    int64_t cnan[MF_STATS_LANES], cfin[MF_STATS_LANES];                                   \
    for (int j = 0; j < MF_STATS_LANES; j++) {                                            \
        s1[j] = s2[j] = e2[j] = r2[j] = 0.0;                                              \
        lo[j] = (T)INFINITY;                                                              \
        hi[j] = (T)-INFINITY;                                                             \
        cnan[j] = cfin[j] = 0;                                                            \
    }                                                                                     \
    LANE_LOOP({                                                                           \
        T v = x[i];                                                                       \
        int f = ABS(v) < (T)INFINITY;                                                     \
        cnan[j] += v != v;                                                                \
        cfin[j] += f;                                                                     \
        T vl = f ? v : (T)INFINITY, vh = f ? v : (T)-INFINITY;                            \
        lo[j] = vl < lo[j] ? vl : lo[j];                                                  \
        hi[j] = vh > hi[j] ? vh : hi[j];                                                  \
        s1[j] = s1[j] + (f ? (double)v : 0.0);                                            \
    });                                                                                   \
    int64_t nan = 0, fin = 0;                                                             \
    for (int j = 0; j < MF_STATS_LANES; j++) {                                            \
        nan += cnan[j];                                                                   \
        fin += cfin[j];                                                                   \
    }                                                                                     \
    s->nan = nan;                                                                         \
    s->finite = fin;                                                                      \
    s->inf = n - nan - fin;                                                               \
    double sum = mf_stats_combine_sum(s1);                                                \
    s->sum = sum;                                                                         \
    double mean = fin ? sum / (double)fin : 0.0;                                          \
    LANE_LOOP({                                                                           \
        T v = x[i];                                                                       \
        int f = ABS(v) < (T)INFINITY;                                                     \
        double d = f ? (double)v - mean : 0.0;                                            \
        s2[j] = s2[j] + d * d;                                                            \
    });                                                                                   \
    int64_t over = 0, zy = 0, zx = 0, gt = 0;                                             \
    if (y != NULL) {                                                                      \
        int64_t co[MF_STATS_LANES], czy[MF_STATS_LANES], czx[MF_STATS_LANES];             \
        int64_t cgt[MF_STATS_LANES];                                                      \
        for (int j = 0; j < MF_STATS_LANES; j++) {                                        \
            co[j] = czy[j] = czx[j] = cgt[j] = 0;                                         \
        }                                                                                 \
        LANE_LOOP({                                                                       \
            T v = x[i];                                                                   \
            T w = y[i];                                                                   \
            int f = ABS(v) < (T)INFINITY;                                                 \
            int g = f & (ABS(w) < (T)INFINITY);                                           \
            co[j] += f & !g;                                                              \
            czy[j] += g & (w == 0);                                                       \
            czx[j] += g & (v == 0);                                                       \
            double xd = g ? (double)v : 0.0;                                              \
            double ed = g ? (double)(T)(w - v) : 0.0;                                     \
            r2[j] = r2[j] + xd * xd;                                                      \
            e2[j] = e2[j] + ed * ed;                                                      \
            cgt[j] += fabs(ed) > fabs(xd) * rel;                                          \
        });                                                                               \
        for (int j = 0; j < MF_STATS_LANES; j++) {                                        \
            over += co[j];                                                                \
            zy += czy[j];                                                                 \
            zx += czx[j];                                                                 \
            gt += cgt[j];                                                                 \
        }                                                                                 \
    }                                                                                     \
    s->m2 = mf_stats_combine_sum(s2);                                                     \
    s->err2 = mf_stats_combine_sum(e2);                                                   \
    s->ref2 = mf_stats_combine_sum(r2);                                                   \
    s->over = over;                                                                       \
    s->zeros_y = zy;                                                                      \
    s->zeros_x = zx;                                                                      \
    s->gt = gt;

void
mf_serial_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel, mf_intp n,
                    int moments)
{
    (void)moments;      /* the oracle computes everything */
    STATS_BODY(float, fabsf)
    float l[MF_STATS_LANES], h[MF_STATS_LANES];
    memcpy(l, lo, sizeof l);
    memcpy(h, hi, sizeof h);
    s->min = mf_stats_combine_min(l);
    s->max = mf_stats_combine_max(h);
}

void
mf_serial_stats_f64(mf_stats_block *s, const double *x, const double *y, double rel, mf_intp n)
{
    STATS_BODY(double, fabs)
    /* min and max of float64 values: order does not matter but for the sign
     * of a zero; halving as for float32 */
    for (int w = MF_STATS_LANES / 2; w >= 1; w /= 2) {
        for (int j = 0; j < w; j++) {
            lo[j] = lo[j + w] < lo[j] ? lo[j + w] : lo[j];
            hi[j] = hi[j + w] > hi[j] ? hi[j + w] : hi[j];
        }
    }
    s->min = lo[0];
    s->max = hi[0];
}

void
mf_stats_merge(mf_stats_acc *a, const mf_stats_block *b, mf_intp n)
{
    a->n += n;
    a->nan += b->nan;
    a->inf += b->inf;
    a->over += b->over;
    a->zeros_y += b->zeros_y;
    a->zeros_x += b->zeros_x;
    a->gt += b->gt;
    a->err2 += b->err2;
    a->ref2 += b->ref2;
    if (b->finite == 0) {
        return;
    }
    double k = (double)b->finite, n0 = (double)a->finite, tot = n0 + k;
    double bmean = b->sum / k;
    double delta = bmean - a->mean;
    a->mean += delta * k / tot;
    a->m2 += b->m2 + delta * delta * n0 * k / tot;
    a->finite += b->finite;
    if (b->min < a->min) {
        a->min = b->min;
    }
    if (b->max > a->max) {
        a->max = b->max;
    }
}

double
mf_stats_finish_first(mf_stats_block *s, const float *x, mf_intp n8, mf_intp n, float *mn,
                      float *mx, double *l1, int64_t nan, int64_t fin)
{
    for (mf_intp i = n8; i < n; i++) {
        float v = x[i];
        int f = fabsf(v) < INFINITY;
        nan += v != v;
        fin += f;
        int j = (int)(i % MF_STATS_LANES);
        float vl = f ? v : INFINITY, vh = f ? v : -INFINITY;
        mn[j] = vl < mn[j] ? vl : mn[j];
        mx[j] = vh > mx[j] ? vh : mx[j];
        l1[j] = l1[j] + (f ? (double)v : 0.0);
    }
    s->nan = nan;
    s->finite = fin;
    s->inf = n - nan - fin;
    s->min = mf_stats_combine_min(mn);
    s->max = mf_stats_combine_max(mx);
    double sum = mf_stats_combine_sum(l1);
    s->sum = sum;
    return fin ? sum / (double)fin : 0.0;
}

void
mf_stats_finish_second(mf_stats_block *s, const float *x, const float *y, mf_intp n8, mf_intp n,
                       double mean, double rel, double *l2, double *le, double *lr,
                       int64_t over, int64_t zy, int64_t zx, int64_t gt)
{
    for (mf_intp i = n8; i < n; i++) {
        float v = x[i];
        int f = fabsf(v) < INFINITY;
        int j = (int)(i % MF_STATS_LANES);
        double d = f ? (double)v - mean : 0.0;
        l2[j] = l2[j] + d * d;
        if (y != NULL) {
            float w = y[i];
            int g = f && fabsf(w) < INFINITY;
            over += f && !g;
            zy += g && w == 0;
            zx += g && v == 0;
            double xd = g ? (double)v : 0.0;
            double ed = g ? (double)(float)(w - v) : 0.0;
            lr[j] = lr[j] + xd * xd;
            le[j] = le[j] + ed * ed;
            gt += fabs(ed) > fabs(xd) * rel;
        }
    }
    s->m2 = mf_stats_combine_sum(l2);
    s->err2 = mf_stats_combine_sum(le);
    s->ref2 = mf_stats_combine_sum(lr);
    s->over = over;
    s->zeros_y = zy;
    s->zeros_x = zx;
    s->gt = gt;
}

/* zeros of n values of type T masked with M, counted in ZW lanes of type
 * T (a lane takes at most `run / ZW` ones, then the lanes are summed): the
 * compiler makes whole-vector compares and subtracts of it, where one
 * int64_t count widened every element first */
#define ZW 32
#define COUNT_ZEROS(T, u, M, n, z)                                                     \
    do {                                                                               \
        const mf_intp run_ = (mf_intp)ZW * (T)~(T)0;                                   \
        for (mf_intp i0_ = 0; i0_ < (n); i0_ += run_) {                                \
            mf_intp e_ = (n) - i0_ < run_ ? (n) : i0_ + run_;                          \
            mf_intp ew_ = i0_ + (e_ - i0_) / ZW * ZW;                                  \
            T lane_[ZW] = {0};                                                         \
            for (mf_intp i_ = i0_; i_ < ew_; i_ += ZW) {                               \
                for (int j_ = 0; j_ < ZW; j_++) {                                      \
                    lane_[j_] += (T)(((u)[i_ + j_] & (M)) == 0);                       \
                }                                                                      \
            }                                                                          \
            for (int j_ = 0; j_ < ZW; j_++) {                                          \
                (z) += lane_[j_];                                                      \
            }                                                                          \
            for (mf_intp i_ = ew_; i_ < e_; i_++) {                                    \
                (z) += ((u)[i_] & (M)) == 0;                                           \
            }                                                                          \
        }                                                                              \
    } while (0)

/* zeros among n values: codes of `f` (+-0; a fnuz format's one zero), or
 * float32 values where f is NULL */
static int64_t
count_zeros(const mf_format *f, const void *v, mf_intp n)
{
    int64_t z = 0;
    if (f == NULL) {
        COUNT_ZEROS(uint32_t, (const uint32_t *)v, 0x7FFFFFFFu, n, z);
        return z;
    }
    uint32_t mask = f->special == MF_SPECIAL_FNUZ ? mf_code_mask(f)
                                                  : (mf_code_mask(f) & ~mf_sign_bit(f));
    if (f->itemsize == 2) {
        COUNT_ZEROS(uint16_t, (const uint16_t *)v, (uint16_t)mask, n, z);
    }
    else {
        COUNT_ZEROS(uint8_t, (const uint8_t *)v, (uint8_t)mask, n, z);
    }
    return z;
}
#undef COUNT_ZEROS
#undef ZW

int
mf_cast_err_finish(mf_stats_block *s, double *le, double *lr, int64_t zy, int64_t zx,
                   const mf_format *src, const void *x, const mf_format *tgt, void *codes,
                   mf_intp done, mf_intp n)
{
    if (done < n) {
        float v[64], w[64];
        char *c = (char *)codes + done * tgt->itemsize;
        if (src == NULL) {
            memcpy(v, (const float *)x + done, (size_t)(n - done) * sizeof(float));
        }
        else {
            mf_serial_decode_f32(src, (const char *)x + done * src->itemsize, v, n - done);
        }
        mf_serial_encode_f32(tgt, v, c, n - done);
        mf_serial_decode_f32(tgt, c, w, n - done);
        for (mf_intp i = done; i < n; i++) {
            int j = (int)(i % MF_STATS_LANES);
            double e = (double)(float)(w[i - done] - v[i - done]), vd = (double)v[i - done];
            le[j] = le[j] + e * e;
            lr[j] = lr[j] + vd * vd;
        }
    }
    for (int j = 0; j < MF_STATS_LANES; j++) {
        /* a finite block's sums stay finite (2048 squares of float32 values) */
        if (!(fabs(le[j]) < INFINITY && fabs(lr[j]) < INFINITY)) {
            return 0;
        }
    }
    s->err2 = mf_stats_combine_sum(le);
    s->ref2 = mf_stats_combine_sum(lr);
    /* every value is finite on both sides here (no overflow, no NaN); the
     * zeros give convert its flushed-to-zero count: the level's, and the
     * tail's (a code that is a zero is a value == 0; a subnormal is not,
     * without DAZ, as in the general route) */
    s->zeros_y = zy + count_zeros(tgt, (const char *)codes + done * tgt->itemsize, n - done);
    s->zeros_x = zx + count_zeros(src, (const char *)x + done * (src != NULL ? src->itemsize : 4),
                                  n - done);
    return 1;
}

/* one block: decode x (unless float32), cast to the target and back, the
 * block kernel of the active level */
static void
stats_one_block(const mf_kernels *k, mf_stats_block *b, const mf_format *src, const void *x,
                mf_intp start, mf_intp len, const mf_format *tgt, double rel, void *codes_out,
                int moments)
{
    float xb[MF_STATS_BLOCK], yb[MF_STATS_BLOCK];
    unsigned char cb[MF_STATS_BLOCK * 2];
    const float *xv;
    if (!moments && tgt != NULL && tgt->id != MF_IEEE_FLOAT32) {
        /* convert's fused loop, straight from the source codes (kernels.h) */
        void *c = codes_out != NULL ? (void *)((char *)codes_out + start * tgt->itemsize)
                                    : (void *)cb;
        const void *xs = (const char *)x + start * (src != NULL ? src->itemsize : 4);
        if (k->cast_err != NULL && k->cast_err(b, src, xs, tgt, c, len)) {
            b->nan = b->inf = b->finite = b->over = b->gt = 0;   /* zeros: counted */
            return;
        }
        /* no fused loop at this level, or a value not finite (in x or cast):
         * the general route below, with every count convert reports
         * (overflow, NaN, inf, zeros) */
        moments = 1;
    }
    if (src == NULL) {
        xv = (const float *)x + start;
    }
    else {
        k->decode_f32(src, (const char *)x + start * src->itemsize, xb, len);
        xv = xb;
    }
    const float *yv = NULL;
    if (tgt != NULL && tgt->id == MF_IEEE_FLOAT32) {
        yv = xv;
    }
    else if (tgt != NULL) {
        void *c = codes_out != NULL ? (void *)((char *)codes_out + start * tgt->itemsize)
                                    : (void *)cb;
        k->encode_f32(tgt, xv, c, len);
        k->decode_f32(tgt, c, yb, len);
        yv = yb;
    }
    int all = moments || yv == NULL;
    k->stats_f32(b, xv, yv, rel, len, all);
    if (!all) {
        /* not computed: merge only the error sums */
        b->nan = b->inf = b->finite = b->over = b->zeros_y = b->zeros_x = b->gt = 0;
    }
}

/* The pool's side of the statistics drivers: items (blocks, windows) in
 * tasks of per_task taken from a counter, each stored in its own slot, run
 * in the caller's floating-point environment (its rounding mode); the
 * workers' flags are dropped: the caller raises none.  A job embeds this
 * first and `item` finds the job from it. */
typedef struct stats_tasks {
    void (*item)(struct stats_tasks *t, mf_intp i);
    void (*item2)(struct stats_tasks *t, mf_intp i);   /* NULL, or items i and i + 1 */
    mf_intp nitems, per_task, ntasks, next;
    fenv_t env;
} stats_tasks;

static void
stats_tasks_worker(void *ctx, int w)
{
    stats_tasks *T = (stats_tasks *)ctx;
    fenv_t saved;
    if (w != 0) {
        fegetenv(&saved);
        fesetenv(&T->env);
    }
    for (;;) {
        mf_intp t = __atomic_fetch_add(&T->next, 1, __ATOMIC_RELAXED);
        if (t >= T->ntasks) {
            break;
        }
        mf_intp i0 = t * T->per_task;
        mf_intp i1 = i0 + T->per_task < T->nitems ? i0 + T->per_task : T->nitems;
        for (mf_intp i = i0; i < i1; i++) {
            if (T->item2 != NULL && i + 1 < i1) {
                T->item2(T, i++);
            }
            else {
                T->item(T, i);
            }
        }
    }
    if (w != 0) {
        fesetenv(&saved);
    }
}

void
mf_write_req_run(void *arg)
{
    mf_write_req *w = (mf_write_req *)arg;
#if !defined(_WIN32)
    while (w->done < w->len) {
        size_t n = w->len - w->done;
        ssize_t k = write(w->fd, w->buf + w->done, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
        if (k <= 0) {
            break;          /* an error or a signal: the caller writes the rest */
        }
        w->done += (size_t)k;
    }
#else
    (void)w;                /* the caller writes it all */
#endif
}

/* all items on up to T threads (here alone if T <= 1 or the pool is busy);
 * w (or NULL): bytes this thread writes first, while the workers start */
static void
stats_tasks_run(stats_tasks *t, mf_intp nitems, mf_intp per_task, int T, mf_write_req *w)
{
    t->nitems = nitems;
    t->per_task = per_task;
    t->ntasks = (nitems + per_task - 1) / per_task;
    t->next = 0;
    fegetenv(&t->env);
    if (T <= 1 || mf_pool_run_after(stats_tasks_worker, t, T, w != NULL ? mf_write_req_run : NULL,
                                    w) == 0) {
        if (w != NULL) {
            mf_write_req_run(w);
        }
        stats_tasks_worker(t, 0);
    }
}

typedef struct {
    stats_tasks tasks;
    const mf_kernels *k;
    const mf_format *src, *tgt;
    const void *x;
    mf_intp n;
    double rel;
    void *codes_out;
    int moments;
    mf_stats_block *blocks;
} stats_job;

static void
stats_item(stats_tasks *t, mf_intp b)
{
    stats_job *J = (stats_job *)t;
    mf_intp start = b * MF_STATS_BLOCK;
    mf_intp len = J->n - start < MF_STATS_BLOCK ? J->n - start : MF_STATS_BLOCK;
    stats_one_block(J->k, &J->blocks[b], J->src, J->x, start, len, J->tgt, J->rel,
                    J->codes_out, J->moments);
}

/* Large chunks are split between the pool's threads at block boundaries;
 * the blocks' results are merged in index order on this thread, so the
 * result is the same for any number of threads. */
void
mf_stats_run(mf_stats_acc *a, const mf_format *src, const void *x, mf_intp n,
             const mf_format *tgt, double rel, void *codes_out, int moments, mf_write_req *w)
{
    const mf_kernels *k = mf_k;
    fexcept_t flags;
    fegetexceptflag(&flags, FE_ALL_EXCEPT);
    mf_intp bytes = n * (src != NULL ? src->itemsize : 4);
    int T = bytes < MF_PAR_MIN_REDUCE_BYTES ? 1 : mf_get_num_threads();
    if (T > 1 && bytes / MF_PAR_THREAD_BYTES < T) {
        T = (int)(bytes / MF_PAR_THREAD_BYTES);
    }
    mf_intp nblocks = (n + MF_STATS_BLOCK - 1) / MF_STATS_BLOCK;
    mf_stats_block *blocks = T > 1 ? malloc((size_t)nblocks * sizeof *blocks) : NULL;
    if (blocks != NULL) {
        stats_job J = {.tasks = {.item = stats_item}, .k = k, .src = src, .tgt = tgt, .x = x,
                       .n = n, .rel = rel, .codes_out = codes_out, .moments = moments,
                       .blocks = blocks};
        /* tasks of 16 blocks (32768 values), at least four per thread */
        stats_tasks_run(&J.tasks, nblocks, 16, T, w);
        for (mf_intp b = 0; b < nblocks; b++) {
            mf_intp len = n - b * MF_STATS_BLOCK < MF_STATS_BLOCK ? n - b * MF_STATS_BLOCK
                                                                  : MF_STATS_BLOCK;
            mf_stats_merge(a, &blocks[b], len);
        }
        free(blocks);
    }
    else {
        if (w != NULL) {
            mf_write_req_run(w);
        }
        for (mf_intp start = 0; start < n; start += MF_STATS_BLOCK) {
            mf_intp len = n - start < MF_STATS_BLOCK ? n - start : MF_STATS_BLOCK;
            mf_stats_block b;
            stats_one_block(k, &b, src, x, start, len, tgt, rel, codes_out, moments);
            mf_stats_merge(a, &b, len);
        }
    }
    fesetexceptflag(&flags, FE_ALL_EXCEPT);
}

/* ---- a block-scaled target: quantize, dequantize and the statistics in
 * one pass over the values.  The windows (the stats blocks) are those the
 * statistics of the whole dequantized chunks give, so the result is that
 * of quantizing each chunk, dequantizing it and running mf_stats_run_f32y
 * over it; each window's round trip is computed from the whole blocks it
 * touches (a block cut by a window's end is quantized in both windows,
 * with the same result). */

/* window [s, s + n) of the flattened (rows, kk) values at x, decoded (unless
 * float32) and round-tripped into xb and yb (MF_STATS_BLOCK + 512 floats
 * each); sets *xv, *yv to the window's values and their round trip */
static void
block_window_prep(const mf_kernels *k, const mf_format *src, const void *x, mf_intp kk,
                  mf_intp s, mf_intp n, const mf_block_params *p, float s_dec, float *xb,
                  float *yb, const float **xv, const float **yv)
{
    const mf_intp B = p->block;
    mf_intp r0 = s / kk, r1 = (s + n - 1) / kk;
    mf_intp a0 = (s - r0 * kk) / B * B;                 /* the first block's column */
    mf_intp z1 = (s + n - r1 * kk + B - 1) / B * B;     /* the last block's end column */
    z1 = z1 < kk ? z1 : kk;
    mf_intp e0 = r0 * kk + a0, e1 = r1 * kk + z1;       /* whole blocks: at most B - 1 more
                                                         * values at either end */
    const float *xe;
    if (src == NULL) {
        xe = (const float *)x + e0;
    }
    else {
        k->decode_f32(src, (const char *)x + e0 * src->itemsize, xb, e1 - e0);
        xe = xb;
    }
    for (mf_intp r = r0; r <= r1; r++) {
        mf_intp a = r == r0 ? a0 : 0, z = r == r1 ? z1 : kk;
        mf_intp off = r * kk + a - e0;
        mf_block_round_trip(p, xe + off, kk - a, (z - a + B - 1) / B, s_dec, yb + off);
    }
    *xv = xe + (s - e0);
    *yv = yb + (s - e0);
}

typedef struct {
    stats_tasks tasks;
    const mf_kernels *k;
    const mf_format *src;
    const void *x;
    mf_intp kk;
    const mf_intp *win;        /* start, length of each window */
    const mf_block_params *p;
    float s_dec;
    double rel;
    mf_stats_block *blocks;
} block_stats_job;

static void
block_stats_item(stats_tasks *t, mf_intp i)
{
    block_stats_job *J = (block_stats_job *)t;
    float xb[MF_STATS_BLOCK + 512], yb[MF_STATS_BLOCK + 512];
    const float *xv, *yv;
    block_window_prep(J->k, J->src, J->x, J->kk, J->win[2 * i], J->win[2 * i + 1], J->p,
                      J->s_dec, xb, yb, &xv, &yv);
    J->k->stats_f32(&J->blocks[i], xv, yv, J->rel, J->win[2 * i + 1], 1);
}

/* windows i and i + 1 through the level's two-window kernel (same length) */
static void
block_stats_item2(stats_tasks *t, mf_intp i)
{
    block_stats_job *J = (block_stats_job *)t;
    if (J->win[2 * i + 1] != J->win[2 * i + 3]) {
        block_stats_item(t, i);
        block_stats_item(t, i + 1);
        return;
    }
    float xb[2][MF_STATS_BLOCK + 512], yb[2][MF_STATS_BLOCK + 512];
    const float *xv[2], *yv[2];
    mf_stats_block *b[2] = {&J->blocks[i], &J->blocks[i + 1]};
    for (int w = 0; w < 2; w++) {
        block_window_prep(J->k, J->src, J->x, J->kk, J->win[2 * (i + w)], J->win[2 * (i + w) + 1],
                          J->p, J->s_dec, xb[w], yb[w], &xv[w], &yv[w]);
    }
    J->k->stats_f32_2(b, xv, yv, J->rel, J->win[2 * i + 1], 1);
}

/* the windows of values [p0, p1): MF_STATS_BLOCK values from p0 on */
static mf_intp
add_windows(mf_intp *win, mf_intp nw, mf_intp p0, mf_intp p1)
{
    for (mf_intp s = p0; s < p1; s += MF_STATS_BLOCK) {
        if (win != NULL) {
            win[2 * nw] = s;
            win[2 * nw + 1] = p1 - s < MF_STATS_BLOCK ? p1 - s : MF_STATS_BLOCK;
        }
        nw++;
    }
    return nw;
}

/* the windows of the chunks checkpoint.py's _block_chunks cuts (whole rows
 * of about `chunk` values, or a long row in runs of whole blocks); chunk
 * <= 0: x is one chunk */
static mf_intp
list_windows(mf_intp *win, mf_intp rows, mf_intp kk, mf_intp chunk, mf_intp B)
{
    mf_intp n = rows * kk, nw = 0;
    if (chunk <= 0) {
        return add_windows(win, 0, 0, n);
    }
    if (kk <= chunk) {
        mf_intp step = chunk / kk * kk;
        for (mf_intp i = 0; i < n; i += step) {
            nw = add_windows(win, nw, i, n - i < step ? n : i + step);
        }
        return nw;
    }
    mf_intp piece = chunk - chunk % B > B ? chunk - chunk % B : B;
    for (mf_intp r = 0; r < n; r += kk) {
        for (mf_intp j = 0; j < kk; j += piece) {
            nw = add_windows(win, nw, r + j, r + (kk - j < piece ? kk : j + piece));
        }
    }
    return nw;
}

/* values per thread, at least, of the block-scaled statistics (a round
 * trip costs several times a plain pass) */
#define BLOCK_STATS_THREAD_VALUES ((mf_intp)1 << 16)

int
mf_stats_run_blocks(mf_stats_acc *a, const mf_format *src, const void *x, mf_intp rows,
                    mf_intp kk, mf_intp chunk, const mf_block_params *p, float s_dec,
                    double rel)
{
    const mf_kernels *k = mf_k;
    if (rows <= 0 || kk <= 0) {
        return 0;
    }
    mf_intp nwin = list_windows(NULL, rows, kk, chunk, p->block);
    mf_intp *win = malloc((size_t)nwin * 2 * sizeof *win);
    mf_stats_block *blocks = malloc((size_t)nwin * sizeof *blocks);
    if (win == NULL || blocks == NULL) {
        free(win);
        free(blocks);
        return -1;
    }
    list_windows(win, rows, kk, chunk, p->block);
    fexcept_t flags;
    fegetexceptflag(&flags, FE_ALL_EXCEPT);
    block_stats_job J = {.tasks = {.item = block_stats_item,
                                   .item2 = k->stats_f32_2 != NULL ? block_stats_item2 : NULL},
                         .k = k, .src = src, .x = x,
                         .kk = kk, .win = win, .p = p, .s_dec = s_dec, .rel = rel,
                         .blocks = blocks};
    mf_intp n = rows * kk;
    int T = mf_get_num_threads();
    if ((mf_intp)T > n / BLOCK_STATS_THREAD_VALUES) {
        T = (int)(n / BLOCK_STATS_THREAD_VALUES);
    }
    stats_tasks_run(&J.tasks, nwin, 8, T, NULL);
    /* merged in order on this thread: the same result for any number of threads */
    for (mf_intp i = 0; i < nwin; i++) {
        mf_stats_merge(a, &blocks[i], win[2 * i + 1]);
    }
    free(win);
    free(blocks);
    fesetexceptflag(&flags, FE_ALL_EXCEPT);
    return 0;
}

void
mf_stats_run_f64(mf_stats_acc *a, const double *x, const double *y, mf_intp n, double rel)
{
    fexcept_t flags;
    fegetexceptflag(&flags, FE_ALL_EXCEPT);   /* NaN compares raise invalid: not ours to report */
    for (mf_intp start = 0; start < n; start += MF_STATS_BLOCK) {
        mf_intp len = n - start < MF_STATS_BLOCK ? n - start : MF_STATS_BLOCK;
        mf_stats_block b;
        mf_serial_stats_f64(&b, x + start, y != NULL ? y + start : NULL, rel, len);
        mf_stats_merge(a, &b, len);
    }
    fesetexceptflag(&flags, FE_ALL_EXCEPT);
}

void
mf_stats_run_f32y(mf_stats_acc *a, const float *x, const float *y, mf_intp n, double rel)
{
    const mf_kernels *k = mf_k;
    fexcept_t flags;
    fegetexceptflag(&flags, FE_ALL_EXCEPT);
    for (mf_intp start = 0; start < n; start += MF_STATS_BLOCK) {
        mf_intp len = n - start < MF_STATS_BLOCK ? n - start : MF_STATS_BLOCK;
        mf_stats_block b;
        k->stats_f32(&b, x + start, y + start, rel, len, 1);
        mf_stats_merge(a, &b, len);
    }
    fesetexceptflag(&flags, FE_ALL_EXCEPT);
}
