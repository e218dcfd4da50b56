/*
 * The blocked, threaded GEMM driver shared by the SIMD gemm files
 * (gemm_avx2.c, gemm_avx512.c, gemm_avx512bf16.c, gemm_neon.c,
 * gemm_neon_bf16.c); each includes it and supplies its packing routines and
 * micro-kernel.  The floating-point environment of the kernels (MXCSR on
 * x86, FPCR/FPSR on aarch64) is set here: see MF_FPENV below.
 *
 * Layout: the k values are packed in pairs (2q, 2q+1), an odd k padded with
 * one zero member.  For a range of NC columns, B is packed once for the whole
 * depth, as KC x NR micro-panels; then for each block of MC rows, the float32
 * results live in a scratch block (rows and columns padded to whole MR x NR
 * tiles, so the micro-kernel never sees an edge), A is packed KC at a time
 * into MR-row micro-panels and the micro-kernel updates MR x NR tiles of the
 * scratch.  When the block is finished it goes to the epilogue (or back into
 * C).  KC is even, so pairs never straddle blocks and every output element
 * is exactly the canonical chain of gemm_serial.c.
 *
 * Threads (of the shared pool, parallel.h) take tasks (column or row
 * chunks of C) from a shared counter and compute their elements' whole chains, so the result depends neither on
 * the number of threads nor on which thread does what.
 * Buffers are allocated before anything is written: if that fails the
 * caller falls back to the serial oracle.
 */
#ifndef MF_GEMM_DRIVER_H
#define MF_GEMM_DRIVER_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include "../kernels.h"
#include "common.h"
#include "../parallel.h"

/*
 * The kernels' floating-point environment (ops->ftz_daz):
 *  - x86: MXCSR = round to nearest, FTZ, DAZ, all exceptions masked.  FTZ
 *    flushes results that are tiny after rounding: exactly the canonical
 *    step of gemm_serial.c.
 *  - aarch64: FPCR = round to nearest, FZ (no traps, no default NaN, no AH).
 *    FZ flushes subnormal inputs (the canonical DAZ), but flushes results
 *    that are tiny *before* rounding: a result whose exact value lies in
 *    [2^-126 - 2^-151, 2^-126) becomes 0 where the canonical step keeps
 *    2^-126.  Every such flush sets FPSR.UFC, and without one the chains are
 *    the canonical ones (tiny after rounding implies tiny before), so the
 *    driver clears FPSR before each block and, if UFC is set after it,
 *    computes the block again with the serial oracle (in the caller's mode
 *    without FZ).  Data with tiny products (|a*b| < 2^-126) take that path.
 * Both restore the caller's environment (flags included: the flags raised
 * inside are dropped, as on x86) when done.
 */
#if defined(__x86_64__) || defined(__i386__)
typedef unsigned int mf_fpenv;
#define MF_GEMM_CSR_WORK (0x1F80u | 0x8000u | 0x0040u)
static inline mf_fpenv mf_fpenv_enter(void) { mf_fpenv e = _mm_getcsr(); _mm_setcsr(MF_GEMM_CSR_WORK); return e; }
static inline void mf_fpenv_leave(mf_fpenv e) { _mm_setcsr(e); }
/* the caller's mode without FTZ/DAZ (epilogues), then back to work */
static inline void mf_fpenv_plain(mf_fpenv e) { _mm_setcsr(e & ~(0x8000u | 0x0040u)); }
static inline void mf_fpenv_work(mf_fpenv e) { (void)e; _mm_setcsr(MF_GEMM_CSR_WORK); }
static inline void mf_fpenv_clear_flags(void) {}
static inline int mf_fpenv_flushed(void) { return 0; }
#elif defined(__aarch64__)
typedef struct { uint64_t fpcr, fpsr; } mf_fpenv;
#define MF_FPCR_FZ (1ull << 24)
/* RMode (23:22), FZ, DN (25), trap enables (15, 12:8), AH (1), FIZ (0) */
#define MF_FPCR_MODE_BITS ((3ull << 22) | MF_FPCR_FZ | (1ull << 25) | (1ull << 15) \
                           | (0x1Full << 8) | 3ull)
#define MF_FPSR_UFC (1ull << 3)
static inline uint64_t mf_get_fpcr(void) { uint64_t v; __asm__ __volatile__("mrs %0, fpcr" : "=r"(v)); return v; }
static inline uint64_t mf_get_fpsr(void) { uint64_t v; __asm__ __volatile__("mrs %0, fpsr" : "=r"(v)); return v; }
static inline void mf_set_fpcr(uint64_t v) { __asm__ __volatile__("msr fpcr, %0" : : "r"(v) : "memory"); }
static inline void mf_set_fpsr(uint64_t v) { __asm__ __volatile__("msr fpsr, %0" : : "r"(v) : "memory"); }
static inline mf_fpenv mf_fpenv_enter(void)
{
    mf_fpenv e = {mf_get_fpcr(), mf_get_fpsr()};
    mf_set_fpcr((e.fpcr & ~MF_FPCR_MODE_BITS) | MF_FPCR_FZ);
    return e;
}
static inline void mf_fpenv_leave(mf_fpenv e) { mf_set_fpcr(e.fpcr); mf_set_fpsr(e.fpsr); }
static inline void mf_fpenv_plain(mf_fpenv e) { mf_set_fpcr(e.fpcr & ~MF_FPCR_FZ); }
static inline void mf_fpenv_work(mf_fpenv e) { mf_set_fpcr((e.fpcr & ~MF_FPCR_MODE_BITS) | MF_FPCR_FZ); }
static inline void mf_fpenv_clear_flags(void) { mf_set_fpsr(0); }
static inline int mf_fpenv_flushed(void) { return (mf_get_fpsr() & MF_FPSR_UFC) != 0; }
#else
#error "gemm_driver.h: no floating-point environment code for this architecture"
#endif

/* pack rows/cols [r0, r0+cnt) of the k range [p0, p0+kc) into micro-panels
 * (cnt padded with zeros to a multiple of MR or NR); k is the full depth */
typedef void (*mf_gemm_pack_fn)(const void *ctx, const void *src, mf_intp ld,
                                mf_intp r0, mf_intp cnt, mf_intp p0, mf_intp kc, mf_intp k,
                                void *dst);
/* C[MR x NR] (row stride ldc) += packed A panel * packed B panel, kq pairs */
typedef void (*mf_gemm_kernel_fn)(mf_intp kq, const void *a, const void *b, float *c,
                                  mf_intp ldc);

typedef struct {
    int MR, NR;
    mf_intp KC, MC, NC;        /* KC even; MC, NC multiples of MR, NR */
    size_t pair_bytes;         /* bytes of one packed k pair of one row/column */
    mf_gemm_pack_fn pack_a;    /* A panel: [q][MR] */
    mf_gemm_pack_fn pack_b;    /* B panel: [q][NR] */
    mf_gemm_kernel_fn kernel;
    int ftz_daz;               /* run with MXCSR = RNE, FTZ, DAZ, all masked */
} mf_gemm_ops;

typedef struct {
    const mf_gemm_ops *ops;
    const void *ctx;           /* passed to the packers (format, tables) */
    mf_intp m, n, k;
    const void *A;
    mf_intp lda;
    const void *B;
    mf_intp ldb;
    float *C;
    mf_intp ldc;
    const mf_gemm_epilogue *ep;
    mf_intp nc;                /* columns per B packing (all of k) */
    /* tasks: column chunks of width tw (split_n) or row chunks of height th */
    int split_n;
    mf_intp tw, th, ntasks;
    mf_intp next;              /* next task, taken atomically */
    const mf_format *fmt;      /* for the oracle fallback (aarch64) */
} mf_gemm_args;

typedef struct {
    mf_gemm_args *g;
    void *abuf, *bbuf;
    float *cbuf;
    mf_intp b_j0, b_nc;        /* the columns bbuf holds (b_nc == 0: none) */
} mf_gemm_job;

#define MF_GEMM_ALIGN 64
#define MF_GEMM_MIN_THREAD_WORK ((double)(1 << 22))   /* m*n*k per extra thread */
#define MF_GEMM_MAX_BPACK ((size_t)16 << 20)          /* bytes of packed B per job */

static inline mf_intp mf_gemm_min(mf_intp a, mf_intp b) { return a < b ? a : b; }
static inline mf_intp mf_gemm_roundup(mf_intp a, mf_intp b) { return (a + b - 1) / b * b; }

/* scratch row stride: whole tiles, and not a multiple of 256 floats so that
 * the rows of a tile do not share cache sets */
static inline mf_intp
mf_gemm_scratch_ld(const mf_gemm_ops *o, mf_intp nc)
{
    mf_intp s = mf_gemm_roundup(nc, o->NR);
    return (s % 256 == 0) ? s + 16 : s;
}

/* the scratch block: C's values (padded with zeros), or zeros with an
 * epilogue */
static void
mf_gemm_scratch_init(const mf_gemm_args *g, float *cs, mf_intp lds, mf_intp ic, mf_intp mc,
                     mf_intp mcp, mf_intp jc, mf_intp nc, mf_intp ncp)
{
    for (mf_intp i = 0; i < mcp; i++) {
        if (g->ep == NULL && i < mc) {
            memcpy(cs + i * lds, g->C + (ic + i) * g->ldc + jc, sizeof(float) * nc);
            memset(cs + i * lds + nc, 0, sizeof(float) * (ncp - nc));
        }
        else {
            memset(cs + i * lds, 0, sizeof(float) * ncp);
        }
    }
}

/* rows [i0, i1) x columns [j0, j1) of C, j1 - j0 <= g->nc */
static void
mf_gemm_block(mf_gemm_job *job, mf_intp i0, mf_intp i1, mf_intp jc, mf_intp j1, mf_fpenv csr)
{
    const mf_gemm_args *g = job->g;
    const mf_gemm_ops *o = g->ops;
    const int MR = o->MR, NR = o->NR;
    const mf_intp k = g->k;
    const mf_intp kqb = o->KC / 2;                     /* pairs per full k block */
    mf_intp nc = j1 - jc;
    mf_intp ncp = mf_gemm_roundup(nc, NR);
    mf_intp lds = mf_gemm_scratch_ld(o, nc);
    if (job->b_nc != nc || job->b_j0 != jc) {
        /* B for these columns, all k blocks */
        for (mf_intp pc = 0; pc < k; pc += o->KC) {
            mf_intp kc = mf_gemm_min(o->KC, k - pc);
            char *bb = (char *)job->bbuf + (size_t)(pc / o->KC) * kqb * ncp * o->pair_bytes;
            o->pack_b(g->ctx, g->B, g->ldb, jc, nc, pc, kc, k, bb);
        }
        job->b_j0 = jc;
        job->b_nc = nc;
    }
    for (mf_intp ic = i0; ic < i1; ic += o->MC) {
        mf_intp mc = mf_gemm_min(o->MC, i1 - ic);
        mf_intp mcp = mf_gemm_roundup(mc, MR);
        float *cs = job->cbuf;
        mf_gemm_scratch_init(g, cs, lds, ic, mc, mcp, jc, nc, ncp);
        if (o->ftz_daz) {
            mf_fpenv_clear_flags();
        }
        for (mf_intp pc = 0; pc < k; pc += o->KC) {
            mf_intp kc = mf_gemm_min(o->KC, k - pc);
            mf_intp kq = (kc + 1) / 2;
            const char *bb = (const char *)job->bbuf + (size_t)(pc / o->KC) * kqb * ncp * o->pair_bytes;
            o->pack_a(g->ctx, g->A, g->lda, ic, mc, pc, kc, k, job->abuf);
            for (mf_intp jr = 0; jr < ncp; jr += NR) {
                const char *bp = bb + (size_t)(jr / NR) * kq * NR * o->pair_bytes;
                for (mf_intp ir = 0; ir < mcp; ir += MR) {
                    const char *ap = (const char *)job->abuf + (size_t)(ir / MR) * kq * MR * o->pair_bytes;
                    o->kernel(kq, ap, bp, cs + ir * lds + jr, lds);
                }
            }
        }
        if (o->ftz_daz && mf_fpenv_flushed()) {
            /* aarch64: a result was flushed before rounding (see MF_FPENV):
             * this block again, by the oracle */
            const mf_intp sz = g->fmt->itemsize;
            mf_gemm_scratch_init(g, cs, lds, ic, mc, mcp, jc, nc, ncp);
            mf_fpenv_plain(csr);
            mf_serial_gemm_f32acc(g->fmt, mc, nc, k, (const char *)g->A + ic * g->lda * sz, g->lda,
                                  (const char *)g->B + jc * sz, g->ldb, cs, lds, NULL);
            mf_fpenv_work(csr);
        }
        if (g->ep != NULL && g->ep->bf16_out != NULL) {
            mf_gemm_store_bf16(g->ep, ic, jc, mc, nc, cs, lds);   /* integer only */
        }
        else if (g->ep != NULL) {
            if (o->ftz_daz) {
                mf_fpenv_plain(csr);
            }
            g->ep->fn(g->ep->ctx, ic, jc, mc, nc, cs, lds);
            if (o->ftz_daz) {
                mf_fpenv_work(csr);
            }
        }
        else {
            for (mf_intp i = 0; i < mc; i++) {
                memcpy(g->C + (ic + i) * g->ldc + jc, cs + i * lds, sizeof(float) * nc);
            }
        }
    }
}

/* take tasks until none are left: threads that get more of the CPU do more */
static void
mf_gemm_run_job(mf_gemm_job *job)
{
    mf_gemm_args *g = job->g;
    const mf_gemm_ops *o = g->ops;
    mf_fpenv csr;
    memset(&csr, 0, sizeof(csr));
    if (o->ftz_daz) {
        csr = mf_fpenv_enter();
    }
    for (;;) {
        mf_intp t = __atomic_fetch_add(&g->next, 1, __ATOMIC_RELAXED);
        if (t >= g->ntasks) {
            break;
        }
        mf_intp i0 = 0, i1 = g->m, j0 = 0, j1 = g->n;
        if (g->split_n) {
            j0 = t * g->tw;
            j1 = mf_gemm_min(j0 + g->tw, g->n);
        }
        else {
            i0 = t * g->th;
            i1 = mf_gemm_min(i0 + g->th, g->m);
        }
        for (mf_intp jc = j0; jc < j1; jc += g->nc) {
            mf_gemm_block(job, i0, i1, jc, mf_gemm_min(jc + g->nc, j1), csr);
        }
    }
    if (o->ftz_daz) {
        mf_fpenv_leave(csr);   /* also drops the flags raised here */
    }
}

static void *
mf_gemm_thread_main(void *arg)
{
    mf_gemm_run_job((mf_gemm_job *)arg);
    return NULL;
}

/* threads to use: minifloat.set_num_threads / MINIFLOAT_NUM_THREADS / the
 * CPUs this process may run on (parallel.h) */
static int
mf_gemm_max_threads(void)
{
    return mf_get_num_threads();
}

/* the shared worker pool (parallel.c) runs jobs[w] on thread w */
static void
mf_gemm_pool_job(void *ctx, int w)
{
    mf_gemm_run_job(&((mf_gemm_job *)ctx)[w]);
}

/* run jobs[0..T) on the pool and this thread; 0 if the pool is busy */
static int
mf_gemm_pool_run(mf_gemm_job *jobs, int T)
{
    return mf_pool_run(mf_gemm_pool_job, jobs, T) > 0;
}

#define MF_GEMM_MAX_JOBS 64
#define MF_GEMM_POOL_KEEP ((size_t)64 << 20)
#define MF_GEMM_TASKS_PER_THREAD 4

static pthread_mutex_t mf_gemm_pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static void *mf_gemm_pool_mem = NULL;
static size_t mf_gemm_pool_size = 0;

/*
 * C[m x n] += A * B (or, with ep, A * B to the epilogue) by the blocked
 * kernels; k >= 1.  Returns 0, -1 if buffers could not be allocated or -2
 * if k is too deep for packing (nothing written: the caller falls back).
 */
static int
mf_gemm_drive(const mf_gemm_ops *o, const void *ctx, mf_intp m, mf_intp n, mf_intp k,
              const void *A, mf_intp lda, const void *B, mf_intp ldb, float *C, mf_intp ldc,
              const mf_gemm_epilogue *ep)
{
    mf_gemm_args g = {o, ctx, m, n, k, A, lda, B, ldb, C, ldc, ep, o->NC, 0, 0, 0, 0, 0, NULL};
    /* every context starts with the format (mf_gemm_ctx) */
    g.fmt = *(const mf_format *const *)ctx;
    mf_gemm_job jobs[MF_GEMM_MAX_JOBS];
    pthread_t tids[MF_GEMM_MAX_JOBS];
    int started[MF_GEMM_MAX_JOBS];

    /* how many threads */
    int T = mf_gemm_max_threads();
    double work = (double)m * (double)n * (double)k;
    if (T > 1 && work < MF_GEMM_MIN_THREAD_WORK * 2) {
        T = 1;
    }
    else if (T > 1 && work < MF_GEMM_MIN_THREAD_WORK * T) {
        T = (int)(work / MF_GEMM_MIN_THREAD_WORK);
    }
    if (T > MF_GEMM_MAX_JOBS) {
        T = MF_GEMM_MAX_JOBS;
    }
    /* B is packed for all of k at once: fewer columns at a time if deep */
    mf_intp kpairs = (k + o->KC - 1) / o->KC * (o->KC / 2);
    mf_intp nc_fit = (mf_intp)(MF_GEMM_MAX_BPACK / ((size_t)kpairs * o->pair_bytes));
    nc_fit = nc_fit / o->NR * o->NR;
    if (nc_fit < o->NR) {
        nc_fit = o->NR;
    }
    if (g.nc > nc_fit) {
        g.nc = nc_fit;
    }
    if ((size_t)o->NR * kpairs * o->pair_bytes > MF_GEMM_MAX_BPACK) {
        return -2;     /* so deep that even one packed panel is too big */
    }
    /* tasks: row chunks when all of B fits one packing (B is then packed
     * once per thread, A once in all), else column chunks of the wider side
     * (each packs its B and all of A); a few tasks per thread balance the
     * load */
    mf_intp nblk = (n + o->NR - 1) / o->NR, mblk = (m + o->MR - 1) / o->MR;
    if (T == 1) {
        g.split_n = 1;
    }
    else if (n <= nc_fit && mblk >= 2 * (mf_intp)T) {
        g.split_n = 0;     /* row tasks: B packed once per thread, A once */
    }
    else {
        g.split_n = nblk >= mblk;
    }
    mf_intp blocks = g.split_n ? nblk : mblk;
    mf_intp want = T == 1 ? 1 : (mf_intp)T * MF_GEMM_TASKS_PER_THREAD;
    if (g.split_n) {
        /* chunks of whole micro-panels, not narrower than 4 panels */
        mf_intp per = (blocks + want - 1) / want;
        if (T > 1 && per < 4) {
            per = 4;
        }
        g.tw = T == 1 ? n : per * o->NR;
        g.ntasks = (n + g.tw - 1) / g.tw;
    }
    else {
        mf_intp per = (blocks + want - 1) / want;
        if (per < 2) {
            per = 2;
        }
        g.th = per * o->MR;
        g.ntasks = (m + g.th - 1) / g.th;
    }
    if (T > g.ntasks) {
        T = (int)g.ntasks;
    }
    if (!g.split_n && n <= nc_fit) {
        g.nc = n;      /* row tasks: all of B packed once per thread */
    }

    /* buffers of one job (all jobs alike) */
    mf_intp rows = g.split_n ? m : g.th;
    mf_intp cols = g.split_n ? g.tw : n;
    mf_intp mcp = mf_gemm_min(o->MC, mf_gemm_roundup(rows, o->MR));
    mf_intp nc = mf_gemm_min(g.nc, cols);
    mf_intp ncp = mf_gemm_roundup(nc, o->NR);
    size_t need[3];
    need[0] = (size_t)mcp * (o->KC / 2) * o->pair_bytes;
    need[1] = (size_t)ncp * kpairs * o->pair_bytes;
    need[2] = (size_t)mcp * mf_gemm_scratch_ld(o, nc) * sizeof(float);
    size_t per_job = 0;
    for (int b = 0; b < 3; b++) {
        need[b] = (need[b] + MF_GEMM_ALIGN - 1) / MF_GEMM_ALIGN * MF_GEMM_ALIGN;
        per_job += need[b];
    }
    size_t total = per_job * (size_t)T;
    /* one block for all buffers: the pool's, kept between calls (up to
     * MF_GEMM_POOL_KEEP bytes) to spare the page faults of fresh memory, or
     * a new one when another call holds the pool */
    char *mem = NULL;
    int pooled = pthread_mutex_trylock(&mf_gemm_pool_mutex) == 0;
    if (pooled) {
        if (mf_gemm_pool_size < total) {
            free(mf_gemm_pool_mem);
            mf_gemm_pool_mem = aligned_alloc(MF_GEMM_ALIGN, total);
            mf_gemm_pool_size = mf_gemm_pool_mem ? total : 0;
        }
        mem = (char *)mf_gemm_pool_mem;
    }
    else {
        mem = (char *)aligned_alloc(MF_GEMM_ALIGN, total);
    }
    int ok = mem != NULL;
    if (ok) {
        for (int t = 0; t < T; t++) {
            char *p = mem + per_job * (size_t)t;
            jobs[t].g = &g;
            jobs[t].abuf = p;
            jobs[t].bbuf = p + need[0];
            jobs[t].cbuf = (float *)(p + need[0] + need[1]);
            jobs[t].b_j0 = 0;
            jobs[t].b_nc = 0;
        }
        if (T == 1) {
            mf_gemm_run_job(&jobs[0]);
        }
        else if (!mf_gemm_pool_run(jobs, T)) {
            /* another call has the pool: threads of our own */
            for (int t = 1; t < T; t++) {
                started[t] = pthread_create(&tids[t], NULL, mf_gemm_thread_main, &jobs[t]) == 0;
            }
            mf_gemm_run_job(&jobs[0]);
            for (int t = 1; t < T; t++) {
                if (started[t]) {
                    pthread_join(tids[t], NULL);
                }
            }
        }
        /* a thread that could not start took no task: the others did them */
    }
    if (pooled) {
        if (mf_gemm_pool_size > MF_GEMM_POOL_KEEP) {
            free(mf_gemm_pool_mem);
            mf_gemm_pool_mem = NULL;
            mf_gemm_pool_size = 0;
        }
        pthread_mutex_unlock(&mf_gemm_pool_mutex);
    }
    else {
        free(mem);
    }
    return ok ? 0 : -1;
}

/*
 * Small products: no packing, no threads, no MXCSR switch.  When every
 * operand value is zero, inf/NaN or of magnitude in [2^-63, 2^64) (always,
 * for the 8/6/4-bit formats but e8m0), every product is an exact normal
 * float32 and the canonical step is c + a*b followed by a flush to zero,
 * which the compiler vectorises.  Other operands go to the serial oracle.
 */
#define MF_GEMM_SMALL_WORK (32.0 * 32.0 * 32.0)
#define MF_GEMM_SMALL_NB 64
#define MF_GEMM_SMALL_RB 8

static inline float
mf_gemm_dec(const mf_format *f, const char *base, mf_intp i)
{
    if (f->itemsize == 2) {
        uint16_t v;
        memcpy(&v, base + 2 * i, 2);
        uint32_t u = (uint32_t)v << 16;
        float x;
        memcpy(&x, &u, 4);
        return x;
    }
    return mf_lut8[f->id][((const uint8_t *)base)[i]];
}

static inline float
mf_gemm_flush(float x)
{
    /* a zero exponent field (zero or subnormal) keeps only the sign */
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= (u & 0x7F800000u) ? 0xFFFFFFFFu : 0x80000000u;
    memcpy(&x, &u, 4);
    return x;
}

/* are all values of an (r x c) block (row stride ld) "safe" (see above)? */
static int
mf_gemm_all_safe(const mf_format *f, const void *src, mf_intp ld, mf_intp r, mf_intp c)
{
    if (f->itemsize == 1 && f->id != MF_FLOAT8_E8M0FNU) {
        return 1;
    }
    unsigned bad = 0;
    for (mf_intp i = 0; i < r; i++) {
        const char *row = (const char *)src + i * ld * f->itemsize;
        if (f->itemsize == 2) {
            const uint16_t *h = (const uint16_t *)row;
            for (mf_intp j = 0; j < c; j++) {
                /* exponent field 64..190 is [2^-63, 2^64); 0 with a zero
                 * mantissa is zero; 255 is inf/NaN */
                unsigned e = (h[j] >> 7) & 0xFFu;
                bad |= (e - 64u > 126u) & (e != 255u) & ((h[j] & 0x7FFFu) != 0);
            }
        }
        else {
            for (mf_intp j = 0; j < c; j++) {
                float x = fabsf(mf_gemm_dec(f, row, j));
                bad |= !(x == 0.0f || !(x <= 0x1p127f) || (x >= 0x1p-63f && x < 0x1p64f));
            }
        }
    }
    return !bad;
}

static void
mf_gemm_small(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
              const void *A, mf_intp lda, const void *B, mf_intp ldb,
              float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    if (!mf_gemm_all_safe(f, A, lda, m, k) || !mf_gemm_all_safe(f, B, ldb, k, n)) {
        mf_serial_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    const mf_intp sz = f->itemsize;
    float acc[MF_GEMM_SMALL_RB][MF_GEMM_SMALL_NB];
    float brow[MF_GEMM_SMALL_NB];
    for (mf_intp j0 = 0; j0 < n; j0 += MF_GEMM_SMALL_NB) {
        mf_intp nb = mf_gemm_min(MF_GEMM_SMALL_NB, n - j0);
        for (mf_intp i0 = 0; i0 < m; i0 += MF_GEMM_SMALL_RB) {
            mf_intp rb = mf_gemm_min(MF_GEMM_SMALL_RB, m - i0);
            for (mf_intp r = 0; r < rb; r++) {
                for (mf_intp j = 0; j < nb; j++) {
                    acc[r][j] = ep ? 0.0f : mf_gemm_flush(C[(i0 + r) * ldc + j0 + j]);
                }
            }
            for (mf_intp q = 0; q < (k + 1) / 2; q++) {
                for (int h = 1; h >= 0; h--) {
                    mf_intp p = 2 * q + h;
                    if (p >= k) {
                        for (mf_intp r = 0; r < rb; r++) {
                            for (mf_intp j = 0; j < nb; j++) {
                                acc[r][j] = acc[r][j] + 0.0f;     /* the +0 pad */
                            }
                        }
                        continue;
                    }
                    const char *bp = (const char *)B + (p * ldb + j0) * sz;
                    for (mf_intp j = 0; j < nb; j++) {
                        brow[j] = mf_gemm_dec(f, bp, j);
                    }
                    for (mf_intp r = 0; r < rb; r++) {
                        float a = mf_gemm_dec(f, (const char *)A + (i0 + r) * lda * sz, p);
                        for (mf_intp j = 0; j < nb; j++) {
                            acc[r][j] = mf_gemm_flush(acc[r][j] + a * brow[j]);
                        }
                    }
                }
            }
            if (ep != NULL) {
                mf_gemm_finish(ep, i0, j0, rb, nb, &acc[0][0], MF_GEMM_SMALL_NB);
            }
            else {
                for (mf_intp r = 0; r < rb; r++) {
                    memcpy(C + (i0 + r) * ldc + j0, acc[r], sizeof(float) * nb);
                }
            }
        }
    }
}

/* ---- generic packers (scalar), parametrised by the context ---- */

typedef struct {
    const mf_format *f;
    int MR, NR;
    uint16_t bf16[256];        /* 8-bit code -> bfloat16 bits (exact) */
} mf_gemm_ctx;

static inline void
mf_gemm_ctx_init(mf_gemm_ctx *c, const mf_format *f, int MR, int NR)
{
    c->f = f;
    c->MR = MR;
    c->NR = NR;
    if (f->itemsize == 1) {
        for (int i = 0; i < 256; i++) {
            uint32_t u;
            memcpy(&u, &mf_lut8[f->id][i], 4);
            c->bf16[i] = (uint16_t)(u >> 16);   /* exact: <= 7 mantissa bits */
        }
    }
}

/* code -> bfloat16 bits / float32 value; every float format decodes exactly */
static inline uint32_t
mf_gemm_bf16(const mf_gemm_ctx *c, const char *p)
{
    if (c->f->itemsize == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    return c->bf16[*(const uint8_t *)p];
}

static inline float
mf_gemm_f32(const mf_gemm_ctx *c, const char *p)
{
    uint32_t u = mf_gemm_bf16(c, p) << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* bfloat16 pairs: one uint32 per (row or column, q): low half k = 2q, high
 * half k = 2q + 1 (0 beyond k) -- VDPBF16PS adds the high product first */
static void
mf_gemm_pack_a_pairs(const void *vctx, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                     mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const mf_gemm_ctx *c = (const mf_gemm_ctx *)vctx;
    const int MR = c->MR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    uint32_t *d = (uint32_t *)dst;
    for (mf_intp ir = 0; ir < cnt; ir += MR, d += kq * MR) {
        for (int i = 0; i < MR; i++) {
            if (ir + i >= cnt) {
                for (mf_intp q = 0; q < kq; q++) {
                    d[q * MR + i] = 0;
                }
                continue;
            }
            const char *row = (const char *)src + ((r0 + ir + i) * ld + p0) * sz;
            mf_intp qfull = kc / 2;    /* pairs with both members below k */
            if (sz == 2) {
                for (mf_intp q = 0; q < qfull; q++) {
                    uint32_t v;
                    memcpy(&v, row + 4 * q, 4);
                    d[q * MR + i] = v;
                }
            }
            else {
                for (mf_intp q = 0; q < qfull; q++) {
                    d[q * MR + i] = mf_gemm_bf16(c, row + 2 * q)
                                    | (mf_gemm_bf16(c, row + 2 * q + 1) << 16);
                }
            }
            for (mf_intp q = qfull; q < kq; q++) {
                uint32_t lo = mf_gemm_bf16(c, row + 2 * q * sz);
                uint32_t hi = (p0 + 2 * q + 1 < k) ? mf_gemm_bf16(c, row + (2 * q + 1) * sz) : 0;
                d[q * MR + i] = lo | (hi << 16);
            }
        }
    }
}

static void
mf_gemm_pack_b_pairs(const void *vctx, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                     mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const mf_gemm_ctx *c = (const mf_gemm_ctx *)vctx;
    const int NR = c->NR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    uint32_t *d = (uint32_t *)dst;
    for (mf_intp jr = 0; jr < cnt; jr += NR) {
        mf_intp nr = mf_gemm_min(NR, cnt - jr);
        for (mf_intp q = 0; q < kq; q++, d += NR) {
            mf_intp plo = p0 + 2 * q, phi = plo + 1;
            const char *rlo = (const char *)src + (plo * ld + r0 + jr) * sz;
            const char *rhi = (const char *)src + (phi * ld + r0 + jr) * sz;
            mf_intp j = 0;
            for (; j < nr; j++) {
                uint32_t hi = phi < k ? mf_gemm_bf16(c, rhi + j * sz) : 0;
                d[j] = mf_gemm_bf16(c, rlo + j * sz) | (hi << 16);
            }
            for (; j < NR; j++) {
                d[j] = 0;
            }
        }
    }
}

/* float32 pairs for the FMA levels: two floats per (row or column, q), slot
 * 0 holds k = 2q + 1 (0 beyond k), slot 1 holds k = 2q: a plain k-ordered
 * FMA chain over the slots is the VDPBF16PS order */
static void
mf_gemm_pack_a_f32(const void *vctx, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                   mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const mf_gemm_ctx *c = (const mf_gemm_ctx *)vctx;
    const int MR = c->MR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    float *d = (float *)dst;
    for (mf_intp ir = 0; ir < cnt; ir += MR, d += 2 * kq * MR) {
        for (int i = 0; i < MR; i++) {
            if (ir + i >= cnt) {
                for (mf_intp q = 0; q < 2 * kq; q++) {
                    d[q * MR + i] = 0.0f;
                }
                continue;
            }
            const char *row = (const char *)src + ((r0 + ir + i) * ld + p0) * sz;
            for (mf_intp q = 0; q < kq; q++) {
                d[(2 * q) * MR + i] = (p0 + 2 * q + 1 < k) ? mf_gemm_f32(c, row + (2 * q + 1) * sz)
                                                           : 0.0f;
                d[(2 * q + 1) * MR + i] = mf_gemm_f32(c, row + 2 * q * sz);
            }
        }
    }
}

static void
mf_gemm_pack_b_f32(const void *vctx, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
                   mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const mf_gemm_ctx *c = (const mf_gemm_ctx *)vctx;
    const int NR = c->NR;
    const mf_intp sz = c->f->itemsize, kq = (kc + 1) / 2;
    float *d = (float *)dst;
    for (mf_intp jr = 0; jr < cnt; jr += NR) {
        mf_intp nr = mf_gemm_min(NR, cnt - jr);
        for (mf_intp q = 0; q < kq; q++) {
            for (int s = 0; s < 2; s++, d += NR) {
                mf_intp p = p0 + 2 * q + 1 - s;
                mf_intp j = 0;
                if (p < k && sz == 2) {
                    /* bfloat16: a shift, vectorised by the compiler */
                    const uint16_t *row = (const uint16_t *)src + p * ld + r0 + jr;
                    uint32_t *du = (uint32_t *)d;
                    for (; j < nr; j++) {
                        du[j] = (uint32_t)row[j] << 16;
                    }
                }
                else if (p < k) {
                    const char *row = (const char *)src + (p * ld + r0 + jr) * sz;
                    for (; j < nr; j++) {
                        d[j] = mf_gemm_f32(c, row + j * sz);
                    }
                }
                for (; j < NR; j++) {
                    d[j] = 0.0f;
                }
            }
        }
    }
}

/* A level's gemm_f32acc entry: tiny products on serial, small ones on
 * mf_gemm_small, the rest through mf_gemm_drive with the level's ops (its
 * micro-kernel's MR x NR), falling back to mf_gemm_small (-2) or serial when
 * the driver cannot (every level's entry is this, with its own ops) */
static inline void
mf_gemm_run(const mf_gemm_ops *ops, const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
            const void *A, mf_intp lda, const void *B, mf_intp ldb,
            float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    if (m <= 0 || n <= 0) {
        return;
    }
    if (k <= 0 || (double)m * (double)n * (double)k <= 512.0) {
        mf_serial_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    if ((double)m * (double)n * (double)k <= MF_GEMM_SMALL_WORK) {
        mf_gemm_small(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    mf_gemm_ctx ctx;
    mf_gemm_ctx_init(&ctx, f, ops->MR, ops->NR);
    int r = mf_gemm_drive(ops, &ctx, m, n, k, A, lda, B, ldb, C, ldc, ep);
    if (r == -2) {
        mf_gemm_small(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
    }
    else if (r < 0) {
        mf_serial_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
    }
}

#endif
