/*
 * Loops for the float formats on other packages' unary ufuncs: scipy.special's
 * erf, expit, gammaln, ndtr, ... (docs/design.md, "scipy.special's ufuncs").
 *
 * Without them NumPy's legacy type resolver runs the ufunc's first loop that a
 * format casts to safely (scipy 1.17: `d->d`), after casting the operand to
 * that type, and returns that type, as for float16 (scipy 1.18 lists `f->f`
 * first: float32).  The loop registered here for
 * (format) -> that loop's type runs the same loop on the same values: a code is
 * widened to float64 as the cast does (through float32, NaN payloads kept), so
 * the result is float16's route bit for bit.  What it adds:
 *
 *  - large calls of the formats (all of at most 16 bits) look each code's
 *    result up in a table of every code's result, made once per ufunc and
 *    format by that same loop (the bits by construction), split between the
 *    threads;
 *  - only while `scipy.special.geterr()` is all "ignore" (its default), read
 *    at each call: scipy's loops report domain errors, overflow and the like
 *    through it, warning or raising SpecialFunctionError from inside the loop,
 *    which a look-up would skip and a worker thread would lose.  Otherwise,
 *    and for small calls, the loop runs on the calling thread, block by block,
 *    as NumPy's route runs it.
 *
 * The floating-point flags a code raises are kept next to its result, as in
 * loops.c's tables (scipy's loops read and clear their own: none reach NumPy).
 */
#include <fenv.h>
#include <float.h>
#include "umath.h"
#include "../kernels/scalar_ops.h"
#include "../kernels/parallel.h"

#define SP_BLOCK 512
#define SP_MAX 2048

typedef struct {
    PyUFuncGenericFunction fn;
    void *data;
    int out_type;              /* NPY_DOUBLE or NPY_FLOAT: the loop's type */
    void *table;               /* every code's result (out size each), then their flag bytes */
} sp_loop;

typedef struct {
    PyObject *ufunc;           /* a reference held for the life of the process */
    sp_loop loops[MF_NUM_PUBLIC_FORMATS];
} sp_ufunc;

/* registered ufuncs, appended to under the GIL, read by get_loop (GIL held) */
static sp_ufunc *sp_ufuncs[SP_MAX];
static int sp_count = 0;
static PyObject *sp_geterr = NULL;     /* scipy.special.geterr */

static sp_ufunc *
sp_find(PyObject *ufunc)
{
    for (int i = 0; i < sp_count; i++) {
        if (sp_ufuncs[i]->ufunc == ufunc) {
            return sp_ufuncs[i];
        }
    }
    return NULL;
}

/* 1 if scipy.special.geterr() reports "ignore" for every kind of error but
 * "memory" (its default is "raise": a work array that could not be allocated,
 * which does not depend on the values; a table whose making meets one is
 * dropped, sp_build) */
static int
sp_errors_ignored(void)
{
    if (sp_geterr == NULL) {
        return 0;
    }
    PyObject *d = PyObject_CallNoArgs(sp_geterr);
    if (d == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyDict_Check(d);
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (ok && PyDict_Next(d, &pos, &k, &v)) {
        ok = (PyUnicode_Check(k) && PyUnicode_CompareWithASCIIString(k, "memory") == 0)
             || (PyUnicode_Check(v) && PyUnicode_CompareWithASCIIString(v, "ignore") == 0);
    }
    Py_DECREF(d);
    return ok;
}

/* n codes at `in` (stride is) widened to the loop's type, into buf: as the
 * cast to float64 / float32 does it */
static void
sp_decode(const mf_format *f, int out_type, const char *in, npy_intp is, void *buf, npy_intp n)
{
    if (out_type == NPY_DOUBLE) {
        double *d = (double *)buf;
        for (npy_intp i = 0; i < n; i++, in += is) {
            d[i] = (double)mf_dec_code(f, mf_load_code(f, in));
        }
    }
    else {
        float *d = (float *)buf;
        for (npy_intp i = 0; i < n; i++, in += is) {
            d[i] = mf_dec_code(f, mf_load_code(f, in));
        }
    }
}

/* the loop on n elements, block by block, on this thread */
static void
sp_direct(const sp_loop *L, const mf_format *f, const char *in, npy_intp is, char *out,
          npy_intp os, npy_intp n)
{
    double buf[SP_BLOCK];
    const npy_intp bs = L->out_type == NPY_DOUBLE ? 8 : 4;
    for (npy_intp s = 0; s < n; s += SP_BLOCK) {
        npy_intp len = n - s < SP_BLOCK ? n - s : SP_BLOCK;
        sp_decode(f, L->out_type, in + s * is, is, buf, len);
        char *args[2] = {(char *)buf, out + s * os};
        npy_intp steps[2] = {bs, os};
        L->fn(args, &len, steps, L->data);
    }
}

/* every code's result and flags, or NULL (no memory).  The caller's flags
 * are kept aside: making the table raises none. */
static void *
sp_build(const sp_loop *L, const mf_format *f)
{
    const npy_intp sz = f->itemsize, ncodes = (npy_intp)1 << (8 * sz);
    const npy_intp bs = L->out_type == NPY_DOUBLE ? 8 : 4;
    char *T = (char *)calloc((size_t)ncodes, (size_t)bs + 1);
    char *codes = mf_every_code(sz);
    if (T == NULL || codes == NULL) {
        free(T);
        free(codes);
        return NULL;
    }
    uint8_t *flags = (uint8_t *)(T + ncodes * bs);
    fenv_t saved;
    feholdexcept(&saved);
    for (npy_intp c = 0; c < ncodes; c += SP_BLOCK) {
        npy_intp len = ncodes - c < SP_BLOCK ? ncodes - c : SP_BLOCK;
        feclearexcept(FE_ALL_EXCEPT);
        sp_direct(L, f, codes + c * sz, sz, T + c * bs, bs, len);
        if (!fetestexcept(FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)) {
            continue;
        }
        /* a block that raised flags: each code alone, for its own */
        for (npy_intp i = c; i < c + len; i++) {
            feclearexcept(FE_ALL_EXCEPT);
            sp_direct(L, f, codes + i * sz, sz, T + i * bs, bs, 1);
            flags[i] = (uint8_t)(mf_lut_flag_bits(fetestexcept(FE_DIVBYZERO | FE_OVERFLOW
                                                               | FE_UNDERFLOW | FE_INVALID)) >> 16);
        }
    }
    fesetenv(&saved);
    free(codes);
    /* an error the loop raised while making it (scipy's loops set it under
     * the GIL they take): no table; NumPy raises the error after the call */
    PyGILState_STATE st = PyGILState_Ensure();
    int failed = PyErr_Occurred() != NULL;
    PyGILState_Release(st);
    if (failed) {
        free(T);
        return NULL;
    }
    return T;
}

typedef struct {
    const sp_loop *L;
    const mf_format *f;
    const char *in;
    npy_intp is;
    char *out;
    npy_intp os;
} sp_job;

/* elements [start, start + len) by table; the flags of the codes met are
 * raised (a worker's reach the caller: mf_par_range) */
static void
sp_lookup_range(void *ctx, mf_intp start, mf_intp len)
{
    const sp_job *J = (const sp_job *)ctx;
    const npy_intp ncodes = (npy_intp)1 << (8 * J->f->itemsize);
    const char *in = J->in + start * J->is;
    char *out = J->out + start * J->os;
    const uint8_t *flags = (const uint8_t *)J->L->table
                           + ncodes * (J->L->out_type == NPY_DOUBLE ? 8 : 4);
    uint8_t hit = 0;
#define SP_LOOKUP(C, R)                                                               \
    {                                                                                 \
        const R *res = (const R *)J->L->table;                                        \
        for (mf_intp i = 0; i < len; i++, in += J->is, out += J->os) {                \
            C c = *(const C *)in;                                                     \
            *(R *)out = res[c];                                                       \
            hit |= flags[c];                                                          \
        }                                                                             \
    }
    if (J->f->itemsize == 2) {
        if (J->L->out_type == NPY_DOUBLE) SP_LOOKUP(uint16_t, double)
        else SP_LOOKUP(uint16_t, float)
    }
    else {
        if (J->L->out_type == NPY_DOUBLE) SP_LOOKUP(uint8_t, double)
        else SP_LOOKUP(uint8_t, float)
    }
#undef SP_LOOKUP
    if (hit) {
        feraiseexcept(mf_lut_fe((uint32_t)hit << 16));
    }
}

typedef struct {
    NpyAuxData base;
    sp_loop *L;
} sp_aux;

static void
sp_aux_free(NpyAuxData *a)
{
    PyMem_RawFree(a);
}

static NpyAuxData *
sp_aux_clone(NpyAuxData *a)
{
    sp_aux *c = PyMem_RawMalloc(sizeof(sp_aux));
    if (c != NULL) {
        *c = *(sp_aux *)a;
    }
    return (NpyAuxData *)c;
}

/* the table of a call of n elements, or NULL: made at the first call of at
 * least 4 elements per code (making it costs the loop on every code, a
 * quarter of such a call at most); kept for the life of the process.  Only
 * while scipy's errors are ignored (read here, under the GIL, for the calls
 * large enough: a small call does not pay for it) */
static const void *
sp_table_for(sp_loop *L, const mf_format *f, npy_intp n)
{
    if (f->itemsize > 2 || n < ((npy_intp)4 << (8 * f->itemsize)) || !mf_default_fp_mode()) {
        return NULL;
    }
    PyGILState_STATE st = PyGILState_Ensure();
    int ignored = sp_errors_ignored();
    PyGILState_Release(st);
    if (!ignored) {
        return NULL;
    }
    void *T = __atomic_load_n(&L->table, __ATOMIC_ACQUIRE);
    if (T != NULL) {
        return T;
    }
    T = sp_build(L, f);
    if (T == NULL) {
        return NULL;
    }
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&L->table, &expected, T, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free(T);                   /* another thread made it first */
        T = expected;
    }
    return T;
}

static int
sp_strided_loop(PyArrayMethod_Context *context, char *const data[], npy_intp const dimensions[],
                npy_intp const strides[], NpyAuxData *auxdata)
{
    sp_aux *a = (sp_aux *)auxdata;
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    npy_intp n = dimensions[0];
    if (sp_table_for(a->L, f, n) != NULL) {
        sp_job J = {a->L, f, data[0], strides[0], data[1], strides[1]};
        mf_par_range(sp_lookup_range, &J, n, 1024, f->itemsize + (a->L->out_type == NPY_DOUBLE ? 8 : 4));
        return 0;
    }
    sp_direct(a->L, f, data[0], strides[0], data[1], strides[1], n);
    return 0;
}

static int
sp_get_loop(PyArrayMethod_Context *context, int NPY_UNUSED(aligned),
            int NPY_UNUSED(move_references), const npy_intp *NPY_UNUSED(strides),
            PyArrayMethod_StridedLoop **out_loop, NpyAuxData **out_transferdata,
            NPY_ARRAYMETHOD_FLAGS *flags)
{
    sp_ufunc *u = context->caller != NULL ? sp_find(context->caller) : NULL;
    int fid = mf_descr_format(context->descriptors[0])->id;
    if (u == NULL || fid < 0 || fid >= MF_NUM_PUBLIC_FORMATS || u->loops[fid].fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "minifloat: no loop registered for this call");
        return -1;
    }
    sp_aux *a = PyMem_RawCalloc(1, sizeof(sp_aux));
    if (a == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    a->base.free = sp_aux_free;
    a->base.clone = sp_aux_clone;
    a->L = &u->loops[fid];
    *out_loop = sp_strided_loop;
    *out_transferdata = (NpyAuxData *)a;
    *flags = 0;            /* the GIL released, as for scipy's own loops; NumPy checks the flags */
    return 0;
}

/*
 * The loop NumPy's legacy resolver picks for the format: the first whose
 * input the format casts to safely.  Its index, or -1 if that loop is not
 * `d->d` or `f->f` (or there is none): then nothing is registered and
 * NumPy's route stays.
 */
static int
sp_legacy_choice(PyUFuncObject *uf, PyArray_Descr *fmt_descr)
{
    for (int i = 0; i < uf->ntypes; i++) {
        int in = uf->types[2 * i], out = uf->types[2 * i + 1];
        PyArray_Descr *d = PyArray_DescrFromType(in);
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        int safe = PyArray_CanCastTypeTo(fmt_descr, d, NPY_SAFE_CASTING);
        Py_DECREF(d);
        if (safe) {
            return (in == out && (in == NPY_DOUBLE || in == NPY_FLOAT)) ? i : -1;
        }
    }
    return -1;
}

/* _add_special_loops(ufunc, geterr) -> the number of formats given a loop */
PyObject *
mf_py_add_special_loops(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *ufunc, *geterr;
    if (!PyArg_ParseTuple(args, "OO", &ufunc, &geterr)) {
        return NULL;
    }
    if (!PyObject_TypeCheck(ufunc, &PyUFunc_Type)) {
        PyErr_SetString(PyExc_TypeError, "_add_special_loops: not a ufunc");
        return NULL;
    }
    PyUFuncObject *uf = (PyUFuncObject *)ufunc;
    if (uf->nin != 1 || uf->nout != 1 || uf->core_enabled || uf->types == NULL
            || uf->functions == NULL) {
        return PyLong_FromLong(0);
    }
    if (sp_find(ufunc) != NULL) {
        return PyLong_FromLong(0);         /* registered before */
    }
    if (sp_count >= SP_MAX) {
        return PyLong_FromLong(0);
    }
    if (sp_geterr == NULL && geterr != Py_None) {
        Py_INCREF(geterr);
        sp_geterr = geterr;
    }
    sp_ufunc *u = PyMem_RawCalloc(1, sizeof(sp_ufunc));
    if (u == NULL) {
        return PyErr_NoMemory();
    }
    Py_INCREF(ufunc);
    u->ufunc = ufunc;
    sp_ufuncs[sp_count++] = u;     /* before the loops: their get_loop finds it */
    int added = 0;
    for (int fid = 0; fid < MF_NUM_PUBLIC_FORMATS; fid++) {
        if (mf_formats[fid].kind != MF_KIND_FLOAT) {
            continue;
        }
        int i = sp_legacy_choice(uf, mf_singletons[fid]);
        if (i < 0) {
            continue;
        }
        sp_loop *L = &u->loops[fid];
        L->fn = uf->functions[i];
        L->data = uf->data != NULL ? uf->data[i] : NULL;
        L->out_type = uf->types[2 * i + 1];
        PyArray_DTypeMeta *dtypes[2] = {&mf_dtypes[fid], mf_builtin_DType(L->out_type)};
        PyType_Slot slots[] = {
            {NPY_METH_get_loop, (void *)sp_get_loop},
            {0, NULL},
        };
        PyArrayMethod_Spec spec = {
            .name = "minifloat_special_loop",
            .nin = 1,
            .nout = 1,
            .casting = NPY_NO_CASTING,
            .flags = 0,
            .dtypes = dtypes,
            .slots = slots,
        };
        if (PyUFunc_AddLoopFromSpec(ufunc, &spec) < 0) {
            L->fn = NULL;
            return NULL;
        }
        added++;
    }
    if (added == 0) {          /* NumPy's route for every format: not kept */
        sp_count--;
        Py_DECREF(ufunc);
        PyMem_RawFree(u);
    }
    return PyLong_FromLong(added);
}

/* _special_ufuncs() -> the ufuncs given loops, in order */
PyObject *
mf_py_special_ufuncs(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    PyObject *t = PyTuple_New(sp_count);
    for (int i = 0; t != NULL && i < sp_count; i++) {
        Py_INCREF(sp_ufuncs[i]->ufunc);
        PyTuple_SET_ITEM(t, i, sp_ufuncs[i]->ufunc);
    }
    return t;
}
