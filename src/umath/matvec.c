/*
 * np.matvec (m,n),(n)->(m) and np.vecmat (n),(n,m)->(m) for the float
 * formats: each output is a dot product in the kernels' summation order
 * (as np.vecdot), rounded once, a NaN stored as the format's canonical NaN;
 * rows read in place on the threads when contiguous, or, for the columns
 * of a C-ordered matrix (vecmat), the columns side by side in the lanes of
 * the kernels' dot_cols (each output its own dot: the same bits on any
 * number of threads).
 */
#include <fenv.h>
#include "umath.h"
#include "../kernels/scalar_ops.h"
#include "../kernels/parallel.h"

/* gather n codes at p (stride s) into a contiguous buffer */
static void
gather(const mf_format *f, const char *p, npy_intp s, npy_intp n, char *dst)
{
    mf_move_codes(dst, f->itemsize, p, s, n, f->itemsize);
}

/* a dot's result rounded once; NaN as the format's canonical NaN (as
 * np.vecdot and matmul store it) */
static inline void
store_dot(const mf_format *f, char *out, double d, int *ovf)
{
    mf_store_code(f, out, isnan(d) ? mf_nan_code(f, 0) : mf_encode_f64_ovf(f, d, ovf));
}

/* rows of a matrix read in place, shared by the threads (below) */
typedef struct {
    const mf_format *f;
    const char *a, *v;
    npy_intp sj, n, so, m;
    char *out;
    npy_intp next;
    int ovf, flags;         /* overflow of the rounding; FP flags the workers raised */
} dots_job;

#define DOTS_ROWS 64        /* rows of a task */

static void
dots_worker(void *ctx, int w)
{
    dots_job *J = (dots_job *)ctx;
    int ovf = 0;
    if (w != 0) {
        feclearexcept(FE_ALL_EXCEPT);
    }
    for (;;) {
        npy_intp j0 = __atomic_fetch_add(&J->next, DOTS_ROWS, __ATOMIC_RELAXED);
        if (j0 >= J->m) {
            break;
        }
        npy_intp j1 = J->m - j0 < DOTS_ROWS ? J->m : j0 + DOTS_ROWS;
        for (npy_intp j = j0; j < j1; j++) {
            double d = mf_k->dot(J->f, J->a + j * J->sj, J->v, J->n);
            store_dot(J->f, J->out + j * J->so, d, &ovf);
        }
    }
    if (ovf) {
        __atomic_fetch_or(&J->ovf, 1, __ATOMIC_RELAXED);
    }
    if (w != 0) {           /* the caller raises them again (np.errstate sees them) */
        int fl = fetestexcept(FE_ALL_EXCEPT);
        if (fl) {
            __atomic_fetch_or(&J->flags, fl, __ATOMIC_RELAXED);
        }
    }
}

/* columns side by side (np.vecmat of a C-ordered matrix): the kernels'
 * dot_cols on panels of up to MF_DOT_COLS columns, shared by the threads */
typedef struct {
    const mf_format *f;
    const float *v;
    float *lanes;           /* each thread's scratch for dot_cols */
    const char *a;
    npy_intp sk, n, so, m;
    char *out;
    npy_intp cols, next;    /* cols <= MF_DOT_COLS a task */
    int ovf, flags;
} cols_job;

static void
cols_worker(void *ctx, int w)
{
    cols_job *J = (cols_job *)ctx;
    int ovf = 0;
    double d[MF_DOT_COLS];
    float *lanes = J->lanes + (size_t)w * MF_DOT_SCRATCH;
    if (w != 0) {
        feclearexcept(FE_ALL_EXCEPT);
    }
    for (;;) {
        npy_intp j0 = __atomic_fetch_add(&J->next, J->cols, __ATOMIC_RELAXED);
        if (j0 >= J->m) {
            break;
        }
        npy_intp cnt = J->m - j0 < J->cols ? J->m - j0 : J->cols;
        mf_k->dot_cols(J->f, J->v, J->a + j0 * J->f->itemsize, J->sk, J->n, cnt, d, lanes);
        for (npy_intp j = 0; j < cnt; j++) {
            store_dot(J->f, J->out + (j0 + j) * J->so, d[j], &ovf);
        }
    }
    if (ovf) {
        __atomic_fetch_or(&J->ovf, 1, __ATOMIC_RELAXED);
    }
    if (w != 0) {
        int fl = fetestexcept(FE_ALL_EXCEPT);
        if (fl) {
            __atomic_fetch_or(&J->flags, fl, __ATOMIC_RELAXED);
        }
    }
}

/* core: out[j] = dot(rows of a along `n` with v), for j < m
 *   a: element (j, k) at a + j*sj + k*sk;  v: element k at v + k*sv */
static int
dots(const mf_format *f, const char *a, npy_intp sj, npy_intp sk, const char *v, npy_intp sv,
     char *out, npy_intp so, npy_intp m, npy_intp n, char *bufa, char *bufv, float *vf)
{
    int ovf = 0;
    const uintptr_t isz = (uintptr_t)f->itemsize;
    /* operands read in place when contiguous and aligned (a gather is a
     * call per element: 3 ns a value on a 4096 x 4096 matrix) */
    const char *vv = v;
    if (sv != f->itemsize || (uintptr_t)v % isz) {
        gather(f, v, sv, n, bufv);
        vv = bufv;
    }
    const int a_direct = sk == f->itemsize && (uintptr_t)a % isz == 0 && sj % f->itemsize == 0;
    int T = mf_get_num_threads();
    /* the outputs' columns side by side in the kernel's lanes (each still
     * its own dot: the same bits on any number of threads) */
    if (!a_direct && sj == f->itemsize && (uintptr_t)a % isz == 0 && sk % f->itemsize == 0
            && m >= 32) {
        if (T <= 1 || (double)m * (double)n < (double)(1 << 20) || m < 128) {
            T = 1;
        }
        /* panels as wide as one a thread allows (long pieces of each row),
         * a multiple of 64 columns */
        npy_intp cols = (m + T - 1) / T;
        cols = (cols + 63) / 64 * 64;
        cols = cols < MF_DOT_COLS ? cols : MF_DOT_COLS;
        float *lanes = PyMem_RawMalloc(sizeof(float) * MF_DOT_SCRATCH * (size_t)T);
        if (lanes != NULL) {
            mf_k->decode_f32(f, vv, vf, n);
            cols_job J = {f, vf, lanes, a, sk, n, so, m, out, cols, 0, 0, 0};
            if (T <= 1 || mf_pool_run(cols_worker, &J, T) <= 0) {
                cols_worker(&J, 0);
            }
            PyMem_RawFree(lanes);
            if (J.flags) {
                feraiseexcept(J.flags);
            }
            return J.ovf;
        }
    }
    /* rows in place on the threads when there are at least 2^20 values (each
     * output is its own dot: the same bits on any number of threads) */
    if (a_direct && T > 1 && (double)m * (double)n >= (double)(1 << 20) && m >= 2 * DOTS_ROWS) {
        dots_job J = {f, a, vv, sj, n, so, m, out, 0, 0, 0};
        if (mf_pool_run(dots_worker, &J, T) <= 0) {
            dots_worker(&J, 0);
        }
        if (J.flags) {
            feraiseexcept(J.flags);
        }
        return J.ovf;
    }
    for (npy_intp j = 0; j < m; j++) {
        const char *row = a + j * sj;
        if (!a_direct) {
            gather(f, row, sk, n, bufa);
            row = bufa;
        }
        double d = mf_k->dot(f, row, vv, n);
        store_dot(f, out + j * so, d, &ovf);
    }
    return ovf;
}

/* N products of (m x n) matrices with n-vectors; the matrix's row j at
 * a + o*sa + j*sj, element k of it at + k*sk */
static int
run(const mf_format *f, npy_intp N, npy_intp m, npy_intp n,
    const char *a, npy_intp sa, npy_intp sj, npy_intp sk,
    const char *v, npy_intp sv_outer, npy_intp sv, char *out, npy_intp so_outer, npy_intp so)
{
    char *bufa = PyMem_RawMalloc((size_t)(n * f->itemsize) + 1);
    char *bufv = PyMem_RawMalloc((size_t)(n * f->itemsize) + 1);
    float *vf = PyMem_RawMalloc((size_t)n * sizeof(float) + 1);
    if (bufa == NULL || bufv == NULL || vf == NULL) {
        PyMem_RawFree(bufa);
        PyMem_RawFree(bufv);
        PyMem_RawFree(vf);
        return -1;
    }
    int ovf = 0;
    for (npy_intp o = 0; o < N; o++) {
        ovf |= dots(f, a + o * sa, sj, sk, v + o * sv_outer, sv, out + o * so_outer, so, m, n,
                    bufa, bufv, vf);
    }
    PyMem_RawFree(bufa);
    PyMem_RawFree(bufv);
    PyMem_RawFree(vf);
    if (ovf) {
        mf_raise_overflow();
    }
    return 0;
}

/* matvec (m,n),(n)->(m): strides outer a, v, out; then a_m, a_n, v_n, out_m */
static int
matvec_loop(PyArrayMethod_Context *context, char *const data[],
            npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *NPY_UNUSED(aux))
{
    return run(mf_descr_format(context->descriptors[0]), dimensions[0], dimensions[1],
               dimensions[2], data[0], strides[0], strides[3], strides[4],
               data[1], strides[1], strides[5], data[2], strides[2], strides[6]);
}

/* vecmat (n),(n,m)->(m): strides outer v, b, out; then v_n, b_n, b_m, out_m;
 * output j is column j of b with v */
static int
vecmat_loop(PyArrayMethod_Context *context, char *const data[],
            npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *NPY_UNUSED(aux))
{
    return run(mf_descr_format(context->descriptors[0]), dimensions[0], dimensions[2],
               dimensions[1], data[1], strides[1], strides[5], strides[4],
               data[0], strides[0], strides[3], data[2], strides[2], strides[6]);
}

int
mf_register_matvec(PyObject *umath)
{
    static const char *names[2] = {"matvec", "vecmat"};
    PyArrayMethod_StridedLoop *loops[2] = {matvec_loop, vecmat_loop};
    for (int u = 0; u < 2; u++) {
        PyObject *ufunc = PyObject_GetAttrString(umath, names[u]);
        if (ufunc == NULL) {
            PyErr_Clear();          /* NumPy < 2.2 has neither */
            return 0;
        }
        for (int fid = 0; fid < MF_NUM_PUBLIC_FORMATS; fid++) {
            if (mf_formats[fid].kind != MF_KIND_FLOAT) {
                continue;
            }
            PyArray_DTypeMeta *dtypes[3] = {&mf_dtypes[fid], &mf_dtypes[fid], &mf_dtypes[fid]};
            PyType_Slot slots[] = {{NPY_METH_strided_loop, (void *)loops[u]}, {0, NULL}};
            PyArrayMethod_Spec spec = {
                .name = "minifloat_matvec", .nin = 2, .nout = 1,
                .casting = NPY_NO_CASTING, .flags = 0, .dtypes = dtypes, .slots = slots,
            };
            if (PyUFunc_AddLoopFromSpec(ufunc, &spec) < 0) {
                Py_DECREF(ufunc);
                return -1;
            }
        }
        Py_DECREF(ufunc);
    }
    return 0;
}
