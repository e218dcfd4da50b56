/*
 * Registration of the ufunc loops (PyUFunc_AddLoopFromSpec) and promoters
 * (PyUFunc_AddPromoter) for every minifloat float format.
 */
#include "umath.h"
#include "ufunc_table.h"

static PyObject *umath_module = NULL;

static PyArray_DTypeMeta *
dtype_for_letter(char t, PyArray_DTypeMeta *fmt_dtype)
{
    switch (t) {
        case 'M': return fmt_dtype;
        case '?': return mf_builtin_DType(NPY_BOOL);
        case 'i': return mf_builtin_DType(NPY_INT);
        case 'l': return mf_builtin_DType(NPY_LONG);
        case 'd': return mf_builtin_DType(NPY_DOUBLE);
        default: return NULL;
    }
}

static int
sig_nin(const char *sig)
{
    return (int)(strchr(sig, '-') - sig);
}

/* the first table row of a ufunc for float (or integer) formats, or NULL */
static const mf_ufunc_def *
row_of(const char *ufunc_name, int for_ints)
{
    for (int d = 0; d < mf_num_ufunc_defs; d++) {
        if (strcmp(mf_ufunc_defs[d].ufunc, ufunc_name) == 0
                && (mf_ufunc_defs[d].kind == MF_LOOP_INT) == for_ints) {
            return &mf_ufunc_defs[d];
        }
    }
    return NULL;
}

static const mf_ufunc_def *
def_of(const char *ufunc_name)
{
    const mf_ufunc_def *d = row_of(ufunc_name, 0);
    return d ? d : row_of(ufunc_name, 1);
}

/*
 * An integer format meeting a ufunc that has no integer loop: the float
 * type NumPy would use for int8 (float16 for sqrt, exp, ...; float64 for
 * true division and float_power), and int64/uint64 for matmul/vecdot so
 * that products do not wrap.
 */
static PyArray_DTypeMeta *
int_format_fallback(const char *name, PyArray_DTypeMeta *common)
{
    int cid = mf_dtype_index(common);
    if (cid < 0 || mf_formats[cid].kind == MF_KIND_FLOAT || row_of(name, 1) != NULL) {
        return common;
    }
    int tn;
    if (strcmp(name, "matmul") == 0 || strcmp(name, "vecdot") == 0) {
        tn = mf_formats[cid].kind == MF_KIND_UINT ? NPY_UINT64 : NPY_INT64;
    }
    else if (strcmp(name, "divide") == 0 || strcmp(name, "float_power") == 0) {
        tn = NPY_DOUBLE;
    }
    else {
        tn = NPY_HALF;
    }
    PyArray_DTypeMeta *r = mf_builtin_DType(tn);
    Py_INCREF(r);
    Py_DECREF(common);
    return r;
}

/*
 * A comparison between a minifloat and a Python float or int compares
 * values: the Python number goes to float64, which holds every value of every
 * format and every Python float exactly, and the float formats' "Md->?" /
 * "dM->?" loops compare (integer formats: both operands float64).  NEP 50 would first convert the
 * Python number into the format, and there it can lose its value: 0.0 and
 * negative numbers become NaN in float8_e8m0fnu, 1e6 becomes NaN in
 * float8_e4m3fn, 100 is out of range of int4.  (NumPy compares Python ints
 * with its integer types by value for the same reason; ml_dtypes compares
 * values.)  Arithmetic keeps NEP 50: there the result has the format.
 */
static int
is_comparison(const char *name)
{
    static const char *names[] = {"equal", "not_equal", "less", "less_equal",
                                  "greater", "greater_equal"};
    for (int i = 0; i < 6; i++) {
        if (strcmp(name, names[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static int
is_python_number(PyArray_DTypeMeta *d)
{
    return d == &PyArray_PyFloatDType || d == &PyArray_PyLongDType;
}

static int
compare_with_python_number(PyUFuncObject *ufunc, PyArray_DTypeMeta *const op_dtypes[],
                           PyArray_DTypeMeta *const signature[],
                           PyArray_DTypeMeta *new_op_dtypes[])
{
    if (ufunc->nin != 2 || ufunc->nargs != 3 || !is_comparison(ufunc->name)) {
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (signature[i] != NULL) {
            return 0;
        }
    }
    int py0 = is_python_number(op_dtypes[0]), py1 = is_python_number(op_dtypes[1]);
    int fid = py0 == py1 ? -1 : mf_dtype_index(op_dtypes[py0 ? 1 : 0]);
    if (fid < 0) {
        return 0;
    }
    PyArray_DTypeMeta *f64 = mf_builtin_DType(NPY_DOUBLE);
    PyArray_DTypeMeta *m = mf_formats[fid].kind == MF_KIND_FLOAT ? op_dtypes[py0 ? 1 : 0] : f64;
    PyArray_DTypeMeta *b = mf_builtin_DType(NPY_BOOL);
    new_op_dtypes[0] = py0 ? f64 : m;
    new_op_dtypes[1] = py0 ? m : f64;
    new_op_dtypes[2] = b;
    for (int i = 0; i < 3; i++) {
        Py_INCREF(new_op_dtypes[i]);
    }
    return 1;
}

/*
 * Promoter for calls that mix a minifloat operand with other types: the
 * minifloat-typed operands of the loop's signature all go to the common
 * DType of those inputs (NEP 50, the dtypes' common_dtype); bool and int
 * operands keep their type.  When the common DType is NumPy's own (float32,
 * ...), NumPy's own loop runs.
 */
static int
mf_promoter(PyObject *ufunc_obj, PyArray_DTypeMeta *const op_dtypes[],
            PyArray_DTypeMeta *const signature[], PyArray_DTypeMeta *new_op_dtypes[])
{
    PyUFuncObject *ufunc = (PyUFuncObject *)ufunc_obj;
    int nin = ufunc->nin, nargs = ufunc->nargs;
    const mf_ufunc_def *def = def_of(ufunc->name);

    if (op_dtypes[0] == NULL) {
        /* a reduction: dtype= if given, else the operand's DType, throughout */
        PyArray_DTypeMeta *d = op_dtypes[1];
        int fixed = 0;
        for (int i = 0; i < nargs; i++) {
            if (signature[i] != NULL) {
                d = signature[i];
                fixed = 1;
                break;
            }
        }
        /* sums and products of the integer formats: int64/uint64, NumPy's
         * rule for its small integers (which it applies by type number) */
        int id = mf_dtype_index(d);
        if (!fixed && id >= 0 && mf_formats[id].kind != MF_KIND_FLOAT
                && (strcmp(ufunc->name, "add") == 0 || strcmp(ufunc->name, "multiply") == 0)) {
            d = mf_builtin_DType(mf_formats[id].kind == MF_KIND_UINT ? NPY_UINT64 : NPY_INT64);
        }
        for (int i = 0; i < nargs; i++) {
            Py_INCREF(d);
            new_op_dtypes[i] = d;
        }
        return 0;
    }
    if (compare_with_python_number(ufunc, op_dtypes, signature, new_op_dtypes)) {
        return 0;
    }
    PyArray_DTypeMeta *common;
    if (def == NULL && strcmp(ufunc->name, "float_power") == 0) {
        /* NumPy has no float32 float_power loop: float64, as for float16 */
        common = mf_builtin_DType(NPY_DOUBLE);
        Py_INCREF(common);
    }
    else {
        /* dtype=/signature= fixing a minifloat-typed operand fixes them all,
         * as NumPy's dtype= does for its own loops (matmul, vecdot: every
         * operand is minifloat-typed) */
        common = NULL;
        for (int i = 0; i < nargs && common == NULL; i++) {
            char t = def ? def->sig[i < nin ? i : i + 2] : 'M';
            if (signature[i] != NULL && t == 'M') {
                common = signature[i];
                Py_INCREF(common);
            }
        }
        if (common == NULL) {
            /* minifloat DTypes first: NumPy asks the first of a pair for the
             * common DType, and its Python-scalar DTypes answer for a legacy
             * DType by asking it about float16/uint8 (abstractdtypes.c), which
             * loses NEP 50's weak-scalar rule; ours apply it */
            PyArray_DTypeMeta *ins[NPY_MAXARGS];
            int k = 0;
            for (int pass = 0; pass < 2; pass++) {
                for (int i = 0; i < nin; i++) {
                    if ((def == NULL || def->sig[i] == 'M')
                            && (mf_dtype_index(op_dtypes[i]) >= 0) == (pass == 0)) {
                        ins[k++] = op_dtypes[i];
                    }
                }
            }
            common = PyArray_PromoteDTypeSequence(k, ins);
            if (common == NULL) {
                return -1;
            }
        }
        common = int_format_fallback(ufunc->name, common);
    }
    for (int i = 0; i < nargs; i++) {
        char t = def ? def->sig[i < nin ? i : i + 2] : 'M';
        PyArray_DTypeMeta *d;
        if (signature[i] != NULL) {
            d = signature[i];
        }
        else if (t == 'M') {
            d = common;
        }
        else if (t == '?') {
            d = mf_builtin_DType(NPY_BOOL);
        }
        else if (t == 'i' && i >= nin) {
            d = mf_builtin_DType(NPY_INT);
        }
        else {
            d = mf_builtin_DType(NPY_LONG);     /* ldexp's exponent */
        }
        Py_INCREF(d);
        new_op_dtypes[i] = d;
    }
    Py_DECREF(common);
    return 0;
}

/*
 * Promoter patterns.  NumPy's dispatcher needs promoters that never match an
 * input equally well: (F, None, ...) catches every call whose first operand
 * is a minifloat F; (K, F, None, ...) with K one of NumPy's abstract numeric
 * DTypes (and bool) catches a NumPy operand followed by F.  Two minifloat
 * operands always match the first pattern only.
 */
static PyObject *numpy_kinds[8];
static int n_numpy_kinds = 0;

static int
init_numpy_kinds(void)
{
    if (n_numpy_kinds) {
        return 0;
    }
    /* NumPy's abstract kinds are the bases of its concrete DTypes */
    static const int representatives[] = {NPY_FLOAT, NPY_INT8, NPY_CFLOAT};
    for (int i = 0; i < 3; i++) {
        PyObject *k = (PyObject *)((PyTypeObject *)mf_builtin_DType(representatives[i]))->tp_base;
        if (k == NULL || !(((PyArray_DTypeMeta *)k)->flags & NPY_DT_ABSTRACT)) {
            PyErr_SetString(PyExc_RuntimeError,
                            "minifloat: NumPy's abstract numeric DTypes were not found");
            return -1;
        }
        Py_INCREF(k);
        numpy_kinds[n_numpy_kinds++] = k;
    }
    PyObject *extra[] = {(PyObject *)mf_builtin_DType(NPY_BOOL), (PyObject *)&PyArray_PyLongDType,
                         (PyObject *)&PyArray_PyFloatDType, (PyObject *)&PyArray_PyComplexDType};
    for (int i = 0; i < 4; i++) {
        int covered = 0;
        for (int j = 0; j < 3; j++) {
            int sub = PyObject_IsSubclass(extra[i], numpy_kinds[j]);
            if (sub < 0) {
                return -1;
            }
            covered |= sub;
        }
        if (!covered) {
            Py_INCREF(extra[i]);
            numpy_kinds[n_numpy_kinds++] = extra[i];
        }
    }
    return 0;
}

/* a promoter for the pattern: `dt` at position `pos`, preceded (when
 * `first` is given) by `first` at position 0, None elsewhere */
static int
add_pattern(PyObject *ufunc, int nargs, int pos, PyObject *dt, PyObject *first, PyObject *capsule)
{
    PyObject *tup = PyTuple_New(nargs);
    if (tup == NULL) {
        return -1;
    }
    for (int i = 0; i < nargs; i++) {
        PyObject *item = (i == pos) ? dt : (i == 0 && first) ? first : Py_None;
        Py_INCREF(item);
        PyTuple_SET_ITEM(tup, i, item);
    }
    int r = PyUFunc_AddPromoter(ufunc, tup, capsule);
    Py_DECREF(tup);
    return r;
}

/*
 * (F, None, ...): the first operand is F.  (K, F, None, ...): a NumPy operand
 * then F.  These never tie.  No pattern names an output: NumPy matches an
 * unspecified output with anything, so such a promoter would take over
 * calls on NumPy's own types; np.add(f32, 1, dtype=F) is therefore not
 * supported (cast the operands first).
 */
static int
add_promoters(PyObject *ufunc, int nin, int nargs, PyArray_DTypeMeta *fmt_dtype, PyObject *capsule)
{
    PyObject *F = (PyObject *)fmt_dtype;
    if (add_pattern(ufunc, nargs, 0, F, NULL, capsule) < 0) {
        return -1;
    }
    if (nin >= 2) {
        for (int k = 0; k < n_numpy_kinds; k++) {
            if (add_pattern(ufunc, nargs, 1, F, numpy_kinds[k], capsule) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/*
 * np.fft's gufuncs (numpy.fft._pocketfft_umath: fft, ifft, rfft_n_even,
 * rfft_n_odd, irfft) have float32/float64/longdouble loops only.  A
 * minifloat operand runs the float64 loop (its values are exact there), and
 * NumPy casts the result to the output np.fft allocated (complex64 for the
 * float formats, by np.result_type): the same loop and result NumPy gives a
 * float32 array, whose call with the scale factor 1 (a Python int) also
 * runs the float64 loop.  So np.fft.rfft(x) == np.fft.rfft(x.astype(float32)).
 */
static int
mf_fft_promoter(PyObject *ufunc_obj, PyArray_DTypeMeta *const NPY_UNUSED(op_dtypes[]),
                PyArray_DTypeMeta *const signature[], PyArray_DTypeMeta *new_op_dtypes[])
{
    const char *name = ((PyUFuncObject *)ufunc_obj)->name;
    const int real = NPY_DOUBLE, cplx = NPY_CDOUBLE;
    int complex_in = strcmp(name, "fft") == 0 || strcmp(name, "ifft") == 0
                     || strcmp(name, "irfft") == 0;
    int want[3] = {complex_in ? cplx : real, real, strcmp(name, "irfft") == 0 ? real : cplx};
    for (int i = 0; i < 3; i++) {
        PyArray_DTypeMeta *d = signature[i] ? signature[i] : mf_builtin_DType(want[i]);
        Py_INCREF(d);
        new_op_dtypes[i] = d;
    }
    return 0;
}

static int
add_fft_promoters(void)
{
    PyObject *fftmod = PyImport_ImportModule("numpy.fft._pocketfft_umath");
    if (fftmod == NULL) {
        PyErr_Clear();          /* no np.fft gufuncs in this NumPy: nothing to do */
        return 0;
    }
    PyObject *capsule = PyCapsule_New((void *)mf_fft_promoter, "numpy._ufunc_promoter", NULL);
    if (capsule == NULL) {
        Py_DECREF(fftmod);
        return -1;
    }
    static const char *names[] = {"fft", "ifft", "rfft_n_even", "rfft_n_odd", "irfft"};
    int rc = 0;
    for (int i = 0; i < 5 && rc == 0; i++) {
        PyObject *u = PyObject_GetAttrString(fftmod, names[i]);
        if (u == NULL) {
            PyErr_Clear();
            continue;
        }
        if (PyObject_TypeCheck(u, &PyUFunc_Type) && ((PyUFuncObject *)u)->nargs == 3) {
            for (int fid = 0; fid < MF_NUM_PUBLIC_FORMATS && rc == 0; fid++) {
                rc = add_pattern(u, 3, 0, (PyObject *)&mf_dtypes[fid], NULL, capsule);
            }
        }
        Py_DECREF(u);
    }
    Py_DECREF(capsule);
    Py_DECREF(fftmod);
    return rc;
}

int
mf_init_ufuncs(PyObject *module)
{
    umath_module = PyImport_ImportModule("numpy._core.umath");
    if (umath_module == NULL) {
        return -1;
    }
    if (mf_find_f32_loops() < 0 || init_numpy_kinds() < 0) {
        return -1;
    }
    if (mf_register_matmul(umath_module) < 0 || mf_register_matvec(umath_module) < 0) {
        return -1;
    }
    PyObject *capsule = PyCapsule_New((void *)mf_promoter, "numpy._ufunc_promoter", NULL);
    if (capsule == NULL) {
        return -1;
    }
    for (int fid = 0; fid < MF_NUM_PUBLIC_FORMATS; fid++) {
        int is_int = mf_formats[fid].kind != MF_KIND_FLOAT;
        PyArray_DTypeMeta *F = &mf_dtypes[fid];
        const char *promoted[160];
        int npromoted = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int d = 0; d < mf_num_ufunc_defs; d++) {
                const mf_ufunc_def *def = &mf_ufunc_defs[d];
                int own_row = (def->kind == MF_LOOP_INT) == is_int;
                /* pass 0: this format's loops; pass 1: promoters only, for the
                 * ufuncs it has no loop for (integer formats meeting sqrt...) */
                if ((pass == 0) != own_row) {
                    continue;
                }
                PyObject *ufunc = PyObject_GetAttrString(umath_module, def->ufunc);
                if (ufunc == NULL) {
                    Py_DECREF(capsule);
                    return -1;
                }
                int nin = sig_nin(def->sig);
                int nargs = nin + (int)strlen(def->sig + nin + 2);
                if (pass == 0) {
                    PyArray_DTypeMeta *dtypes[4];
                    for (int k = 0; k < nargs; k++) {
                        dtypes[k] = dtype_for_letter(def->sig[k < nin ? k : k + 2], F);
                    }
                    PyType_Slot slots[3] = {
                        {NPY_METH_get_loop, (void *)get_loops[d]},
                        {0, NULL},
                        {0, NULL},
                    };
                    if (def->identity) {
                        slots[1].slot = NPY_METH_get_reduction_initial;
                        slots[1].pfunc = (void *)red_inits[d];
                    }
                    PyArrayMethod_Spec spec = {
                        .name = "minifloat_loop",
                        .nin = nin,
                        .nout = nargs - nin,
                        .casting = NPY_NO_CASTING,
                        .flags = def->reorderable ? NPY_METH_IS_REORDERABLE : 0,
                        .dtypes = dtypes,
                        .slots = slots,
                    };
                    if (PyUFunc_AddLoopFromSpec(ufunc, &spec) < 0) {
                        Py_DECREF(ufunc);
                        Py_DECREF(capsule);
                        return -1;
                    }
                }
                int seen = 0;
                for (int i = 0; i < npromoted; i++) {
                    if (strcmp(promoted[i], def->ufunc) == 0) {
                        seen = 1;
                    }
                }
                if (!seen) {
                    promoted[npromoted++] = def->ufunc;
                    if (add_promoters(ufunc, nin, nargs, F, capsule) < 0) {
                        Py_DECREF(ufunc);
                        Py_DECREF(capsule);
                        return -1;
                    }
                    /* (None, F, None): a reduction of F (only patterns with
                     * None first match one); for sums and products of the
                     * integer formats mf_promoter picks int64/uint64.  With
                     * (G, None, None) it would tie on (G, F): every (G, F)
                     * gets its own, more specific pattern, registered
                     * first (NumPy's dispatcher gives up at the first tie
                     * it meets, in registration order). */
                    if (is_int && nargs == 3 && (strcmp(def->ufunc, "add") == 0
                                                 || strcmp(def->ufunc, "multiply") == 0)) {
                        int rc = 0;
                        for (int g = 0; g < MF_NUM_PUBLIC_FORMATS && rc == 0; g++) {
                            if (g != fid) {
                                rc = add_pattern(ufunc, 3, 1, (PyObject *)F,
                                                 (PyObject *)&mf_dtypes[g], capsule);
                            }
                        }
                        if (rc == 0) {
                            rc = add_pattern(ufunc, 3, 1, (PyObject *)F, NULL, capsule);
                        }
                        if (rc < 0) {
                            Py_DECREF(ufunc);
                            Py_DECREF(capsule);
                            return -1;
                        }
                    }
                }
                Py_DECREF(ufunc);
            }
        }
        /* ufuncs without rows: float_power (float64 as for float16), and the
         * gufuncs matmul and vecdot (loops in matmul.c) */
        static const char *others[] = {"float_power", "matmul", "vecdot", "matvec", "vecmat"};
        for (int i = 0; i < 5; i++) {
            PyObject *u = PyObject_GetAttrString(umath_module, others[i]);
            if (u == NULL && i >= 3) {
                PyErr_Clear();     /* matvec/vecmat: NumPy >= 2.2 */
                continue;
            }
            if (u == NULL || add_promoters(u, 2, 3, F, capsule) < 0) {
                Py_XDECREF(u);
                Py_DECREF(capsule);
                return -1;
            }
            Py_DECREF(u);
        }
    }
    Py_DECREF(capsule);
    return add_fft_promoters();
}

/*
 * ml_dtypes' arrays first, ours second: NumPy finds no loop for (ml_dtypes
 * X, minifloat Y) (ml_dtypes' legacy loops take its own types only) and, for
 * == and !=, answers all-False/all-True.  A promoter for every pattern
 * (M, F, None, ...), M an ml_dtypes DType and F one of ours, sends such calls
 * to mf_promoter, which picks the common DType (ours: mf_common_dtype maps
 * M to its minifloat twin).  (F, M, ...) is (F, None, ...) above.  Nothing
 * here matches a call on ml_dtypes' types alone.  Called once, when the user
 * imports ml_dtypes.
 *
 * Every (M, F) pair for == and != (where NumPy would otherwise answer
 * all-False/all-True); for the other ufuncs only M and F of the same format
 * (ml_dtypes' bfloat16 with minifloat's bfloat16, ...).  NumPy checks each
 * new promoter against all of the ufunc's loops and promoters, so every pair
 * for every ufunc (18 x 18 each) took 0.1 s; this takes about 0.01 s.  A
 * different-format pair in other ufuncs raises NumPy's "no loop" TypeError
 * (cast one operand first).
 */
int
mf_add_ml_dtypes_promoters(void)
{
    static const char *others[] = {"float_power", "matmul", "vecdot", "matvec", "vecmat"};
    const char *names[160];
    int nnames = 0;
    for (int d = 0; d < mf_num_ufunc_defs; d++) {
        if (sig_nin(mf_ufunc_defs[d].sig) < 2) {
            continue;
        }
        int seen = 0;
        for (int i = 0; i < nnames; i++) {
            seen |= strcmp(names[i], mf_ufunc_defs[d].ufunc) == 0;
        }
        if (!seen && nnames < 155) {
            names[nnames++] = mf_ufunc_defs[d].ufunc;
        }
    }
    for (int i = 0; i < 5; i++) {
        names[nnames++] = others[i];
    }
    if (umath_module == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "minifloat: ufuncs not initialised");
        return -1;
    }
    PyObject *capsule = PyCapsule_New((void *)mf_promoter, "numpy._ufunc_promoter", NULL);
    if (capsule == NULL) {
        return -1;
    }
    for (int u = 0; u < nnames; u++) {
        PyObject *ufunc = PyObject_GetAttrString(umath_module, names[u]);
        if (ufunc == NULL) {
            PyErr_Clear();          /* matvec/vecmat: NumPy >= 2.2 */
            continue;
        }
        int nargs = ((PyUFuncObject *)ufunc)->nargs;
        int all_pairs = strcmp(names[u], "equal") == 0 || strcmp(names[u], "not_equal") == 0;
        for (int m = 0; m < MF_NUM_PUBLIC_FORMATS; m++) {
            if (mf_ml_dtypes[m] == NULL) {
                continue;
            }
            for (int f = 0; f < MF_NUM_PUBLIC_FORMATS; f++) {
                if (f != m && !all_pairs) {
                    continue;
                }
                if (add_pattern(ufunc, nargs, 1, (PyObject *)&mf_dtypes[f],
                                (PyObject *)mf_ml_dtypes[m], capsule) < 0) {
                    Py_DECREF(ufunc);
                    Py_DECREF(capsule);
                    return -1;
                }
            }
        }
        Py_DECREF(ufunc);
    }
    Py_DECREF(capsule);
    return 0;
}
