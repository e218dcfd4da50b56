/*
 * minifloat.cast (earlier name minifloat.convert): the rounding modes a
 * NumPy cast cannot express (saturation,
 * rounding toward zero, stochastic rounding).  Every value is rounded once,
 * from its float64 value, by the codec (codec.h).
 *
 * Stochastic rounding draws 64 random bits per element from splitmix64 of
 * (seed, C-order index of the element), so a given seed gives the same
 * result for the same array whatever its memory layout.
 */
#include "../core/minifloat.h"
#include "../kernels/scalar_ops.h"

static inline uint64_t
splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* _convert(src, out, rounding, saturate, seed): out[...] = round(src) */
static PyObject *
py_convert(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *src, *out;
    int rounding, saturate;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "O!O!ipK", &PyArray_Type, &src, &PyArray_Type, &out,
                          &rounding, &saturate, &seed)) {
        return NULL;
    }
    int id = mf_dtype_index(NPY_DTYPE(PyArray_DESCR(out)));
    if (id < 0 || mf_formats[id].kind != MF_KIND_FLOAT) {
        PyErr_SetString(PyExc_ValueError, "out must be an array of a minifloat float format");
        return NULL;
    }
    const mf_format *f = &mf_formats[id];
    if (PyArray_SIZE(src) == 0) {
        Py_RETURN_NONE;
    }
    /* read integers as 64-bit integers and long doubles as long doubles, so
     * that values beyond float64's precision still round once (to odd in a
     * float64 first); everything else is read as float64, exactly */
    int src_num = PyArray_DESCR(src)->type_num;
    int read_as = NPY_DOUBLE;
    if (PyTypeNum_ISUNSIGNED(src_num)) {
        read_as = NPY_UINT64;
    }
    else if (PyTypeNum_ISSIGNED(src_num)) {
        read_as = NPY_INT64;
    }
    else if (src_num == NPY_LONGDOUBLE || src_num == NPY_CLONGDOUBLE) {
        read_as = NPY_LONGDOUBLE;
    }
    PyArrayObject *ops[2] = {src, out};
    npy_uint32 op_flags[2] = {NPY_ITER_READONLY, NPY_ITER_WRITEONLY};
    PyArray_Descr *op_dtypes[2] = {PyArray_DescrFromType(read_as), NULL};
    NpyIter *iter = NpyIter_MultiNew(2, ops,
                                     NPY_ITER_EXTERNAL_LOOP | NPY_ITER_BUFFERED | NPY_ITER_GROWINNER
                                     | NPY_ITER_ZEROSIZE_OK,
                                     NPY_CORDER, NPY_UNSAFE_CASTING, op_flags, op_dtypes);
    Py_DECREF(op_dtypes[0]);
    if (iter == NULL) {
        return NULL;
    }
    NpyIter_IterNextFunc *next = NpyIter_GetIterNext(iter, NULL);
    if (next == NULL) {
        NpyIter_Deallocate(iter);
        return NULL;
    }
    char **data = NpyIter_GetDataPtrArray(iter);
    npy_intp *strides = NpyIter_GetInnerStrideArray(iter);
    npy_intp *count = NpyIter_GetInnerLoopSizePtr(iter);
    uint64_t index = 0;
    int ovf = 0;
    NPY_BEGIN_THREADS_DEF;
    if (!NpyIter_IterationNeedsAPI(iter)) {
        NPY_BEGIN_THREADS;
    }
    do {
        const char *in = data[0];
        char *o = data[1];
        npy_intp n = *count;
        for (npy_intp i = 0; i < n; i++, in += strides[0], o += strides[1]) {
            double v;
            if (read_as == NPY_DOUBLE) {
                memcpy(&v, in, sizeof v);
            }
            else if (read_as == NPY_INT64) {
                int64_t iv;
                memcpy(&iv, in, sizeof iv);
                v = mf_int64_to_f64_odd(iv);
            }
            else if (read_as == NPY_UINT64) {
                uint64_t uv;
                memcpy(&uv, in, sizeof uv);
                v = mf_uint64_to_f64_odd(uv);
            }
            else {
                long double lv;
                memcpy(&lv, in, sizeof lv);
                v = mf_longdouble_to_f64_odd(lv);
            }
            uint64_t r = rounding == MF_ROUND_STOCHASTIC ? splitmix64(seed ^ splitmix64(index)) : 0;
            index++;
            mf_store_code(f, o, mf_encode_f64_ex(f, v, (mf_rounding)rounding, saturate, r, &ovf));
        }
    } while (next(iter));
    NPY_END_THREADS;
    if (!NpyIter_Deallocate(iter)) {
        return NULL;
    }
    if (ovf && !saturate) {
        /* overflow to inf/NaN is reported as a cast's would be */
        PyObject *np = PyImport_ImportModule("numpy");
        if (np == NULL) {
            return NULL;
        }
        PyObject *r = PyObject_CallMethod(np, "geterr", NULL);
        Py_DECREF(np);
        if (r == NULL) {
            return NULL;
        }
        PyObject *mode = PyDict_GetItemString(r, "over");
        const char *m = mode ? PyUnicode_AsUTF8(mode) : "warn";
        int res = 0;
        if (m && strcmp(m, "raise") == 0) {
            PyErr_SetString(PyExc_FloatingPointError, "overflow encountered in convert");
            res = -1;
        }
        else if (m && strcmp(m, "warn") == 0) {
            res = PyErr_WarnEx(PyExc_RuntimeWarning, "overflow encountered in convert", 1);
        }
        Py_DECREF(r);
        if (res < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef convert_methods[] = {
    {"_convert", py_convert, METH_VARARGS,
     "_convert(src, out, rounding, saturate, seed): round src into out (see minifloat.convert)."},
    {NULL, NULL, 0, NULL},
};

int
mf_init_rounding(PyObject *module)
{
    return PyModule_AddFunctions(module, convert_methods);
}
