/*
 * float32 sums in NumPy's pairwise order, for mean/var/std (patch
 * "statistics" in minifloat/_numpy_patches.py).
 *
 * NumPy computes the mean of a float16 array (and, through that patch, of
 * a minifloat float format) as the float32 sum of its values divided by the
 * count.  Reached through np.add.reduce(a, dtype=float32), that sum is
 * NumPy's float32 add loop over the iterator's cast buffers: the values are
 * decoded one buffer at a time, and the bits depend on the buffer size.
 * Here the sum is what NumPy's float32 add.reduce gives for the float32
 * values themselves, np.add.reduce(a.astype(np.float32), axis), bit for bit
 * (the tests compare the two): each output is 0.0f + pairwise(run), where
 * the run is the reduced values of that output (contiguous, C order) and
 * pairwise is NumPy's: under 8 values a sequential sum from 0; up to 128,
 * eight accumulators r[j] += x[i + j], added as ((r0 + r1) + (r2 + r3)) +
 * ((r4 + r5) + (r6 + r7)), then the rest in order; above 128, the two halves
 * split at n / 2 rounded down to a multiple of 8, each summed pairwise.
 *
 * The runs (or subtrees of one) go to the level's pairwise_f32 kernel
 * (src/kernels/stream/pairwise.h: bfloat16 widened in registers, other
 * formats decoded a window at a time); threads take whole runs, or
 * subtrees of one run (the tree is fixed by n, so the bits do not depend on
 * the thread count).  Only which NaN a sum of two NaNs returns may differ
 * from NumPy's compiled loop (it depends on the operand order its compiler
 * chose).
 *
 * Reduced over a leading block of axes instead, NumPy's loop adds each row
 * into the outputs: each output is the chain 0.0f + x0 + x1 + ... in row
 * order, the kernels' column sums (colsum_f32), threads on column blocks
 * (var's squared deviations: a row piece decoded, then the chains).  A
 * middle block of reduced axes is the same for each index of the kept axes
 * before it (NumPy's loop adds the rows of each outer block into that
 * block's outputs): threads take outer blocks, or column blocks of them.
 *
 * Covered: C-contiguous, aligned arrays of a float format in native byte
 * order, non-empty, reducing every axis, a trailing block of axes (NumPy's
 * iterator then gives its loop one run per output), a leading block or a
 * middle one, axes of length 1 ignored.  Anything else is
 * NotImplemented and the caller takes NumPy's route.
 */
#include <fenv.h>
#include <string.h>
#include "umath.h"
#include "../kernels/parallel.h"

#define PW_BLOCK 128                 /* NumPy's PW_BLOCKSIZE (stream/pairwise.h) */
#define PW_SUBTREE_MIN ((npy_intp)1 << 15)
#define PW_DEPTH_MAX 6

/* The subtrees of a run of n at depth d: with starts != NULL, their
 * starts and lengths in order; returns how many (a node of at most
 * PW_BLOCK values is a leaf at any depth). */
static npy_intp
pw_subtrees(npy_intp i, npy_intp n, int d, npy_intp *starts, npy_intp *lens, npy_intp m)
{
    if (d == 0 || n <= PW_BLOCK) {
        if (starts != NULL) {
            starts[m] = i;
            lens[m] = n;
        }
        return m + 1;
    }
    npy_intp n2 = n / 2;
    n2 -= n2 % 8;
    m = pw_subtrees(i, n2, d - 1, starts, lens, m);
    return pw_subtrees(i + n2, n - n2, d - 1, starts, lens, m);
}

/* the sum of a run of n at depth d from its subtrees' sums, consumed in order */
static float
pw_combine(npy_intp n, int d, const float *part, npy_intp *m)
{
    if (d == 0 || n <= PW_BLOCK) {
        return part[(*m)++];
    }
    npy_intp n2 = n / 2;
    n2 -= n2 % 8;
    float lo = pw_combine(n2, d - 1, part, m);
    float hi = pw_combine(n - n2, d - 1, part, m);
    return lo + hi;
}

typedef struct {
    const mf_kernels *k;
    const mf_format *f;
    const char *x;
    npy_intp rows, n;
    int depth;
    npy_intp nsub;                   /* subtrees a run */
    const npy_intp *starts, *lens;   /* of run 0 (the same offsets in every run) */
    const float *mean;               /* NULL, or each run's mean: squared deviations */
    float *part;                     /* rows * nsub subtree sums */
    /* column mode: out[j] = 0.0f + x[0][j] + x[1][j] + ..., rows runs of
     * cols values, tasks of cb columns; outer blocks of rows x cols values
     * one after another (a reduction along middle axes), each with its own
     * cols outputs (and means) */
    int column;
    npy_intp cols, cb, outer, nblocks;
    float *out;
    npy_intp nitems, per_task, ntasks, next;
    fenv_t env;
    int flags;
} pw_job;

/* column mode: columns [j0, j0 + cb) of every row, in row order: through
 * the level's column sums (each column's float32 chain acc = acc + x, as
 * NumPy's float32 add loop runs along an outer axis from add.reduce's
 * initial 0); with mean, the chain of (x - mean[j]) * (x - mean[j]) (the
 * float32 array _var subtracts and squares, then sums the same way), a row
 * piece of PW_COLS values decoded at a time */
#define PW_COLS 2048
static void
pw_columns(const pw_job *J, npy_intp t)
{
    const npy_intp isz = J->f->itemsize;
    const npy_intp ob = t / J->nblocks, j0 = t % J->nblocks * J->cb;
    const char *x = J->x + ob * J->rows * J->cols * isz;
    npy_intp n = J->cols - j0 < J->cb ? J->cols - j0 : J->cb;
    float *acc = J->out + ob * J->cols + j0;
    for (npy_intp j = 0; j < n; j++) {
        acc[j] = 0.0f;
    }
    if (J->mean != NULL) {
        float buf[PW_COLS];
        for (npy_intp c0 = 0; c0 < n; c0 += PW_COLS) {
            npy_intp w = n - c0 < PW_COLS ? n - c0 : PW_COLS;
            const float *m = J->mean + ob * J->cols + j0 + c0;
            float *a = acc + c0;
            for (npy_intp r = 0; r < J->rows; r++) {
                J->k->decode_f32(J->f, x + (r * J->cols + j0 + c0) * isz, buf, w);
                for (npy_intp j = 0; j < w; j++) {
                    float t = buf[j] - m[j];
                    t = t * t;
                    a[j] = a[j] + t;
                }
            }
        }
        return;
    }
    const char *rows[MF_COLSUM_ROWS];
    for (npy_intp r = 0; r < J->rows; r += MF_COLSUM_ROWS) {
        int nb = J->rows - r < MF_COLSUM_ROWS ? (int)(J->rows - r) : MF_COLSUM_ROWS;
        for (int i = 0; i < nb; i++) {
            rows[i] = x + ((r + i) * J->cols + j0) * isz;
        }
        J->k->colsum_f32(J->f, rows, nb, acc, n);
    }
}

static void
pw_worker(void *ctx, int w)
{
    pw_job *J = (pw_job *)ctx;
    fenv_t saved;
    mf_worker_enter(w, &J->env, &saved);
    const npy_intp isz = J->f->itemsize;
    for (;;) {
        npy_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        if (J->column) {
            pw_columns(J, t);
            continue;
        }
        npy_intp i1 = (t + 1) * J->per_task < J->nitems ? (t + 1) * J->per_task : J->nitems;
        for (npy_intp it = t * J->per_task; it < i1; it++) {
            npy_intp r = it / J->nsub, q = it % J->nsub;
            J->part[it] = J->k->pairwise_f32(J->f, J->x + (r * J->n + J->starts[q]) * isz,
                                             J->lens[q], J->mean != NULL ? J->mean[r] : 0.0f,
                                             J->mean != NULL);
        }
    }
    mf_worker_leave(w, &J->flags, &saved);
}

/* threads for `bytes` of input (the reductions' thresholds) */
static int
pw_threads(npy_intp bytes)
{
    if (bytes < MF_PAR_MIN_REDUCE_BYTES) {
        return 1;
    }
    int T = mf_get_num_threads();
    npy_intp most = bytes / MF_PAR_THREAD_BYTES;
    T = most < T ? (int)most : T;
    return T < 1 ? 1 : T;
}

static void
pw_job_init(pw_job *J, const mf_format *f, const char *x, npy_intp rows)
{
    memset(J, 0, sizeof *J);
    J->k = mf_k;
    J->f = f;
    J->x = x;
    J->rows = rows;
}

/* out[r] = 0.0f + pairwise(run r) for rows runs of n values at x (with
 * mean: of (v - mean[r])^2); -1: no memory */
static int
pw_run(const mf_format *f, const char *x, npy_intp rows, npy_intp n, const float *mean, float *out)
{
    int T = pw_threads(rows * n * f->itemsize);
    /* split runs into subtrees while there are fewer than 4 items a thread */
    int depth = 0;
    while (T > 1 && depth < PW_DEPTH_MAX && rows * ((npy_intp)1 << depth) < 4 * (npy_intp)T
           && (n >> (depth + 1)) >= PW_SUBTREE_MIN) {
        depth++;
    }
    pw_job J;
    pw_job_init(&J, f, x, rows);
    J.n = n;
    J.depth = depth;
    J.mean = mean;
    J.nsub = pw_subtrees(0, n, depth, NULL, NULL, 0);
    npy_intp *sl = malloc((size_t)J.nsub * 2 * sizeof *sl);
    float *part = depth > 0 ? malloc((size_t)(rows * J.nsub) * sizeof *part) : out;
    if (sl == NULL || part == NULL) {
        free(sl);
        if (part != out) {
            free(part);
        }
        return -1;
    }
    pw_subtrees(0, n, depth, sl, sl + J.nsub, 0);
    J.starts = sl;
    J.lens = sl + J.nsub;
    J.part = part;
    J.nitems = rows * J.nsub;
    npy_intp per = J.nitems / (4 * (npy_intp)T);
    npy_intp least = ((npy_intp)64 << 10) / (n / J.nsub * f->itemsize + 1) + 1;
    J.per_task = per < least ? least : per;
    J.ntasks = (J.nitems + J.per_task - 1) / J.per_task;
    fegetenv(&J.env);
    if (T <= 1 || mf_pool_run(pw_worker, &J, T) == 0) {
        pw_worker(&J, 0);
    }
    for (npy_intp r = 0; r < rows; r++) {
        float s;
        if (depth > 0) {
            npy_intp m = 0;
            s = pw_combine(n, depth, part + r * J.nsub, &m);
        }
        else {
            s = part[r];
        }
        out[r] = 0.0f + s;          /* add.reduce's initial value, then the loop's += */
    }
    free(sl);
    if (part != out) {
        free(part);
    }
    if (J.flags) {
        feraiseexcept(J.flags);
    }
    return 0;
}

/* out[o][j] = 0.0f + x[o][0][j] + ... + x[o][rows - 1][j] for the outer
 * blocks o < outer of rows rows of cols values at x (a reduction along
 * leading axes: outer 1; along middle axes: the kept axes before them) */
static void
pw_run_columns(const mf_format *f, const char *x, npy_intp outer, npy_intp rows, npy_intp cols,
               const float *mean, float *out)
{
    /* rows of up to 2 KiB stay whole, one stream (docs/design.md, "The
     * order column sums read rows in"); several outer blocks go to the
     * threads whole */
    const npy_intp bytes = outer * rows * cols * f->itemsize;
    int T = cols * f->itemsize > 2048 || outer > 1 ? pw_threads(bytes) : 1;
    pw_job J;
    pw_job_init(&J, f, x, rows);
    J.column = 1;
    J.mean = mean;
    J.cols = cols;
    J.outer = outer;
    J.out = out;
    /* two tasks a thread: whole outer blocks where there are enough, else
     * column blocks of whole 64-column groups, at least 128 */
    npy_intp cb = cols;
    if (T > 1 && outer < 2 * T) {
        npy_intp per = (2 * T + outer - 1) / outer;       /* blocks an outer block */
        cb = (cols + per - 1) / per;
        cb = (cb + 63) / 64 * 64;
        cb = cb < 128 ? 128 : cb;
    }
    J.cb = cb;
    J.nblocks = (cols + J.cb - 1) / J.cb;
    J.ntasks = outer * J.nblocks;
    fegetenv(&J.env);
    if (T <= 1 || mf_pool_run(pw_worker, &J, T) == 0) {
        pw_worker(&J, 0);
    }
    if (J.flags) {
        feraiseexcept(J.flags);
    }
}

/*
 * _sum_f32(a, axis, keepdims, mean=None): np.add.reduce(a.astype(np.float32),
 * axis, keepdims=keepdims) without the float32 copy, or NotImplemented.  With
 * mean (float32, C-contiguous, one value per output: _var's mean, kept
 * dimensions), the sum of np.square(a.astype(np.float32) - mean) instead.
 */
PyObject *
mf_py_sum_f32(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *a_obj, *axis, *mean_obj = Py_None;
    int keepdims;
    if (!PyArg_ParseTuple(args, "OOp|O:_sum_f32", &a_obj, &axis, &keepdims, &mean_obj)) {
        return NULL;
    }
    if (!PyArray_CheckExact(a_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    int fid = mf_dtype_index(NPY_DTYPE(descr));
    int nd = PyArray_NDIM(a);
    if (fid < 0 || mf_formats[fid].kind != MF_KIND_FLOAT || mf_descr_swapped(descr)
            || PyArray_SIZE(a) == 0 || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || nd == 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int red[NPY_MAXDIMS], naxes;
    if (mf_parse_axes(axis, nd, red, &naxes) < 0 || naxes == 0) {
        Py_RETURN_NOTIMPLEMENTED;     /* NumPy's route: its errors, axis=() */
    }
    /* runs: the reduced axes after every kept one; column mode: a leading
     * or middle block of them (outer blocks of rows of the trailing kept
     * axes) */
    const npy_intp *shape = PyArray_SHAPE(a);
    npy_intp outer, nred, inner, rows, n;
    if (mf_reduced_block(nd, shape, red, &outer, &nred, &inner) < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int column = inner > 1;
    if (column) {
        rows = nred;        /* rows of inner values */
        n = inner;
    }
    else {
        rows = outer;
        n = nred;
    }
    const float *mean = NULL;
    if (mean_obj != Py_None) {
        PyArrayObject *m = (PyArrayObject *)mean_obj;
        if (!PyArray_Check(mean_obj) || PyArray_TYPE(m) != NPY_FLOAT32 || !PyArray_ISNOTSWAPPED(m)
                || !PyArray_IS_C_CONTIGUOUS(m) || !PyArray_ISALIGNED(m)
                || PyArray_SIZE(m) != (column ? outer * n : rows)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        mean = (const float *)PyArray_DATA(m);
    }
    npy_intp oshape[NPY_MAXDIMS];
    int ond = mf_kept_shape(nd, shape, red, keepdims, oshape);
    PyArrayObject *res = (PyArrayObject *)PyArray_SimpleNew(ond, oshape, NPY_FLOAT32);
    if (res == NULL) {
        return NULL;
    }
    const mf_format *f = &mf_formats[fid];
    int rc, fl;
    Py_BEGIN_ALLOW_THREADS
    feclearexcept(FE_ALL_EXCEPT);
    if (column) {
        pw_run_columns(f, PyArray_BYTES(a), outer, rows, n, mean, (float *)PyArray_DATA(res));
        rc = 0;
    }
    else {
        rc = pw_run(f, PyArray_BYTES(a), rows, n, mean, (float *)PyArray_DATA(res));
    }
    fl = fetestexcept(FE_ALL_EXCEPT);
    feclearexcept(FE_ALL_EXCEPT);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    int fpe = ((fl & FE_DIVBYZERO) ? NPY_FPE_DIVIDEBYZERO : 0) | ((fl & FE_OVERFLOW) ? NPY_FPE_OVERFLOW : 0)
              | ((fl & FE_UNDERFLOW) ? NPY_FPE_UNDERFLOW : 0) | ((fl & FE_INVALID) ? NPY_FPE_INVALID : 0);
    if (fpe && PyUFunc_GiveFloatingpointErrors("reduce", fpe) < 0) {
        Py_DECREF(res);
        return NULL;
    }
    return PyArray_Return(res);
}
