/*
 * _core._stats: inspect's statistics of one chunk, accumulated into a
 * float64 array (minifloat/io/checkpoint.py's Stats holds it).  The work is the
 * kernel layer's (kernels/stats.c): decode to float32 blocks, the block
 * kernel of the active level, Chan's merge.
 */
#include "../core/minifloat.h"
#include "../kernels/stats/stats.h"

enum { A_N, A_NAN, A_INF, A_FINITE, A_MIN, A_MAX, A_MEAN, A_M2, A_OVER, A_ZY, A_ZX, A_GT,
       A_ERR2, A_REF2, A_LEN };

const mf_format *
mf_float_format_of(PyArray_Descr *d)
{
    int id = mf_dtype_index(NPY_DTYPE(d));
    if (id >= 0) {
        return mf_formats[id].kind == MF_KIND_FLOAT ? &mf_formats[id] : NULL;
    }
    if (d->type_num == NPY_HALF) {
        return &mf_formats[MF_IEEE_FLOAT16];
    }
    return NULL;
}

static int
contiguous_1d(PyArrayObject *a, const char *what)
{
    if (PyArray_NDIM(a) != 1 || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISNBO(PyArray_DESCR(a)->byteorder)
            || !PyArray_ISALIGNED(a)) {
        PyErr_Format(PyExc_ValueError, "_stats: %s must be a 1-d contiguous aligned native array",
                     what);
        return -1;
    }
    return 0;
}

static void
acc_load(mf_stats_acc *a, const double *v)
{
    *a = (mf_stats_acc){
        .n = (int64_t)v[A_N], .nan = (int64_t)v[A_NAN], .inf = (int64_t)v[A_INF],
        .finite = (int64_t)v[A_FINITE], .over = (int64_t)v[A_OVER], .zeros_y = (int64_t)v[A_ZY],
        .zeros_x = (int64_t)v[A_ZX], .gt = (int64_t)v[A_GT], .min = v[A_MIN], .max = v[A_MAX],
        .mean = v[A_MEAN], .m2 = v[A_M2], .err2 = v[A_ERR2], .ref2 = v[A_REF2]};
}

static void
acc_store(double *v, const mf_stats_acc *a)
{
    v[A_N] = (double)a->n; v[A_NAN] = (double)a->nan; v[A_INF] = (double)a->inf;
    v[A_FINITE] = (double)a->finite; v[A_OVER] = (double)a->over; v[A_ZY] = (double)a->zeros_y;
    v[A_ZX] = (double)a->zeros_x; v[A_GT] = (double)a->gt; v[A_MIN] = a->min; v[A_MAX] = a->max;
    v[A_MEAN] = a->mean; v[A_M2] = a->m2; v[A_ERR2] = a->err2; v[A_REF2] = a->ref2;
}

/* _stats with a block-scaled target: quantized, dequantized and compared
 * in one pass (kernels/stats/common.c, mf_stats_run_blocks) */
static PyObject *
stats_blocks(PyArrayObject *acc, PyArrayObject *x, PyObject *target, double rel,
             PyObject *yobj, PyObject *outobj)
{
    int kind, elem_id, block, mode;
    double s_enc, s_dec;
    long long k, chunk;
    if (!PyArg_ParseTuple(target, "iiiiddLL;_stats: a block target is (kind, elem_id, block, "
                          "mode, s_enc, s_dec, k, chunk)", &kind, &elem_id, &block, &mode,
                          &s_enc, &s_dec, &k, &chunk)) {
        return NULL;
    }
    mf_block_params p;
    if (mf_block_params_from(&p, kind, elem_id, block, mode, s_enc) < 0) {
        return NULL;
    }
    npy_intp n = PyArray_SIZE(x);
    const mf_format *src = NULL;
    if (PyArray_TYPE(x) != NPY_FLOAT) {
        src = mf_float_format_of(PyArray_DESCR(x));
        if (src == NULL) {
            PyErr_SetString(PyExc_TypeError, "_stats: x of a block target must be float16, "
                            "float32 or a minifloat float format");
            return NULL;
        }
    }
    if (yobj != Py_None || outobj != Py_None || k <= 0 || n % k) {
        PyErr_SetString(PyExc_ValueError, "_stats: a block target takes whole rows of k "
                        "values, no y and no out");
        return NULL;
    }
    double *v = PyArray_DATA(acc);
    mf_stats_acc a;
    acc_load(&a, v);
    const void *data = PyArray_DATA(x);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mf_stats_run_blocks(&a, src, data, n / (npy_intp)k, (mf_intp)k, (mf_intp)chunk, &p,
                             (float)s_dec, rel);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        return PyErr_NoMemory();
    }
    acc_store(v, &a);
    Py_RETURN_NONE;
}

/* _stats(acc, x, target, rel, y=None, out=None, moments=True, fd=-1, data=None)
 * -> the bytes of `data` written to file descriptor fd (while the threads
 * start on x; at the first error or signal it stops: the caller writes the
 * rest and reports the error)
 * target: None, a float format's name, or a block-scaled target as the
 * tuple (kind, elem_id, block, mode, s_enc, s_dec, k, chunk) (blocks.h;
 * x: whole rows of k values, float32 or a float format; the windows those of
 * checkpoint.py's _block_chunks(..., chunk), chunk <= 0: x is one chunk) */
PyObject *
mf_py_stats(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *acc, *x;
    PyObject *target, *yobj = Py_None, *outobj = Py_None, *wobj = Py_None;
    double rel;
    int moments = 1, wfd = -1;
    if (!PyArg_ParseTuple(args, "O!O!Od|OOpiO", &PyArray_Type, &acc, &PyArray_Type, &x, &target,
                          &rel, &yobj, &outobj, &moments, &wfd, &wobj)) {
        return NULL;
    }
    if (wobj != Py_None && (wfd < 0 || PyTuple_Check(target))) {
        PyErr_SetString(PyExc_ValueError, "_stats: data to write needs fd >= 0 and a format target");
        return NULL;
    }
    if (PyArray_TYPE(acc) != NPY_DOUBLE || PyArray_SIZE(acc) != A_LEN || contiguous_1d(acc, "acc") < 0
            || !PyArray_ISWRITEABLE(acc)) {
        PyErr_Format(PyExc_ValueError, "_stats: acc must be a writable float64 array of %d values",
                     (int)A_LEN);
        return NULL;
    }
    if (contiguous_1d(x, "x") < 0) {
        return NULL;
    }
    if (PyTuple_Check(target)) {
        return stats_blocks(acc, x, target, rel, yobj, outobj);
    }
    const mf_format *tgt = NULL;
    if (target != Py_None) {
        const char *s = PyUnicode_AsUTF8(target);
        if (s == NULL) {
            return NULL;
        }
        for (int i = 0; i < MF_NUM_FORMATS; i++) {
            if (strcmp(mf_formats[i].name, s) == 0 && mf_formats[i].kind == MF_KIND_FLOAT) {
                tgt = &mf_formats[i];
            }
        }
        if (tgt == NULL) {
            PyErr_Format(PyExc_ValueError, "_stats: unknown float format %R", target);
            return NULL;
        }
    }
    npy_intp n = PyArray_SIZE(x);
    int xt = PyArray_TYPE(x);
    const mf_format *src = NULL;
    if (xt != NPY_FLOAT && xt != NPY_DOUBLE) {
        src = mf_float_format_of(PyArray_DESCR(x));
        if (src == NULL) {
            PyErr_SetString(PyExc_TypeError,
                            "_stats: x must be float16, float32, float64 or a minifloat float format");
            return NULL;
        }
    }
    const double *y = NULL;
    const float *y32 = NULL;
    if (xt == NPY_FLOAT && tgt != NULL && yobj != Py_None) {
        /* float32 x with its round trip given (block-scaled targets) */
        PyArrayObject *ya = (PyArrayObject *)yobj;
        if (!PyArray_Check(yobj) || PyArray_TYPE(ya) != NPY_FLOAT || PyArray_SIZE(ya) != n
                || contiguous_1d(ya, "y") < 0) {
            PyErr_SetString(PyExc_ValueError, "_stats: float32 x with y needs y, the round "
                            "trip, as float32 of the same length");
            return NULL;
        }
        y32 = PyArray_DATA(ya);
    }
    if (xt == NPY_DOUBLE && tgt != NULL) {
        PyArrayObject *ya = (PyArrayObject *)yobj;
        if (!PyArray_Check(yobj) || PyArray_TYPE(ya) != NPY_DOUBLE || PyArray_SIZE(ya) != n
                || contiguous_1d(ya, "y") < 0) {
            PyErr_SetString(PyExc_ValueError, "_stats: float64 x with a target needs y, the "
                            "round trip, as float64 of the same length");
            return NULL;
        }
        y = PyArray_DATA(ya);
    }
    void *codes = NULL;
    if (outobj != Py_None) {
        PyArrayObject *oa = (PyArrayObject *)outobj;
        if (!PyArray_Check(outobj) || tgt == NULL || xt == NPY_DOUBLE || y32 != NULL
                || mf_dtype_index(NPY_DTYPE(PyArray_DESCR(oa))) != (int)tgt->id
                || PyArray_SIZE(oa) != n || contiguous_1d(oa, "out") < 0 || !PyArray_ISWRITEABLE(oa)) {
            PyErr_SetString(PyExc_ValueError, "_stats: out must be a writable contiguous array of "
                            "the target format, as long as x (and x not float64)");
            return NULL;
        }
        codes = PyArray_DATA(oa);
    }
    Py_buffer wb = {0};
    mf_write_req wr = {wfd, NULL, 0, 0};
    if (wobj != Py_None) {
        if (PyObject_GetBuffer(wobj, &wb, PyBUF_SIMPLE) < 0) {
            return NULL;
        }
        wr.buf = wb.buf;
        wr.len = (size_t)wb.len;
    }
    double *v = PyArray_DATA(acc);
    mf_stats_acc a;
    acc_load(&a, v);
    const void *data = PyArray_DATA(x);
    Py_BEGIN_ALLOW_THREADS
    if (wobj != Py_None && (xt == NPY_DOUBLE || y32 != NULL)) {
        mf_write_req_run(&wr);
    }
    if (xt == NPY_DOUBLE) {
        mf_stats_run_f64(&a, data, y, n, rel);
    }
    else if (y32 != NULL) {
        mf_stats_run_f32y(&a, data, y32, n, rel);
    }
    else {
        mf_stats_run(&a, src, data, n, tgt, rel, codes, moments, wobj != Py_None ? &wr : NULL);
    }
    Py_END_ALLOW_THREADS
    if (wobj != Py_None) {
        PyBuffer_Release(&wb);
    }
    acc_store(v, &a);
    return PyLong_FromSize_t(wr.done);
}
