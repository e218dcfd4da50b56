/*
 * The blocked, threaded GEMM driver of the SIMD levels (layout and ops table:
 * driver.h).  One copy for all levels: the worker threads, the buffer
 * memory kept between calls and the fallbacks live here once; a level's
 * packers and micro-kernel are reached through its ops table.  Portable C
 * (no ISA flags): only the floating-point environment below is per
 * architecture.
 *
 * Threads (of the shared pool, parallel.h) take tasks (column or row
 * chunks of C) from a shared counter and compute their elements' whole
 * chains, so the result depends neither on the number of threads nor on
 * which thread does what.  Buffers are allocated before anything is
 * written: if that fails the caller falls back to the serial oracle.
 */
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include "../kernels.h"
#include "../parallel.h"
#include "common.h"
#include "driver.h"

/*
 * The kernels' floating-point environment (ops->ftz_daz):
 *  - x86: MXCSR = round to nearest, FTZ, DAZ, all exceptions masked.  FTZ
 *    flushes results that are tiny after rounding: exactly the canonical
 *    step of serial.c.
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
#error "gemm/driver.c: no floating-point environment code for this architecture"
#endif

typedef struct {
    const mf_gemm_ops *ops;
    const mf_gemm_ctx *ctx;    /* passed to the packers (format, tables) */
    /* B's packer and its context: ops->pack_b and ctx, or ops->pack_bt and a
     * context whose MR is NR (B given transposed: mf_gemm_run_bt) */
    mf_gemm_pack_fn pack_b;
    const mf_gemm_ctx *bctx;
    int b_t;                   /* B given transposed (pack_bt) */
    mf_intp m, n, k;
    const void *A;
    mf_intp lda;
    const void *B;
    mf_intp ldb;
    float *C;
    mf_intp ldc;
    const mf_gemm_epilogue *ep;
    mf_intp nc;                /* columns per B packing (all of k) */
    int a_all;                 /* A packed for all of k per row block */
    int a_rows;                /* or read in place by ops->kernel_rows */
    mf_intp cw;                /* then: columns of tiles that go through all of k */
    /* row tasks on several threads: B packed first, by all of them */
    struct mf_gemm_packb_job *packb;
    /* column tasks on several threads: all of A packed first, by all of
     * them (a_shared: the row block at ic starts at (ic / MC) * a_region
     * bytes, laid out as a job's abuf with a_all); NULL: each job packs */
    struct mf_gemm_packa_job *packa;
    char *a_shared;
    size_t a_region;
    /* tasks: column chunks of width tw (split_n) or row chunks of height th */
    int split_n;
    mf_intp tw, th, ntasks;
    int nthreads;
    mf_intp next;              /* next task (row tasks: micro-panel), taken atomically */
    mf_intp hint_lines[2], hint_per_tile;   /* ep's next ranges, lines a tile (0: none) */
} mf_gemm_args;

typedef struct {
    mf_gemm_args *g;
    void *abuf, *bbuf;
    float *cbuf;
    mf_intp b_j0, b_nc;        /* the columns bbuf holds (b_nc == 0: none) */
    mf_intp hint_at;           /* lines of the hint fetched so far */
} mf_gemm_job;

#define MF_GEMM_ALIGN 64
/* m*n*k per extra thread: a product of MF_GEMM_THREADED_WORK gets two */
#define MF_GEMM_MIN_THREAD_WORK (MF_GEMM_THREADED_WORK / 2)
/* bytes of packed B per job (mf_gemm_max_bpack: tests lower it to reach the
 * paths of a B wider than one packing with small products) */
#define MF_GEMM_MAX_BPACK mf_gemm_max_bpack
size_t mf_gemm_max_bpack = (size_t)16 << 20;
#define MF_GEMM_MAX_APACK ((size_t)4 << 20)           /* packed A for all of k, per job */
#define MF_GEMM_C_CHUNK ((size_t)128 << 10)           /* scratch bytes kept in L2 */
#define MF_GEMM_OWN_B_MAX ((size_t)2 << 20)           /* packed B a thread may keep alone */
#define MF_GEMM_SHARED_A_MAX ((size_t)16 << 20)       /* all of A packed once for column tasks */
#define MF_GEMM_HINT_B_MAX ((size_t)256 << 10)        /* packed B that leaves the prefetch to the hint */

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

/* the tile's prefetch from the caller's hint (mf_gemm_epilogue.next)
 * instead of the next B panel, which is in L2 already: the next
 * hint_per_tile lines */
static inline void
mf_gemm_hint(const mf_gemm_args *g, mf_gemm_job *job, const char **pf, mf_intp *npf)
{
    mf_intp at = job->hint_at;
    int r = at < g->hint_lines[0] ? 0 : 1;
    if (r == 1) {
        at -= g->hint_lines[0];
    }
    mf_intp cnt = mf_gemm_min(g->hint_per_tile, g->hint_lines[r] - at);
    if (cnt <= 0) {
        *pf = NULL;
        *npf = 0;
        return;
    }
    *pf = (const char *)((uintptr_t)g->ep->next[r] & ~(uintptr_t)63) + 64 * at;
    *npf = cnt;
    job->hint_at += cnt;
}

/* part `part` of `parts` of the lines B's packer reads for columns [col,
 * col + cnt) and k [pc, pc + kc) of a B given transposed (lazy_b: a column
 * is a run of kc elements), fetched into L2: the panel packed after this
 * one, while this one's tiles run (B from memory is then read while the
 * kernel computes, not in a stall before it) */
static void
mf_gemm_prefetch_b(const mf_gemm_args *g, mf_intp col, mf_intp cnt, mf_intp pc, mf_intp kc,
                   const char *dst, size_t dbytes, mf_intp part, mf_intp parts)
{
    /* the packed panel's lines too, for writing (each store would read its
     * line first) */
    const mf_intp dl = (mf_intp)((dbytes + 63) / 64);
    for (mf_intp l = dl * part / parts; l < dl * (part + 1) / parts; l++) {
        __builtin_prefetch(dst + 64 * l, 1, 2);
    }
    const mf_intp sz = g->ctx->f->itemsize;
    const mf_intp r0 = cnt * part / parts, r1 = cnt * (part + 1) / parts;
    for (mf_intp r = r0; r < r1; r++) {
        const char *p = (const char *)g->B + ((col + r) * g->ldb + pc) * sz;
        const char *end = p + kc * sz;
        for (p = (const char *)((uintptr_t)p & ~(uintptr_t)63); p < end; p += 64) {
            __builtin_prefetch(p, 0, 2);
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
    /* B for these columns, all k blocks.  Given transposed (rows of W in
     * x @ W.T), packed panel by panel just before the first row block's
     * tiles use it (lazy_b), the next panel's lines fetched during them;
     * else all at once, its rows read in order (a panel of B's columns
     * takes a line from each of kc rows a stride apart) */
    int lazy_b = 0;
    if (job->b_nc != nc || job->b_j0 != jc) {
        lazy_b = g->b_t;
        for (mf_intp pc = 0; pc < k && !lazy_b; pc += o->KC) {
            mf_intp kc = mf_gemm_min(o->KC, k - pc);
            char *bb = (char *)job->bbuf + (size_t)(pc / o->KC) * kqb * ncp * o->pair_bytes;
            g->pack_b(g->bctx, g->B, g->ldb, jc, nc, pc, kc, k, bb);
        }
        job->b_j0 = jc;
        job->b_nc = nc;
    }
    /* A read in place, one k block, the bfloat16 epilogue: each tile
     * goes from the kernel's registers to C, no scratch (not with
     * ftz_daz, whose redo below needs the scratch) */
    const int direct = g->a_rows && o->kernel_rows_bf16 != NULL && !o->ftz_daz && k <= o->KC
                       && g->ep != NULL && g->ep->bf16_out != NULL;
    for (mf_intp ic = i0; ic < i1; lazy_b = 0, ic += o->MC) {
        mf_intp mc = mf_gemm_min(o->MC, i1 - ic);
        mf_intp mcp = mf_gemm_roundup(mc, MR);
        float *cs = job->cbuf;
        if (!direct) {
            mf_gemm_scratch_init(g, cs, lds, ic, mc, mcp, jc, nc, ncp);
        }
        if (o->ftz_daz) {
            mf_fpenv_clear_flags();
        }
        /* with all of k's A packed at once (g->a_all) or read in place
         * (g->a_rows), the tiles of g->cw columns go through all of k
         * before the next ones: that much of the scratch stays in L2
         * between k blocks */
        const char *abase = g->a_shared != NULL ? g->a_shared + (size_t)(ic / o->MC) * g->a_region
                                                : (const char *)job->abuf;
        if (g->a_all && g->a_shared == NULL) {
            for (mf_intp pc = 0; pc < k; pc += o->KC) {
                o->pack_a(g->ctx, g->A, g->lda, ic, mc, pc, mf_gemm_min(o->KC, k - pc), k,
                          (char *)job->abuf + (size_t)(pc / o->KC) * kqb * mcp * o->pair_bytes);
            }
        }
        mf_intp cw = (g->a_all || g->a_rows) ? g->cw : ncp;
        for (mf_intp j0 = 0; j0 < ncp; j0 += cw) {
            mf_intp j1 = mf_gemm_min(j0 + cw, ncp);
            for (mf_intp pc = 0; pc < k; pc += o->KC) {
                mf_intp kc = mf_gemm_min(o->KC, k - pc);
                mf_intp kq = (kc + 1) / 2;
                const char *bb = (const char *)job->bbuf + (size_t)(pc / o->KC) * kqb * ncp * o->pair_bytes;
                const char *ab = abase;   /* (unused with A in place) */
                if (g->a_all) {
                    ab += (size_t)(pc / o->KC) * kqb * mcp * o->pair_bytes;
                }
                else if (!g->a_rows) {
                    o->pack_a(g->ctx, g->A, g->lda, ic, mc, pc, kc, k, job->abuf);
                }
                const size_t bpanel = (size_t)kq * NR * o->pair_bytes;
                const mf_intp pf_lines = (mf_intp)((bpanel / 64 + mcp / MR - 1) / (mcp / MR));
                for (mf_intp jr = j0; jr < j1; jr += NR) {
                    const char *bp = bb + (size_t)(jr / NR) * bpanel;
                    /* lazy_b: this panel packed now, the next one's
                     * source fetched during its tiles */
                    mf_intp npc = -1, njr = 0;
                    if (lazy_b) {
                        g->pack_b(g->bctx, g->B, g->ldb, jc + jr, mf_gemm_min(NR, nc - jr), pc, kc, k,
                                  (char *)bp);
                        if (jr + NR < j1) {
                            npc = pc, njr = jr + NR;
                        }
                        else if (pc + o->KC < k) {
                            npc = pc + o->KC, njr = j0;
                        }
                        else if (j1 < ncp) {
                            npc = 0, njr = j1;
                        }
                    }
                    /* the next panel of B comes from memory: fetch it a
                     * piece before each tile of this one (the hardware
                     * prefetchers stop at each page) */
                    const char *bn = NULL;
                    if (jr + NR < j1) {
                        bn = bp + bpanel;
                    }
                    else if (pc + o->KC < k) {
                        bn = bb + (size_t)kqb * ncp * o->pair_bytes
                             + (size_t)(j0 / NR) * mf_gemm_min(kqb, (k - pc - o->KC + 1) / 2) * NR * o->pair_bytes;
                    }
                    else if (j1 < ncp) {
                        bn = (const char *)job->bbuf + (size_t)(j1 / NR) * mf_gemm_min(kqb, (k + 1) / 2) * NR * o->pair_bytes;
                    }
                    for (mf_intp ir = 0, l = 0; ir < mcp; ir += MR, l += pf_lines) {
                        if (npc >= 0) {
                            const mf_intp nkc = mf_gemm_min(o->KC, k - npc);
                            const size_t nbp = (size_t)((nkc + 1) / 2) * NR * o->pair_bytes;
                            mf_gemm_prefetch_b(g, jc + njr, mf_gemm_min(NR, nc - njr), npc, nkc,
                                               (const char *)job->bbuf
                                               + (size_t)(npc / o->KC) * kqb * ncp * o->pair_bytes
                                               + (size_t)(njr / NR) * nbp,
                                               nbp, ir / MR, mcp / MR);
                        }
                        mf_intp npf = mf_gemm_min(pf_lines, mf_gemm_max(0, (mf_intp)(bpanel / 64) - l));
                        const char *pf = bn != NULL ? bn + l * 64 : NULL;
                        if (g->hint_per_tile > 0) {
                            mf_gemm_hint(g, job, &pf, &npf);
                        }
                        if (direct) {
                            o->kernel_rows_bf16(kq, (const uint16_t *)g->A + (ic + ir) * g->lda, g->lda,
                                                bp, g->ep, ic + ir, jc + jr,
                                                (int)mf_gemm_min(NR, nc - jr), pf, npf,
                                                (int)mf_gemm_min(MR, mc - ir));
                        }
                        else if (g->a_rows) {
                            o->kernel_rows(kq, (const uint16_t *)g->A + (ic + ir) * g->lda + pc, g->lda,
                                           bp, cs + ir * lds + jr, lds, pf, npf,
                                           (int)mf_gemm_min(MR, mc - ir));
                        }
                        else {
                            const char *ap = ab + (size_t)(ir / MR) * kq * MR * o->pair_bytes;
                            o->kernel(kq, ap, bp, cs + ir * lds + jr, lds, pf, npf);
                        }
                    }
                }
            }
        }
        if (o->ftz_daz && mf_fpenv_flushed()) {
            /* aarch64: a result was flushed before rounding (see the
             * floating-point environment above): this block again, by the
             * oracle (which reads B as it is: the aarch64 levels have no
             * pack_bt) */
            const mf_intp sz = g->ctx->f->itemsize;
            mf_gemm_scratch_init(g, cs, lds, ic, mc, mcp, jc, nc, ncp);
            mf_fpenv_plain(csr);
            mf_serial_gemm_f32acc(g->ctx->f, mc, nc, k, (const char *)g->A + ic * g->lda * sz, g->lda,
                                  (const char *)g->B + jc * sz, g->ldb, cs, lds, NULL);
            mf_fpenv_work(csr);
        }
        if (direct) {
            /* the kernel stored it */
        }
        else if (g->ep != NULL && g->ep->bf16_out != NULL) {
            o->store_bf16(g->ep, ic, jc, mc, nc, cs, lds);   /* integer only */
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

/* B packed once for all row tasks (mf_gemm_drive): the threads take
 * pieces of `panels` micro-panels of one k block, at most
 * MF_GEMM_PACK_PANELS, and about four pieces a thread (with pieces of 16, a
 * 512^3 product's B was one piece: one thread packed it, 60 us, while the
 * other waited) */
#define MF_GEMM_PACK_PANELS 16

typedef struct mf_gemm_packb_job {
    const mf_gemm_args *g;
    char *bbuf;
    mf_intp npieces, per_blk, panels, next;
    mf_intp done;              /* pieces packed */
} mf_gemm_packb_job;

static void
mf_gemm_packb_worker(void *ctx, int w)
{
    (void)w;
    mf_gemm_packb_job *J = (mf_gemm_packb_job *)ctx;
    const mf_gemm_args *g = J->g;
    const mf_gemm_ops *o = g->ops;
    const mf_intp kqb = o->KC / 2, ncp = mf_gemm_roundup(g->n, o->NR);
    for (;;) {
        mf_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->npieces) {
            break;
        }
        mf_intp pc = (t / J->per_blk) * o->KC, kc = mf_gemm_min(o->KC, g->k - pc);
        mf_intp j0 = (t % J->per_blk) * J->panels * o->NR;
        mf_intp cnt = mf_gemm_min(J->panels * o->NR, g->n - j0);
        char *dst = J->bbuf + (size_t)(pc / o->KC) * kqb * ncp * o->pair_bytes
                    + (size_t)(j0 / o->NR) * ((kc + 1) / 2) * o->NR * o->pair_bytes;
        g->pack_b(g->bctx, g->B, g->ldb, j0, cnt, pc, kc, g->k, dst);
        __atomic_fetch_add(&J->done, 1, __ATOMIC_RELEASE);
    }
}

/* wait until *done reaches n (the other threads' pieces) */
static void
mf_gemm_wait_pieces(const mf_intp *done, mf_intp n)
{
    while (__atomic_load_n(done, __ATOMIC_ACQUIRE) < n) {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
    }
}

/* the pieces of B until none are left, then wait for the other threads'
 * (the same pool run as the row tasks: one wake-up of the threads a call) */
static void
mf_gemm_packb_all(mf_gemm_packb_job *J)
{
    mf_gemm_packb_worker(J, 0);
    mf_gemm_wait_pieces(&J->done, J->npieces);
}

/* All of A packed once for the column tasks (mf_gemm_drive), by all
 * threads: a piece is one k block of one row block of MC rows.  Each column
 * task packed all of A for itself: x @ W.T of 512 rows against a (4096,
 * 4096) W, eight tasks of 512 columns, packed x eight times (pack_a 4.2% of
 * the profile, more than W's packing). */
typedef struct mf_gemm_packa_job {
    const mf_gemm_args *g;
    mf_intp npieces, kblocks, next;
    mf_intp done;
} mf_gemm_packa_job;

static void
mf_gemm_packa_all(mf_gemm_packa_job *J)
{
    const mf_gemm_args *g = J->g;
    const mf_gemm_ops *o = g->ops;
    const mf_intp kqb = o->KC / 2;
    for (;;) {
        mf_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->npieces) {
            break;
        }
        mf_intp ic = (t / J->kblocks) * o->MC, pc = (t % J->kblocks) * o->KC;
        mf_intp mc = mf_gemm_min(o->MC, g->m - ic), kc = mf_gemm_min(o->KC, g->k - pc);
        mf_intp mcp = mf_gemm_roundup(mc, o->MR);
        char *dst = g->a_shared + (size_t)(ic / o->MC) * g->a_region
                    + (size_t)(pc / o->KC) * kqb * mcp * o->pair_bytes;
        o->pack_a(g->ctx, g->A, g->lda, ic, mc, pc, kc, g->k, dst);
        __atomic_fetch_add(&J->done, 1, __ATOMIC_RELEASE);
    }
    mf_gemm_wait_pieces(&J->done, J->npieces);
}

/* take tasks until none are left: threads that get more of the CPU do more */
static void
mf_gemm_run_job(mf_gemm_job *job)
{
    mf_gemm_args *g = job->g;
    const mf_gemm_ops *o = g->ops;
    mf_fpenv csr;
    memset(&csr, 0, sizeof(csr));
    if (g->packb != NULL) {
        mf_gemm_packb_all(g->packb);
    }
    if (g->packa != NULL) {
        mf_gemm_packa_all(g->packa);
    }
    if (o->ftz_daz) {
        csr = mf_fpenv_enter();
    }
    const mf_intp mb = (g->m + o->MR - 1) / o->MR, most = g->th / o->MR;
    for (;;) {
        mf_intp i0 = 0, i1 = g->m, j0 = 0, j1 = g->n;
        if (g->split_n) {
            /* the tasks share the micro-panels evenly (at most g->tw wide
             * each): a last task of a few columns would leave a thread idle */
            mf_intp t = __atomic_fetch_add(&g->next, 1, __ATOMIC_RELAXED);
            if (t >= g->ntasks) {
                break;
            }
            mf_intp nb = (g->n + o->NR - 1) / o->NR;
            j0 = mf_gemm_min(t * nb / g->ntasks * o->NR, g->n);
            j1 = mf_gemm_min((t + 1) * nb / g->ntasks * o->NR, g->n);
        }
        else {
            /* row tasks: up to g->th rows, shrinking to one micro-panel as
             * the panels run out (each takes its share of what is left), so
             * that the threads finish together: with equal tasks one
             * thread of two finished a 512^3 product 70 us after the other */
            mf_intp cur = __atomic_load_n(&g->next, __ATOMIC_RELAXED), take;
            do {
                if (cur >= mb) {
                    break;
                }
                take = mf_gemm_max(1, mf_gemm_min(most, (mb - cur) / (2 * g->nthreads)));
            } while (!__atomic_compare_exchange_n(&g->next, &cur, cur + take, 0, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED));
            if (cur >= mb) {
                break;
            }
            i0 = cur * o->MR;
            i1 = mf_gemm_min((cur + take) * o->MR, g->m);
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

/* whether MR rows lda_bytes apart fall in different sets of a 64-set L1
 * (at most 3 in one): rows a multiple of 4 KiB apart all share one, and
 * broadcasting from them in place loses each line before its 16 pairs are
 * read */
static int
mf_gemm_rows_spread(mf_intp lda_bytes, int MR)
{
    int cnt[64] = {0};
    for (int i = 0; i < MR; i++) {
        if (++cnt[(int)(((mf_intp)i * lda_bytes) >> 6) & 63] > 3) {
            return 0;
        }
    }
    return 1;
}

/* an epilogue for columns [j0, ...) of a product, as a block of columns of
 * a wider one: the block's (i, j) is the product's (i, j0 + j) */
typedef struct {
    const mf_gemm_epilogue *ep;
    mf_intp j0;
} mf_gemm_ep_shift;

static void
mf_gemm_ep_shifted(void *ctx, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols, float *vals,
                   mf_intp ldv)
{
    const mf_gemm_ep_shift *sh = (const mf_gemm_ep_shift *)ctx;
    sh->ep->fn(sh->ep->ctx, i0, sh->j0 + j0, rows, cols, vals, ldv);
}

/* sub: ep for the block of columns at sh->j0 (sh's fields set) */
static void
mf_gemm_ep_block(const mf_gemm_ep_shift *sh, mf_gemm_epilogue *sub)
{
    const mf_gemm_epilogue *ep = sh->ep;
    *sub = *ep;
    sub->fn = ep->fn != NULL ? mf_gemm_ep_shifted : NULL;
    sub->ctx = (void *)sh;
    sub->bf16_out = ep->bf16_out != NULL ? ep->bf16_out + 2 * sh->j0 : NULL;
    sub->next[0] = sub->next[1] = NULL;
    sub->next_bytes[0] = sub->next_bytes[1] = 0;
}

/*
 * C[m x n] += A * B (or, with ep, A * B to the epilogue) by the blocked
 * kernels; k >= 1.  Returns 0, -1 if buffers could not be allocated or -2
 * if k is too deep for packing (nothing written: the caller falls back;
 * with an epilogue, blocks of columns may have been handed to it already,
 * and the fallback hands them again).  ctx_bt: B given transposed
 * (mf_gemm_run_bt), the context of its packer; else NULL.
 */
static int
mf_gemm_drive(const mf_gemm_ops *o, const mf_gemm_ctx *ctx, mf_intp m, mf_intp n, mf_intp k,
              const void *A, mf_intp lda, const void *B, mf_intp ldb, float *C, mf_intp ldc,
              const mf_gemm_epilogue *ep, const mf_gemm_ctx *ctx_bt)
{
    mf_gemm_args g = {.ops = o, .ctx = ctx, .pack_b = ctx_bt ? o->pack_bt : o->pack_b,
                      .bctx = ctx_bt ? ctx_bt : ctx, .b_t = ctx_bt != NULL, .m = m, .n = n, .k = k, .A = A, .lda = lda,
                      .B = B, .ldb = ldb, .C = C, .ldc = ldc, .ep = ep, .nc = o->NC};
    mf_gemm_job jobs[MF_GEMM_MAX_JOBS];
    mf_gemm_packb_job P = {NULL, NULL, 0, 0, 0, 0, 0};
    mf_gemm_packa_job PA = {NULL, 0, 0, 0, 0};
    pthread_t tids[MF_GEMM_MAX_JOBS];
    int started[MF_GEMM_MAX_JOBS];

    /* how many threads: minifloat.set_num_threads / MINIFLOAT_NUM_THREADS /
     * the CPUs this process may run on (parallel.h), fewer for small work */
    int T = mf_get_num_threads();
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
    g.nthreads = T;
    if (!g.split_n && n <= nc_fit) {
        g.nc = n;      /* row tasks: all of B packed once per thread */
    }
    else if (!g.split_n && T > 1 && ep != NULL) {
        /* row tasks, B wider than one packing: each thread packed each
         * column block of B again for each of its row tasks (a 4096^3
         * product packed its 32 MiB about 14 times).  Instead the column
         * blocks one after the other, each a product of its own whose B
         * all threads pack once, together (Zen 5, two threads, 4096^3:
         * 170-182 -> 153-157 ms).  Only with an epilogue: a block that
         * finds no memory leaves the whole product to the caller's
         * fallback, which hands every block to the epilogue again (C
         * accumulated in place would be added to twice). */
        for (mf_intp jc = 0; jc < n; jc += nc_fit) {
            mf_intp nb = mf_gemm_min(nc_fit, n - jc);
            mf_gemm_ep_shift sh = {ep, jc};
            mf_gemm_epilogue sub;
            mf_gemm_ep_block(&sh, &sub);
            const mf_intp sz = ctx->f->itemsize;
            const char *Bj = (const char *)B + (ctx_bt != NULL ? jc * ldb : jc) * sz;
            int r = mf_gemm_drive(o, ctx, m, nb, k, A, lda, Bj, ldb, NULL, 0, &sub, ctx_bt);
            if (r != 0) {
                return r;
            }
        }
        return 0;
    }

    /* buffers of one job (all jobs alike) */
    mf_intp rows = g.split_n ? m : g.th;
    mf_intp cols = g.split_n ? g.tw : n;
    mf_intp mcp = mf_gemm_min(o->MC, mf_gemm_roundup(rows, o->MR));
    mf_intp nc = mf_gemm_min(g.nc, cols);
    mf_intp ncp = mf_gemm_roundup(nc, o->NR);
    size_t need[3];
    need[0] = (size_t)mcp * (o->KC / 2) * o->pair_bytes;
    /* bfloat16 A read in place where its rows fall in different sets of L1
     * (an even k: each pair whole) */
    g.a_rows = o->kernel_rows != NULL && ctx->f->id == MF_BFLOAT16 && k % 2 == 0
               && mf_gemm_rows_spread(lda * 2, o->MR);
    if (g.a_rows) {
        need[0] = 0;
    }
    if (g.a_rows || ((size_t)mcp * kpairs * o->pair_bytes <= MF_GEMM_MAX_APACK && ncp > 2 * o->NR)) {
        /* A for all of k, and the scratch in chunks of about
         * MF_GEMM_C_CHUNK bytes (at least two micro-panels wide) */
        g.a_all = !g.a_rows;
        if (g.a_all) {
            need[0] = (size_t)mcp * kpairs * o->pair_bytes;
        }
        g.cw = mf_gemm_roundup((mf_intp)(MF_GEMM_C_CHUNK / ((size_t)mcp * sizeof(float))), o->NR);
        if (g.cw < 2 * o->NR) {
            g.cw = 2 * o->NR;
        }
    }
    need[1] = (size_t)ncp * kpairs * o->pair_bytes;
    need[2] = (size_t)mcp * mf_gemm_scratch_ld(o, nc) * sizeof(float);
    /* row tasks on several threads: B packed once, by all of them, before
     * the tasks (each would pack all of it), where it is larger than
     * MF_GEMM_OWN_B_MAX; a smaller one each thread packs for itself: a
     * shared B's lines are written by one core after the other core read
     * them in the last call (Zen 4, two threads: 512^3 0.68 -> 0.65-0.66 ms,
     * 1024^3 5.67 -> 5.28; 1536^3 and 2048^3 were 1-3% faster shared) */
    int shared_b = T > 1 && !g.split_n && g.nc == n && need[1] > MF_GEMM_OWN_B_MAX;
    /* column tasks on several threads, A packed for all of k: all of A
     * packed once, by all threads, before the tasks (each task packed it
     * all again) */
    const mf_intp nic = (m + o->MC - 1) / o->MC;
    const size_t a_region = (size_t)mf_gemm_roundup(o->MC, o->MR) * kpairs * o->pair_bytes;
    int shared_a = T > 1 && g.split_n && g.a_all && g.ntasks > 1
                   && (size_t)nic * a_region <= MF_GEMM_SHARED_A_MAX;
    if (shared_a) {
        need[0] = 0;
    }
    size_t per_job = 0;
    for (int b = 0; b < 3; b++) {
        need[b] = (need[b] + MF_GEMM_ALIGN - 1) / MF_GEMM_ALIGN * MF_GEMM_ALIGN;
        per_job += (b == 1 && shared_b) ? 0 : need[b];
    }
    size_t total = per_job * (size_t)T + (shared_b ? need[1] : 0)
                   + (shared_a ? (size_t)nic * a_region : 0);
    /* the caller's hint, on one thread whose packed B stays in L2 (the
     * next-panel prefetch has nothing to fetch): spread over the tiles */
    if (T == 1 && ep != NULL && need[1] <= MF_GEMM_HINT_B_MAX) {
        mf_intp lines = 0;
        for (int r = 0; r < 2; r++) {
            /* whole lines from the range's first: a line's prefetch
             * fetches all of it */
            g.hint_lines[r] = ep->next[r] == NULL ? 0
                : (mf_intp)(((uintptr_t)ep->next[r] % 64 + ep->next_bytes[r] + 63) / 64);
            lines += g.hint_lines[r];
        }
        mf_intp tiles = mf_gemm_roundup(m, o->MR) / o->MR * (ncp / o->NR) * ((k + o->KC - 1) / o->KC);
        g.hint_per_tile = lines > 0 ? (lines + tiles - 1) / tiles : 0;
        /* not more than a line every other k step: short tiles (a stack of
         * 32x64 @ 64x32 products) were slower with it */
        if (g.hint_per_tile > mf_gemm_min(k, o->KC) / 4) {
            g.hint_per_tile = 0;
        }
    }
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
        char *shared = mem + per_job * (size_t)T;
        for (int t = 0; t < T; t++) {
            char *p = mem + per_job * (size_t)t;
            jobs[t].g = &g;
            jobs[t].abuf = p;
            jobs[t].bbuf = shared_b ? shared : p + need[0];
            jobs[t].cbuf = (float *)(p + need[0] + (shared_b ? 0 : need[1]));
            jobs[t].b_j0 = 0;
            jobs[t].b_nc = shared_b ? n : 0;
            jobs[t].hint_at = 0;
        }
        if (shared_a) {
            g.a_shared = shared;
            g.a_region = a_region;
            PA.g = &g;
            PA.kblocks = (k + o->KC - 1) / o->KC;
            PA.npieces = nic * PA.kblocks;
            g.packa = &PA;
        }
        if (shared_b) {
            mf_intp npanels = mf_gemm_roundup(n, o->NR) / o->NR, kblocks = (k + o->KC - 1) / o->KC;
            mf_intp panels = (npanels * kblocks + 4 * T - 1) / (4 * T);
            panels = mf_gemm_max(1, mf_gemm_min(panels, MF_GEMM_PACK_PANELS));
            mf_intp per_blk = (npanels + panels - 1) / panels;
            P.g = &g;
            P.bbuf = shared;
            P.npieces = per_blk * kblocks;
            P.per_blk = per_blk;
            P.panels = panels;
            g.packb = &P;
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

static void
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

/* ---- a few columns of bfloat16 (a matrix times a vector or a thin
 * matrix: a model's decode step).  The blocked path packs all of A into
 * float32 panels for those few columns; here each row is read in place by
 * the level's gemv (rows side by side in the lanes, k in the canonical pair
 * order), row blocks on the threads. */

/* a thin path's block of rows x cols results at (i0, j0), row stride na:
 * the chains start from +0 (an epilogue) or from C, and end in the epilogue
 * (its bfloat16 shortcut where the caller offers it) or back in C */
static void
mf_thin_start(const mf_gemm_epilogue *ep, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols,
              float *acc, mf_intp na, const float *C, mf_intp ldc)
{
    for (mf_intp i = 0; i < rows; i++) {
        if (ep != NULL) {
            memset(acc + i * na, 0, (size_t)cols * sizeof(float));
        }
        else {
            memcpy(acc + i * na, C + (i0 + i) * ldc + j0, (size_t)cols * sizeof(float));
        }
    }
}

static void
mf_thin_finish(const mf_gemm_ops *o, const mf_gemm_epilogue *ep, mf_fpenv csr, mf_intp i0,
               mf_intp j0, mf_intp rows, mf_intp cols, float *acc, mf_intp na, float *C,
               mf_intp ldc)
{
    if (ep != NULL && ep->bf16_out != NULL) {
        o->store_bf16(ep, i0, j0, rows, cols, acc, na);   /* integer only */
    }
    else if (ep != NULL) {
        mf_fpenv_plain(csr);
        ep->fn(ep->ctx, i0, j0, rows, cols, acc, na);
        mf_fpenv_work(csr);
    }
    else {
        for (mf_intp i = 0; i < rows; i++) {
            memcpy(C + (i0 + i) * ldc + j0, acc + i * na, (size_t)cols * sizeof(float));
        }
    }
}

#define MF_GEMV_ROWS 128           /* rows of a task */
#define MF_GEMV_MAX_COLS 16        /* widest B taken by ops->gemv */
#define MF_GEMV_ACC_COLS 64        /* widest ops->gemv_pairs_max */

int
mf_gemm_thin_cols(const mf_gemm_ops *ops, const mf_format *f)
{
    if (f == mf_fmt(MF_BFLOAT16)) {
        return ops->gemv_pairs != NULL ? MF_GEMM_THIN_COLS_MAX
               : ops->gemv != NULL ? MF_GEMV_MAX_COLS : 0;
    }
    return f->itemsize == 1 && ops->gemv_pairs8 != NULL ? MF_GEMM_THIN_COLS_MAX : 0;
}

/* the product goes to the thin path: B's few columns, A read in place
 * (kernels.h: MF_GEMM_THIN_COLS) */
static int
mf_gemv_takes(const mf_gemm_ops *ops, const mf_format *f, mf_intp m, mf_intp n)
{
    return n <= mf_gemm_thin_cols(ops, f)
           && (n <= MF_GEMM_THIN_COLS || m >= MF_GEMM_THIN_MIN_ROWS);
}

typedef struct {
    const mf_gemm_ops *ops;
    mf_intp m, n, k, lda, ldc;
    const void *A;
    const float *b;            /* B's values [k][n], or NULL: */
    const uint32_t *bp;        /* B's pairs for ops->gemv_pairs */
    const uint16_t *lut;       /* NULL, or A's 8-bit codes' bfloat16 bits */
    float *C;
    const mf_gemm_epilogue *ep;
    mf_intp ntasks, next;
} mf_gemv_job;

static void
mf_gemv_worker(void *ctx, int w)
{
    (void)w;
    mf_gemv_job *J = (mf_gemv_job *)ctx;
    float acc[MF_GEMV_ROWS * MF_GEMV_ACC_COLS];
    const mf_intp n = J->n;
    mf_fpenv csr = mf_fpenv_enter();
    for (;;) {
        mf_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        mf_intp i0 = t * MF_GEMV_ROWS, rows = mf_gemm_min(MF_GEMV_ROWS, J->m - i0);
        mf_thin_start(J->ep, i0, 0, rows, n, acc, n, J->C, J->ldc);
        if (J->b != NULL) {
            J->ops->gemv(rows, J->k, (const uint16_t *)J->A + i0 * J->lda, J->lda, J->b, n, acc);
        }
        else if (J->lut != NULL) {
            J->ops->gemv_pairs8(rows, J->k, (const uint8_t *)J->A + i0 * J->lda, J->lda, J->bp, n,
                                acc, J->lut);
        }
        else {
            J->ops->gemv_pairs(rows, J->k, (const uint16_t *)J->A + i0 * J->lda, J->lda, J->bp, n,
                               acc);
        }
        mf_thin_finish(J->ops, J->ep, csr, i0, 0, rows, n, acc, n, J->C, J->ldc);
    }
    mf_fpenv_leave(csr);
}

/* 0 when done; -1 (no memory for B's values) leaves it to the caller.
 * B's element (p, j) is at B[p * ldb + j], or with bt at B[j * ldb + p]
 * (B given as its transpose: x @ W.T computed as (W @ x.T).T) */
static int
mf_gemv_run_one(const mf_gemm_ops *ops, const mf_gemm_ctx *ctx, mf_intp m, mf_intp n, mf_intp k,
                const void *A, mf_intp lda, const void *B, mf_intp ldb, int bt, float *C,
                mf_intp ldc, const mf_gemm_epilogue *ep)
{
    const uint16_t *Bc = (const uint16_t *)B;
    const uint8_t *B8 = (const uint8_t *)B;
    const int e8 = ctx->f->itemsize == 1;
    const int pairs = e8 || (ops->gemv_pairs != NULL && n >= ops->gemv_pairs_min);
    const mf_intp kq = (k + 1) / 2, bw = MF_GEMV_PAIRS_WIDTH(n);
    const mf_intp sp = bt ? 1 : ldb, sj = bt ? ldb : 1;      /* B's strides */
    void *mem = pairs ? aligned_alloc(MF_GEMM_ALIGN, (size_t)(kq * bw) * sizeof(uint32_t))
                      : malloc((size_t)(k * n) * sizeof(float));
    if (mem == NULL) {
        return -1;
    }
    float *b = pairs ? NULL : (float *)mem;
    uint32_t *bp = pairs ? (uint32_t *)mem : NULL;
    if (pairs) {
        /* in the order B lies in memory: row by row, or with bt column by
         * column (the rows of its transpose) */
        memset(bp, 0, (size_t)(kq * bw) * sizeof(uint32_t));
        const mf_intp outer = bt ? n : kq, inner = bt ? kq : n;
        for (mf_intp o = 0; o < outer; o++) {
            for (mf_intp i = 0; i < inner; i++) {
                const mf_intp j = bt ? o : i, q = bt ? i : o;
                const mf_intp at = 2 * q * sp + j * sj;
                uint32_t lo = e8 ? ctx->bf16[B8[at]] : Bc[at];
                uint32_t hi = 2 * q + 1 >= k ? 0u : e8 ? ctx->bf16[B8[at + sp]] : Bc[at + sp];
                bp[q * bw + j] = lo | (hi << 16);
            }
        }
    }
    else {
        for (mf_intp p = 0; p < k; p++) {
            for (mf_intp j = 0; j < n; j++) {
                uint32_t u = (uint32_t)Bc[p * sp + j * sj] << 16;
                memcpy(b + p * n + j, &u, 4);
            }
        }
    }
    mf_gemv_job J = {ops, m, n, k, lda, ldc, A, b, bp, e8 ? ctx->bf16 : NULL, C, ep,
                     (m + MF_GEMV_ROWS - 1) / MF_GEMV_ROWS, 0};
    double work = (double)m * (double)n * (double)k;
    int T = mf_get_num_threads();
    if (work < 2 * MF_GEMM_MIN_THREAD_WORK) {
        T = 1;
    }
    if (T > J.ntasks) {
        T = (int)J.ntasks;
    }
    if (T <= 1 || mf_pool_run(mf_gemv_worker, &J, T) <= 0) {
        mf_gemv_worker(&J, 0);
    }
    free(mem);
    return 0;
}

/* B wider than the thin kernel's columns: in blocks of them, A read once a
 * block */
static int
mf_gemv_run(const mf_gemm_ops *ops, const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
            const void *A, mf_intp lda, const void *B, mf_intp ldb, int bt, float *C,
            mf_intp ldc, const mf_gemm_epilogue *ep)
{
    mf_gemm_ctx ctx;
    mf_gemm_ctx_init(&ctx, f, ops->MR, ops->NR);
    const mf_intp sz = f->itemsize;
    const mf_intp w = ops->gemv_pairs != NULL ? ops->gemv_pairs_max : n;
    if (n <= w) {
        return mf_gemv_run_one(ops, &ctx, m, n, k, A, lda, B, ldb, bt, C, ldc, ep);
    }
    /* only with an epilogue: a block that finds no memory leaves the
     * whole product to the caller's fallback, which hands the done blocks
     * to the epilogue again (C accumulated in place would be added to
     * twice), as in mf_gemm_drive */
    if (ep == NULL) {
        return -1;
    }
    for (mf_intp j0 = 0; j0 < n; j0 += w) {
        const mf_intp nb = mf_gemm_min(w, n - j0);
        const char *Bj = (const char *)B + (bt ? j0 * ldb : j0) * sz;
        mf_gemm_ep_shift sh = {ep, j0};
        mf_gemm_epilogue sub;
        mf_gemm_ep_block(&sh, &sub);
        if (mf_gemv_run_one(ops, &ctx, m, nb, k, A, lda, Bj, ldb, bt, NULL, 0, &sub) != 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- a few rows of bfloat16 (v @ B): B read in place by the level's gevm
 * (B's columns side by side in the lanes), panels of columns on the
 * threads.  The blocked path would pack all of B for those few rows. */

#define MF_GEVM_COLS 1024          /* columns of a task */

typedef struct {
    const mf_gemm_ops *ops;
    mf_intp m, n, k, lda, ldb, ldc;
    const uint16_t *A, *B;
    float *C;
    const mf_gemm_epilogue *ep;
    mf_intp cols, ntasks, next;    /* cols <= MF_GEVM_COLS a task */
} mf_gevm_job;

static void
mf_gevm_worker(void *ctx, int w)
{
    (void)w;
    mf_gevm_job *J = (mf_gevm_job *)ctx;
    float acc[MF_GEVM_MAX_ROWS * MF_GEVM_COLS];
    mf_fpenv csr = mf_fpenv_enter();
    for (;;) {
        mf_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        mf_intp j0 = t * J->cols, cols = mf_gemm_min(J->cols, J->n - j0);
        mf_thin_start(J->ep, 0, j0, J->m, cols, acc, MF_GEVM_COLS, J->C, J->ldc);
        J->ops->gevm((int)J->m, J->k, J->A, J->lda, J->B + j0, J->ldb, cols, acc, MF_GEVM_COLS);
        mf_thin_finish(J->ops, J->ep, csr, 0, j0, J->m, cols, acc, MF_GEVM_COLS, J->C, J->ldc);
    }
    mf_fpenv_leave(csr);
}

static void
mf_gevm_run(const mf_gemm_ops *ops, mf_intp m, mf_intp n, mf_intp k, const void *A,
            mf_intp lda, const void *B, mf_intp ldb, float *C, mf_intp ldc,
            const mf_gemm_epilogue *ep)
{
    /* reading B is the work: a thread for each MF_PAR_THREAD_BYTES of it */
    double bytes = 2.0 * (double)n * (double)k;
    int T = mf_get_num_threads();
    if (bytes < (double)T * MF_PAR_THREAD_BYTES) {
        T = (int)(bytes / MF_PAR_THREAD_BYTES) + 1;
    }
    /* panels as wide as they go (long pieces of B's rows), yet at least
     * one a thread; a multiple of 64 columns */
    mf_intp cols = (n + T - 1) / T;
    cols = mf_gemm_min(MF_GEVM_COLS, (cols + 63) / 64 * 64);
    mf_gevm_job J = {ops, m, n, k, lda, ldb, ldc, (const uint16_t *)A, (const uint16_t *)B, C, ep,
                     cols, (n + cols - 1) / cols, 0};
    if (T > J.ntasks) {
        T = (int)J.ntasks;
    }
    if (T <= 1 || mf_pool_run(mf_gevm_worker, &J, T) <= 0) {
        mf_gevm_worker(&J, 0);
    }
}

void
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
        ops->small(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    if (mf_gemv_takes(ops, f, m, n)
            && mf_gemv_run(ops, f, m, n, k, A, lda, B, ldb, 0, C, ldc, ep) == 0) {
        return;
    }
    if (m <= MF_GEVM_MAX_ROWS && ops->gevm != NULL && f == mf_fmt(MF_BFLOAT16)) {
        mf_gevm_run(ops, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    mf_gemm_ctx ctx;
    mf_gemm_ctx_init(&ctx, f, ops->MR, ops->NR);
    int r = mf_gemm_drive(ops, &ctx, m, n, k, A, lda, B, ldb, C, ldc, ep, NULL);
    if (r == -2) {
        ops->small(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
    }
    else if (r < 0) {
        mf_serial_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
    }
}

int
mf_gemm_run_bt(const mf_gemm_ops *ops, const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
               const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
               float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    /* the products mf_gemm_run gives the blocked kernels, and the thin
     * path's, whose B's pairs are as easily taken from B's rows as from
     * its columns */
    const int bf16 = f == mf_fmt(MF_BFLOAT16);
    if (m <= 0 || n <= 0 || k <= 0 || (double)m * (double)n * (double)k <= MF_GEMM_SMALL_WORK) {
        return -1;
    }
    if (mf_gemv_takes(ops, f, m, n)) {
        return mf_gemv_run(ops, f, m, n, k, A, lda, Bt, ldbt, 1, C, ldc, ep);
    }
    if (ops->pack_bt == NULL || (m <= MF_GEVM_MAX_ROWS && ops->gevm != NULL && bf16)) {
        return -1;
    }
    mf_gemm_ctx ctx, ctx_bt;
    mf_gemm_ctx_init(&ctx, f, ops->MR, ops->NR);
    ctx_bt = ctx;
    ctx_bt.MR = ops->NR;       /* B's columns are the rows the A packers take */
    return mf_gemm_drive(ops, &ctx, m, n, k, A, lda, Bt, ldbt, C, ldc, ep, &ctx_bt) == 0 ? 0 : -1;
}
