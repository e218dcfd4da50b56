/*
 * Threads: the worker pool (shared by the GEMM driver and the streaming
 * kernels), the thread count, and the multi-threaded forms of the streaming
 * kernels (decode, encode, binary, sum, dot) for large contiguous arrays.
 *
 * The mf_par_* functions have the contract of the kernel table's entries
 * (kernels.h) and call the active table (mf_k); arrays smaller than
 * MF_PAR_MIN_BYTES, a thread count of 1, or a pool another call is using,
 * run on the calling thread alone.  Results are bit-identical to one call
 * of the kernel on the whole array whatever the number of threads:
 * elementwise kernels compute each element on its own, and sum/dot split
 * only at MF_SUM_BLOCK boundaries, each block summed by the kernel and the
 * block results added in index order by the caller, exactly as the kernel
 * itself does (kernels.h).  Floating-point flags the workers raise are
 * raised again in the calling thread; workers run with the caller's
 * floating-point environment (rounding, FTZ/DAZ).  Call with the GIL
 * released or held: the workers never touch Python.
 */
#ifndef MF_PARALLEL_H
#define MF_PARALLEL_H

#include <fenv.h>
#include "kernels.h"

/* bytes from which work is split between threads: of output for elementwise
 * kernels and casts (MF_PAR_MIN_BYTES), of input for the reductions: sum, dot
 * and the checkpoint statistics (MF_PAR_MIN_REDUCE_BYTES); the least each
 * thread gets, and the range of a task's size (a quarter of a thread's share,
 * within these bounds: up to a 2 MiB huge page of output, so that threads
 * fault in different pages of a new array).  Measured on a quiet Zen 3 (two
 * cores): two threads gain from 512 KiB of output for add and casts (1.4x),
 * from 1 MiB of input for sum (1.1x; 0.9x at 512 KiB); docs/design.md
 * "Threads for streaming kernels".  All overridable at build time
 * (-DMF_PAR_MIN_BYTES=...), to measure them. */
#ifndef MF_PAR_MIN_BYTES
#define MF_PAR_MIN_BYTES ((mf_intp)512 << 10)
#endif
#ifndef MF_PAR_MIN_REDUCE_BYTES
#define MF_PAR_MIN_REDUCE_BYTES ((mf_intp)1 << 20)
#endif
#ifndef MF_PAR_THREAD_BYTES
#define MF_PAR_THREAD_BYTES ((mf_intp)256 << 10)
#endif
#define MF_PAR_TASK_MIN_BYTES ((mf_intp)64 << 10)
#define MF_PAR_TASK_MAX_BYTES ((mf_intp)2 << 20)
#define MF_PAR_MAX_THREADS 64

/* threads the kernels use: set_num_threads's value if set, else
 * MINIFLOAT_NUM_THREADS (read once, >= 1), else the CPUs this process may
 * run on; at most MF_PAR_MAX_THREADS */
int mf_get_num_threads(void);
/* n >= 1: use n threads (capped); n <= 0: back to the default */
void mf_set_num_threads(int n);
/* the default (environment variable or CPUs), ignoring set_num_threads */
int mf_default_num_threads(void);

/*
 * Run fn(ctx, w) for w = 0 .. T'-1 at once, w = 0 on the calling thread and
 * the others on the pool's workers (started on first use, kept), where
 * T' <= T is the number of threads the pool could give; returns T', or 0
 * (nothing run) when another call holds the pool.  fn should take its work
 * from a shared counter, so that any T' >= 1 does all of it.  After fork()
 * the child starts with no workers.
 */
typedef void (*mf_pool_fn)(void *ctx, int w);
int mf_pool_run(mf_pool_fn fn, void *ctx, int T);
/* the same, with before(bctx) run on the calling thread once the workers
 * are woken, before it takes its own share: I/O that overlaps their work
 * (0: the pool was busy, and neither ran) */
int mf_pool_run_after(mf_pool_fn fn, void *ctx, int T, void (*before)(void *), void *bctx);

void mf_par_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n);
void mf_par_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_par_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                   void *out, mf_intp n);
double mf_par_sum(const mf_format *f, const void *src, mf_intp n);
/* n contiguous codes of float format fa -> fb (itemsize <= 2), one rounding:
 * decoded to float32 and encoded block by block (every float format decodes
 * exactly to float32), with the encode kernel's overflow flag */
void mf_convert_codes_f32(const mf_kernels *k, const mf_format *fa, const void *in,
                          const mf_format *fb, void *out, mf_intp n);
void mf_par_convert_codes(const mf_format *fa, const void *in, const mf_format *fb, void *out,
                          mf_intp n);
/* n float64 values -> codes of float format f (itemsize <= 2), rounded
 * once (through float32 rounded to odd, codec.h), with the encode kernel's
 * overflow flag */
void mf_encode_f64_codes(const mf_kernels *k, const mf_format *f, const double *src, void *dst,
                         mf_intp n);
void mf_par_encode_f64(const mf_format *f, const double *src, void *dst, mf_intp n);
double mf_par_dot(const mf_format *f, const void *a, const void *b, mf_intp n);

/*
 * Elementwise work of any kind: fn(ctx, start, len) over pieces covering
 * [0, n), each piece a whole number of `unit`s (but the last), on up to
 * mf_get_num_threads() threads when n * bytes_per_elem (the bytes the work
 * streams through, e.g. the float32 operands of a ufunc) reaches
 * MF_PAR_MIN_BYTES, else fn(ctx, 0, n) on the calling thread.  fn must
 * compute each element on its own (then the result does not depend on the
 * split) and must not touch Python.  Floating-point flags raised by the
 * workers are raised again in the calling thread.
 */
typedef void (*mf_range_fn)(void *ctx, mf_intp start, mf_intp len);
void mf_par_range(mf_range_fn fn, void *ctx, mf_intp n, mf_intp unit, mf_intp bytes_per_elem);

/* Set for the duration of a parallel streaming call in every thread that
 * runs part of it: the whole array is large, so the kernels may use
 * non-temporal stores on pieces smaller than MF_STREAM_BYTES. */
extern _Thread_local int mf_par_stream;

/* Notes an output [out, out + bytes) written by this thread; 1 if it
 * continues a run of outputs, each starting where the one before ended
 * (NumPy calling a loop row after row of one array), of MF_STREAM_BYTES or
 * more: the rest of such an output is as large as a single large one, and
 * is streamed as one (set mf_par_stream for the call). */
int mf_par_run_long(const void *out, mf_intp bytes);

/* A pool worker w > 0 runs in the caller's floating-point environment
 * `env` (its rounding mode), flags cleared; mf_worker_leave ORs the flags
 * it raised into *flags (for the caller to raise) and restores the
 * worker's own environment.  Worker 0 is the caller: nothing to do. */
static inline void
mf_worker_enter(int w, const fenv_t *env, fenv_t *saved)
{
    if (w != 0) {
        fegetenv(saved);
        fesetenv(env);
        feclearexcept(FE_ALL_EXCEPT);
    }
}

static inline void
mf_worker_leave(int w, int *flags, const fenv_t *saved)
{
    if (w != 0) {
        int fl = fetestexcept(FE_ALL_EXCEPT);
        if (fl) {
            __atomic_fetch_or(flags, fl, __ATOMIC_RELAXED);
        }
        fesetenv(saved);
    }
}

#endif
