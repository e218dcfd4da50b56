/*
 * any/all of a minifloat array along any block of axes in one call
 * (np.any, np.all and the ndarray methods, through the patch
 * "fast_reductions" in minifloat/_numpy_patches.py).
 *
 * NumPy's route is logical_or/logical_and.reduce over the cast to bool: the
 * iterator casts 8192 values at a time into a buffer (casts.c's truth
 * tables) and the bool loop folds them, on one thread.  A value is True
 * when it is not zero: NaN is True, both zeros are False.  Here that truth
 * is (code & mask) != 0 on the codes themselves, with the mask made at
 * import and checked against the decode for every code (casts.c:
 * mf_truth8_mask, mf_truth16_mask); a format without one (e8m0, every code
 * of which is True, has its own case) stays on NumPy's route.  The answer
 * is a bool per output, so there is no order to keep: a run stops at its
 * first True (any) or False (all), and threads take runs, pieces of a
 * long run, or blocks of columns.  Plain C in GCC/clang vector extensions
 * (16-byte registers: SSE2 or NEON), written once for every level.
 */
#include <string.h>
#include "umath.h"
#include "../kernels/parallel.h"

typedef uint8_t tr_b16 __attribute__((vector_size(16)));
typedef uint16_t tr_h8 __attribute__((vector_size(16)));

#define TR_VEC 16                 /* bytes a vector */
#define TR_STEP 64                /* bytes a step of a run: 4 vectors */
#define TR_COLS 16384             /* bytes of a column block (its flags: a quarter of L1) */
#define TR_PIECE ((npy_intp)1 << 20)    /* bytes of a piece of a long run */

typedef struct {
    const char *in;
    char *out;                    /* piece k's result for output i at out[k * nout + i] */
    int isz, want_all;
    uint16_t mask;                /* the format's truth mask, in its width */
    npy_intp outer, nred, inner;  /* (outer, nred, inner) codes, nred reduced */
    npy_intp nout;                /* outer * inner */
    npy_intp pieces;              /* pieces of each output's run (rows in column mode) */
    npy_intp ncb;                 /* column mode: column blocks an outer block */
} truth_job;

static inline tr_b16
tr_load(const char *p)
{
    tr_b16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* a vector of the mask, in the codes' width: (code & mask) for every code */
static inline tr_b16
tr_mask_vec(const truth_job *J)
{
    if (J->isz == 1) {
        return (tr_b16){0} + (uint8_t)J->mask;
    }
    return (tr_b16)((tr_h8){0} + J->mask);
}

static inline int
tr_nonzero(tr_b16 v)
{
    uint64_t q[2];
    memcpy(q, &v, sizeof q);
    return (q[0] | q[1]) != 0;
}

/* the codes of a masked vector that are False (all their bits clear): all
 * bits set there */
static inline tr_b16
tr_false(const truth_job *J, tr_b16 v)
{
    if (J->isz == 1) {
        return (tr_b16)(v == 0);
    }
    return (tr_b16)((tr_h8)v == 0);
}

static inline int
tr_code_true(const truth_job *J, const char *p)
{
    uint16_t c;
    if (J->isz == 1) {
        c = *(const uint8_t *)p;
    }
    else {
        memcpy(&c, p, sizeof c);
    }
    return (c & J->mask) != 0;
}

/* any: 1 at the first True code of n bytes at p; all: 0 at the first False */
static int
tr_run(const truth_job *J, const char *p, npy_intp bytes)
{
    const tr_b16 m = tr_mask_vec(J);
    npy_intp i = 0;
    if (!J->want_all) {
        for (; i + TR_STEP <= bytes; i += TR_STEP) {
            if (tr_nonzero((tr_load(p + i) | tr_load(p + i + 16) | tr_load(p + i + 32)
                            | tr_load(p + i + 48)) & m)) {
                return 1;
            }
        }
        for (; i < bytes; i += J->isz) {
            if (tr_code_true(J, p + i)) {
                return 1;
            }
        }
        return 0;
    }
    for (; i + TR_STEP <= bytes; i += TR_STEP) {
        if (tr_nonzero(tr_false(J, tr_load(p + i) & m) | tr_false(J, tr_load(p + i + 16) & m)
                       | tr_false(J, tr_load(p + i + 32) & m)
                       | tr_false(J, tr_load(p + i + 48) & m))) {
            return 0;
        }
    }
    for (; i < bytes; i += J->isz) {
        if (!tr_code_true(J, p + i)) {
            return 0;
        }
    }
    return 1;
}

/* [*r0, *r1): piece k of n things cut in pieces of a multiple of `step` */
static inline void
tr_piece(const truth_job *J, npy_intp k, npy_intp n, npy_intp step, npy_intp *r0, npy_intp *r1)
{
    npy_intp per = ((n + J->pieces - 1) / J->pieces + step - 1) / step * step;
    *r0 = k * per < n ? k * per : n;
    *r1 = *r0 + per < n ? *r0 + per : n;
}

/* row mode: task t is piece t % pieces of run t / pieces */
static void
tr_rows(void *ctx, mf_intp t0, mf_intp len)
{
    const truth_job *J = (const truth_job *)ctx;
    const npy_intp run = J->nred * J->isz;
    if (run < TR_STEP) {
        /* short runs (one piece each): every code, no vectors */
        const char *p = J->in + t0 * run;
        for (npy_intp o = t0; o < t0 + len; o++) {
            int any_true = 0, any_false = 0;
            for (npy_intp i = 0; i < J->nred; i++, p += J->isz) {
                int tv = tr_code_true(J, p);
                any_true |= tv;
                any_false |= !tv;
            }
            J->out[o] = (char)(J->want_all ? !any_false : any_true);
        }
        return;
    }
    for (npy_intp t = t0; t < t0 + len; t++) {
        npy_intp o = t / J->pieces, k = t % J->pieces, start, end;
        tr_piece(J, k, run, TR_STEP, &start, &end);
        J->out[k * J->nout + o] = (char)(start < end ? tr_run(J, J->in + o * run + start,
                                                              end - start)
                                                     : J->want_all);
    }
}

/* column mode: task t is the rows of piece t % pieces of column block
 * (t / pieces) % ncb of outer block t / pieces / ncb; acc ORs each column's
 * masked codes (any) or its codes' falseness (all) */
static void
tr_columns(void *ctx, mf_intp t0, mf_intp len)
{
    const truth_job *J = (const truth_job *)ctx;
    const tr_b16 m = tr_mask_vec(J);
    const npy_intp row = J->inner * J->isz;
    tr_b16 acc[TR_COLS / TR_VEC];
    for (npy_intp t = t0; t < t0 + len; t++) {
        npy_intp k = t % J->pieces, a = t / J->pieces / J->ncb;
        npy_intp b0 = (t / J->pieces % J->ncb) * TR_COLS, r0, r1;
        tr_piece(J, k, J->nred, 1, &r0, &r1);
        npy_intp bytes = row - b0 < TR_COLS ? row - b0 : TR_COLS;
        npy_intp nv = bytes / TR_VEC;
        const char *base = J->in + (a * J->nred + r0) * row + b0;
        char *out = J->out + k * J->nout + (a * row + b0) / J->isz;
        for (npy_intp v = 0; v < nv; v++) {
            acc[v] = (tr_b16){0};
        }
        const char *p = base;
        for (npy_intp r = r0; r < r1; r++, p += row) {
            if (!J->want_all) {
                for (npy_intp v = 0; v < nv; v++) {
                    acc[v] |= tr_load(p + v * TR_VEC) & m;
                }
            }
            else {
                for (npy_intp v = 0; v < nv; v++) {
                    acc[v] |= tr_false(J, tr_load(p + v * TR_VEC) & m);
                }
            }
        }
        /* a vector's codes: any, True when a byte of the code is set; all,
         * True when none of its bytes saw a False */
        for (npy_intp j = 0; j < nv * TR_VEC; j += J->isz) {
            const uint8_t *q = (const uint8_t *)acc + j;
            int set = J->isz == 1 ? q[0] != 0 : (q[0] | q[1]) != 0;
            out[j / J->isz] = (char)(J->want_all ? !set : set);
        }
        /* the last columns of the block, fewer than a vector: row by row */
        const npy_intp nt = (bytes - nv * TR_VEC) / J->isz;
        if (nt > 0) {
            uint16_t tacc[TR_VEC] = {0};
            const char *c = base + nv * TR_VEC;
            for (npy_intp r = r0; r < r1; r++, c += row) {
                for (npy_intp j = 0; j < nt; j++) {
                    int tv = tr_code_true(J, c + j * J->isz);
                    tacc[j] |= (uint16_t)(J->want_all ? !tv : tv);
                }
            }
            for (npy_intp j = 0; j < nt; j++) {
                out[nv * TR_VEC / J->isz + j] = (char)(J->want_all ? !tacc[j] : tacc[j]);
            }
        }
    }
}

/* the truth mask of an array of format f (casts.c), 0x100 when every code
 * is True, -1 when there is none (then NumPy's route) */
static int
truth_mask_of(const mf_format *f, PyArray_Descr *descr)
{
    const int fid = (int)(f - mf_formats);
    if (f->itemsize == 1) {
        return mf_truth8_mask[fid];
    }
    if (f->itemsize == 2 && !mf_descr_swapped(descr) && mf_truth16_mask[fid] != 0) {
        return mf_truth16_mask[fid];
    }
    return -1;
}

/*
 * _any_all(want_all, a, axis, keepdims): a.all(axis) or a.any(axis) as a
 * bool array (np.bool_ when nothing is kept), or NotImplemented (NumPy's
 * route) for what this does not take: not an exact ndarray of a minifloat
 * format, not C-contiguous, empty, 0-d, byte-swapped, axes that are not
 * one block (or not ints: NumPy's errors), axis=().
 */
PyObject *
mf_py_any_all(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *a_obj, *axis;
    int want_all, keepdims;
    if (!PyArg_ParseTuple(args, "pOOp:_any_all", &want_all, &a_obj, &axis, &keepdims)) {
        return NULL;
    }
    if (!PyArray_CheckExact(a_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    int fid = mf_dtype_index(NPY_DTYPE(descr));
    int nd = PyArray_NDIM(a);
    if (fid < 0 || fid >= MF_NUM_PUBLIC_FORMATS || nd == 0 || PyArray_SIZE(a) == 0
            || !PyArray_IS_C_CONTIGUOUS(a)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const mf_format *f = &mf_formats[fid];
    const int mask = truth_mask_of(f, descr);
    if (mask < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int red[NPY_MAXDIMS], naxes;
    if (mf_parse_axes(axis, nd, red, &naxes) < 0 || naxes == 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const npy_intp *shape = PyArray_SHAPE(a);
    truth_job J = {.in = PyArray_BYTES(a), .isz = (int)f->itemsize, .want_all = want_all};
    if (mf_reduced_block(nd, shape, red, &J.outer, &J.nred, &J.inner) < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    npy_intp oshape[NPY_MAXDIMS];
    int ond = mf_kept_shape(nd, shape, red, keepdims, oshape);
    PyArrayObject *res = (PyArrayObject *)PyArray_SimpleNew(ond, oshape, NPY_BOOL);
    if (res == NULL) {
        return NULL;
    }
    char *out = PyArray_BYTES(res);
    const npy_intp nout = J.outer * J.inner;
    if (mask == 0x100) {
        /* every code True: any is True (no run is empty), all is True */
        memset(out, 1, (size_t)nout);
        return PyArray_Return(res);
    }
    J.mask = (uint16_t)mask;
    J.nout = nout;
    /* tasks: runs or column blocks, each cut in pieces where there are
     * fewer than four a thread (pieces of a run: at least TR_PIECE bytes) */
    const npy_intp bytes = PyArray_NBYTES(a);
    const int T = mf_get_num_threads();
    npy_intp base, most;
    if (J.inner > 1) {
        J.ncb = (J.inner * J.isz + TR_COLS - 1) / TR_COLS;
        base = J.outer * J.ncb;
        most = J.nred;
    }
    else {
        base = J.outer;
        most = (J.nred * J.isz + TR_PIECE - 1) / TR_PIECE;
    }
    J.pieces = 1;
    if (T > 1 && bytes >= MF_PAR_MIN_REDUCE_BYTES && base < 4 * (npy_intp)T) {
        J.pieces = (4 * (npy_intp)T + base - 1) / base;
        J.pieces = J.pieces < most ? J.pieces : most;
    }
    char *partials = J.pieces > 1 ? (char *)malloc((size_t)(J.pieces * nout)) : NULL;
    if (partials == NULL) {
        J.pieces = 1;
    }
    J.out = J.pieces > 1 ? partials : out;
    const npy_intp ntasks = base * J.pieces;
    Py_BEGIN_ALLOW_THREADS
    mf_par_range(J.inner > 1 ? tr_columns : tr_rows, &J, ntasks, 1, bytes / ntasks);
    if (partials != NULL) {
        for (npy_intp i = 0; i < nout; i++) {
            int r = J.want_all;
            for (npy_intp k = 0; k < J.pieces; k++) {
                r = J.want_all ? r & partials[k * nout + i] : r | partials[k * nout + i];
            }
            out[i] = (char)r;
        }
        free(partials);
    }
    Py_END_ALLOW_THREADS
    return PyArray_Return(res);
}

/* ------------------------------------------------------- count_nonzero */

typedef struct {
    truth_job J;
    npy_intp n;                   /* codes */
    npy_intp *counts;             /* a task's True codes */
} count_job;

#define TR_COUNT_TASK ((npy_intp)1 << 20)    /* bytes a task */

/* the False codes of `bytes` bytes at p (a multiple of TR_VEC): each lane
 * of the codes' width counts up by the -1 of tr_false, 255 (1-byte) or
 * 4096 (2-byte) steps at most before the lanes are added up */
static npy_intp
tr_count_false(const truth_job *J, const char *p, npy_intp bytes)
{
    const tr_b16 m = tr_mask_vec(J);
    const npy_intp per = J->isz == 1 ? 255 : 4096;
    npy_intp total = 0;
    for (npy_intp i = 0; i < bytes;) {
        npy_intp end = i + per * TR_VEC < bytes ? i + per * TR_VEC : bytes;
        if (J->isz == 1) {
            tr_b16 acc = {0};
            for (; i < end; i += TR_VEC) {
                acc -= tr_false(J, tr_load(p + i) & m);
            }
            for (int k = 0; k < TR_VEC; k++) {
                total += acc[k];
            }
        }
        else {
            tr_h8 acc = {0};
            for (; i < end; i += TR_VEC) {
                acc -= (tr_h8)tr_false(J, tr_load(p + i) & m);
            }
            for (int k = 0; k < TR_VEC / 2; k++) {
                total += acc[k];
            }
        }
    }
    return total;
}

static void
tr_count(void *ctx, mf_intp t0, mf_intp len)
{
    count_job *C = (count_job *)ctx;
    const truth_job *J = &C->J;
    const npy_intp nbytes = C->n * J->isz;
    for (npy_intp t = t0; t < t0 + len; t++) {
        npy_intp start = t * TR_COUNT_TASK;
        npy_intp end = start + TR_COUNT_TASK < nbytes ? start + TR_COUNT_TASK : nbytes;
        npy_intp whole = start + (end - start) / TR_VEC * TR_VEC;
        npy_intp falses = tr_count_false(J, J->in + start, whole - start);
        for (npy_intp i = whole; i < end; i += J->isz) {
            falses += !tr_code_true(J, J->in + i);
        }
        C->counts[t] = (end - start) / J->isz - falses;
    }
}

/*
 * _count_nonzero(a): np.count_nonzero(a) (no axis) of a contiguous (C or
 * Fortran order) minifloat array as an int, or NotImplemented (NumPy's
 * route, which calls the format's nonzero function once a value).
 */
PyObject *
mf_py_count_nonzero(PyObject *NPY_UNUSED(self), PyObject *a_obj)
{
    if (!PyArray_CheckExact(a_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    int fid = mf_dtype_index(NPY_DTYPE(descr));
    if (fid < 0 || fid >= MF_NUM_PUBLIC_FORMATS || !PyArray_ISONESEGMENT(a)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const mf_format *f = &mf_formats[fid];
    const int mask = truth_mask_of(f, descr);
    if (mask < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const npy_intp n = PyArray_SIZE(a);
    if (mask == 0x100 || n == 0) {
        return PyLong_FromSsize_t(mask == 0x100 ? n : 0);
    }
    count_job C = {.J = {.in = PyArray_BYTES(a), .isz = (int)f->itemsize, .mask = (uint16_t)mask},
                   .n = n};
    const npy_intp ntasks = (n * C.J.isz + TR_COUNT_TASK - 1) / TR_COUNT_TASK;
    npy_intp one;
    C.counts = ntasks > 1 ? (npy_intp *)malloc(sizeof(npy_intp) * (size_t)ntasks) : &one;
    if (C.counts == NULL) {
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    mf_par_range(tr_count, &C, ntasks, 1, TR_COUNT_TASK);
    Py_END_ALLOW_THREADS
    npy_intp total = 0;
    for (npy_intp t = 0; t < ntasks; t++) {
        total += C.counts[t];
    }
    if (C.counts != &one) {
        free(C.counts);
    }
    return PyLong_FromSsize_t(total);
}
