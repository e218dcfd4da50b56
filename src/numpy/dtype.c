/*
 * The DType classes (NEP 42): one non-parametric DType per format, whose
 * singleton instance is the dtype users see (np.dtype(minifloat.bfloat16)).
 */
#include "../core/minifloat.h"

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

/* a descriptor in the other byte order (legacy dtypes can have one, e.g.
 * a.dtype.newbyteorder()) canonicalises to the native singleton; NumPy
 * then byte-swaps through the self cast around every loop */
static PyArray_Descr *
mf_ensure_canonical(PyArray_Descr *self)
{
    if (mf_descr_swapped(self)) {
        return mf_default_descr(NPY_DTYPE(self));
    }
    Py_INCREF(self);
    return self;
}

static PyArray_Descr *
mf_common_instance(PyArray_Descr *d1, PyArray_Descr *NPY_UNUSED(d2))
{
    return mf_ensure_canonical(d1);
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

#ifdef NPY_DT_get_constant   /* headers of NumPy >= 2.4 */
/* np.finfo (NumPy >= 2.4 asks the DType for these) */
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
    {0, NULL},
};

/*
 * Per-format ArrFuncs.  NumPy calls them without a descriptor (the `arr`
 * argument may be NULL or a stand-in), so each format has its own:
 *   getitem      PyArray_GETITEM: arr.item(), arr.tolist(), astype(object):
 *                Python floats (ints for the integer formats), as float16's;
 *   setitem      Python objects into the format (the cast's rounding);
 *   copyswap(n)  ndarray.byteswap(), and NumPy makes scalars with copyswap
 *                (the descriptors leave out NPY_USE_GETITEM, so `arr[i]` is
 *                a minifloat scalar made by copying the code into it);
 *   dotfunc      np.dot, ndarray.dot, np.vdot, np.inner, np.convolve,
 *                np.correlate (and so np.linalg.norm of a vector): float32
 *                accumulation in the dot kernels' order, rounded once, as
 *                np.vecdot; the integer formats accumulate in int64 and wrap
 *                to the format's width, as NumPy's int8 dot wraps in int8.
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

static int
set_value(int id, PyObject *obj, void *data)
{
    const mf_format *f = &mf_formats[id];
    uint32_t code;
    if (mf_code_from_pyobject(f, obj, &code) < 0) {
        return -1;
    }
    mf_store_code(f, (char *)data, code);
    return 0;
}

static void
dot_value(int id, char *ip1, npy_intp is1, char *ip2, npy_intp is2, char *op, npy_intp n)
{
    const mf_format *f = &mf_formats[id];
    if (f->kind == MF_KIND_FLOAT) {
        mf_strided_dots(f, 0, 1, n, ip1, 0, is1, ip2, 0, is2, op, 0);
        return;
    }
    int64_t acc = 0;
    for (npy_intp i = 0; i < n; i++, ip1 += is1, ip2 += is2) {
        int64_t a = (int64_t)mf_decode_f64(f, mf_load_code(f, ip1));
        int64_t b = (int64_t)mf_decode_f64(f, mf_load_code(f, ip2));
        acc += a * b;
    }
    /* two's complement in the format's width */
    mf_store_code(f, op, (uint32_t)((uint64_t)acc & ((1u << f->bits) - 1u)));
}

#define MF_FORMAT_FUNCS(i)                                                                \
    static PyObject *arr_getitem_##i(void *data, void *NPY_UNUSED(arr))                  \
    {                                                                                     \
        return py_value(i, data);                                                         \
    }                                                                                     \
    static int arr_setitem_##i(PyObject *obj, void *data, void *NPY_UNUSED(arr))          \
    {                                                                                     \
        return set_value(i, obj, data);                                                   \
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
    static void dot_##i(void *ip1, npy_intp is1, void *ip2, npy_intp is2, void *op,       \
                        npy_intp n, void *NPY_UNUSED(arr))                                \
    {                                                                                     \
        dot_value(i, ip1, is1, ip2, is2, op, n);                                          \
    }
MF_FORMAT_FUNCS(0) MF_FORMAT_FUNCS(1) MF_FORMAT_FUNCS(2) MF_FORMAT_FUNCS(3)
MF_FORMAT_FUNCS(4) MF_FORMAT_FUNCS(5) MF_FORMAT_FUNCS(6) MF_FORMAT_FUNCS(7)
MF_FORMAT_FUNCS(8) MF_FORMAT_FUNCS(9) MF_FORMAT_FUNCS(10) MF_FORMAT_FUNCS(11)
MF_FORMAT_FUNCS(12) MF_FORMAT_FUNCS(13) MF_FORMAT_FUNCS(14) MF_FORMAT_FUNCS(15)
MF_FORMAT_FUNCS(16) MF_FORMAT_FUNCS(17)
#undef MF_FORMAT_FUNCS

typedef char mf_one_set_of_funcs_per_format[(MF_NUM_PUBLIC_FORMATS == 18) ? 1 : -1];

#define FUNCS(i) {(void *)arr_getitem_##i, (void *)arr_setitem_##i, (void *)copyswapn_##i, \
                  (void *)copyswap_##i, (void *)dot_##i}
static void *per_format_funcs[MF_NUM_PUBLIC_FORMATS][5] = {
    FUNCS(0), FUNCS(1), FUNCS(2), FUNCS(3), FUNCS(4), FUNCS(5), FUNCS(6), FUNCS(7), FUNCS(8),
    FUNCS(9), FUNCS(10), FUNCS(11), FUNCS(12), FUNCS(13), FUNCS(14), FUNCS(15), FUNCS(16),
    FUNCS(17),
};
#undef FUNCS

/* the legacy half: a PyArray_DescrProto with the ArrFuncs (see register_dtype) */
static PyArray_ArrFuncs legacy_funcs[MF_NUM_PUBLIC_FORMATS];
static PyArray_DescrProto legacy_protos[MF_NUM_PUBLIC_FORMATS];

static PyArray_DescrProto *
legacy_proto(int id)
{
    const mf_format *f = &mf_formats[id];
    PyArray_ArrFuncs *fn = &legacy_funcs[id];
    PyArray_InitArrFuncs(fn);
    fn->getitem = (PyArray_GetItemFunc *)per_format_funcs[id][0];
    fn->setitem = (PyArray_SetItemFunc *)per_format_funcs[id][1];
    fn->copyswapn = (PyArray_CopySwapNFunc *)per_format_funcs[id][2];
    fn->copyswap = (PyArray_CopySwapFunc *)per_format_funcs[id][3];
    fn->dotfunc = (PyArray_DotFunc *)per_format_funcs[id][4];
    fn->compare = mf_compare_of[id];
    fn->argmax = (PyArray_ArgFunc *)mf_argmax;
    fn->argmin = (PyArray_ArgFunc *)mf_argmin;
    fn->nonzero = mf_nonzero_of[id];
    fn->fill = (PyArray_FillFunc *)mf_fill;
    fn->fillwithscalar = (PyArray_FillWithScalarFunc *)mf_fillwithscalar;
    fn->scanfunc = (PyArray_ScanFunc *)mf_scanfunc;
    fn->fromstr = (PyArray_FromStrFunc *)mf_fromstr;
    for (int k = 0; k < NPY_NSORTS; k++) {
        fn->sort[k] = (PyArray_SortFunc *)mf_sort;
        fn->argsort[k] = (PyArray_ArgSortFunc *)mf_argsort;
    }
    PyArray_DescrProto *p = &legacy_protos[id];
    memset(p, 0, sizeof(*p));
    Py_SET_REFCNT(p, 1);
    Py_SET_TYPE(p, &PyArrayDescr_Type);
    p->typeobj = mf_scalar_types[id];
    /*
     * kind 'V', as ml_dtypes: a legacy dtype's `.str`, `.descr` and
     * __array_interface__ typestr are kind + itemsize, and 'f' would make
     * bfloat16 read back as float16 ('<f2') wherever a consumer trusts the
     * typestr.  '<V2' is raw bytes: lossy, never wrong.  dt.str itself is
     * the format's name (dtype_get_str).
     */
    p->kind = 'V';
    p->type = f->typechar;
    p->byteorder = f->itemsize > 1 ? '=' : '|';
    /* not NPY_USE_GETITEM: NumPy makes scalars by copyswap into our scalar type */
    p->flags = NPY_USE_SETITEM;
    p->type_num = 0;
    p->elsize = f->itemsize;
    p->alignment = f->itemsize;
    p->f = fn;
    return p;
}

/* ArrFuncs slot numbers moved from 1 << 10 to 1 << 11 in NumPy 2.4 (an ABI
 * change numpy/numpy#31302 documents): use the running NumPy's */
static void
translate_arrfuncs_slots(PyType_Slot *slots, unsigned int runtime)
{
    int built = _NPY_DT_ARRFUNCS_OFFSET;
    int running = runtime >= 0x15 ? (1 << 11) : (1 << 10);
    for (PyType_Slot *sl = slots; sl->slot != 0; sl++) {
        if (sl->slot >= built && sl->slot < built + 30) {
            sl->slot += running - built;
        }
    }
}

#define MF_DT_LEGACY_DESCRIPTOR_PROTO ((1 << 11) - 1)   /* NumPy >= 2.5 */
#define MF_DT_LEGACY_FLAG 1                              /* NPY_DT_LEGACY */
typedef int (init_from_spec_fn)(PyArray_DTypeMeta *, PyArrayDTypeMeta_Spec *);

/*
 * A new-style DType that is also a legacy one (numpy/numpy#31302): it has a
 * type number, a descriptor NumPy's legacy C paths accept (np.dot and
 * friends, ufunc dtype= instances, byte-order changes, the legacy ufunc
 * type resolver that scipy's and np.fft's ufuncs use), and keeps every
 * new-style slot, cast and loop.  NumPy >= 2.5 does this itself given the
 * NPY_DT_legacy_descriptor_proto slot; on 2.0 - 2.4 we follow the steps of
 * NumPy's published backport (npy_2_compat.h): register the prototype the
 * legacy way, initialise the DType from the spec, then hand the legacy
 * descriptor and type number to the DType.
 */
static int
register_dtype(PyArray_DTypeMeta *DType, PyArrayDTypeMeta_Spec *spec, PyArray_DescrProto *proto)
{
    init_from_spec_fn *init_from_spec = (init_from_spec_fn *)PyArray_API[362];
    unsigned int runtime = PyArray_GetNDArrayCFeatureVersion();
    translate_arrfuncs_slots(spec->slots, runtime);
#ifdef NPY_DT_get_constant
    if (runtime < 0x15) {
        /* get_constant (np.finfo) is new in NumPy 2.4; minifloat.finfo
         * works without it */
        PyType_Slot *sl = spec->slots;
        int i = 0;
        while (sl[i].slot != 0 && sl[i].slot != NPY_DT_get_constant) i++;
        for (; sl[i].slot != 0; i++) {
            sl[i] = sl[i + 1];      /* shifts the terminator down too */
        }
    }
#endif
    if (runtime >= 0x16) {
        /* the proto slot first, then ours (the array has room: see format_slots) */
        PyType_Slot *sl = spec->slots;
        int n = 0;
        while (sl[n].slot != 0) n++;
        memmove(sl + 1, sl, (size_t)(n + 1) * sizeof(PyType_Slot));
        sl[0] = (PyType_Slot){MF_DT_LEGACY_DESCRIPTOR_PROTO, proto};
        return init_from_spec(DType, spec);
    }
    /* 1: the legacy registration, with a stand-in scalar type so that NumPy
     * does not map our scalar type to the DType it makes here */
    PyArray_DescrProto stand_in = *proto;
    stand_in.typeobj = &PyBaseObject_Type;
    int typenum = PyArray_RegisterDataType(&stand_in);
    if (typenum < 0) {
        return -1;
    }
    /* 2: the new-style DType */
    if (init_from_spec(DType, spec) < 0) {
        return -1;
    }
    /* 3: its singleton is the legacy descriptor, re-typed */
    PyArray_Descr *descr = PyArray_DescrFromType(typenum);
    if (descr == NULL) {
        return -1;
    }
    PyObject *made = (PyObject *)Py_TYPE(descr);
    DType->type_num = typenum;
    DType->singleton = descr;
    DType->flags |= MF_DT_LEGACY_FLAG;
    Py_INCREF((PyObject *)DType);
    Py_SET_TYPE(descr, (PyTypeObject *)DType);
    Py_DECREF(made);
    Py_INCREF((PyObject *)proto->typeobj);
    Py_XSETREF(descr->typeobj, proto->typeobj);
    PyArray_ArrFuncs *f = PyDataType_GetArrFuncs(descr);
    PyArray_ArrFuncs *pf = proto->f;
    f->getitem = pf->getitem;
    f->setitem = pf->setitem;
    f->copyswap = pf->copyswap;
    f->copyswapn = pf->copyswapn;
    f->dotfunc = pf->dotfunc;
    f->compare = pf->compare;
    f->argmax = pf->argmax;
    f->argmin = pf->argmin;
    f->nonzero = pf->nonzero;
    f->fill = pf->fill;
    f->fillwithscalar = pf->fillwithscalar;
    f->scanfunc = pf->scanfunc;
    f->fromstr = pf->fromstr;
    for (int k = 0; k < NPY_NSORTS; k++) {
        f->sort[k] = pf->sort[k];
        f->argsort[k] = pf->argsort[k];
    }
    return 0;
}

#define N_SHARED_SLOTS (sizeof(dtype_slots) / sizeof(dtype_slots[0]) - 1)
static PyType_Slot slots_of[MF_NUM_PUBLIC_FORMATS][N_SHARED_SLOTS + 2];

static PyType_Slot *
format_slots(int id)
{
    PyType_Slot *sl = slots_of[id];
    /* one free slot in front for NPY_DT_legacy_descriptor_proto */
    memcpy(sl, dtype_slots, (N_SHARED_SLOTS + 1) * sizeof(PyType_Slot));
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

/* dt.str: the name, which np.dtype() accepts back; np.save writes it as the
 * .npy header's descr, so np.load needs no pickle */
static PyObject *
dtype_get_str(PyObject *self, void *NPY_UNUSED(closure))
{
    return dtype_str(self);
}

static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dtype_getset[] = {
    {"name", dtype_get_name, NULL, "The format's name, e.g. 'bfloat16'.", NULL},
    {"str", dtype_get_str, NULL, "The format's name, e.g. 'bfloat16'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int
mf_init_dtypes(PyObject *module)
{
    mf_compute_cast_safety();
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        const mf_format *f = &mf_formats[id];
        PyTypeObject *t = (PyTypeObject *)&mf_dtypes[id];
        snprintf(dtype_class_names[id], sizeof(dtype_class_names[id]),
                 "minifloat.dtypes.%s", f->dtype_class);
        Py_SET_REFCNT(t, 1);
        Py_SET_TYPE(t, &PyArrayDTypeMeta_Type);
        t->tp_name = dtype_class_names[id];
        t->tp_basicsize = sizeof(_PyArray_LegacyDescr);   /* NumPy copies descriptors */
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
        if (register_dtype(&mf_dtypes[id], &spec, legacy_proto(id)) < 0) {
            return -1;
        }
        mf_singletons[id] = mf_dtypes[id].singleton;
        Py_INCREF(t);
        if (PyModule_AddObject(module, f->dtype_class, (PyObject *)t) < 0) {
            Py_DECREF(t);
            return -1;
        }
    }
    return 0;
}
