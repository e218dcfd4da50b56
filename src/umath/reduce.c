/*
 * Whole reductions in one call: sum, prod, max and min of a float format
 * along any axes, SIMD and threaded, for the entry points NumPy's Python
 * layer calls (ndarray.sum/prod/max/min, np.sum/prod/max/min; the wrappers
 * are in minifloat/_numpy_patches.py, patch "fast_reductions").
 *
 * The results are those of NumPy's own route through our ufunc loops
 * (np.add.reduce etc., loops.c and accumulate.c), bit for bit: every output
 * element goes through exactly the operations that route gives it, in the
 * same order, whatever the number of threads.  NumPy's iterator walks a
 * C-ordered array in C order, drops axes of length 1 and merges neighbouring
 * axes whose strides allow it; the loops then compute:
 *
 *  - "column" mode, when the innermost axis is kept (axis 0, a middle axis):
 *    each call adds a row into the outputs, so each output element is the
 *    float32 chain over the reduced indices in C order (the partials that
 *    accumulate.c keeps), rounded once at the end.  Here each thread takes
 *    blocks of output columns and runs all rows over them with the
 *    accumulators in cache; the float32 operation is NumPy's own float32
 *    loop, as in loops.c.  Sums of contiguous rows go through the kernels'
 *    column sums instead (the same additions in the same order, several
 *    rows a call with the accumulators in registers); only which operand's
 *    NaN an addition returns can differ, so a column that ends NaN is
 *    computed again NumPy's way.  max/min over one outer axis go through
 *    the kernels' column maxima the same way, a column that ends NaN or
 *    zero (whose sign depends on which operand a step keeps) again NumPy's
 *    way.
 *  - "row" mode, when the innermost (merged) axis is reduced: each call
 *    reduces one run of the input into one output element, starting from
 *    the element's float32 partial.  Sums: the partial plus the kernel sum of
 *    the run in float64 (contiguous runs: the kernels' order; strided runs:
 *    blocks of 512 gathered), the stored code rounded from that float64;
 *    products, max, min: NumPy's float32 reduce loop on blocks of 512.
 *    Threads take whole output elements.  max/min of one contiguous run an
 *    output, of a format whose codes order as sign and magnitude
 *    (bfloat16, float8_e4m3fn, ...: sort.c's check), are the run's extreme
 *    code, found by the kernels' argmax (arg_extreme8/16) without decoding;
 *    with fewer outputs than threads each run is cut into pieces whose
 *    extremes are then compared.  That is NumPy's result bit for bit
 *    except where the result is NaN or zero (which NaN, which zero, depends
 *    on the operand each step keeps): those outputs go NumPy's way (over
 *    several reduced axes the call returns NotImplemented and NumPy's route
 *    computes everything).  max/min over several axes that are not one run
 *    go in stages (staged_extreme), under the same rule.
 *
 * With where=, NumPy's masked loop calls ours on each run of True, which is
 * what is done here.  max/min have no initial value: NumPy copies the first
 * element along the (single) reduced axis into the output and reduces the
 * rest; the general loop stores each step's result into the output's
 * format, and so does this (a NaN becomes the format's NaN of its sign).
 *
 * F-ordered arrays (without out= and where=) are reduced as the C-ordered
 * view with their axes reversed, which NumPy's iterator walks in the same
 * memory order (reduce_fortran).
 *
 * Views that are not contiguous but C-ordered (strides positive and
 * decreasing, after dropping axes of length 1: x[::2], x[:, :n], x[:, ::2])
 * are reduced as they are, without where=, where NumPy's iterator hands the
 * loops the pieces it hands them for a contiguous array (in_place_pieces).
 *
 * Returns NotImplemented for what it does not cover (then the caller runs
 * NumPy's route): other arrays that are not C-ordered, the views above
 * otherwise, byte-swapped or unaligned,
 * dtype=, initial=, out= that is not C-contiguous of the format or overlaps
 * the input, formats without zero, empty arrays and reductions, max/min with
 * where=, max/min over several axes but by the keyed path and the stages
 * above (with out=, or of a format whose codes do not order), and more
 * than 2^24 column-mode outputs
 * (beyond which accumulate.c stops keeping partials).
 */
#include <fenv.h>
#include <math.h>
#include "umath.h"
#include "../kernels/scalar_ops.h"
#include "../kernels/parallel.h"
#include "../kernels/stream/argkey.h"

enum { RED_SUM = 0, RED_PROD, RED_MAX, RED_MIN, RED_NUM };

/* the same block size as the loops (loops.c): run sums of strided data and
 * the float32 reduce loop see the same pieces */
#define RBLOCK 512
/* columns of a column-mode task (a multiple of RBLOCK): accumulators and
 * one decoded row in L1 */
#define COLS_MAX 1024
/* the narrowest column task of the column sums: a few vectors */
#define COLS_MIN 128
#define SHADOW_MAX ((npy_intp)1 << 24)
/* the most pieces of keyed runs with few outputs */
#define KEYED_PIECES 1024

typedef struct {
    int op;
    const mf_format *f;
    const mf_kernels *k;
    PyUFuncGenericFunction fn;   /* NumPy's float32 loop of the operation */
    void *fndata;
    const char *in;
    const char *mask;            /* NULL: no where= */
    char *out;                   /* nout codes, C order of the kept axes */
    npy_intp isz;
    /* kept axes (outer to inner; column mode: the innermost is the vector axis) */
    int nk;
    npy_intp kshape[NPY_MAXDIMS], kis[NPY_MAXDIMS], kms[NPY_MAXDIMS];
    /* reduced axes (row mode: without the merged innermost run) */
    int nr;
    npy_intp rshape[NPY_MAXDIMS], ris[NPY_MAXDIMS], rms[NPY_MAXDIMS];
    npy_intp R;                  /* product of rshape */
    int column;
    /* column mode: the vector axis */
    npy_intp K, ks, kms_inner, cols, ncolblocks, A;
    /* row mode: the innermost run */
    npy_intp L, ls, lms;
    npy_intp nout;
    int first_copied;            /* max/min: the first element along the axis is the start */
    npy_intp ntasks, per_task;
    /* row mode with fewer outputs than threads (a whole-array sum): one
     * task, each contiguous run summed by mf_par_sum (its blocks on the
     * threads, added in order: the kernel's bits) */
    int par_sum;
    /* column mode, sums without where= of aligned contiguous rows: the
     * kernels' column sums (column_sum) */
    int colsum;
    /* column mode, max/min without where= over one reduced axis of aligned
     * contiguous rows: the kernels' column maxima (column_max) */
    int colmax;
    /* row mode, sums of one contiguous aligned run an output without
     * where=: the kernels' sum_rows (rows_sum) */
    int sum_rows;
    /* row mode, max/min of one contiguous aligned run an output without
     * where=, of a format whose codes order as sign and magnitude: the
     * run's extreme code by the kernels' arg_extreme (keyed_rows) */
    int keyed;
    /* row mode, products of one run an output without where=: eight
     * outputs' chains interleaved (prod_rows) */
    int prod_rows;
    int16_t lim;                 /* its NaN limit (sort.c) */
    int multi;                   /* several reduced axes: no exact route here */
    int special;                 /* keyed: an output is NaN or zero */
    /* keyed with fewer outputs than threads: each run cut in npieces, the
     * pieces' extreme codes */
    npy_intp npieces;
    uint32_t *pcode;
    npy_intp next;
    fenv_t env;
    int flags;
    int nomem;                   /* a task could not get its scratch memory */
} red_job;

static inline npy_intp
offset_of(npy_intp idx, int n, const npy_intp *shape, const npy_intp *str)
{
    npy_intp off = 0;
    for (int d = n - 1; d >= 0; d--) {
        npy_intp i = idx % shape[d];
        idx /= shape[d];
        off += i * str[d];
    }
    return off;
}

/* the reduced multi-index after r, as offsets of input and mask (C order) */
static inline void
next_r(const red_job *J, npy_intp *ctr, npy_intp *ioff, npy_intp *moff)
{
    for (int d = J->nr - 1; d >= 0; d--) {
        if (++ctr[d] < J->rshape[d]) {
            *ioff += J->ris[d];
            *moff += J->rms[d];
            return;
        }
        ctr[d] = 0;
        *ioff -= (J->rshape[d] - 1) * J->ris[d];
        *moff -= (J->rshape[d] - 1) * J->rms[d];
    }
}

static inline void
decode_run(const red_job *J, const char *p, npy_intp s, float *dst, npy_intp n)
{
    if (s == J->isz && ((uintptr_t)p % (uintptr_t)J->isz) == 0) {
        J->k->decode_f32(J->f, p, dst, n);
        return;
    }
    for (npy_intp i = 0; i < n; i++, p += s) {
        dst[i] = mf_dec_code(J->f, mf_load_code(J->f, p));
    }
}

/* max/min: the general loop stores each step in the format and reads it
 * back; that is the identity except on NaN, which becomes the format's NaN */
static inline void
store_and_reload(const mf_format *f, float *a, npy_intp n)
{
    int any = 0;
    for (npy_intp i = 0; i < n; i++) {
        any |= a[i] != a[i];
    }
    if (!any) {
        return;
    }
    for (npy_intp i = 0; i < n; i++) {
        if (a[i] != a[i]) {
            int ovf = 0;
            a[i] = mf_dec_code(f, mf_enc1_ovf(f, a[i], &ovf));
        }
    }
}

static inline void
call_fn(const red_job *J, float *acc, const float *x, npy_intp n, npy_intp acc_step)
{
    char *args[3] = {(char *)acc, (char *)x, (char *)acc};
    npy_intp steps[3] = {acc_step, sizeof(float), acc_step};
    J->fn(args, &n, steps, J->fndata);
}

/* column mode, NumPy's route: the float32 partials of output row a,
 * columns [j0, j0 + n) into acc (j0 a multiple of RBLOCK, or 0 with a mask;
 * x: n floats of scratch) */
static void
column_exact(const red_job *J, npy_intp a, npy_intp j0, npy_intp n, float *acc, float *x)
{
    npy_intp ctr[NPY_MAXDIMS] = {0};
    npy_intp abase = offset_of(a, J->nk - 1, J->kshape, J->kis) + j0 * J->ks;
    npy_intp mbase = J->mask ? offset_of(a, J->nk - 1, J->kshape, J->kms) + j0 * J->kms_inner : 0;
    npy_intp ioff = 0, moff = 0;
    npy_intp r0 = 0;
    int minmax = J->op == RED_MAX || J->op == RED_MIN;
    if (J->first_copied) {
        decode_run(J, J->in + abase, J->ks, acc, n);
        r0 = 1;
        next_r(J, ctr, &ioff, &moff);
    }
    else {
        float init = J->op == RED_PROD ? 1.0f : 0.0f;
        for (npy_intp j = 0; j < n; j++) {
            acc[j] = init;
        }
    }
    for (npy_intp r = r0; r < J->R; r++) {
        const char *p = J->in + abase + ioff;
        decode_run(J, p, J->ks, x, n);
        if (J->mask == NULL) {
            /* pieces of RBLOCK from the row's start, as loops.c calls
             * NumPy's loop (whose vector body and tail may treat NaN
             * operands differently); j0 is a multiple of RBLOCK */
            for (npy_intp s = 0; s < n; s += RBLOCK) {
                call_fn(J, acc + s, x + s, n - s < RBLOCK ? n - s : RBLOCK, sizeof(float));
            }
            if (minmax) {
                store_and_reload(J->f, acc, n);
            }
        }
        else {
            const char *m = J->mask + mbase + moff;
            npy_intp j = 0;
            while (j < n) {
                while (j < n && !m[j * J->kms_inner]) {
                    j++;
                }
                npy_intp s = j;
                while (j < n && m[j * J->kms_inner]) {
                    j++;
                }
                for (npy_intp c = s; c < j; c += RBLOCK) {
                    call_fn(J, acc + c, x + c, j - c < RBLOCK ? j - c : RBLOCK, sizeof(float));
                }
            }
        }
        next_r(J, ctr, &ioff, &moff);
    }
}

/* the columns of acc (output row a, columns [j0, j0 + n)) that end NaN
 * (and, with zeros, zero) again by NumPy's route, over the RBLOCK pieces
 * that hold them */
static void
redo_columns(const red_job *J, npy_intp a, npy_intp j0, npy_intp n, float *acc, int zeros)
{
    float pacc[RBLOCK], px[RBLOCK];
    for (npy_intp p = j0 / RBLOCK * RBLOCK; p < j0 + n; p += RBLOCK) {
        npy_intp m = J->K - p < RBLOCK ? J->K - p : RBLOCK;
        npy_intp lo = p > j0 ? p : j0;
        npy_intp hi = p + m < j0 + n ? p + m : j0 + n;
        int any = 0;
        for (npy_intp j = lo; j < hi; j++) {
            float v = acc[j - j0];
            any |= v != v || (zeros && v == 0.0f);
        }
        if (!any) {
            continue;
        }
        column_exact(J, a, p, m, pacc, px);
        memcpy(acc + (lo - j0), pacc + (lo - p), sizeof(float) * (size_t)(hi - lo));
    }
}

/* column mode, sums without where=: the rows through the kernels' column
 * sums (the same float32 chains); a column that ends NaN is computed again
 * by NumPy's route, over the RBLOCK pieces that hold it, for its NaN's
 * sign and payload */
static void
column_sum(const red_job *J, npy_intp a, npy_intp j0, npy_intp n, float *acc)
{
    npy_intp ctr[NPY_MAXDIMS] = {0};
    npy_intp abase = offset_of(a, J->nk - 1, J->kshape, J->kis) + j0 * J->ks;
    npy_intp ioff = 0, moff = 0;
    const char *rows[MF_COLSUM_ROWS];
    int nb = 0;
    for (npy_intp j = 0; j < n; j++) {
        acc[j] = 0.0f;
    }
    if (J->nr == 1) {
        /* one reduced axis: the rows a stride apart */
        const char *p = J->in + abase;
        for (npy_intp r = 0; r < J->R; r += MF_COLSUM_ROWS) {
            nb = J->R - r < MF_COLSUM_ROWS ? (int)(J->R - r) : MF_COLSUM_ROWS;
            for (int i = 0; i < nb; i++) {
                rows[i] = p + (r + i) * J->ris[0];
            }
            J->k->colsum_f32(J->f, rows, nb, acc, n);
        }
        nb = 0;
    }
    else {
        for (npy_intp r = 0; r < J->R; r++) {
            rows[nb++] = J->in + abase + ioff;
            if (nb == MF_COLSUM_ROWS) {
                J->k->colsum_f32(J->f, rows, nb, acc, n);
                nb = 0;
            }
            next_r(J, ctr, &ioff, &moff);
        }
    }
    if (nb > 0) {
        J->k->colsum_f32(J->f, rows, nb, acc, n);
    }
    redo_columns(J, a, j0, n, acc, 0);
}

/* column mode, max/min without where= over one reduced axis: the first row,
 * then the others through the kernels' column maxima (minima).  A column
 * that ends NaN or zero, whose NaN or zero sign depends on which operand
 * NumPy's loop keeps, is computed again NumPy's way (redo_columns) */
static void
column_max(const red_job *J, npy_intp a, npy_intp j0, npy_intp n, float *acc)
{
    const char *p = J->in + offset_of(a, J->nk - 1, J->kshape, J->kis) + j0 * J->ks;
    const char *rows[MF_COLSUM_ROWS];
    decode_run(J, p, J->ks, acc, n);
    for (npy_intp r = 1; r < J->R; r += MF_COLSUM_ROWS) {
        int nb = J->R - r < MF_COLSUM_ROWS ? (int)(J->R - r) : MF_COLSUM_ROWS;
        for (int i = 0; i < nb; i++) {
            rows[i] = p + (r + i) * J->ris[0];
        }
        J->k->colmax_f32(J->f, rows, nb, acc, n, J->op == RED_MIN);
    }
    redo_columns(J, a, j0, n, acc, 1);
}

/* column mode: output row a, columns [j0, j0 + n) */
static void
column_task(const red_job *J, npy_intp a, npy_intp j0, npy_intp n)
{
    float stack_acc[COLS_MAX], stack_x[COLS_MAX];
    float *acc = stack_acc, *x = stack_x;
    if (n > COLS_MAX) {
        /* a masked row: whole (runs must not be cut) */
        acc = (float *)malloc(sizeof(float) * (size_t)n * 2);
        if (acc == NULL) {
            __atomic_store_n((int *)&J->nomem, 1, __ATOMIC_RELAXED);
            return;
        }
        x = acc + n;
    }
    if (J->colsum) {
        column_sum(J, a, j0, n, acc);
    }
    else if (J->colmax) {
        column_max(J, a, j0, n, acc);
    }
    else {
        column_exact(J, a, j0, n, acc, x);
    }
    char *o = J->out + (a * J->K + j0) * J->isz;
    J->k->encode_f32(J->f, acc, o, n);
    if (acc != stack_acc) {
        free(acc);
    }
}

/* row mode, sums: the partial plus the run's sum in float64 */
static inline double
sum_run(const red_job *J, double acc, const char *p, npy_intp n)
{
    if (J->ls == J->isz && ((uintptr_t)p % (uintptr_t)J->isz) == 0) {
        return mf_add_first(J->par_sum ? mf_par_sum(J->f, p, n) : J->k->sum(J->f, p, n), acc);
    }
    char codes[RBLOCK * 2];
    for (npy_intp s = 0; s < n; s += RBLOCK) {
        npy_intp len = n - s < RBLOCK ? n - s : RBLOCK;
        mf_move_codes(codes, J->isz, p + s * J->ls, J->ls, len, J->isz);
        acc = mf_add_first(J->k->sum(J->f, codes, len), acc);
    }
    return acc;
}

/* row mode, products, max, min: NumPy's float32 reduce loop on blocks */
static inline void
fold_run(const red_job *J, float *acc, const char *p, npy_intp n)
{
    float x[RBLOCK];
    for (npy_intp s = 0; s < n; s += RBLOCK) {
        npy_intp len = n - s < RBLOCK ? n - s : RBLOCK;
        decode_run(J, p + s * J->ls, J->ls, x, len);
        call_fn(J, acc, x, len, 0);
    }
}

static void
row_task(const red_job *J, npy_intp o)
{
    const mf_format *f = J->f;
    npy_intp ibase = offset_of(o, J->nk, J->kshape, J->kis);
    npy_intp mbase = J->mask ? offset_of(o, J->nk, J->kshape, J->kms) : 0;
    npy_intp ctr[NPY_MAXDIMS] = {0};
    npy_intp ioff = 0, moff = 0;
    char *out = J->out + o * J->isz;
    int ovf = 0;
    if (J->op == RED_SUM) {
        float p = 0.0f;
        double last = 0.0;
        int any = 0;
        for (npy_intp r = 0; r < J->R; r++) {
            const char *in = J->in + ibase + ioff;
            if (J->mask == NULL) {
                last = sum_run(J, (double)p, in, J->L);
                p = (float)last;
                any = 1;
            }
            else {
                const char *m = J->mask + mbase + moff;
                npy_intp j = 0;
                while (j < J->L) {
                    while (j < J->L && !m[j * J->lms]) {
                        j++;
                    }
                    npy_intp s = j;
                    while (j < J->L && m[j * J->lms]) {
                        j++;
                    }
                    if (j > s) {
                        last = sum_run(J, (double)p, in + s * J->ls, j - s);
                        p = (float)last;
                        any = 1;
                    }
                }
            }
            next_r(J, ctr, &ioff, &moff);
        }
        mf_store_code(f, out, any ? mf_encode_f64_ovf(f, last, &ovf) : mf_encode_f64(f, 0.0));
    }
    else {
        float p;
        npy_intp skip = 0;
        if (J->first_copied) {
            p = mf_dec_code(f, mf_load_code(f, J->in + ibase));
            skip = 1;
        }
        else {
            p = J->op == RED_PROD ? 1.0f : 0.0f;
        }
        for (npy_intp r = 0; r < J->R; r++) {
            const char *in = J->in + ibase + ioff;
            if (J->mask == NULL) {
                fold_run(J, &p, in + skip * J->ls, J->L - skip);
            }
            else {
                const char *m = J->mask + mbase + moff;
                npy_intp j = 0;
                while (j < J->L) {
                    while (j < J->L && !m[j * J->lms]) {
                        j++;
                    }
                    npy_intp s = j;
                    while (j < J->L && m[j * J->lms]) {
                        j++;
                    }
                    if (j > s) {
                        fold_run(J, &p, in + s * J->ls, j - s);
                    }
                }
            }
            next_r(J, ctr, &ioff, &moff);
        }
        mf_store_code(f, out, mf_enc1_ovf(f, p, &ovf));
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

/* row mode, sums of single contiguous runs without where=: several runs a
 * kernel call (sum_rows), each output what row_task gives it */
static void
rows_sum(const red_job *J, npy_intp o0, npy_intp o1)
{
    const char *rows[MF_COLSUM_ROWS];
    double s[MF_COLSUM_ROWS];
    int ovf = 0;
    /* the kept multi-index of o0, then stepped in C order (no divisions a row) */
    npy_intp ctr[NPY_MAXDIMS], off = 0, rest = o0;
    for (int d = J->nk - 1; d >= 0; d--) {
        ctr[d] = rest % J->kshape[d];
        rest /= J->kshape[d];
        off += ctr[d] * J->kis[d];
    }
    for (npy_intp o = o0; o < o1; o += MF_COLSUM_ROWS) {
        npy_intp cnt = o1 - o < MF_COLSUM_ROWS ? o1 - o : MF_COLSUM_ROWS;
        for (npy_intp i = 0; i < cnt; i++) {
            rows[i] = J->in + off;
            for (int d = J->nk - 1; d >= 0; d--) {
                if (++ctr[d] < J->kshape[d]) {
                    off += J->kis[d];
                    break;
                }
                ctr[d] = 0;
                off -= (J->kshape[d] - 1) * J->kis[d];
            }
        }
        J->k->sum_rows(J->f, rows, cnt, J->L, s);
        for (npy_intp i = 0; i < cnt; i++) {
            mf_store_code(J->f, J->out + (o + i) * J->isz,
                          mf_encode_f64_ovf(J->f, mf_add_first(s[i], 0.0), &ovf));
        }
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

/* row mode, products: each output's chain p = p * x over its run from
 * 1.0f, as NumPy's float32 multiply loop runs it (row_task), for up to
 * sixteen outputs at once: the rows' values decoded a block at a time, then
 * four of them at a time transposed in registers (a 4 x 4 block of four
 * rows and four positions becomes four vectors of one position each) so
 * that one vector multiplication advances four chains, and four such
 * vectors overlap where each waits on its product.  The operations and
 * their order in each chain are row_task's; an output whose product is NaN
 * (which NaN depends on the operand a multiplication keeps) is computed by
 * row_task.  (GCC and clang vector extensions: SSE2 or NEON registers.) */
#define PROD_GROUPS 4
#define PROD_BLOCK 4096
typedef float prod_v4 __attribute__((vector_size(16)));
typedef uint16_t prod_h8 __attribute__((vector_size(16)));
typedef uint64_t prod_q2 __attribute__((vector_size(16)));

/* four float32 values at p */
static inline prod_v4
prod_load4(const float *p)
{
    prod_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* the float32 values of four bfloat16 codes at p: each code the upper half
 * of its lane (interleaved with zeros) */
static inline prod_v4
prod_bf16_4(const char *p)
{
    uint64_t c4;
    memcpy(&c4, p, 8);
    const prod_q2 q = {c4, 0};
    prod_h8 h;
    memcpy(&h, &q, sizeof h);
    const prod_h8 z = {0, 0, 0, 0, 0, 0, 0, 0};
    const prod_h8 w = __builtin_shufflevector(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
    prod_v4 v;
    memcpy(&v, &w, sizeof v);
    return v;
}

/* the products of outputs o .. o + n - 1, four a vector: a NaN product is
 * computed by row_task (which NaN depends on the operand each step keeps) */
static inline __attribute__((always_inline)) void
prod_store(const red_job *J, npy_intp o, const prod_v4 *P, int n)
{
    int ovf = 0;
    for (int j = 0; j < n; j++) {
        const float p = P[j / 4][j % 4];
        if (p != p) {
            row_task(J, o + j);
        }
        else {
            mf_store_code(J->f, J->out + (o + j) * J->isz, mf_enc1_ovf(J->f, p, &ovf));
        }
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

/* the products of rows o .. o + 4G - 1 (G groups of four; inlined with G
 * and `bf16` constants, so that the chains stay in registers).  bfloat16
 * rows are read as codes (no decode pass: the input streams from memory
 * once, in row order); the other formats are decoded a block at a time. */
static inline __attribute__((always_inline)) void
prod_group(const red_job *J, npy_intp o, int G, int bf16)
{
    /* rows 64 bytes apart beyond the block, so that the same position of
     * the sixteen rows does not map to one L1 set */
    static _Thread_local float buf[4 * PROD_GROUPS][PROD_BLOCK + 16];
    const char *row[4 * PROD_GROUPS];
    prod_v4 P[PROD_GROUPS];
    for (int g = 0; g < G; g++) {
        P[g] = (prod_v4){1.0f, 1.0f, 1.0f, 1.0f};
        for (int k = 0; k < 4; k++) {
            row[4 * g + k] = J->in + offset_of(o + 4 * g + k, J->nk, J->kshape, J->kis);
        }
    }
    const npy_intp block = bf16 ? J->L : PROD_BLOCK;
    for (npy_intp s = 0; s < J->L; s += block) {
        const npy_intp len = J->L - s < block ? J->L - s : block;
        if (!bf16) {
            for (int j = 0; j < 4 * G; j++) {
                decode_run(J, row[j] + s * J->ls, J->ls, buf[j], len);
            }
        }
#define PROD_A(j, i) (bf16 ? prod_bf16_4(row[j] + 2 * (s + (i))) : prod_load4(buf[j] + (i)))
        npy_intp i = 0;
        for (; i + 4 <= len; i += 4) {
            for (int g = 0; g < G; g++) {
                const prod_v4 a0 = PROD_A(4 * g, i), a1 = PROD_A(4 * g + 1, i);
                const prod_v4 a2 = PROD_A(4 * g + 2, i), a3 = PROD_A(4 * g + 3, i);
                const prod_v4 t0 = __builtin_shufflevector(a0, a1, 0, 4, 1, 5);
                const prod_v4 t1 = __builtin_shufflevector(a0, a1, 2, 6, 3, 7);
                const prod_v4 t2 = __builtin_shufflevector(a2, a3, 0, 4, 1, 5);
                const prod_v4 t3 = __builtin_shufflevector(a2, a3, 2, 6, 3, 7);
                P[g] = P[g] * __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
                P[g] = P[g] * __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
                P[g] = P[g] * __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
                P[g] = P[g] * __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
            }
        }
#undef PROD_A
        for (; i < len; i++) {
            for (int g = 0; g < G; g++) {
                prod_v4 c;
                for (int k = 0; k < 4; k++) {
                    c[k] = bf16 ? mf_dec_code(J->f, mf_load_code(J->f, row[4 * g + k] + 2 * (s + i)))
                                : buf[4 * g + k][i];
                }
                P[g] = P[g] * c;
            }
        }
    }
    prod_store(J, o, P, 4 * G);
}

/* bfloat16 rows of PROD_LONG values or more, eight at a time: eight codes
 * of each of four rows transposed as 16-bit codes (two rounds of
 * interleaving: each vector then holds two positions of the four rows) and
 * decoded by interleaving with zeros, so that a position of four rows costs
 * one shuffle beside its multiplication (prod_group's 4 x 4 float
 * transposes cost three, and one more to decode each load); the two chains
 * of four rows overlap.  Measured on a Zen 4 (one thread, (4096, 4096)):
 * 4.8 ms with prod_group's sixteen chains; of this kind, sixteen or
 * twenty-four rows at once 2.6-4.2 ms (probably their lines, 8 KiB apart,
 * evicting each other from one L1 set), eight 2.0 ms.  Rows of fewer than
 * PROD_LONG values keep prod_group (an output's setup and rounding are more
 * of their time); rows up to PROD_SHORT values are too short a stream for
 * the hardware's prefetchers (256 values: 6.6 -> 3.2 ms with the next group
 * fetched). */
#define PROD_LONG 256
#define PROD_SHORT 1024
static inline __attribute__((always_inline)) prod_h8
prod_codes8(const char *p)
{
    prod_h8 h;
    memcpy(&h, p, sizeof h);
    return h;
}

static inline __attribute__((always_inline)) prod_v4
prod_h8_as_v4(prod_h8 h)
{
    prod_v4 v;
    memcpy(&v, &h, sizeof v);
    return v;
}

typedef uint32_t prod_w4 __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) prod_h8
prod_zip32(prod_h8 a, prod_h8 b, int hi)
{
    prod_w4 x, y, z;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    if (hi) {
        z = __builtin_shufflevector(x, y, 2, 6, 3, 7);
    }
    else {
        z = __builtin_shufflevector(x, y, 0, 4, 1, 5);
    }
    prod_h8 h;
    memcpy(&h, &z, sizeof h);
    return h;
}

/* eight positions i .. i + 7 of eight rows into their two chains, four
 * rows at a time (fewer registers live) */
static inline __attribute__((always_inline)) void
prod_step8(const char *const *row, prod_v4 *P, npy_intp i)
{
    const prod_h8 z = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int q = 0; q < 2; q++) {
        const prod_h8 r0 = prod_codes8(row[4 * q] + 2 * i);
        const prod_h8 r1 = prod_codes8(row[4 * q + 1] + 2 * i);
        const prod_h8 r2 = prod_codes8(row[4 * q + 2] + 2 * i);
        const prod_h8 r3 = prod_codes8(row[4 * q + 3] + 2 * i);
        /* rows 0, 1 (and 2, 3) interleaved: positions 0-3, then 4-7 */
        const prod_h8 a0 = __builtin_shufflevector(r0, r1, 0, 8, 1, 9, 2, 10, 3, 11);
        const prod_h8 a1 = __builtin_shufflevector(r0, r1, 4, 12, 5, 13, 6, 14, 7, 15);
        const prod_h8 a2 = __builtin_shufflevector(r2, r3, 0, 8, 1, 9, 2, 10, 3, 11);
        const prod_h8 a3 = __builtin_shufflevector(r2, r3, 4, 12, 5, 13, 6, 14, 7, 15);
        /* b[h]: the four rows' codes at positions 2h and 2h + 1 */
        const prod_h8 b[4] = {prod_zip32(a0, a2, 0), prod_zip32(a0, a2, 1),
                              prod_zip32(a1, a3, 0), prod_zip32(a1, a3, 1)};
        for (int h = 0; h < 4; h++) {
            P[q] = P[q] * prod_h8_as_v4(__builtin_shufflevector(z, b[h], 0, 8, 1, 9, 2, 10, 3, 11));
            P[q] = P[q] * prod_h8_as_v4(__builtin_shufflevector(z, b[h], 4, 12, 5, 13, 6, 14, 7, 15));
        }
    }
}

/* (not inlined into prod_rows: inlined, it cost prod_group's short rows
 * a quarter of their speed, (1048576, 16) 5.8 -> 7.3 ms) */
static __attribute__((noinline)) void
prod_group8(const red_job *J, npy_intp o, npy_intp o1)
{
    const char *row[8], *next[8];
    for (int j = 0; j < 8; j++) {
        row[j] = J->in + offset_of(o + j, J->nk, J->kshape, J->kis);
        next[j] = o + 8 + j < o1 ? J->in + offset_of(o + 8 + j, J->nk, J->kshape, J->kis) : row[j];
    }
    prod_v4 P[2] = {{1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 1.0f, 1.0f}};
    const npy_intp L = J->L;
    /* short rows fetch the next group's lines as they read theirs */
    const int short_rows = L <= PROD_SHORT;
    npy_intp i = 0;
    for (; i + 8 <= L; i += 8) {
        if (short_rows && (i & 31) == 0) {
            for (int k = 0; k < 8; k++) {
                __builtin_prefetch(next[k] + 2 * i);
            }
        }
        prod_step8(row, P, i);
    }
    for (; i < L; i++) {
        for (int q = 0; q < 2; q++) {
            prod_v4 c;
            for (int k = 0; k < 4; k++) {
                c[k] = mf_dec_code(J->f, mf_load_code(J->f, row[4 * q + k] + 2 * i));
            }
            P[q] = P[q] * c;
        }
    }
    prod_store(J, o, P, 8);
}

static void
prod_rows(const red_job *J, npy_intp o0, npy_intp o1)
{
    npy_intp o = o0;
    if (J->f->id == MF_BFLOAT16 && J->ls == 2) {
        for (; J->L >= PROD_LONG && o + 8 <= o1; o += 8) {
            prod_group8(J, o, o1);
        }
        for (; o + 4 * PROD_GROUPS <= o1; o += 4 * PROD_GROUPS) {
            prod_group(J, o, PROD_GROUPS, 1);
        }
        for (; o + 4 <= o1; o += 4) {
            prod_group(J, o, 1, 1);
        }
    }
    for (; o + 4 * PROD_GROUPS <= o1; o += 4 * PROD_GROUPS) {
        prod_group(J, o, PROD_GROUPS, 0);
    }
    for (; o + 4 <= o1; o += 4) {
        prod_group(J, o, 1, 0);
    }
    for (; o < o1; o++) {
        row_task(J, o);
    }
}

/* keyed: the extreme code of the n codes at p (the first of them) */
static inline uint32_t
keyed_extreme(const red_job *J, const char *p, npy_intp n)
{
    const int want_max = J->op == RED_MAX;
    npy_intp i = J->isz == 1
                 ? J->k->arg_extreme8((const uint8_t *)p, n, (int8_t)J->lim, want_max)
                 : J->k->arg_extreme16((const uint16_t *)p, n, J->lim, want_max);
    return mf_load_code(J->f, p + i * J->isz);
}

/* a result whose code NumPy's route decides by which operand each step
 * keeps (a NaN's sign, a zero's sign): computed that way (row_task) */
static inline int
keyed_special(const red_job *J, uint32_t c)
{
    return mf_code_isnan(J->f, c) || (c & ~mf_sign_bit(J->f)) == 0;
}

static void
keyed_rows(red_job *J, npy_intp o0, npy_intp o1)
{
    for (npy_intp o = o0; o < o1; o++) {
        const char *p = J->in + offset_of(o, J->nk, J->kshape, J->kis);
        uint32_t c = keyed_extreme(J, p, J->L);
        if (!keyed_special(J, c)) {
            mf_store_code(J->f, J->out + o * J->isz, c);
        }
        else if (J->multi) {
            __atomic_store_n(&J->special, 1, __ATOMIC_RELAXED);
        }
        else {
            row_task(J, o);
        }
    }
}

/* keyed, piece t % npieces of output t / npieces */
static void
keyed_piece(red_job *J, npy_intp t)
{
    npy_intp o = t / J->npieces, q = t % J->npieces;
    npy_intp a = J->L * q / J->npieces, b = J->L * (q + 1) / J->npieces;
    const char *p = J->in + offset_of(o, J->nk, J->kshape, J->kis) + a * J->isz;
    J->pcode[t] = keyed_extreme(J, p, b - a);
}

/* keyed: the outputs from their pieces' extremes, on the calling thread */
static void
keyed_combine(red_job *J)
{
    const int want_max = J->op == RED_MAX;
    for (npy_intp o = 0; o < J->nout; o++) {
        const uint32_t *pc = J->pcode + o * J->npieces;
        uint32_t best = pc[0];
        int special = keyed_special(J, best);
        for (npy_intp q = 1; q < J->npieces && !special; q++) {
            int32_t kb, kq;
            if (J->isz == 1) {
                kb = ae8_key((uint8_t)best, (int8_t)J->lim, 0);
                kq = ae8_key((uint8_t)pc[q], (int8_t)J->lim, 0);
            }
            else {
                kb = ae16_key((uint16_t)best, J->lim, 0);
                kq = ae16_key((uint16_t)pc[q], J->lim, 0);
            }
            special = mf_code_isnan(J->f, pc[q]);
            if (want_max ? kq > kb : kq < kb) {
                best = pc[q];
            }
        }
        if (!special && !keyed_special(J, best)) {
            mf_store_code(J->f, J->out + o * J->isz, best);
        }
        else if (J->multi) {
            J->special = 1;
        }
        else {
            row_task(J, o);
        }
    }
}

static void
run_task(const red_job *J, npy_intp t)
{
    if (J->column) {
        npy_intp a = t / J->ncolblocks, b = t % J->ncolblocks;
        npy_intp j0 = b * J->cols;
        npy_intp n = J->K - j0 < J->cols ? J->K - j0 : J->cols;
        column_task(J, a, j0, n);
        return;
    }
    if (J->npieces) {
        keyed_piece((red_job *)J, t);
        return;
    }
    npy_intp o0 = t * J->per_task;
    npy_intp o1 = o0 + J->per_task < J->nout ? o0 + J->per_task : J->nout;
    if (J->keyed) {
        keyed_rows((red_job *)J, o0, o1);
        return;
    }
    if (J->prod_rows) {
        prod_rows(J, o0, o1);
        return;
    }
    if (J->sum_rows) {
        rows_sum(J, o0, o1);
        return;
    }
    for (npy_intp o = o0; o < o1; o++) {
        row_task(J, o);
    }
}

static void
red_worker(void *ctx, int w)
{
    red_job *J = (red_job *)ctx;
    fenv_t saved;
    mf_worker_enter(w, &J->env, &saved);
    for (;;) {
        npy_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        run_task(J, t);
    }
    mf_worker_leave(w, &J->flags, &saved);
}

static void
red_run(red_job *J)
{
    npy_intp bytes = (J->column ? J->A * J->K : J->nout * J->L) * J->R * J->isz;
    int T = 1;
    if (bytes >= MF_PAR_MIN_REDUCE_BYTES) {
        T = mf_get_num_threads();
        npy_intp most = bytes / MF_PAR_THREAD_BYTES;
        if (most < T) {
            T = (int)most;
        }
        if (T < 1) {
            T = 1;
        }
    }
    if (J->column) {
        /* narrower column blocks when there are few, so that every thread
         * gets several tasks */
        npy_intp cols = COLS_MAX;
        if (J->mask != NULL) {
            cols = J->K;        /* a run of True must not be cut */
        }
        else if ((J->colsum || J->colmax) && J->K <= COLS_MAX && J->K * J->isz <= 2048) {
            /* rows of up to 2 KiB whole, one stream: split between threads
             * they took longer than on one (Zen 4, (65536, 256) bf16: 1.0
             * ms on one thread, 1.9 ms on two with 128 columns each) */
            cols = J->K;
        }
        else if (J->colsum || J->colmax) {
            /* any width (column_sum redoes NaN columns over whole pieces):
             * down to COLS_MIN for at least 2 tasks a thread (narrower
             * tasks read a row's bytes in pieces too small to stream) */
            while (T > 1 && cols > COLS_MIN
                   && J->A * ((J->K + cols - 1) / cols) < 2 * (npy_intp)T) {
                cols /= 2;
            }
        }
        else if (J->A * ((J->K + cols - 1) / cols) < 4 * (npy_intp)T) {
            cols = RBLOCK;
        }
        J->cols = cols;
        J->ncolblocks = (J->K + cols - 1) / cols;
        J->ntasks = J->A * J->ncolblocks;
    }
    else if (J->keyed && T > 1 && J->nout < T && J->nout * 4 * (npy_intp)T <= KEYED_PIECES
             && J->L >= 4 * (npy_intp)T) {
        /* few outputs: each run in pieces, 4 a thread */
        J->npieces = 4 * (npy_intp)T;
        J->ntasks = J->nout * J->npieces;
    }
    else if (J->op == RED_SUM && T > 1 && J->nout < T) {
        J->par_sum = 1;
        J->sum_rows = 0;
        J->per_task = J->nout;
        J->ntasks = 1;
        T = 1;
    }
    else {
        /* about 4 tasks per thread, of at least 64 KiB of input */
        npy_intp per = J->nout / (4 * (npy_intp)T);
        npy_intp least = ((npy_intp)64 << 10) / (J->L * J->R * J->isz + 1) + 1;
        if (per < least) {
            per = least;
        }
        J->per_task = per;
        J->ntasks = (J->nout + per - 1) / per;
    }
    J->next = 0;
    J->flags = 0;
    fegetenv(&J->env);
    if (T <= 1 || mf_pool_run(red_worker, J, T) == 0) {
        red_worker(J, 0);
    }
    if (J->npieces) {
        keyed_combine(J);
    }
    if (J->flags) {
        feraiseexcept(J->flags);
    }
}

/* the float32 loop NumPy's ufunc has for the operation (loops.c found it) */
static int
f32_loop_of(int op, PyUFuncGenericFunction *fn, void **data)
{
    static const char *names[RED_NUM] = {"add", "multiply", "maximum", "minimum"};
    for (int d = 0; d < mf_num_ufunc_defs; d++) {
        const mf_ufunc_def *def = &mf_ufunc_defs[d];
        if (def->kind != MF_LOOP_INT && strcmp(def->ufunc, names[op]) == 0
                && strcmp(def->sig, "MM->M") == 0 && mf_f32_fns[d] != NULL) {
            *fn = mf_f32_fns[d];
            *data = mf_f32_data[d];
            return 0;
        }
    }
    return -1;
}

int
mf_fpe_bits(int fl)
{
    return ((fl & FE_DIVBYZERO) ? NPY_FPE_DIVIDEBYZERO : 0) | ((fl & FE_OVERFLOW) ? NPY_FPE_OVERFLOW : 0)
           | ((fl & FE_UNDERFLOW) ? NPY_FPE_UNDERFLOW : 0) | ((fl & FE_INVALID) ? NPY_FPE_INVALID : 0);
}

/* axis argument (None, an int or a tuple of ints) -> red[d], whether axis d
 * is reduced, and how many are; 0 ok, -1 not handled (NumPy will say why).
 * Shared with pairwise.c. */
int
mf_parse_axes(PyObject *axis, int nd, int *red, int *naxes)
{
    for (int d = 0; d < nd; d++) {
        red[d] = axis == Py_None;
    }
    *naxes = axis == Py_None ? nd : 0;
    if (axis == Py_None) {
        return 0;
    }
    PyObject *seq = PyTuple_Check(axis) ? axis : NULL;
    Py_ssize_t n = seq ? PyTuple_GET_SIZE(seq) : 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = seq ? PyTuple_GET_ITEM(seq, i) : axis;
        if (!PyLong_CheckExact(item)) {
            return -1;
        }
        long v = PyLong_AsLong(item);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        if (v < 0) {
            v += nd;
        }
        if (v < 0 || v >= nd || red[v]) {
            return -1;
        }
        red[v] = 1;
    }
    *naxes = (int)n;
    return 0;
}

/* the reduced axes of a C-ordered shape as one block: *outer, *nred and
 * *inner are the products of the kept axes before the block, of the reduced
 * axes, and of the kept axes after it (axes of length 1 are in no block);
 * -1 when the reduced axes longer than 1 are not next to each other.
 * Shared with pairwise.c and truth.c. */
int
mf_reduced_block(int nd, const npy_intp *shape, const int *red, npy_intp *outer,
                 npy_intp *nred, npy_intp *inner)
{
    npy_intp p[3] = {1, 1, 1};
    int part = 0;       /* 0 before the block, 1 in it, 2 after it */
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) {
            continue;
        }
        if (red[d]) {
            if (part == 2) {
                return -1;
            }
            part = 1;
        }
        else if (part == 1) {
            part = 2;
        }
        p[part] *= shape[d];
    }
    *outer = p[0];
    *nred = p[1];
    *inner = p[2];
    return 0;
}

/* the shape of a reduction's result: the kept axes, and 1 for each reduced
 * one with keepdims; returns its number of dimensions */
int
mf_kept_shape(int nd, const npy_intp *shape, const int *red, int keepdims, npy_intp *out)
{
    int k = 0;
    for (int d = 0; d < nd; d++) {
        if (!red[d]) {
            out[k++] = shape[d];
        }
        else if (keepdims) {
            out[k++] = 1;
        }
    }
    return k;
}

PyObject *mf_py_reduce(PyObject *self, PyObject *args);

/* mf_py_reduce of a over axis (without out= and where=) */
static PyObject *
reduce_call(PyObject *self, int op, PyObject *a, PyObject *axis, int keepdims)
{
    PyObject *args = Py_BuildValue("(iOOOOO)", op, a, axis, Py_None,
                                   keepdims ? Py_True : Py_False, Py_True);
    if (args == NULL) {
        return NULL;
    }
    PyObject *r = mf_py_reduce(self, args);
    Py_DECREF(args);
    return r;
}

/* a view of a with its axes in reverse order (C-ordered when a is F-ordered) */
static PyObject *
reversed_axes(PyArrayObject *a)
{
    npy_intp perm[NPY_MAXDIMS];
    const int nd = PyArray_NDIM(a);
    for (int d = 0; d < nd; d++) {
        perm[d] = nd - 1 - d;
    }
    PyArray_Dims dims = {perm, nd};
    return PyArray_Transpose(a, &dims);
}

/*
 * An F-ordered array (a transpose of a C-ordered one): NumPy's iterator
 * walks it in memory order, as it walks the C-ordered view with its axes
 * reversed, so that view reduced over the mirrored axes gives every output
 * element the same operations in the same order; the result comes back
 * with its axes reversed again (F-ordered, as NumPy allocates it).  Without
 * out= and where= only.
 */
static PyObject *
reduce_fortran(PyObject *self, int op, PyArrayObject *a, PyObject *axis, int keepdims)
{
    const int nd = PyArray_NDIM(a);
    int red[NPY_MAXDIMS], naxes;
    if (mf_parse_axes(axis, nd, red, &naxes) < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *ax = Py_None;
    Py_INCREF(ax);
    if (axis != Py_None) {
        Py_DECREF(ax);
        ax = PyTuple_New(naxes);
        if (ax == NULL) {
            return NULL;
        }
        for (int d = nd - 1, k = 0; d >= 0; d--) {
            if (red[d]) {
                PyObject *i = PyLong_FromLong(nd - 1 - d);
                if (i == NULL) {
                    Py_DECREF(ax);
                    return NULL;
                }
                PyTuple_SET_ITEM(ax, k++, i);
            }
        }
    }
    PyObject *at = reversed_axes(a);
    if (at == NULL) {
        Py_DECREF(ax);
        return NULL;
    }
    PyObject *r = reduce_call(self, op, at, ax, keepdims);
    Py_DECREF(at);
    Py_DECREF(ax);
    if (r == NULL || !PyArray_Check(r) || PyArray_NDIM((PyArrayObject *)r) < 2) {
        return r;
    }
    PyObject *back = reversed_axes((PyArrayObject *)r);
    Py_DECREF(r);
    return back;
}

/*
 * Whether NumPy's reduction iterator takes a view that is not contiguous in
 * place, one innermost run a loop call, as it takes a contiguous array (1),
 * or copies pieces of it into its buffer (0; -1 with an exception set).
 * The pieces matter: a sum is rounded per call, a NaN's sign is decided by
 * where NumPy's float32 loop cuts its vector body (the module comment), and
 * the buffer spans several runs (a (6, 20, 70)[:, ::2] bfloat16 view's
 * .sum(axis=0) gets calls of 1400 values, 20 rows).
 *
 * This is the choice of NumPy's buffer setup (npyiter_find_buffering_setup
 * in nditer_constr.c, NumPy 2.3-2.5), for the two operands of a reduction
 * without where= (the result: 0 strides on the reduced axes, C-contiguous
 * on the kept ones; the input) and no cast, with GROWINNER, as a cost
 * model: from the innermost axis outwards, a core of the axes so far costs
 * (1 + the operands that cannot walk it with one stride) per min(its size,
 * the buffer size) values, the cheapest core wins (ties to the larger), and
 * no core grows past the first axis where the result's stride turns from or
 * to 0 (the reduction's outer axis).  The operands walk the chosen core in
 * place if they can (the result as the reduction operand, or any operand
 * that can by the reduction's outer stride); otherwise they are buffered.
 * Taken in place only with a core of one axis: one run a call.
 */
static int
in_place_pieces(int nd, const npy_intp *shape, const npy_intp *strides, const int *red,
                npy_intp isz)
{
    static PyObject *getbufsize = NULL;
    if (getbufsize == NULL) {
        PyObject *np = PyImport_ImportModule("numpy");
        if (np == NULL) {
            return -1;
        }
        getbufsize = PyObject_GetAttrString(np, "getbufsize");
        Py_DECREF(np);
        if (getbufsize == NULL) {
            return -1;
        }
    }
    PyObject *b = PyObject_CallNoArgs(getbufsize);
    if (b == NULL) {
        return -1;
    }
    const npy_intp bufsize = PyLong_AsSsize_t(b);
    Py_DECREF(b);
    if (bufsize == -1 && PyErr_Occurred()) {
        return -1;
    }
    /* the axes of length > 1, innermost first, coalesced where both
     * operands' strides allow; st[0]: the result's, st[1]: the input's */
    npy_intp sh[NPY_MAXDIMS], st[2][NPY_MAXDIMS];
    npy_intp ostride = isz;
    int m = 0;
    for (int d = nd - 1; d >= 0; d--) {
        if (shape[d] == 1) {
            continue;
        }
        const npy_intp os = red[d] ? 0 : ostride;
        if (!red[d]) {
            ostride *= shape[d];
        }
        if (m > 0 && st[0][m - 1] * sh[m - 1] == os && st[1][m - 1] * sh[m - 1] == strides[d]) {
            sh[m - 1] *= shape[d];
            continue;
        }
        sh[m] = shape[d];
        st[0][m] = os;
        st[1][m] = strides[d];
        m++;
    }
    if (m == 0) {
        return 1;
    }
    int single[2] = {1, 1};
    int cost = 1, outer_reduce = 0, best_dim = 0, best_cost = 1;
    npy_intp size = sh[0], best_size = sh[0];
    for (int idim = 1; idim < m; idim++) {
        if (outer_reduce || (size >= bufsize && cost > 1)) {
            break;
        }
        for (int op = 0; op < 2; op++) {
            if (single[op] == idim) {
                if (st[op][idim - 1] * sh[idim - 1] == st[op][idim]) {
                    single[op]++;
                    continue;
                }
                cost++;
            }
            if (op == 0 && (st[0][idim] == 0 || st[0][idim - 1] == 0)) {
                outer_reduce = idim;
            }
        }
        size *= sh[idim];
        double cap = (double)size;
        if (cap > (double)bufsize && cost > 1) {
            cap = (double)bufsize;
        }
        if (cost * (double)best_size <= best_cost * cap) {
            best_cost = cost;
            best_size = size;
            best_dim = idim;
        }
    }
    const int using_reduce = outer_reduce && best_dim == outer_reduce;
    if (best_dim > 1 || (best_dim == 1 && !using_reduce)) {
        return 0;
    }
    for (int op = 0; op < 2; op++) {
        int is_reduce = 0;
        if (using_reduce) {
            is_reduce = (op == 0 && outer_reduce == best_dim) || single[op] == best_dim
                        || (st[op][outer_reduce] == 0 && single[op] <= best_dim);
        }
        if (single[op] + is_reduce <= best_dim) {
            return 0;    /* buffered */
        }
    }
    return 1;
}

/*
 * max/min over several axes that are not one run (keyed_rows takes those):
 * the outermost reduced axis of length > 1 first (column mode: the whole
 * array read once, in order), then the rest of the now smaller array, each
 * stage through mf_py_reduce; a max or min keeps codes, so every output gets
 * its group's extreme code whatever the stages.  NumPy's route for the whole
 * call if a result is NaN or zero, whose code depends on the operand each of
 * its steps keeps.  (Without out=, so that nothing was written when NumPy's
 * route takes over.)
 */
static PyObject *
staged_extreme(PyObject *self, int op, PyArrayObject *a, const int *red, int keepdims)
{
    const int nd = PyArray_NDIM(a);
    int first = -1, n = 0;
    for (int d = 0; d < nd; d++) {
        if (red[d] && PyArray_DIM(a, d) > 1) {
            first = first < 0 ? d : first;
            n++;
        }
    }
    if (n < 2) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* the other reduced axes of length > 1: one, or a tuple */
    PyObject *rest = PyTuple_New(n - 1);
    if (rest == NULL) {
        return NULL;
    }
    for (int d = first + 1, k = 0; d < nd; d++) {
        if (red[d] && PyArray_DIM(a, d) > 1) {
            PyObject *ax = PyLong_FromLong(d);
            if (ax == NULL) {
                Py_DECREF(rest);
                return NULL;
            }
            PyTuple_SET_ITEM(rest, k++, ax);
        }
    }
    PyObject *ax1 = PyLong_FromLong(first);
    PyObject *s1 = ax1 == NULL ? NULL : reduce_call(self, op, (PyObject *)a, ax1, 1);
    Py_XDECREF(ax1);
    PyObject *r = s1;
    if (s1 != NULL && s1 != Py_NotImplemented) {
        r = reduce_call(self, op, s1, n == 2 ? PyTuple_GET_ITEM(rest, 0) : rest, 1);
        Py_DECREF(s1);
    }
    Py_DECREF(rest);
    if (r == NULL || r == Py_NotImplemented) {
        return r;
    }
    if (!PyArray_Check(r) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)r)) {
        Py_DECREF(r);
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *ra = (PyArrayObject *)r;
    const mf_format *f = &mf_formats[mf_dtype_index(NPY_DTYPE(PyArray_DESCR(a)))];
    const npy_intp isz = f->itemsize, cnt = PyArray_SIZE(ra);
    const char *p = PyArray_BYTES(ra);
    for (npy_intp i = 0; i < cnt; i++) {
        const uint32_t c = mf_load_code(f, p + i * isz);
        if (mf_code_isnan(f, c) || (c & ~mf_sign_bit(f)) == 0) {
            Py_DECREF(r);
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    /* the kept shape (the reduced axes dropped, or 1 with keepdims) */
    npy_intp shape[NPY_MAXDIMS];
    int rnd = mf_kept_shape(nd, PyArray_SHAPE(a), red, keepdims, shape);
    PyArray_Dims dims = {shape, rnd};
    PyObject *out = PyArray_Newshape(ra, &dims, NPY_CORDER);
    Py_DECREF(r);
    return out == NULL ? NULL : PyArray_Return((PyArrayObject *)out);   /* 0-d: the scalar */
}

/*
 * _reduce(op, a, axis, out, keepdims, where): op 0..3 = sum, prod, max,
 * min.  Returns the result, or NotImplemented.  The caller has checked that
 * dtype= and initial= were not given.
 */
PyObject *
mf_py_reduce(PyObject *self, PyObject *args)
{
    int op, keepdims;
    PyObject *a_obj, *axis, *out_obj, *where;
    if (!PyArg_ParseTuple(args, "iOOOpO:_reduce", &op, &a_obj, &axis, &out_obj, &keepdims, &where)) {
        return NULL;
    }
    if (op < 0 || op >= RED_NUM || !PyArray_CheckExact(a_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    int fid = mf_dtype_index(NPY_DTYPE(descr));
    if (fid < 0 || mf_formats[fid].kind != MF_KIND_FLOAT || !mf_has_zero(&mf_formats[fid])
            || mf_descr_swapped(descr) || !PyArray_ISALIGNED(a) || PyArray_SIZE(a) == 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) && PyArray_IS_F_CONTIGUOUS(a) && PyArray_NDIM(a) >= 2) {
        if (out_obj == Py_None && where == Py_True) {
            return reduce_fortran(self, op, a, axis, keepdims);
        }
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* other views: C-ordered ones (checked below) as they are */
    const mf_format *f = &mf_formats[fid];
    int nd = PyArray_NDIM(a);
    int red[NPY_MAXDIMS];
    int naxes;
    if (nd == 0 || mf_parse_axes(axis, nd, red, &naxes) < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const npy_intp *shape = PyArray_SHAPE(a), *strides = PyArray_STRIDES(a);
    int minmax = op == RED_MAX || op == RED_MIN;
    int16_t klim = 0;
    const int keyable = minmax && mf_arg_key_lim(&mf_formats[fid], &klim);
    /* max/min over several axes: only where the keyed path takes them
     * (below; NumPy's route for the results it cannot) */
    if (minmax && naxes != 1 && !keyable) {
        Py_RETURN_NOTIMPLEMENTED;
    }

    /* where= : True, or a bool array broadcast to a's shape */
    PyArrayObject *mask = NULL;
    if (where != Py_True) {
        if (minmax || !PyArray_Check(where) || PyArray_TYPE((PyArrayObject *)where) != NPY_BOOL
                || PyArray_NDIM((PyArrayObject *)where) > nd) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        /* a mask of a's shape in a's layout: NumPy's iterator treats it as
         * it treats a (broadcast masks change its axis merging and buffering) */
        PyArrayObject *w = (PyArrayObject *)where;
        if (PyArray_NDIM(w) != nd || !PyArray_IS_C_CONTIGUOUS(w)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        for (int d = 0; d < nd; d++) {
            if (PyArray_DIM(w, d) != shape[d]) {
                Py_RETURN_NOTIMPLEMENTED;
            }
        }
        mask = w;
    }
    npy_intp mstr[NPY_MAXDIMS];
    for (int d = 0; d < nd; d++) {
        mstr[d] = 0;
        if (mask) {
            int off = nd - PyArray_NDIM(mask);
            if (d >= off && PyArray_DIM(mask, d - off) != 1) {
                mstr[d] = PyArray_STRIDE(mask, d - off);
            }
        }
    }

    red_job J;
    memset(&J, 0, sizeof(J));
    J.op = op;
    J.f = f;
    J.isz = f->itemsize;
    J.in = PyArray_BYTES(a);
    J.mask = mask ? PyArray_BYTES(mask) : NULL;
    /* axes of length > 1, C-ordered: strides positive and decreasing (so
     * that NumPy's iterator keeps C order) */
    npy_intp last = -1;
    int lastred = -1;
    npy_intp nout = 1;
    int any_red = 0;
    for (int d = 0; d < nd; d++) {
        if (!red[d]) {
            nout *= shape[d];
        }
        if (shape[d] == 1) {
            continue;
        }
        if (strides[d] <= 0 || (last >= 0 && strides[d] >= last)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (mask && mstr[d] < 0) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        last = strides[d];
        lastred = red[d];
        if (red[d]) {
            any_red = 1;
            J.rshape[J.nr] = shape[d];
            J.ris[J.nr] = strides[d];
            J.rms[J.nr] = mstr[d];
            J.nr++;
        }
        else {
            J.kshape[J.nk] = shape[d];
            J.kis[J.nk] = strides[d];
            J.kms[J.nk] = mstr[d];
            J.nk++;
        }
    }
    if (!any_red) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* a view that is not contiguous: only where NumPy's iterator hands the
     * loops the pieces it would for a contiguous array (in_place_pieces),
     * without where= */
    if (!PyArray_IS_C_CONTIGUOUS(a)) {
        if (mask != NULL) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        int r = in_place_pieces(nd, shape, strides, red, J.isz);
        if (r <= 0) {
            if (r < 0) {
                return NULL;
            }
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    J.column = !lastred;
    J.nout = nout;
    if (J.column) {
        if (nout > SHADOW_MAX) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        /* the kept axes after the last reduced one merge into one row (a and
         * the mask are C-contiguous): NumPy's loop calls get whole rows */
        int i = J.nk - 1;
        J.K = J.kshape[i];
        J.ks = J.kis[i];
        J.kms_inner = J.kms[i];
        int ntrail = 0;
        for (int d = nd - 1; d >= 0 && (shape[d] == 1 || !red[d]); d--) {
            ntrail += shape[d] != 1;
        }
        while (ntrail > 1 && i > 0 && J.kis[i - 1] == J.K * J.ks) {
            J.K *= J.kshape[i - 1];
            i--;
            ntrail--;
        }
        J.nk = i + 1;
        J.kshape[i] = J.K;
        J.A = nout / J.K;
    }
    else {
        /* the innermost run: reduced axes merged while input and mask strides
         * allow (NumPy's coalescing) */
        int i = J.nr - 1;
        J.L = J.rshape[i];
        J.ls = J.ris[i];
        J.lms = J.rms[i];
        /* only trailing reduced axes that are adjacent in a's order merge:
         * the reduced axes after the last kept one */
        int ntrail = 1;
        {
            /* count trailing reduced axes among the length > 1 axes */
            int cnt = 0;
            for (int d = nd - 1; d >= 0; d--) {
                if (shape[d] == 1) {
                    continue;
                }
                if (!red[d]) {
                    break;
                }
                cnt++;
            }
            ntrail = cnt;
        }
        while (ntrail > 1 && i > 0 && J.ris[i - 1] == J.L * J.ls
               && (!mask || J.rms[i - 1] == J.L * J.lms)) {
            J.L *= J.rshape[i - 1];
            i--;
            ntrail--;
        }
        J.nr = i;    /* the outer reduced axes */
        /* several calls per output keep the partial in accumulate.c, which
         * holds up to 2^24 outputs */
        if (J.nr > 0 && nout > SHADOW_MAX) {
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    J.R = 1;
    for (int d = 0; d < J.nr; d++) {
        J.R *= J.rshape[d];
    }
    J.first_copied = minmax;
    if (keyable && !J.column && mask == NULL && J.nr == 0 && J.ls == J.isz
            && (uintptr_t)J.in % (uintptr_t)J.isz == 0) {
        J.keyed = 1;
        for (int d = 0; d < J.nk; d++) {
            J.keyed &= J.kis[d] % J.isz == 0;
        }
    }
    J.lim = klim;
    J.prod_rows = op == RED_PROD && !J.column && mask == NULL && J.nr == 0;
    J.multi = minmax && naxes != 1;
    if (J.multi && !J.keyed) {
        if (keyable && mask == NULL && out_obj == Py_None) {
            return staged_extreme(self, op, a, red, keepdims);
        }
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (!J.column && op == RED_SUM && mask == NULL && J.nr == 0 && J.ls == J.isz
            && (uintptr_t)J.in % (uintptr_t)J.isz == 0) {
        J.sum_rows = 1;
        for (int d = 0; d < J.nk; d++) {
            J.sum_rows &= J.kis[d] % J.isz == 0;
        }
    }
    if (J.column && op == RED_SUM && mask == NULL && J.ks == J.isz
            && (uintptr_t)J.in % (uintptr_t)J.isz == 0) {
        J.colsum = 1;
        for (int d = 0; d < J.nk; d++) {
            J.colsum &= J.kis[d] % J.isz == 0;
        }
        for (int d = 0; d < J.nr; d++) {
            J.colsum &= J.ris[d] % J.isz == 0;
        }
    }
    if (J.column && minmax && mask == NULL && J.nr == 1 && J.ks == J.isz
            && (uintptr_t)J.in % (uintptr_t)J.isz == 0 && J.ris[0] % J.isz == 0) {
        J.colmax = 1;
        for (int d = 0; d < J.nk; d++) {
            J.colmax &= J.kis[d] % J.isz == 0;
        }
    }
    if (f32_loop_of(op, &J.fn, &J.fndata) < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }

    /* the result: out=, or a new C-ordered array of the kept shape */
    npy_intp rshape_out[NPY_MAXDIMS];
    int rnd = mf_kept_shape(nd, shape, red, keepdims, rshape_out);
    PyArrayObject *res;
    if (out_obj != Py_None) {
        if (!PyArray_CheckExact(out_obj)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        PyArrayObject *o = (PyArrayObject *)out_obj;
        if (!PyArray_EquivTypes(PyArray_DESCR(o), descr) || !PyArray_IS_C_CONTIGUOUS(o)
                || !PyArray_ISALIGNED(o) || !PyArray_ISWRITEABLE(o) || PyArray_NDIM(o) != rnd) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        for (int d = 0; d < rnd; d++) {
            if (PyArray_DIM(o, d) != rshape_out[d]) {
                Py_RETURN_NOTIMPLEMENTED;
            }
        }
        /* the input's memory extent against the output's */
        char *lo = PyArray_BYTES(a), *hi = PyArray_BYTES(a) + J.isz;
        for (int d = 0; d < nd; d++) {
            hi += (shape[d] - 1) * strides[d];
        }
        char *olo = PyArray_BYTES(o), *ohi = olo + PyArray_NBYTES(o);
        if (olo < hi && lo < ohi) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (mask) {
            char *mlo = PyArray_BYTES(mask), *mhi = mlo + 1;
            for (int d = 0; d < PyArray_NDIM(mask); d++) {
                if (PyArray_STRIDE(mask, d) < 0) {
                    Py_RETURN_NOTIMPLEMENTED;
                }
                mhi += (PyArray_DIM(mask, d) - 1) * PyArray_STRIDE(mask, d);
            }
            if (olo < mhi && mlo < ohi) {
                Py_RETURN_NOTIMPLEMENTED;
            }
        }
        Py_INCREF(o);
        res = o;
    }
    else {
        Py_INCREF(descr);
        res = (PyArrayObject *)PyArray_NewFromDescr(&PyArray_Type, descr, rnd, rshape_out, NULL,
                                                    NULL, 0, NULL);
        if (res == NULL) {
            return NULL;
        }
    }
    J.out = PyArray_BYTES(res);
    J.k = mf_k;
    uint32_t pcode[KEYED_PIECES];
    J.pcode = pcode;

    int fl;
    Py_BEGIN_ALLOW_THREADS
    feclearexcept(FE_ALL_EXCEPT);
    red_run(&J);
    fl = fetestexcept(FE_ALL_EXCEPT);
    feclearexcept(FE_ALL_EXCEPT);
    Py_END_ALLOW_THREADS
    if (J.nomem) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    if (J.special) {
        /* a NaN or zero result of max/min over several axes: NumPy's route
         * (its first-element rules decide the sign) computes them all */
        Py_DECREF(res);
        Py_RETURN_NOTIMPLEMENTED;
    }
    int fpe = mf_fpe_bits(fl);
    if (fpe && PyUFunc_GiveFloatingpointErrors("reduce", fpe) < 0) {
        Py_DECREF(res);
        return NULL;
    }
    if (out_obj != Py_None) {
        return (PyObject *)res;
    }
    return PyArray_Return(res);
}
