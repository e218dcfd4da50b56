/*
 * The DType classes (NEP 42): one non-parametric DType per format, whose
 * singleton instance is the dtype users see (np.dtype(minifloat.bfloat16)).
 */
#include "minifloat.h"

PyArray_DTypeMeta mf_dtypes[MF_NUM_PUBLIC_FORMATS];
PyArray_Descr *mf_singletons[MF_NUM_PUBLIC_FORMATS];

static char dtype_class_names[MF_NUM_PUBLIC_FORMATS][80];

/* ---------------------------------------------------------------- slots */

static PyArray_Descr *
mf_default_descr(PyArray_DTypeMeta *cls)
{
    PyArray_Descr *d = mf_singletons[mf_dtype_index(cls)];
    Py_INCREF(d);
    return d;
}

static PyArray_Descr *
mf_ensure_canonical(PyArray_Descr *self)
{
    Py_INCREF(self);
    return self;
}

static PyArray_Descr *
mf_common_instance(PyArray_Descr *d1, PyArray_Descr *NPY_UNUSED(d2))
{
    Py_INCREF(d1);
    return d1;
}

static PyArray_Descr *
mf_discover_descr(PyArray_DTypeMeta *cls, PyObject *NPY_UNUSED(obj))
{
    return mf_default_descr(cls);
}

/*
 * Promotion (NEP 50).  The common DType of A and B is the first of
 *   A, B, bfloat16, float16, float32, float64, longdouble
 * (complex: complex64, complex128, clongdouble) into which both cast
 * safely, i.e. which holds every value of both exactly.  Integer formats
 * with NumPy integers follow NumPy's integer rules.  Python scalars are
 * weak: a Python int or float keeps a minifloat float format.
 * docs/promotion.md prints the whole table from this function.
 */
static int
dt_safe(PyArray_DTypeMeta *from, PyArray_DTypeMeta *to)
{
    int a = mf_dtype_index(from), b = mf_dtype_index(to);
    if (a >= 0 && b >= 0) {
        return mf_format_casts_safely(&mf_formats[a], &mf_formats[b]);
    }
    if (a >= 0) {
        return mf_format_safe_to_builtin(&mf_formats[a], to->type_num);
    }
    if (b >= 0) {
        return mf_builtin_safe_to_format(from->type_num, &mf_formats[b]);
    }
    return PyArray_CanCastTypeTo(from->singleton, to->singleton, NPY_SAFE_CASTING);
}

static PyArray_DTypeMeta *
first_safe(PyArray_DTypeMeta *a, PyArray_DTypeMeta *b, PyArray_DTypeMeta **candidates, int n)
{
    for (int i = 0; i < n; i++) {
        PyArray_DTypeMeta *c = candidates[i];
        if (c != NULL && dt_safe(a, c) && dt_safe(b, c)) {
            Py_INCREF(c);
            return c;
        }
    }
    Py_INCREF(Py_NotImplemented);
    return (PyArray_DTypeMeta *)Py_NotImplemented;
}

static PyArray_DTypeMeta *
mf_common_dtype(PyArray_DTypeMeta *cls, PyArray_DTypeMeta *other)
{
    int a = mf_dtype_index(cls);
    const mf_format *fa = &mf_formats[a];
    int is_float = fa->kind == MF_KIND_FLOAT;

    if (other == cls) {
        Py_INCREF(cls);
        return cls;
    }
    /* Python scalars: weak */
    if (other == &PyArray_PyLongDType) {
        Py_INCREF(cls);
        return cls;
    }
    if (other == &PyArray_PyFloatDType) {
        PyArray_DTypeMeta *r = is_float ? cls : mf_builtin_DType(NPY_DOUBLE);
        Py_INCREF(r);
        return r;
    }
    if (other == &PyArray_PyComplexDType) {
        PyArray_DTypeMeta *r = mf_builtin_DType(is_float ? NPY_CFLOAT : NPY_CDOUBLE);
        Py_INCREF(r);
        return r;
    }

    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        if (mf_ml_dtypes[i] != NULL && other == mf_ml_dtypes[i]) {
            /* an ml_dtypes array: promote as if it were ours */
            return mf_common_dtype(cls, &mf_dtypes[i]);
        }
    }
    int b = mf_dtype_index(other);
    int other_is_builtin = b < 0 && other->type_num >= 0 && other->type_num < NPY_NTYPES_LEGACY
                           && other->singleton != NULL;
    if (b < 0 && !other_is_builtin) {
        Py_INCREF(Py_NotImplemented);
        return (PyArray_DTypeMeta *)Py_NotImplemented;
    }
    if (other_is_builtin && !(PyTypeNum_ISBOOL(other->type_num) || PyTypeNum_ISNUMBER(other->type_num))) {
        /* strings, datetimes, object, void: NumPy's own rules (object wins) */
        Py_INCREF(Py_NotImplemented);
        return (PyArray_DTypeMeta *)Py_NotImplemented;
    }

    int other_complex = other_is_builtin && PyTypeNum_ISCOMPLEX(other->type_num);
    int other_int_kind = (b >= 0) ? (mf_formats[b].kind != MF_KIND_FLOAT)
                                  : (other_is_builtin && (PyTypeNum_ISINTEGER(other->type_num)
                                                          || PyTypeNum_ISBOOL(other->type_num)));
    if (!is_float && other_int_kind) {
        /* integers with integers: our narrow ints first, then NumPy's */
        PyArray_DTypeMeta *ints[14];
        int n = 0;
        ints[n++] = cls;
        ints[n++] = other;
        static const mf_format_id narrow[] = {MF_UINT1, MF_INT1, MF_UINT2, MF_INT2, MF_UINT4, MF_INT4};
        for (size_t i = 0; i < sizeof(narrow) / sizeof(narrow[0]); i++) {
            ints[n++] = &mf_dtypes[narrow[i]];
        }
        static const int wide[] = {NPY_INT8, NPY_INT16, NPY_INT32, NPY_INT64, NPY_DOUBLE};
        for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++) {
            ints[n++] = mf_builtin_DType(wide[i]);
        }
        /* keep NumPy's habit of uint8 + uint4 -> uint8 (unsigned stays unsigned) */
        PyArray_DTypeMeta *uns[4] = {mf_builtin_DType(NPY_UINT8), mf_builtin_DType(NPY_UINT16),
                                     mf_builtin_DType(NPY_UINT32), mf_builtin_DType(NPY_UINT64)};
        if (fa->kind == MF_KIND_UINT && other_is_builtin && PyTypeNum_ISUNSIGNED(other->type_num)) {
            return first_safe(cls, other, uns, 4);
        }
        return first_safe(cls, other, ints, n);
    }

    PyArray_DTypeMeta *cands[8];
    int n = 0;
    cands[n++] = cls;
    cands[n++] = other;
    if (other_complex) {
        cands[n++] = mf_builtin_DType(NPY_CFLOAT);
        cands[n++] = mf_builtin_DType(NPY_CDOUBLE);
        cands[n++] = mf_builtin_DType(NPY_CLONGDOUBLE);
    }
    else {
        cands[n++] = &mf_dtypes[MF_BFLOAT16];
        cands[n++] = mf_builtin_DType(NPY_HALF);
        cands[n++] = mf_builtin_DType(NPY_FLOAT);
        cands[n++] = mf_builtin_DType(NPY_DOUBLE);
        cands[n++] = mf_builtin_DType(NPY_LONGDOUBLE);
    }
    PyArray_DTypeMeta *res = first_safe(cls, other, cands, n);
    if ((PyObject *)res == Py_NotImplemented && !other_complex) {
        /* int64/uint64 with a float format: float64, as NumPy does */
        Py_DECREF(res);
        res = mf_builtin_DType(NPY_DOUBLE);
        Py_INCREF(res);
    }
    return res;
}

static int
mf_setitem(PyArray_Descr *descr, PyObject *obj, char *dataptr)
{
    const mf_format *f = mf_descr_format(descr);
    uint32_t code;
    if (mf_code_from_pyobject(f, obj, &code) < 0) {
        return -1;
    }
    mf_store_code(f, dataptr, code);
    return 0;
}

static PyObject *
mf_getitem(PyArray_Descr *descr, char *dataptr)
{
    const mf_format *f = mf_descr_format(descr);
    return mf_scalar_from_code((int)f->id, mf_load_code(f, dataptr));
}

/* np.finfo (NumPy >= 2.4 asks the DType for these).  Built against older
 * NumPy headers the slot does not exist; run on an older NumPy it is left
 * out (format_slots), and minifloat.finfo fills in np.finfo's fields. */
#ifdef NPY_DT_get_constant
static int
mf_get_constant(PyArray_Descr *descr, int constant_id, void *ptr)
{
    const mf_format *f = mf_descr_format(descr);
    if (f->kind != MF_KIND_FLOAT) {
        return 0;
    }
    uint32_t code;
    switch (constant_id) {
        case NPY_CONSTANT_zero:
            if (!mf_has_zero(f)) return 0;
            code = 0;
            break;
        case NPY_CONSTANT_one:
            code = mf_encode_f64(f, 1.0);
            break;
        case NPY_CONSTANT_maximum_finite:
            code = mf_max_finite_mag(f);
            break;
        case NPY_CONSTANT_minimum_finite:
            if (!f->has_sign) {
                code = 0;     /* e8m0: smallest value */
            }
            else {
                code = mf_max_finite_mag(f) | mf_sign_bit(f);
            }
            break;
        case NPY_CONSTANT_inf:
            if (!mf_has_inf(f)) return 0;
            code = mf_inf_code(f, 0);
            break;
        case NPY_CONSTANT_ninf:
            if (!mf_has_inf(f)) return 0;
            code = mf_inf_code(f, 1);
            break;
        case NPY_CONSTANT_nan:
            if (!mf_has_nan(f)) return 0;
            code = mf_nan_code(f, 0);
            break;
        case NPY_CONSTANT_finfo_radix:
            code = mf_encode_f64(f, 2.0);
            break;
        case NPY_CONSTANT_finfo_eps:
            code = mf_encode_f64(f, ldexp(1.0, -f->mant_bits));
            break;
        case NPY_CONSTANT_finfo_smallest_normal:
            code = mf_encode_f64(f, ldexp(1.0, mf_emin(f)));
            break;
        case NPY_CONSTANT_finfo_smallest_subnormal:
            code = (f->special == MF_SPECIAL_E8M0) ? 0u : 1u;
            break;
        case NPY_CONSTANT_finfo_nmant:
            *(npy_intp *)ptr = f->mant_bits;
            return 1;
        case NPY_CONSTANT_finfo_min_exp:
            *(npy_intp *)ptr = mf_emin(f);
            return 1;
        case NPY_CONSTANT_finfo_max_exp: {
            /* exponent one past the largest finite value's */
            int e;
            frexp(mf_decode_f64(f, mf_max_finite_mag(f)), &e);
            *(npy_intp *)ptr = e;
            return 1;
        }
        case NPY_CONSTANT_finfo_decimal_digits: {
            /* floor(nmant * log10(2)), but at least one digit for the 8-bit
             * and wider formats: ml_dtypes' convention (its finfo.precision
             * is 1 for every float8, 0 for float6/float4) */
            npy_intp digits = (npy_intp)floor(f->mant_bits * 0.30102999566398120);
            if (f->bits >= 8 && digits < 1) {
                digits = 1;
            }
            *(npy_intp *)ptr = digits;
            return 1;
        }
        default:
            return 0;
    }
    mf_store_code(f, (char *)ptr, code);
    return 1;
}
#endif

static PyType_Slot dtype_slots[] = {
    {NPY_DT_ensure_canonical, (void *)mf_ensure_canonical},
    {NPY_DT_common_instance, (void *)mf_common_instance},
    {NPY_DT_common_dtype, (void *)mf_common_dtype},
    {NPY_DT_discover_descr_from_pyobject, (void *)mf_discover_descr},
    {NPY_DT_default_descr, (void *)mf_default_descr},
    {NPY_DT_setitem, (void *)mf_setitem},
    {NPY_DT_getitem, (void *)mf_getitem},
#ifdef NPY_DT_get_constant
    {NPY_DT_get_constant, (void *)mf_get_constant},
#endif
    {NPY_DT_PyArray_ArrFuncs_compare, (void *)mf_compare},
    {NPY_DT_PyArray_ArrFuncs_argmax, (void *)mf_argmax},
    {NPY_DT_PyArray_ArrFuncs_argmin, (void *)mf_argmin},
    {NPY_DT_PyArray_ArrFuncs_nonzero, (void *)mf_nonzero},
    {NPY_DT_PyArray_ArrFuncs_fill, (void *)mf_fill},
    {NPY_DT_PyArray_ArrFuncs_fillwithscalar, (void *)mf_fillwithscalar},
    {NPY_DT_PyArray_ArrFuncs_sort, (void *)mf_sort},
    {NPY_DT_PyArray_ArrFuncs_argsort, (void *)mf_argsort},
    {NPY_DT_PyArray_ArrFuncs_fromstr, (void *)mf_fromstr},
    {NPY_DT_PyArray_ArrFuncs_scanfunc, (void *)mf_scanfunc},
    {0, NULL},
};

/*
 * Per-format ArrFuncs that NumPy may call without an array to say which
 * format it is:
 *   copyswap(n)  ndarray.byteswap() calls them unchecked, and NumPy makes
 *                scalars with copyswap (our descriptors leave out
 *                NPY_USE_GETITEM, so `arr[i]` is a minifloat scalar made by
 *                copying the code into it, as for legacy user dtypes);
 *   getitem      PyArray_GETITEM: arr.item(), arr.tolist(), astype(object):
 *                Python floats (ints for the integer formats), as float16's;
 *   dotfunc      np.dot / ndarray.dot on NumPy >= 2.5 (umath/matmul.c).
 * NumPy (2.3 to 2.5) accepts the copyswap slots (3, 4) although its header
 * omits them.
 */
static PyObject *
py_value(int id, const void *data)
{
    const mf_format *f = &mf_formats[id];
    double v = mf_decode_f64(f, mf_load_code(f, (const char *)data));
    if (f->kind != MF_KIND_FLOAT) {
        return PyLong_FromLongLong((long long)v);
    }
    if (f->id == MF_BFLOAT16 || f->itemsize == 1) {
        /* through float32: NaN payloads as the kernels keep them */
        uint32_t c = mf_load_code(f, (const char *)data);
        if (mf_code_isnan(f, c)) {
            return PyFloat_FromDouble(f->id == MF_BFLOAT16 ? (double)mf_bits_f32(c << 16) : v);
        }
    }
    return PyFloat_FromDouble(v);
}

#define MF_FORMAT_FUNCS(i)                                                                \
    static PyObject *arr_getitem_##i(void *data, void *NPY_UNUSED(arr))                  \
    {                                                                                     \
        return py_value(i, data);                                                         \
    }                                                                                     \
    static void copyswapn_##i(void *dst, npy_intp ds, void *src, npy_intp ss, npy_intp n, \
                              int swap, void *NPY_UNUSED(arr))                            \
    {                                                                                     \
        mf_copyswapn_sized(mf_formats[i].itemsize, dst, ds, src, ss, n, swap);            \
    }                                                                                     \
    static void copyswap_##i(void *dst, void *src, int swap, void *NPY_UNUSED(arr))       \
    {                                                                                     \
        mf_copyswapn_sized(mf_formats[i].itemsize, dst, 0, src, 0, 1, swap);              \
    }                                                                                     \
    static void dot_##i(void *a, npy_intp sa, void *b, npy_intp sb, void *out, npy_intp n, \
                        void *NPY_UNUSED(arr))                                            \
    {                                                                                     \
        mf_dotfunc(&mf_formats[i], a, sa, b, sb, out, n);                                 \
    }
MF_FORMAT_FUNCS(0) MF_FORMAT_FUNCS(1) MF_FORMAT_FUNCS(2) MF_FORMAT_FUNCS(3)
MF_FORMAT_FUNCS(4) MF_FORMAT_FUNCS(5) MF_FORMAT_FUNCS(6) MF_FORMAT_FUNCS(7)
MF_FORMAT_FUNCS(8) MF_FORMAT_FUNCS(9) MF_FORMAT_FUNCS(10) MF_FORMAT_FUNCS(11)
MF_FORMAT_FUNCS(12) MF_FORMAT_FUNCS(13) MF_FORMAT_FUNCS(14) MF_FORMAT_FUNCS(15)
MF_FORMAT_FUNCS(16) MF_FORMAT_FUNCS(17)
#undef MF_FORMAT_FUNCS

typedef char mf_one_set_of_funcs_per_format[(MF_NUM_PUBLIC_FORMATS == 18) ? 1 : -1];

#define FUNCS(i) {(void *)arr_getitem_##i, (void *)copyswapn_##i, (void *)copyswap_##i, \
                  (void *)dot_##i}
static void *per_format_funcs[MF_NUM_PUBLIC_FORMATS][4] = {
    FUNCS(0), FUNCS(1), FUNCS(2), FUNCS(3), FUNCS(4), FUNCS(5), FUNCS(6), FUNCS(7), FUNCS(8),
    FUNCS(9), FUNCS(10), FUNCS(11), FUNCS(12), FUNCS(13), FUNCS(14), FUNCS(15), FUNCS(16),
    FUNCS(17),
};
#undef FUNCS

#define N_SHARED_SLOTS (sizeof(dtype_slots) / sizeof(dtype_slots[0]) - 1)
static PyType_Slot slots_of[MF_NUM_PUBLIC_FORMATS][N_SHARED_SLOTS + 5];

/*
 * The slot number the running NumPy expects.  Headers of NumPy >= 2.4 number
 * the ArrFuncs slots from 1 << 11, older NumPy from 1 << 10 (and NumPy >= 2.4
 * still accepts those): a build against new headers that runs on NumPy 2.3
 * translates them.
 */
static int
runtime_slot(int slot)
{
#if _NPY_DT_ARRFUNCS_OFFSET != (1 << 10)
    if (slot >= _NPY_DT_ARRFUNCS_OFFSET && PyArray_RUNTIME_VERSION < NPY_2_4_API_VERSION) {
        return slot - _NPY_DT_ARRFUNCS_OFFSET + (1 << 10);
    }
#endif
    return slot;
}

static PyType_Slot *
format_slots(int id)
{
    PyType_Slot *sl = slots_of[id];
    int n = 0;
    for (size_t k = 0; k < N_SHARED_SLOTS; k++) {
#ifdef NPY_DT_get_constant
        /* a NumPy older than the headers rejects a slot it does not know */
        if (dtype_slots[k].slot == NPY_DT_get_constant
                && PyArray_RUNTIME_VERSION < NPY_2_4_API_VERSION) {
            continue;
        }
#endif
        sl[n++] = dtype_slots[k];
    }
    sl[n++] = (PyType_Slot){NPY_DT_PyArray_ArrFuncs_getitem, per_format_funcs[id][0]};
    sl[n++] = (PyType_Slot){_NPY_DT_ARRFUNCS_OFFSET + 3, per_format_funcs[id][1]};
    sl[n++] = (PyType_Slot){_NPY_DT_ARRFUNCS_OFFSET + 4, per_format_funcs[id][2]};
    /* np.dot and ndarray.dot (NumPy >= 2.5 reach a user dtype's dotfunc;
     * older ones refuse user dtypes before): the float formats only, the
     * integer formats' np.dot stays with the patch (int64 results) */
    if (mf_formats[id].kind == MF_KIND_FLOAT) {
        sl[n++] = (PyType_Slot){NPY_DT_PyArray_ArrFuncs_dotfunc, per_format_funcs[id][3]};
    }
    for (int k = 0; k < n; k++) {
        sl[k].slot = runtime_slot(sl[k].slot);
    }
    sl[n] = (PyType_Slot){0, NULL};
    return sl;
}

/* ----------------------------------------------------- class-level API */

static PyObject *
dtype_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    if ((args && PyTuple_GET_SIZE(args)) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_Format(PyExc_TypeError, "%s takes no arguments", cls->tp_name);
        return NULL;
    }
    int id = mf_dtype_index((PyArray_DTypeMeta *)cls);
    if (id < 0) {
        PyErr_SetString(PyExc_TypeError, "not a minifloat DType");
        return NULL;
    }
    Py_INCREF(mf_singletons[id]);
    return (PyObject *)mf_singletons[id];
}

static PyObject *
dtype_repr(PyObject *self)
{
    return PyUnicode_FromFormat("dtype(%s)", mf_descr_format((PyArray_Descr *)self)->name);
}

/* str(dt), and so dt.str: the name, which np.dtype() accepts back */
static PyObject *
dtype_str(PyObject *self)
{
    return PyUnicode_FromString(mf_descr_format((PyArray_Descr *)self)->name);
}

static PyObject *
dtype_reduce(PyObject *self, PyObject *NPY_UNUSED(args))
{
    return Py_BuildValue("O()", (PyObject *)Py_TYPE(self));
}

static PyObject *
dtype_get_name(PyObject *self, void *NPY_UNUSED(closure))
{
    return PyUnicode_FromString(mf_descr_format((PyArray_Descr *)self)->name);
}

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dtype_getset[] = {
    {"name", dtype_get_name, NULL, "The format's name, e.g. 'bfloat16'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* make one descriptor instance and fill in what NumPy reads from it */
static PyArray_Descr *
make_singleton(int id)
{
    const mf_format *f = &mf_formats[id];
    PyTypeObject *cls = (PyTypeObject *)&mf_dtypes[id];
    MFDescrObject *d = (MFDescrObject *)PyArrayDescr_Type.tp_new(cls, NULL, NULL);
    if (d == NULL) {
        return NULL;
    }
    d->fmt = f;
    /* not NPY_USE_GETITEM: NumPy makes scalars by copyswap into our scalar
     * type (see format_slots), so that arr.item() can give Python floats */
    d->base.flags = NPY_USE_SETITEM;
    d->base.elsize = f->itemsize;
    d->base.alignment = f->itemsize;
    d->base.kind = f->kind == MF_KIND_FLOAT ? 'f' : (f->kind == MF_KIND_SINT ? 'i' : 'u');
    d->base.type = f->typechar;
    d->base.byteorder = f->itemsize > 1 ? '=' : '|';
    /*
     * A type number no table inside NumPy is indexed with.  NumPy gives new
     * DTypes -1, which einsum's C code uses as an index into its tables
     * (reading out of bounds); with a number >= NPY_NTYPES_LEGACY that
     * code path instead reports "invalid data type for einsum".
     */
    d->base.type_num = 0x4D00 + id;
    return (PyArray_Descr *)d;
}

int
mf_init_dtypes(PyObject *module)
{
    mf_compute_cast_safety();
    if (mf_find_ml_dtypes() < 0) {
        return -1;
    }
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        const mf_format *f = &mf_formats[id];
        PyTypeObject *t = (PyTypeObject *)&mf_dtypes[id];
        snprintf(dtype_class_names[id], sizeof(dtype_class_names[id]),
                 "minifloat.dtypes.%s", f->dtype_class);
        Py_SET_REFCNT(t, 1);
        Py_SET_TYPE(t, &PyArrayDTypeMeta_Type);
        t->tp_name = dtype_class_names[id];
        t->tp_basicsize = sizeof(MFDescrObject);
        t->tp_flags = Py_TPFLAGS_DEFAULT;
        t->tp_base = &PyArrayDescr_Type;
        t->tp_new = dtype_new;
        t->tp_repr = dtype_repr;
        t->tp_str = dtype_str;
        t->tp_methods = dtype_methods;
        t->tp_getset = dtype_getset;
        t->tp_doc = "A minifloat DType class; its one instance is np.dtype(<format>).";
        if (PyType_Ready(t) < 0) {
            return -1;
        }
        PyArrayDTypeMeta_Spec spec = {
            .typeobj = mf_scalar_types[id],
            .flags = NPY_DT_NUMERIC,
            .casts = mf_get_cast_specs(id),
            .slots = format_slots(id),
            .baseclass = NULL,
        };
        if (PyArrayInitDTypeMeta_FromSpec(&mf_dtypes[id], &spec) < 0) {
            return -1;
        }
        mf_singletons[id] = make_singleton(id);
        if (mf_singletons[id] == NULL) {
            return -1;
        }
        mf_dtypes[id].singleton = mf_singletons[id];
        Py_INCREF(t);
        if (PyModule_AddObject(module, f->dtype_class, (PyObject *)t) < 0) {
            Py_DECREF(t);
            return -1;
        }
    }
    return 0;
}
