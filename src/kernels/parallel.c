/*
 * The worker pool, the thread count and the multi-threaded streaming
 * kernels (see parallel.h).
 */
#define _GNU_SOURCE
#include <fenv.h>
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "parallel.h"
#include "../core/codec.h"
#include "nan_order.h"

#if defined(_WIN32) && !defined(__MINGW32__)
#define MF_NO_PTHREADS 1       /* no pool: everything runs on the calling thread */
#else
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

_Thread_local int mf_par_stream = 0;

/* the end of this thread's last output noted by mf_par_run_long, and the
 * bytes of the run of outputs, each starting where the last ended, up to it */
static _Thread_local const char *run_end = NULL;
static _Thread_local mf_intp run_bytes = 0;

int
mf_par_run_long(const void *out, mf_intp bytes)
{
    const char *o = (const char *)out;
    run_bytes = o == run_end ? run_bytes + bytes : bytes;
    run_end = o + bytes;
    return run_bytes >= ((mf_intp)8 << 20);      /* MF_STREAM_BYTES, simd_params.h */
}

/* ------------------------------------------------------- thread count */

static int mf_threads_set = 0;       /* set_num_threads's value, 0: default */

int
mf_default_num_threads(void)
{
    static int cached = 0;
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c > 0) {
        return c;
    }
    int t = 0;
    const char *env = getenv("MINIFLOAT_NUM_THREADS");
    if (env != NULL && *env) {
        t = atoi(env);
    }
#ifdef MF_NO_PTHREADS
    t = 1;
#else
    if (t <= 0) {
#ifdef CPU_COUNT
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof(set), &set) == 0) {
            t = CPU_COUNT(&set);
        }
#endif
        if (t <= 0) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            t = n > 0 ? (int)n : 1;
        }
    }
#endif
    if (t > MF_PAR_MAX_THREADS) {
        t = MF_PAR_MAX_THREADS;
    }
    __atomic_store_n(&cached, t, __ATOMIC_RELAXED);
    return t;
}

int
mf_get_num_threads(void)
{
    int t = __atomic_load_n(&mf_threads_set, __ATOMIC_RELAXED);
    return t > 0 ? t : mf_default_num_threads();
}

void
mf_set_num_threads(int n)
{
    if (n > MF_PAR_MAX_THREADS) {
        n = MF_PAR_MAX_THREADS;
    }
    __atomic_store_n(&mf_threads_set, n > 0 ? n : 0, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------- the pool */

#ifdef MF_NO_PTHREADS
int
mf_pool_run(mf_pool_fn fn, void *ctx, int T)
{
    (void)fn;
    (void)ctx;
    (void)T;
    return 0;
}

int
mf_pool_run_after(mf_pool_fn fn, void *ctx, int T, void (*before)(void *), void *bctx)
{
    (void)fn;
    (void)ctx;
    (void)T;
    (void)before;
    (void)bctx;
    return 0;
}
#else

/*
 * A small pool of worker threads, started on first use and kept: creating
 * a thread costs 0.1-0.4 ms on a busy VM, as much as a 512^3 product or a
 * 2^20-element add.  One call owns the pool at a time (a concurrent call is
 * told so and does its work otherwise); after fork() the child forgets the
 * parent's workers.
 */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int nworkers;
    unsigned long gen;         /* bumped for each call */
    unsigned long pending;     /* workers with a job still running */
    int busy;
    mf_pool_fn fn;
    void *ctx;
    int nthreads;              /* worker w runs fn(ctx, w + 1) if w + 1 < nthreads */
    unsigned long start_gen[MF_PAR_MAX_THREADS];   /* gen when worker w was created */
} mf_pool_t;

static mf_pool_t mf_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                            PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, NULL, NULL, 0, {0}};

/*
 * Waiting threads spin for up to MF_POOL_SPIN_NS before they sleep on a
 * condition variable: a worker asleep took tens of microseconds to wake on
 * a VM, most of what a two-thread 512^3 product lost to one (0.65 ms of
 * work a thread ran in 0.73).  A spin is the processor's pause, one check
 * of the flag at a time, and ends on its clock; every 64 checks it yields
 * the CPU, for when the thread it waits for shares this CPU (without that,
 * some runs of a 512^3 product took the one-thread time, 1.24 ms).
 */
#define MF_POOL_SPIN_NS 100000

static inline void
mf_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long long
mf_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* spin until (*p == v) == until_equal (1) or the spin time is over (0) */
static int
mf_spin_until(const unsigned long *p, unsigned long v, int until_equal)
{
    long long end = 0;
    for (unsigned i = 0;; i++) {
        if ((__atomic_load_n(p, __ATOMIC_ACQUIRE) == v) == until_equal) {
            return 1;
        }
        if ((i & 63) == 0) {
            /* a thread this one waits for may be queued on this CPU */
            sched_yield();
            long long t = mf_now_ns();
            if (end == 0) {
                end = t + MF_POOL_SPIN_NS;
            }
            else if (t > end) {
                return 0;
            }
        }
        mf_cpu_relax();
    }
}

static void
mf_pool_atfork_child(void)
{
    pthread_mutex_init(&mf_pool.mu, NULL);
    pthread_cond_init(&mf_pool.work, NULL);
    pthread_cond_init(&mf_pool.done, NULL);
    mf_pool.nworkers = 0;
    mf_pool.pending = 0;
    mf_pool.busy = 0;
    mf_pool.fn = NULL;
    mf_pool.ctx = NULL;
    mf_pool.nthreads = 0;
}

static void *
mf_pool_worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    mf_pool_t *P = &mf_pool;
    pthread_mutex_lock(&P->mu);
    /* the call that created this worker bumps gen after creating it */
    unsigned long seen = P->start_gen[w];
    for (;;) {
        if (P->gen == seen) {
            pthread_mutex_unlock(&P->mu);
            mf_spin_until(&P->gen, seen, 0);
            pthread_mutex_lock(&P->mu);
        }
        while (P->gen == seen) {
            pthread_cond_wait(&P->work, &P->mu);
        }
        seen = P->gen;
        int mine = w + 1 < P->nthreads;
        mf_pool_fn fn = P->fn;
        void *ctx = P->ctx;
        pthread_mutex_unlock(&P->mu);
        if (mine) {
            fn(ctx, w + 1);
        }
        pthread_mutex_lock(&P->mu);
        if (mine && __atomic_sub_fetch(&P->pending, 1, __ATOMIC_RELEASE) == 0) {
            pthread_cond_signal(&P->done);
        }
    }
    return NULL;
}

/* both entry points below: mf_pool_run's own copy has no `before` at all
 * (a plain call through mf_pool_run_after made every pool call slower:
 * np.exp of 2^24 bfloat16 at two threads 4.0 -> 5.2 ms on a Zen 4) */
static inline __attribute__((always_inline)) int
mf_pool_run_impl(mf_pool_fn fn, void *ctx, int T, void (*before)(void *), void *bctx)
{
    static int atfork_done = 0;
    mf_pool_t *P = &mf_pool;
    if (T < 1) {
        T = 1;
    }
    if (T > MF_PAR_MAX_THREADS) {
        T = MF_PAR_MAX_THREADS;
    }
    pthread_mutex_lock(&P->mu);
    if (P->busy) {
        pthread_mutex_unlock(&P->mu);
        return 0;
    }
    P->busy = 1;
    if (!atfork_done) {
        atfork_done = pthread_atfork(NULL, NULL, mf_pool_atfork_child) == 0;
    }
    while (P->nworkers < T - 1) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        P->start_gen[P->nworkers] = P->gen;
        int r = pthread_create(&tid, &attr, mf_pool_worker, (void *)(intptr_t)P->nworkers);
        pthread_attr_destroy(&attr);
        if (r != 0) {
            break;
        }
        P->nworkers++;
    }
    if (T > P->nworkers + 1) {
        T = P->nworkers + 1;   /* the work is shared: fewer threads do it all */
    }
    P->fn = fn;
    P->ctx = ctx;
    P->nthreads = T;
    P->pending = T - 1;
    if (T > 1) {
        __atomic_store_n(&P->gen, P->gen + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&P->work);
    }
    pthread_mutex_unlock(&P->mu);
    if (before != NULL) {
        before(bctx);
    }
    fn(ctx, 0);
    mf_spin_until(&P->pending, 0, 1);
    pthread_mutex_lock(&P->mu);
    while (P->pending > 0) {
        pthread_cond_wait(&P->done, &P->mu);
    }
    P->fn = NULL;
    P->ctx = NULL;
    P->nthreads = 0;
    P->busy = 0;
    pthread_mutex_unlock(&P->mu);
    return T;
}

int
mf_pool_run(mf_pool_fn fn, void *ctx, int T)
{
    return mf_pool_run_impl(fn, ctx, T, NULL, NULL);
}

int
mf_pool_run_after(mf_pool_fn fn, void *ctx, int T, void (*before)(void *), void *bctx)
{
    return mf_pool_run_impl(fn, ctx, T, before, bctx);
}
#endif

/* ------------------------------------------------------- streaming kernels */

typedef enum {
    PAR_DECODE, PAR_ENCODE, PAR_ENCODE64, PAR_BINARY, PAR_SUM, PAR_DOT, PAR_CONVERT, PAR_RANGE
} par_kind;

typedef struct {
    par_kind kind;
    const mf_kernels *k;
    const mf_format *f;
    const mf_format *g;        /* convert: the target (f the source) */
    mf_binary_op op;
    const char *a, *b;
    char *out;
    mf_intp n;
    mf_intp isz, osz;          /* bytes per element of the inputs, the output */
    mf_intp chunk;             /* elements per task (a multiple of 64, of MF_SUM_BLOCK for sums) */
    mf_intp head;              /* elements of task 0 (up to a huge page boundary of out), or chunk */
    mf_intp ntasks;
    mf_intp next;              /* the next task, taken atomically */
    double *partials;          /* sum, dot: one per MF_SUM_BLOCK block */
    mf_range_fn fn;            /* range: the caller's work */
    void *fn_ctx;
    int stream;
    fenv_t env;                /* the caller's */
    int flags;                 /* FP flags the workers raised, or-ed atomically */
} par_job;

static void
par_task(par_job *J, mf_intp t)
{
    mf_intp i0 = t == 0 ? 0 : J->head + (t - 1) * J->chunk;
    mf_intp want = t == 0 ? J->head : J->chunk;
    mf_intp len = J->n - i0 < want ? J->n - i0 : want;
    if (J->kind == PAR_RANGE) {
        J->fn(J->fn_ctx, i0, len);
        return;
    }
    const char *a = J->a + i0 * J->isz;
    switch (J->kind) {
        case PAR_DECODE:
            J->k->decode_f32(J->f, a, (float *)(J->out + i0 * J->osz), len);
            break;
        case PAR_ENCODE:
            J->k->encode_f32(J->f, (const float *)a, J->out + i0 * J->osz, len);
            break;
        case PAR_BINARY:
            J->k->binary(J->op, J->f, a, J->b + i0 * J->isz, J->out + i0 * J->osz, len);
            break;
        case PAR_ENCODE64:
            mf_encode_f64_codes(J->k, J->f, (const double *)a, J->out + i0 * J->osz, len);
            break;
        case PAR_CONVERT:
            mf_convert_codes_f32(J->k, J->f, a, J->g, J->out + i0 * J->osz, len);
            break;
        case PAR_RANGE:
            break;
        case PAR_SUM:
        case PAR_DOT:
            for (mf_intp s = 0; s < len; s += MF_SUM_BLOCK) {
                mf_intp bl = len - s < MF_SUM_BLOCK ? len - s : MF_SUM_BLOCK;
                const char *p = a + s * J->isz;
                J->partials[(i0 + s) / MF_SUM_BLOCK] =
                    J->kind == PAR_SUM ? J->k->sum(J->f, p, bl)
                                       : J->k->dot(J->f, p, J->b + (i0 + s) * J->isz, bl);
            }
            break;
    }
}

static void
par_worker(void *ctx, int w)
{
    par_job *J = (par_job *)ctx;
    fenv_t saved;
    mf_worker_enter(w, &J->env, &saved);
    int prev_stream = mf_par_stream;
    mf_par_stream = J->stream;
    for (;;) {
        mf_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        par_task(J, t);
    }
    mf_par_stream = prev_stream;
    mf_worker_leave(w, &J->flags, &saved);
}

/* threads for `bytes` of work, 1 if it is below `min` (not worth splitting) */
static int
par_threads(mf_intp bytes, mf_intp min)
{
    if (bytes < min) {
        return 1;
    }
    int T = mf_get_num_threads();
    mf_intp most = bytes / MF_PAR_THREAD_BYTES;
    if (most < T) {
        T = (int)most;
    }
    return T < 1 ? 1 : T;
}

/* run J on T threads (or this one alone); 0 if done */
static void
par_run(par_job *J, int T, mf_intp unit, mf_intp bytes_per_elem)
{
    /* at least four tasks per thread, so that threads that get more of the
     * CPU do more, of whole units, within the task size bounds */
    mf_intp bytes = J->n / (4 * (mf_intp)T) * bytes_per_elem;
    if (bytes < MF_PAR_TASK_MIN_BYTES) {
        bytes = MF_PAR_TASK_MIN_BYTES;
    }
    if (bytes > MF_PAR_TASK_MAX_BYTES) {
        bytes = MF_PAR_TASK_MAX_BYTES;
    }
    mf_intp chunk = bytes / bytes_per_elem;
    chunk = (chunk + unit - 1) / unit * unit;
    if (chunk < unit) {
        chunk = unit;
    }
    J->chunk = chunk;
    J->head = chunk;
    if (J->kind != PAR_SUM && J->kind != PAR_DOT && J->out != NULL
        && chunk * J->osz == MF_PAR_TASK_MAX_BYTES) {
        /* tasks of whole huge pages of the output: task 0 runs up to the
         * first 2 MiB boundary, so that no two threads fault in (and the
         * kernel zeroes) the same huge page of a new array, one waiting for
         * the other (docs/design.md "Threads for streaming kernels") */
        mf_intp off = (mf_intp)((0 - (uintptr_t)J->out) & (uintptr_t)(MF_PAR_TASK_MAX_BYTES - 1));
        if (off % J->osz == 0 && off > 0) {
            J->head = off / J->osz;
        }
    }
    J->ntasks = J->n <= J->head ? 1 : 1 + (J->n - J->head + chunk - 1) / chunk;
    J->next = 0;
    J->flags = 0;
    J->stream = J->kind != PAR_RANGE && J->n * J->osz >= ((mf_intp)8 << 20);
    fegetenv(&J->env);
    if (mf_pool_run(par_worker, J, T) == 0) {
        par_worker(J, 0);      /* the pool is busy: this thread does it all */
    }
    if (J->flags) {
        feraiseexcept(J->flags);
    }
}

void
mf_par_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n)
{
    const mf_kernels *k = mf_k;
    int T = par_threads(n * 4, MF_PAR_MIN_BYTES);
    if (T <= 1) {
        k->decode_f32(f, src, dst, n);
        return;
    }
    par_job J = {.kind = PAR_DECODE, .k = k, .f = f, .a = (const char *)src, .out = (char *)dst,
                 .n = n, .isz = f->itemsize, .osz = 4};
    par_run(&J, T, 64, 4);
}

void
mf_par_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    const mf_kernels *k = mf_k;
    int T = par_threads(n * f->itemsize, MF_PAR_MIN_BYTES);
    if (T <= 1) {
        k->encode_f32(f, src, dst, n);
        return;
    }
    par_job J = {.kind = PAR_ENCODE, .k = k, .f = f, .a = (const char *)src, .out = (char *)dst,
                 .n = n, .isz = 4, .osz = f->itemsize};
    par_run(&J, T, 64, f->itemsize);
}

void
mf_encode_f64_codes(const mf_kernels *k, const mf_format *f, const double *src, void *dst,
                    mf_intp n)
{
    float buf[1024];
    for (mf_intp i = 0; i < n; i += 1024) {
        mf_intp len = n - i < 1024 ? n - i : 1024;
        if (k->f64_to_f32_odd != NULL) {
            k->f64_to_f32_odd(src + i, buf, len);
        }
        else {
            for (mf_intp j = 0; j < len; j++) {
                buf[j] = mf_f64_to_f32_odd(src[i + j]);
            }
        }
        k->encode_f32(f, buf, (char *)dst + i * f->itemsize, len);
    }
}

void
mf_par_encode_f64(const mf_format *f, const double *src, void *dst, mf_intp n)
{
    const mf_kernels *k = mf_k;
    int T = par_threads(n * 8, MF_PAR_MIN_BYTES);
    if (T <= 1) {
        mf_encode_f64_codes(k, f, src, dst, n);
        return;
    }
    par_job J = {.kind = PAR_ENCODE64, .k = k, .f = f, .a = (const char *)src,
                 .out = (char *)dst, .n = n, .isz = 8, .osz = f->itemsize};
    par_run(&J, T, 1024, 8);
}

void
mf_par_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b, void *out,
              mf_intp n)
{
    const mf_kernels *k = mf_k;
    int T = par_threads(n * f->itemsize, MF_PAR_MIN_BYTES);
    if (T <= 1) {
        k->binary(op, f, a, b, out, n);
        return;
    }
    par_job J = {.kind = PAR_BINARY, .k = k, .f = f, .op = op, .a = (const char *)a,
                 .b = (const char *)b, .out = (char *)out, .n = n, .isz = f->itemsize,
                 .osz = f->itemsize};
    par_run(&J, T, 64, f->itemsize);
}

void
mf_convert_codes_f32(const mf_kernels *k, const mf_format *fa, const void *in,
                     const mf_format *fb, void *out, mf_intp n)
{
    float buf[1024];
    int stream = mf_par_stream;
    for (mf_intp i = 0; i < n; i += 1024) {
        mf_intp len = n - i < 1024 ? n - i : 1024;
        mf_par_stream = 0;        /* buf is read back at once: never streamed past the cache */
        k->decode_f32(fa, (const char *)in + i * fa->itemsize, buf, len);
        mf_par_stream = stream;
        k->encode_f32(fb, buf, (char *)out + i * fb->itemsize, len);
    }
}

void
mf_par_convert_codes(const mf_format *fa, const void *in, const mf_format *fb, void *out,
                     mf_intp n)
{
    const mf_kernels *k = mf_k;
    int T = par_threads(n * fb->itemsize, MF_PAR_MIN_BYTES);
    if (T <= 1) {
        mf_convert_codes_f32(k, fa, in, fb, out, n);
        return;
    }
    par_job J = {.kind = PAR_CONVERT, .k = k, .f = fa, .g = fb, .a = (const char *)in,
                 .out = (char *)out, .n = n, .isz = fa->itemsize, .osz = fb->itemsize};
    par_run(&J, T, 1024, fb->itemsize);
}

static double
par_reduce(par_kind kind, const mf_format *f, const void *a, const void *b, mf_intp n)
{
    const mf_kernels *k = mf_k;
    int T = par_threads(n * f->itemsize * (kind == PAR_DOT ? 2 : 1), MF_PAR_MIN_REDUCE_BYTES);
    mf_intp nblocks = (n + MF_SUM_BLOCK - 1) / MF_SUM_BLOCK;
    double *partials = T > 1 ? (double *)malloc(sizeof(double) * (size_t)nblocks) : NULL;
    if (partials == NULL) {
        return kind == PAR_SUM ? k->sum(f, a, n) : k->dot(f, a, b, n);
    }
    par_job J = {.kind = kind, .k = k, .f = f, .a = (const char *)a, .b = (const char *)b,
                 .n = n, .isz = f->itemsize, .osz = 0, .partials = partials};
    par_run(&J, T, MF_SUM_BLOCK, f->itemsize * (kind == PAR_DOT ? 2 : 1));
    /* each partial is -0.0 + (the block's float32 result), which is that
     * result exactly: the kernel's own chain over the blocks */
    double total = -0.0;
    for (mf_intp i = 0; i < nblocks; i++) {
        total = mf_add_first(total, partials[i]);   /* the kernels' order */
    }
    free(partials);
    return total;
}

double
mf_par_sum(const mf_format *f, const void *src, mf_intp n)
{
    return par_reduce(PAR_SUM, f, src, NULL, n);
}

double
mf_par_dot(const mf_format *f, const void *a, const void *b, mf_intp n)
{
    return par_reduce(PAR_DOT, f, a, b, n);
}

void
mf_par_range(mf_range_fn fn, void *ctx, mf_intp n, mf_intp unit, mf_intp bytes_per_elem)
{
    int T = par_threads(n * bytes_per_elem, MF_PAR_MIN_BYTES);
    if (T <= 1) {
        fn(ctx, 0, n);
        return;
    }
    /* no output pointer: the work's own stores decide how they write (a
     * piece is not a stream of the whole output's kind) */
    par_job J = {.kind = PAR_RANGE, .n = n, .isz = 0, .osz = bytes_per_elem, .fn = fn,
                 .fn_ctx = ctx};
    par_run(&J, T, unit, bytes_per_elem);
}
