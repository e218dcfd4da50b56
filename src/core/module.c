/*
 * minifloat._core: the C core.  Creates the scalar types, the DTypes with
 * their casts, the ufunc loops, and exposes the format table and the kernel
 * level to Python.
 */
#define MF_IMPORT_ARRAY_HERE
#include "minifloat.h"
#include <fenv.h>
#include "../kernels/kernels.h"
#include "../kernels/parallel.h"
#include "../umath/umath.h"

static const char *special_names[] = {"ieee", "fn", "fnuz", "none", "e8m0"};
static const char *kind_names[] = {"float", "int", "uint"};

static int
format_by_name(PyObject *name)
{
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL) {
        return -1;
    }
    for (int i = 0; i < MF_NUM_FORMATS; i++) {
        if (strcmp(mf_formats[i].name, s) == 0) {
            return i;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown minifloat format %R", name);
    return -1;
}

#define SET(key, value)                                       \
    do {                                                      \
        PyObject *v_ = (value);                               \
        if (v_ == NULL || PyDict_SetItemString(d, key, v_) < 0) { \
            Py_XDECREF(v_);                                   \
            Py_DECREF(d);                                     \
            return NULL;                                      \
        }                                                     \
        Py_DECREF(v_);                                        \
    } while (0)

/* one row of the table, with the derived values, as a dict */
static PyObject *
format_dict(int id)
{
    const mf_format *f = &mf_formats[id];
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    SET("name", PyUnicode_FromString(f->name));
    SET("kind", PyUnicode_FromString(kind_names[f->kind]));
    SET("bits", PyLong_FromLong(f->bits));
    SET("itemsize", PyLong_FromLong(f->itemsize));
    SET("dlpack_code", PyLong_FromLong(f->dlpack_code));
    SET("dlpack_bits", PyLong_FromLong(f->dlpack_bits));
    SET("char", PyUnicode_FromStringAndSize(&f->typechar, 1));
    SET("has_sign", PyBool_FromLong(f->has_sign));
    if (id < MF_NUM_PUBLIC_FORMATS) {
        SET("type", Py_NewRef((PyObject *)mf_scalar_types[id]));
        SET("dtype", Py_NewRef((PyObject *)mf_singletons[id]));
    }
    if (f->kind != MF_KIND_FLOAT) {
        SET("min", PyLong_FromLongLong(mf_int_min(f)));
        SET("max", PyLong_FromLongLong(mf_int_max(f)));
        return d;
    }
    SET("exp_bits", PyLong_FromLong(f->exp_bits));
    SET("mant_bits", PyLong_FromLong(f->mant_bits));
    SET("bias", PyLong_FromLong(f->bias));
    SET("special", PyUnicode_FromString(special_names[f->special]));
    SET("has_inf", PyBool_FromLong(mf_has_inf(f)));
    SET("has_nan", PyBool_FromLong(mf_has_nan(f)));
    SET("has_negzero", PyBool_FromLong(mf_has_negzero(f)));
    SET("has_zero", PyBool_FromLong(mf_has_zero(f)));
    uint32_t maxc = mf_max_finite_mag(f);
    SET("max_code", PyLong_FromUnsignedLong(maxc));
    SET("max", PyFloat_FromDouble(mf_decode_f64(f, maxc)));
    SET("min", PyFloat_FromDouble(f->has_sign ? -mf_decode_f64(f, maxc) : mf_decode_f64(f, 0)));
    SET("smallest_normal", PyFloat_FromDouble(ldexp(1.0, mf_emin(f))));
    SET("smallest_subnormal", PyFloat_FromDouble(
            f->special == MF_SPECIAL_E8M0 ? ldexp(1.0, mf_emin(f)) : ldexp(1.0, mf_emin(f) - f->mant_bits)));
    SET("eps", PyFloat_FromDouble(ldexp(1.0, -f->mant_bits)));
    SET("epsneg", PyFloat_FromDouble(ldexp(1.0, -f->mant_bits - 1)));
    SET("minexp", PyLong_FromLong(mf_emin(f)));
    {
        int e;
        frexp(mf_decode_f64(f, maxc), &e);
        SET("maxexp", PyLong_FromLong(e));
    }
    uint32_t nnan = 0;
    for (uint32_t c = 0; c <= mf_code_mask(f); c++) {
        nnan += (uint32_t)mf_code_isnan(f, c);
    }
    SET("nan_codes", PyLong_FromUnsignedLong(nnan));
    SET("nan_code", mf_has_nan(f) ? PyLong_FromUnsignedLong(mf_nan_code(f, 0)) : Py_NewRef(Py_None));
    SET("inf_code", mf_has_inf(f) ? PyLong_FromUnsignedLong(mf_inf_code(f, 0)) : Py_NewRef(Py_None));
    return d;
}

static PyObject *
py_formats(PyObject *NPY_UNUSED(self), PyObject *args)
{
    int internal = 0;
    if (!PyArg_ParseTuple(args, "|p", &internal)) {
        return NULL;
    }
    int n = internal ? MF_NUM_FORMATS : MF_NUM_PUBLIC_FORMATS;
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = format_dict(i);
        if (d == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

static PyObject *
py_scalar_from_code(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *name;
    unsigned int code;
    if (!PyArg_ParseTuple(args, "UI", &name, &code)) {
        return NULL;
    }
    int id = format_by_name(name);
    if (id < 0) {
        return NULL;
    }
    if (id >= MF_NUM_PUBLIC_FORMATS) {
        PyErr_SetString(PyExc_ValueError, "not a minifloat format");
        return NULL;
    }
    return mf_scalar_from_code(id, code);
}

/* ---- kernel levels ---- */

static PyObject *
py_get_kernel_level(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    return PyUnicode_FromString(mf_level_name(mf_active_level));
}

static PyObject *
py_set_kernel_level(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (name == NULL) {
        return NULL;
    }
    int level = mf_level_from_name(name);
    if (level < 0) {
        PyErr_Format(PyExc_ValueError,
                     "unknown kernel level %R; the levels are 'serial', 'avx2', 'avx512', "
                     "'avx512bf16', 'neon', 'neon_bf16'", arg);
        return NULL;
    }
    PyObject *prev = PyUnicode_FromString(mf_level_name(mf_active_level));
    if (mf_set_level((mf_level)level) < 0) {
        Py_XDECREF(prev);
        PyErr_Format(PyExc_ValueError,
                     "kernel level %R is not available on this CPU or build; available: %s",
                     arg, "see minifloat._core.kernel_levels()");
        return NULL;
    }
    return prev;
}

/* the largest distance MINIFLOAT_READ_PREFETCH and set_read_prefetch take */
#define MF_READ_PREFETCH_MAX (1 << 20)

static PyObject *
py_set_read_prefetch(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    Py_ssize_t v = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (v < 0 || v > MF_READ_PREFETCH_MAX) {
        PyErr_Format(PyExc_ValueError, "the read prefetch distance is a byte count from 0 to %d, "
                     "not %zd", MF_READ_PREFETCH_MAX, v);
        return NULL;
    }
    Py_ssize_t prev = (Py_ssize_t)mf_read_prefetch;
    mf_read_prefetch = (mf_intp)v;
    return PyLong_FromSsize_t(prev);
}

static PyObject *
py_get_read_prefetch(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    return PyLong_FromSsize_t((Py_ssize_t)mf_read_prefetch);
}

static PyObject *
py_kernel_levels(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        return NULL;
    }
    for (int l = 0; l < MF_NUM_LEVELS; l++) {
        if (mf_level_supported((mf_level)l)) {
            PyObject *s = PyUnicode_FromString(mf_level_name((mf_level)l));
            if (s == NULL || PyList_Append(list, s) < 0) {
                Py_XDECREF(s);
                Py_DECREF(list);
                return NULL;
            }
            Py_DECREF(s);
        }
    }
    return list;
}

/* ---- threads (kernels/parallel.h) ---- */

static PyObject *
py_get_num_threads(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    return PyLong_FromLong(mf_get_num_threads());
}

static PyObject *
py_set_num_threads(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    int prev = mf_get_num_threads();
    if (arg == Py_None) {
        mf_set_num_threads(0);
        return PyLong_FromLong(prev);
    }
    if (PyBool_Check(arg) || !PyIndex_Check(arg)) {
        PyErr_Format(PyExc_TypeError,
                     "set_num_threads() takes an int >= 1 (or None for the default), not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (n == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear();
        n = PY_SSIZE_T_MAX;
    }
    if (n < 1) {
        PyErr_Format(PyExc_ValueError,
                     "set_num_threads() needs a thread count >= 1, got %zd; pass None for the "
                     "default", n);
        return NULL;
    }
    mf_set_num_threads(n > MF_PAR_MAX_THREADS ? MF_PAR_MAX_THREADS : (int)n);
    return PyLong_FromLong(prev);
}

static PyObject *
py_default_num_threads(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    return PyLong_FromLong(mf_default_num_threads());
}

/* ---- the codec itself, for tests (the oracle) ---- */

static PyObject *
py_oracle_encode(PyObject *NPY_UNUSED(self), PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"format", "values", "rounding", "saturate", "seed", NULL};
    PyObject *name, *values;
    int rounding = 0, saturate = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UO|ipK", kwlist, &name, &values,
                                     &rounding, &saturate, &seed)) {
        return NULL;
    }
    int id = format_by_name(name);
    if (id < 0) {
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)PyArray_FROMANY(values, NPY_DOUBLE, 0, 0, NPY_ARRAY_CARRAY_RO);
    if (arr == NULL) {
        return NULL;
    }
    npy_intp n = PyArray_SIZE(arr);
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(PyArray_NDIM(arr), PyArray_DIMS(arr), NPY_UINT32);
    if (out == NULL) {
        Py_DECREF(arr);
        return NULL;
    }
    const double *in = PyArray_DATA(arr);
    uint32_t *o = PyArray_DATA(out);
    uint64_t state = seed;
    for (npy_intp i = 0; i < n; i++) {
        /* splitmix64: reproducible random bits for stochastic rounding */
        state += 0x9E3779B97F4A7C15ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        o[i] = mf_encode_f64_ex(&mf_formats[id], in[i], (mf_rounding)rounding, saturate, z, NULL);
    }
    Py_DECREF(arr);
    return (PyObject *)out;
}

static PyObject *
py_oracle_decode(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *name, *codes;
    if (!PyArg_ParseTuple(args, "UO", &name, &codes)) {
        return NULL;
    }
    int id = format_by_name(name);
    if (id < 0) {
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)PyArray_FROMANY(codes, NPY_UINT32, 0, 0, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST);
    if (arr == NULL) {
        return NULL;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_SimpleNew(PyArray_NDIM(arr), PyArray_DIMS(arr), NPY_DOUBLE);
    if (out == NULL) {
        Py_DECREF(arr);
        return NULL;
    }
    const uint32_t *in = PyArray_DATA(arr);
    double *o = PyArray_DATA(out);
    for (npy_intp i = 0; i < PyArray_SIZE(arr); i++) {
        o[i] = mf_decode_f64(&mf_formats[id], in[i]);
    }
    Py_DECREF(arr);
    return (PyObject *)out;
}

static PyObject *
py_shortest(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O", &obj)) {
        return NULL;
    }
    int id = mf_scalar_format_of(obj);
    if (id < 0) {
        PyErr_SetString(PyExc_TypeError, "expected a minifloat scalar");
        return NULL;
    }
    return PyFloat_FromDouble(mf_shortest_double(&mf_formats[id], ((MFScalarObject *)obj)->code));
}

static PyObject *
py_cast_safety(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "UU", &a, &b)) {
        return NULL;
    }
    int ia = format_by_name(a), ib = format_by_name(b);
    if (ia < 0 || ib < 0) {
        return NULL;
    }
    return PyBool_FromLong(mf_cast_safety_table[ia][ib]);
}

/* ---- the active level's reduction kernels, for tests: their float64
 * result is otherwise only seen rounded to the format.  Returns (result,
 * flags) with the FP flags the kernel raised: 1 divide-by-zero, 2 overflow,
 * 4 underflow, 8 invalid. ---- */

static PyObject *
py_kernel_reduce(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *name;
    Py_buffer a, b = {0};
    if (!PyArg_ParseTuple(args, "Uy*|y*", &name, &a, &b)) {
        return NULL;
    }
    PyObject *res = NULL;
    int id = format_by_name(name);
    if (id >= 0) {
        const mf_format *f = &mf_formats[id];
        mf_intp n = (mf_intp)(a.len / f->itemsize);
        if (b.buf != NULL && b.len / f->itemsize != n) {
            PyErr_SetString(PyExc_ValueError, "operands of different lengths");
        }
        else {
            double s;
            int fl;
            Py_BEGIN_ALLOW_THREADS
            feclearexcept(FE_ALL_EXCEPT);
            s = b.buf != NULL ? mf_k->dot(f, a.buf, b.buf, n) : mf_k->sum(f, a.buf, n);
            fl = fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID);
            feclearexcept(FE_ALL_EXCEPT);
            Py_END_ALLOW_THREADS
            res = Py_BuildValue("(di)", s, ((fl & FE_DIVBYZERO) ? 1 : 0) | ((fl & FE_OVERFLOW) ? 2 : 0)
                                           | ((fl & FE_UNDERFLOW) ? 4 : 0) | ((fl & FE_INVALID) ? 8 : 0));
        }
    }
    PyBuffer_Release(&a);
    if (b.buf != NULL) {
        PyBuffer_Release(&b);
    }
    return res;
}

/* matmul.c: test hook */
PyObject *mf_py_gemm_f32acc(PyObject *self, PyObject *args);
PyObject *mf_py_set_gemm_bpack_limit(PyObject *self, PyObject *arg);
PyObject *mf_py_stats(PyObject *self, PyObject *args);
/* umath/reduce.c: whole reductions for the Python entry points */
PyObject *mf_py_reduce(PyObject *self, PyObject *args);
/* numpy/sort.c: argmax/argmin along an axis that is not the last */
PyObject *mf_py_arg_axis(PyObject *self, PyObject *args);
PyObject *mf_py_sort_rows(PyObject *self, PyObject *a);
PyObject *mf_py_argsort_rows(PyObject *self, PyObject *a);
PyObject *mf_py_replace_special(PyObject *self, PyObject *args);
/* umath/pairwise.c: float32 sums in NumPy's pairwise order (mean, var, std) */
PyObject *mf_py_sum_f32(PyObject *self, PyObject *args);
PyObject *mf_py_any_all(PyObject *self, PyObject *args);
PyObject *mf_py_count_nonzero(PyObject *self, PyObject *a);

static PyMethodDef module_methods[] = {
    {"formats", py_formats, METH_VARARGS,
     "formats(internal=False): the format table, one dict per format."},
    {"_scalar_from_code", py_scalar_from_code, METH_VARARGS,
     "_scalar_from_code(name, code): the scalar with these bits (used by pickle)."},
    {"get_kernel_level", py_get_kernel_level, METH_NOARGS, "The active kernel level."},
    {"set_kernel_level", py_set_kernel_level, METH_O,
     "set_kernel_level(name) -> previous: force a kernel level (tests, benchmarks)."},
    {"kernel_levels", py_kernel_levels, METH_NOARGS, "Kernel levels this CPU and build support."},
    {"get_read_prefetch", py_get_read_prefetch, METH_NOARGS,
     "How far ahead (bytes) sum and dot prefetch what they read; 0: not at all."},
    {"set_read_prefetch", py_set_read_prefetch, METH_O,
     "set_read_prefetch(nbytes) -> previous (tests, benchmarks)."},
    {"get_num_threads", py_get_num_threads, METH_NOARGS,
     "Threads minifloat's kernels use for large arrays and matmul."},
    {"set_num_threads", py_set_num_threads, METH_O,
     "set_num_threads(n) -> previous: use n threads (None: the default)."},
    {"default_num_threads", py_default_num_threads, METH_NOARGS,
     "The default thread count: MINIFLOAT_NUM_THREADS, else the CPUs this process may use."},
    {"_oracle_encode", (PyCFunction)(void (*)(void))py_oracle_encode, METH_VARARGS | METH_KEYWORDS,
     "The serial codec: float64 values -> codes (uint32)."},
    {"_oracle_decode", py_oracle_decode, METH_VARARGS, "The serial codec: codes -> float64."},
    {"_shortest", py_shortest, METH_VARARGS,
     "The float this scalar prints as: exact with <= 6 significant digits, else the shortest that rounds back."},
    {"_cast_is_safe", py_cast_safety, METH_VARARGS,
     "_cast_is_safe(a, b): every value of format a is a value of format b."},
    {"_kernel_reduce", py_kernel_reduce, METH_VARARGS,
     "_kernel_reduce(name, a[, b]) -> (result, fp_flags): the active level's sum(a) or dot(a, b) kernel (tests)."},
    {"_gemm_f32acc", mf_py_gemm_f32acc, METH_VARARGS,
     "_gemm_f32acc(format, A, B, C): C += A @ B (codes, float32 C) at the active level."},
    {"_set_gemm_bpack_limit", mf_py_set_gemm_bpack_limit, METH_O,
     "_set_gemm_bpack_limit(nbytes) -> previous: packed B per GEMM job (tests)."},
    {"_stats", mf_py_stats, METH_VARARGS,
     "_stats(acc, x, target, rel, y=None, out=None, moments=True, fd=-1, data=None): inspect's statistics "
     "of chunk x into acc (float64[14]; minifloat/io/checkpoint.py); moments=False: the error sums (err2, ref2) "
     "only; data: bytes written to fd meanwhile (convert's previous chunk).  Returns how many were written."},
    {"_accumulate", mf_py_accumulate, METH_VARARGS,
     "_accumulate(op, a, axis): cumsum/cumprod (op 0/1) of a float format along any axis of "
     "a C-contiguous array, all chains in one call; NotImplemented for anything else."},
    {"_sort_rows", mf_py_sort_rows, METH_O,
     "_sort_rows(a): a copy of a C-contiguous array of a format sorted along its last axis, "
     "the rows on the threads (the codes ndarray.sort gives); NotImplemented otherwise."},
    {"_replace_special", mf_py_replace_special, METH_VARARGS,
     "_replace_special(x, rep): np.nan_to_num's replacements in place, in one pass: NaN, +inf and "
     "-inf codes become rep's three codes (rep: 3 values of x's dtype); NotImplemented for an "
     "array it does not take."},
    {"_argsort_rows", mf_py_argsort_rows, METH_O,
     "_argsort_rows(a): the stable argsort along the last axis of a C-contiguous array of a "
     "format, the rows on the threads (ndarray.argsort's indices); NotImplemented otherwise."},
    {"_arg_axis", mf_py_arg_axis, METH_VARARGS,
     "_arg_axis(want_max, a, axis): argmax/argmin along an axis that is not the last of a "
     "C-contiguous array of a sign-magnitude format, NumPy's indices; NotImplemented otherwise."},
    {"_reduce", mf_py_reduce, METH_VARARGS,
     "_reduce(op, a, axis, out, keepdims, where): sum/prod/max/min (op 0..3) of a float format in one "
     "call, bit-identical to NumPy's route through the ufunc loops, or NotImplemented (src/umath/reduce.c)."},
    {"_count_nonzero", mf_py_count_nonzero, METH_O,
     "_count_nonzero(a): np.count_nonzero(a) of a contiguous minifloat array as an int, or "
     "NotImplemented (NumPy's route)."},
    {"_any_all", mf_py_any_all, METH_VARARGS,
     "_any_all(want_all, a, axis, keepdims): a.all(axis=axis) or a.any(axis=axis) of a C-contiguous "
     "minifloat array in one call, or NotImplemented (NumPy's route)."},
    {"_sum_f32", mf_py_sum_f32, METH_VARARGS,
     "_sum_f32(a, axis, keepdims, mean=None): np.add.reduce(a.astype(np.float32), axis, "
     "keepdims=keepdims) bit for bit, without the copy, or NotImplemented; with mean (float32, one "
     "per output), the sum of np.square(a.astype(np.float32) - mean) (src/umath/pairwise.c)."},
    {"_add_special_loops", mf_py_add_special_loops, METH_VARARGS,
     "_add_special_loops(ufunc, geterr) -> count: the float formats' loops on another package's "
     "unary ufunc (scipy.special), built on the loop NumPy would run for float16."},
    {"_special_ufuncs", mf_py_special_ufuncs, METH_NOARGS,
     "_special_ufuncs() -> the ufuncs _add_special_loops gave loops."},
    {"_link_ml_dtypes", mf_py_link_ml_dtypes, METH_O,
     "_link_ml_dtypes(ml_dtypes) -> names: casts and promoters with ml_dtypes' DTypes (once)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "minifloat._core",
    .m_doc = "The C core of minifloat: dtypes, casts, ufunc loops, kernels.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    import_array();
    import_umath();

    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    /* The version is written once, in meson.build's project(); the build
     * passes it here, and minifloat.__version__ is this string. */
    if (PyModule_AddStringConstant(m, "__version__", MF_VERSION) < 0) {
        goto fail;
    }
    mf_init_luts();
    mf_set_level(mf_best_level());
    const char *env = getenv("MINIFLOAT_KERNEL_LEVEL");
    if (env != NULL && env[0] != '\0') {
        int level = mf_level_from_name(env);
        if (level < 0 || mf_set_level((mf_level)level) < 0) {
            if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                    "MINIFLOAT_KERNEL_LEVEL=%s is not a level this CPU and build support "
                    "(serial, avx2, avx512, avx512bf16 where available); using %s",
                    env, mf_level_name(mf_active_level)) < 0) {
                goto fail;
            }
        }
    }
    mf_read_prefetch = mf_default_read_prefetch();
    env = getenv("MINIFLOAT_READ_PREFETCH");
    if (env != NULL && env[0] != '\0') {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end != '\0' || v < 0 || v > MF_READ_PREFETCH_MAX) {
            if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                    "MINIFLOAT_READ_PREFETCH=%s is not a byte count from 0 to %d; using %zd",
                    env, MF_READ_PREFETCH_MAX, (Py_ssize_t)mf_read_prefetch) < 0) {
                goto fail;
            }
        }
        else {
            mf_read_prefetch = (mf_intp)v;
        }
    }
    {
        PyObject *exc = PyImport_ImportModule("numpy.exceptions");
        if (exc == NULL) {
            goto fail;
        }
        mf_ComplexWarning = PyObject_GetAttrString(exc, "ComplexWarning");
        Py_DECREF(exc);
        if (mf_ComplexWarning == NULL) {
            goto fail;
        }
    }
    if (mf_init_scalars(m) < 0) {
        goto fail;
    }
    if (mf_init_dtypes(m) < 0 || mf_sort_init() < 0 || mf_casts_init() < 0 || mf_scalars_set_dtype() < 0) {
        goto fail;
    }
    if (mf_init_ufuncs(m) < 0) {
        goto fail;
    }
    if (mf_init_rounding(m) < 0) {
        goto fail;
    }
    if (mf_init_dlpack(m) < 0) {
        goto fail;
    }
    if (mf_init_blocks(m) < 0 || mf_init_fastpath(m) < 0 || mf_init_checkpoint_unpack(m) < 0) {
        goto fail;
    }
    return m;

fail:
    Py_DECREF(m);
    return NULL;
}
