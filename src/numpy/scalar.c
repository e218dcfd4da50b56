/*
 * Scalar types: minifloat.bfloat16 and friends.  Float formats subclass
 * np.floating, integer formats np.signedinteger / np.unsignedinteger.  A
 * scalar holds one code; arithmetic is inherited from np.generic, which
 * sends it through the ufunc loops, so scalars and arrays agree.
 */
#include "../core/minifloat.h"
#include <structmember.h>

PyTypeObject *mf_scalar_types[MF_NUM_PUBLIC_FORMATS];

int
mf_scalar_format_of(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        if (t == mf_scalar_types[i]) {
            return i;
        }
    }
    return -1;
}

static int
format_of_type(PyTypeObject *t)
{
    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        if (t == mf_scalar_types[i] || PyType_IsSubtype(t, mf_scalar_types[i])) {
            return i;
        }
    }
    return -1;
}

PyObject *
mf_scalar_from_code(int fmt_id, uint32_t code)
{
    PyTypeObject *t = mf_scalar_types[fmt_id];
    MFScalarObject *obj = (MFScalarObject *)t->tp_alloc(t, 0);
    if (obj == NULL) {
        return NULL;
    }
    obj->code = (uint16_t)(code & mf_code_mask(&mf_formats[fmt_id]));
    return (PyObject *)obj;
}

static inline double
scalar_value(PyObject *self)
{
    int id = mf_scalar_format_of(self);
    return mf_decode_f64(&mf_formats[id], ((MFScalarObject *)self)->code);
}

/* ------------------------------------------------ Python objects -> codes */

/* a Python value too large for the format: reported as NumPy reports a
 * float32 overflow (np.errstate decides: warn, raise, ignore, call) */
static int
code_from_double(const mf_format *f, double v, uint32_t *code)
{
    int ovf = 0;
    *code = mf_encode_f64_ovf(f, v, &ovf);
    if (ovf && PyUFunc_GiveFloatingpointErrors("cast", NPY_FPE_OVERFLOW) < 0) {
        return -1;
    }
    return 0;
}

/* integers, exactly: wrap for integer formats, round once for floats */
static int
code_from_pylong(const mf_format *f, PyObject *obj, uint32_t *code)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (f->kind != MF_KIND_FLOAT) {
        if (overflow) {
            /* wrap arbitrary Python ints: keep the low bits */
            PyObject *mask = PyLong_FromUnsignedLong(mf_code_mask(f));
            if (mask == NULL) {
                return -1;
            }
            PyObject *low = PyNumber_And(obj, mask);
            Py_DECREF(mask);
            if (low == NULL) {
                return -1;
            }
            v = PyLong_AsLongLong(low);
            Py_DECREF(low);
        }
        *code = (uint32_t)((unsigned long long)v & mf_code_mask(f));
        return 0;
    }
    if (overflow) {
        double d = PyLong_AsDouble(obj);
        if (d == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        /* |obj| >= 2^63: rounding the double again is off only for huge
         * values far beyond every format's range */
        return code_from_double(f, d, code);
    }
    *code = mf_encode_f64(f, mf_int64_to_f64_odd((int64_t)v));
    return 0;
}

/* NumPy 2: an integer out of an integer type's range is an error when it
 * is stored as a scalar (arrays cast with wrap-around instead) */
static int
check_int_range(const mf_format *f, PyObject *pylong)
{
    if (f->kind == MF_KIND_FLOAT) {
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(pylong, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || v < mf_int_min(f) || v > mf_int_max(f)) {
        PyErr_Format(PyExc_OverflowError, "Python integer %R out of bounds for %s", pylong, f->name);
        return -1;
    }
    return 0;
}

/* anything with __index__ */
static int
code_from_index(const mf_format *f, PyObject *obj, uint32_t *code)
{
    PyObject *as_int = PyNumber_Index(obj);
    if (as_int == NULL) {
        return -1;
    }
    int r = code_from_pylong(f, as_int, code);
    Py_DECREF(as_int);
    return r;
}

int
mf_code_from_pyobject(const mf_format *f, PyObject *obj, uint32_t *code)
{
    int other = mf_scalar_format_of(obj);
    if (other >= 0) {
        const mf_format *of = &mf_formats[other];
        uint32_t c = ((MFScalarObject *)obj)->code;
        if (other == (int)f->id) {
            *code = c;
            return 0;
        }
        if (f->kind != MF_KIND_FLOAT && of->kind != MF_KIND_FLOAT) {
            *code = (uint32_t)((uint64_t)(int64_t)mf_decode_f64(of, c) & mf_code_mask(f));
            return 0;
        }
        return code_from_double(f, mf_decode_f64(of, c), code);
    }
    if (PyFloat_CheckExact(obj)) {
        return code_from_double(f, PyFloat_AS_DOUBLE(obj), code);
    }
    if (PyBool_Check(obj)) {
        *code = mf_encode_f64(f, obj == Py_True ? 1.0 : 0.0);
        return 0;
    }
    if (PyLong_Check(obj)) {
        if (check_int_range(f, obj) < 0) {
            return -1;
        }
        return code_from_pylong(f, obj, code);
    }
    if (PyArray_IsScalar(obj, LongDouble)) {
        long double v = PyArrayScalar_VAL(obj, LongDouble);
        if (f->kind != MF_KIND_FLOAT) {
            return code_from_double(f, (double)v, code);
        }
        *code = mf_encode_f64(f, mf_longdouble_to_f64_odd(v));
        return 0;
    }
    if (PyArray_IsScalar(obj, Integer)) {
        PyObject *as_int = PyNumber_Index(obj);
        if (as_int == NULL) {
            return -1;
        }
        if (check_int_range(f, as_int) < 0) {
            Py_DECREF(as_int);
            return -1;
        }
        int r = code_from_pylong(f, as_int, code);
        Py_DECREF(as_int);
        return r;
    }
    if (PyFloat_Check(obj) || PyArray_IsScalar(obj, Floating)) {
        double d = PyFloat_AsDouble(obj);
        if (d == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        return code_from_double(f, d, code);
    }
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyObject *flt = PyFloat_FromString(obj);
        if (flt == NULL) {
            return -1;
        }
        double d = PyFloat_AS_DOUBLE(flt);
        Py_DECREF(flt);
        if (f->kind != MF_KIND_FLOAT) {
            /* "3" for int4: parse as a float, then the integer rules */
            return code_from_double(f, d, code);
        }
        return code_from_double(f, d, code);
    }
    if (obj == Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "%s: expected a number, got None (use float('nan') for a missing float value)",
                     f->name);
        return -1;
    }
    if (f->kind != MF_KIND_FLOAT && PyIndex_Check(obj)) {
        return code_from_index(f, obj, code);     /* integers first for int formats */
    }
    /* anything else with __float__ (e.g. a 0-d torch tensor, Fraction) */
    if (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_float) {
        PyObject *flt = PyNumber_Float(obj);
        if (flt == NULL) {
            return -1;
        }
        double d = PyFloat_AS_DOUBLE(flt);
        Py_DECREF(flt);
        return code_from_double(f, d, code);
    }
    if (PyIndex_Check(obj)) {
        return code_from_index(f, obj, code);
    }
    PyErr_Format(PyExc_TypeError, "%s: expected a number, got %.200s",
                 f->name, Py_TYPE(obj)->tp_name);
    return -1;
}

/* ------------------------------------------------------------- type slots */

static PyObject *
scalar_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    int id = format_of_type(type);
    if (id < 0) {
        PyErr_SetString(PyExc_TypeError, "not a minifloat scalar type");
        return NULL;
    }
    const mf_format *f = &mf_formats[id];
    PyObject *x = NULL;
    static char *kwlist[] = {"value", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O", kwlist, &x)) {
        return NULL;
    }
    if (x == NULL) {
        return mf_scalar_from_code(id, mf_encode_f64(f, 0.0));
    }
    if (Py_TYPE(x) == type) {
        Py_INCREF(x);
        return x;
    }
    /* like np.float32([1, 2]): array-likes give an array of this dtype */
    if (PyArray_Check(x) || PyList_Check(x) || PyTuple_Check(x)) {
        if (PyArray_Check(x) && PyArray_NDIM((PyArrayObject *)x) == 0) {
            PyObject *item = PyArray_GETITEM((PyArrayObject *)x, PyArray_DATA((PyArrayObject *)x));
            if (item == NULL) {
                return NULL;
            }
            PyObject *targs = PyTuple_Pack(1, item);
            Py_DECREF(item);
            if (targs == NULL) {
                return NULL;
            }
            PyObject *res = scalar_new(type, targs, NULL);
            Py_DECREF(targs);
            return res;
        }
        Py_INCREF(mf_singletons[id]);
        return PyArray_FromAny(x, mf_singletons[id], 0, 0, NPY_ARRAY_FORCECAST | NPY_ARRAY_ENSURECOPY, NULL);
    }
    uint32_t code;
    if (f->kind != MF_KIND_FLOAT && mf_scalar_format_of(x) < 0
            && (PyFloat_Check(x) || PyArray_IsScalar(x, Floating))) {
        /* int4(3.7) is int4(int(3.7)), as np.int8(300.7) is np.int8(300):
         * out of range raises OverflowError (NaN ValueError), no wrap-around */
        PyObject *as_int = PyNumber_Long(x);
        if (as_int == NULL) {
            return NULL;
        }
        if (check_int_range(f, as_int) < 0 || code_from_pylong(f, as_int, &code) < 0) {
            Py_DECREF(as_int);
            return NULL;
        }
        Py_DECREF(as_int);
        return mf_scalar_from_code(id, code);
    }
    if (mf_code_from_pyobject(f, x, &code) < 0) {
        return NULL;
    }
    return mf_scalar_from_code(id, code);
}

/* the p-significant-digit decimal m * 10^e (as a double, correctly rounded) */
static double
decimal_value(long long m, int e, int *ok)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%llde%d", m, e);
    double d = PyOS_string_to_double(buf, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        *ok = 0;
    }
    return d;
}

/* values whose exact decimal has at most this many significant digits print
 * exactly (the printing rule: docs/design.md) */
#define MF_EXACT_PRINT_DIGITS 6

/*
 * Does |v| (finite, nonzero) have an exact decimal expansion of at most
 * `digits` significant digits (digits <= 9)?  |v| = M * 2^E with M odd: for
 * E < 0 its digits are those of M * 5^-E (odd, so no trailing zero); for
 * E >= 0 those of M * 2^E less the trailing zeros (factors of 5 in M paired
 * with factors of 2).
 */
static int
exact_digits_at_most(double v, int digits)
{
    uint64_t limit = 1;
    for (int i = 0; i < digits; i++) {
        limit *= 10;
    }
    int e;
    double fr = frexp(fabs(v), &e);
    uint64_t m = (uint64_t)ldexp(fr, 53);
    int E = e - 53;
    while (!(m & 1)) {
        m >>= 1;
        E++;
    }
    if (E < 0) {
        for (int k = 0; k < -E; k++) {
            if (m >= limit) {
                return 0;
            }
            m *= 5;
        }
        return m < limit;
    }
    while (E > 0 && m % 5 == 0) {
        m /= 5;
        E--;
    }
    for (; E > 0; E--) {
        if (m >= limit) {
            return 0;
        }
        m *= 2;
    }
    return m < limit;
}

/*
 * The decimal a value of the format prints as, as a double (whose own
 * shortest digits it then has):
 *  - the exact value when its decimal expansion has at most 6 significant
 *    digits (448 in float8_e4m3fn prints as 448.0, not as the shorter 450.0
 *    that also rounds back; 1.125 and 0.125 print exactly);
 *  - otherwise the shortest decimal that rounds back to `code` in the format,
 *    the nearest to the value among those of that length (bfloat16's
 *    0.10009765625 prints as 0.1).
 * Either way the printed decimal rounds back to `code`.  For the shortest
 * search, for each digit count p the candidates are the nearest p-digit
 * decimal and its two neighbours: at a power of two the rounding interval is
 * lopsided, and the nearest one may fall outside it while a neighbour does
 * not.  For the saturating formats (float6/float4)
 * digits from the midpoint above the largest value on are refused: they
 * round back only by saturation.
 */
double
mf_shortest_double(const mf_format *f, uint32_t code)
{
    double v = mf_decode_f64(f, code);
    if (!isfinite(v) || v == 0.0 || exact_digits_at_most(v, MF_EXACT_PRINT_DIGITS)) {
        return v;
    }
    /* formats without inf and NaN (float6/float4) saturate, so their cast
     * takes any large decimal back to the largest value: accept only those
     * below the midpoint to the next value the format would have */
    double bound = INFINITY;
    if (f->special == MF_SPECIAL_NONE) {
        uint32_t maxc = mf_max_finite_mag(f);
        double maxv = mf_decode_f64(f, maxc);
        bound = maxv + 0.5 * (maxv - mf_decode_f64(f, maxc - 1));
    }
    for (int digits = 1; digits <= 17; digits++) {
        char *s = PyOS_double_to_string(fabs(v), 'e', digits - 1, 0, NULL);
        if (s == NULL) {
            PyErr_Clear();
            return v;
        }
        /* "d.ddde[+-]XX" -> integer mantissa m (digits long) and exponent */
        long long m = 0;
        int e = 0;
        const char *c = s;
        for (; *c && *c != 'e'; c++) {
            if (*c >= '0' && *c <= '9') {
                m = m * 10 + (*c - '0');
            }
        }
        if (*c == 'e') {
            e = atoi(c + 1);
        }
        PyMem_Free(s);
        e -= digits - 1;
        /* m is the nearest p-digit decimal (printf rounds ties to even), so
         * it wins when it rounds back; else the neighbour on v's side first */
        int ok = 1;
        double dm = decimal_value(m, e, &ok);
        long long order[3] = {m, m + 1, m - 1};
        if (ok && fabs(v) < dm) {
            order[1] = m - 1;
            order[2] = m + 1;
        }
        for (int k = 0; k < 3; k++) {
            if (order[k] <= 0) {
                continue;
            }
            ok = 1;
            double d = decimal_value(order[k], e, &ok);
            if (ok && mf_encode_f64(f, copysign(d, v)) == code && d < bound) {
                return copysign(d, v);
            }
        }
    }
    return v;
}

static PyObject *
scalar_str(PyObject *self)
{
    int id = mf_scalar_format_of(self);
    const mf_format *f = &mf_formats[id];
    uint32_t code = ((MFScalarObject *)self)->code;
    if (f->kind != MF_KIND_FLOAT) {
        return PyUnicode_FromFormat("%lld", (long long)mf_decode_f64(f, code));
    }
    double d = mf_shortest_double(f, code);
    char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) {
        return NULL;
    }
    PyObject *res = PyUnicode_FromString(s);
    PyMem_Free(s);
    return res;
}

static PyObject *
scalar_repr(PyObject *self)
{
    PyObject *s = scalar_str(self);
    if (s == NULL) {
        return NULL;
    }
    int id = mf_scalar_format_of(self);
    PyObject *res = PyUnicode_FromFormat("minifloat.%s(%U)", mf_formats[id].name, s);
    Py_DECREF(s);
    return res;
}

static Py_hash_t
scalar_hash(PyObject *self)
{
    double v = scalar_value(self);
    if (isnan(v)) {
        return PyBaseObject_Type.tp_hash(self);
    }
    PyObject *fl = PyFloat_FromDouble(v);
    if (fl == NULL) {
        return -1;
    }
    Py_hash_t h = PyObject_Hash(fl);
    Py_DECREF(fl);
    return h;
}

static PyObject *
scalar_richcompare(PyObject *self, PyObject *other, int op)
{
    /* minifloat scalars against each other and against Python floats and
     * ints: their exact values (as arrays compare with Python numbers, see
     * src/umath/ufuncs.c); everything else goes through NumPy's generic
     * scalar comparison (ufuncs, NEP 50) */
    double b;
    int self_id = mf_scalar_format_of(self);
    if (self_id < 0) {
        return PyGenericArrType_Type.tp_richcompare(self, other, op);
    }
    if (mf_scalar_format_of(other) >= 0) {
        /* two formats: their exact values (a common type holds both) */
        b = scalar_value(other);
    }
    else if (PyFloat_CheckExact(other)) {
        b = PyFloat_AS_DOUBLE(other);
    }
    else if (PyLong_CheckExact(other)) {
        b = PyLong_AsDouble(other);
        if (b == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                return NULL;
            }
            PyErr_Clear();   /* the generic path raises what arrays raise */
            return PyGenericArrType_Type.tp_richcompare(self, other, op);
        }
    }
    else {
        return PyGenericArrType_Type.tp_richcompare(self, other, op);
    }
    double a = scalar_value(self);
    int r;
    switch (op) {
        case Py_LT: r = a < b; break;
        case Py_LE: r = a <= b; break;
        case Py_EQ: r = a == b; break;
        case Py_NE: r = a != b; break;
        case Py_GT: r = a > b; break;
        default:    r = a >= b; break;
    }
    return PyArray_Scalar(&(npy_bool){(npy_bool)r}, PyArray_DescrFromType(NPY_BOOL), NULL);
}

static PyObject *
scalar_float(PyObject *self)
{
    return PyFloat_FromDouble(scalar_value(self));
}

static PyObject *
scalar_int(PyObject *self)
{
    int id = mf_scalar_format_of(self);
    if (mf_formats[id].kind != MF_KIND_FLOAT) {
        return PyLong_FromLongLong((long long)scalar_value(self));
    }
    return PyLong_FromDouble(scalar_value(self));   /* ValueError/OverflowError for NaN/inf */
}

static int
scalar_bool(PyObject *self)
{
    return scalar_value(self) != 0.0;
}

static PyObject *
scalar_item(PyObject *self, PyObject *NPY_UNUSED(args))
{
    int id = mf_scalar_format_of(self);
    if (mf_formats[id].kind != MF_KIND_FLOAT) {
        return scalar_int(self);
    }
    return scalar_float(self);
}

static PyObject *
scalar_reduce(PyObject *self, PyObject *NPY_UNUSED(args))
{
    /* by code, so NaN payloads survive: minifloat._core._scalar(name, code) */
    PyObject *mod = PyImport_ImportModule("minifloat._core");
    if (mod == NULL) {
        return NULL;
    }
    PyObject *ctor = PyObject_GetAttrString(mod, "_scalar_from_code");
    Py_DECREF(mod);
    if (ctor == NULL) {
        return NULL;
    }
    int id = mf_scalar_format_of(self);
    return Py_BuildValue("N(si)", ctor, mf_formats[id].name, (int)((MFScalarObject *)self)->code);
}

static PyObject *
scalar_format(PyObject *self, PyObject *spec)
{
    PyObject *v = scalar_item(self, NULL);
    if (v == NULL) {
        return NULL;
    }
    PyObject *res;
    if (PyUnicode_Check(spec) && PyUnicode_GetLength(spec) == 0) {
        res = PyObject_Str(self);
    }
    else {
        res = PyObject_Format(v, spec);
    }
    Py_DECREF(v);
    return res;
}

static PyObject *
scalar_get_code(PyObject *self, void *NPY_UNUSED(closure))
{
    return PyLong_FromLong(((MFScalarObject *)self)->code);
}

static PyObject *
scalar_is_integer(PyObject *self, PyObject *NPY_UNUSED(args))
{
    double v = scalar_value(self);
    return PyBool_FromLong(isfinite(v) && v == floor(v));
}

static PyObject *
scalar_as_integer_ratio(PyObject *self, PyObject *NPY_UNUSED(args))
{
    PyObject *fl = scalar_float(self);
    if (fl == NULL) {
        return NULL;
    }
    PyObject *res = PyObject_CallMethod(fl, "as_integer_ratio", NULL);
    Py_DECREF(fl);
    return res;
}

/* a real number is its own conjugate (NumPy < 2.4's ndarray.conjugate
 * refuses dtypes it does not know to be numeric) */
static PyObject *
scalar_conjugate(PyObject *self, PyObject *NPY_UNUSED(args))
{
    Py_INCREF(self);
    return self;
}

static PyMethodDef scalar_methods[] = {
    {"conjugate", scalar_conjugate, METH_NOARGS, "The value itself (a real number)."},
    {"conj", scalar_conjugate, METH_NOARGS, "The value itself (a real number)."},
    {"item", scalar_item, METH_VARARGS, "The value as a Python float (int for integer formats)."},
    {"tolist", scalar_item, METH_NOARGS, "Same as item()."},
    {"__reduce__", scalar_reduce, METH_NOARGS, NULL},
    {"__format__", scalar_format, METH_O, NULL},
    {"is_integer", scalar_is_integer, METH_NOARGS, "True if the value is finite and integral."},
    {"as_integer_ratio", scalar_as_integer_ratio, METH_NOARGS,
     "The exact value as a pair of integers."},
    {NULL, NULL, 0, NULL},
};

static PyObject *
scalar_get_real(PyObject *self, void *NPY_UNUSED(closure))
{
    Py_INCREF(self);
    return self;
}

static PyObject *
scalar_get_imag(PyObject *self, void *NPY_UNUSED(closure))
{
    int id = mf_scalar_format_of(self);
    return mf_scalar_from_code(id, mf_encode_f64(&mf_formats[id], 0.0));
}

static PyGetSetDef scalar_getset[] = {
    {"code", scalar_get_code, NULL, "The stored bits of this value.", NULL},
    {"real", scalar_get_real, NULL, "The value itself.", NULL},
    {"imag", scalar_get_imag, NULL, "Zero, in this format.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *
scalar_index(PyObject *self)
{
    return scalar_int(self);
}

static char type_names[MF_NUM_PUBLIC_FORMATS][64];

int
mf_init_scalars(PyObject *module)
{
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        const mf_format *f = &mf_formats[id];
        snprintf(type_names[id], sizeof(type_names[id]), "minifloat.%s", f->name);
        int is_float = f->kind == MF_KIND_FLOAT;
        PyType_Slot slots[] = {
            {Py_tp_new, scalar_new},
            {Py_tp_repr, scalar_repr},
            {Py_tp_str, scalar_str},
            {Py_tp_hash, scalar_hash},
            {Py_tp_richcompare, scalar_richcompare},
            {Py_tp_methods, scalar_methods},
            {Py_tp_getset, scalar_getset},
            {Py_nb_float, scalar_float},
            {Py_nb_int, scalar_int},
            {Py_nb_bool, scalar_bool},
            {is_float ? 0 : Py_nb_index, is_float ? NULL : (void *)scalar_index},
            {0, NULL},
        };
        PyType_Spec spec = {
            .name = type_names[id],
            .basicsize = sizeof(MFScalarObject),
            .itemsize = 0,
            .flags = Py_TPFLAGS_DEFAULT,
            .slots = slots,
        };
        PyTypeObject *base = is_float ? &PyFloatingArrType_Type
                             : (f->kind == MF_KIND_SINT ? &PySignedIntegerArrType_Type
                                                        : &PyUnsignedIntegerArrType_Type);
        PyObject *bases = PyTuple_Pack(1, (PyObject *)base);
        if (bases == NULL) {
            return -1;
        }
        PyObject *t = PyType_FromSpecWithBases(&spec, bases);
        Py_DECREF(bases);
        if (t == NULL) {
            return -1;
        }
        PyObject *doc = PyUnicode_FromFormat(
                "%s scalar: one value of the %s format (see minifloat.finfo / iinfo).",
                f->name, f->name);
        if (doc == NULL || PyObject_SetAttrString(t, "__doc__", doc) < 0) {
            Py_XDECREF(doc);
            return -1;
        }
        Py_DECREF(doc);
        mf_scalar_types[id] = (PyTypeObject *)t;
        Py_INCREF(t);
        if (PyModule_AddObject(module, f->name, t) < 0) {
            Py_DECREF(t);
            return -1;
        }
    }
    return 0;
}

/* bfloat16.dtype etc.: the dtype as a class attribute of each scalar type, as
 * ml_dtypes' scalar types have it (it also answers for instances, shadowing
 * np.generic's dtype getter with the same value).  Called once the dtypes
 * exist. */
int
mf_scalars_set_dtype(void)
{
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        if (PyObject_SetAttrString((PyObject *)mf_scalar_types[id], "dtype",
                                   (PyObject *)mf_singletons[id]) < 0) {
            return -1;
        }
    }
    return 0;
}
