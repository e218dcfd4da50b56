/*
 * Living next to ml_dtypes (docs/design.md, "Good neighbours").
 *
 * minifloat never imports ml_dtypes.  When the user does (before or after
 * minifloat), minifloat/_neighbours.py calls _core._link_ml_dtypes(ml_dtypes)
 * once, which
 *   - finds ml_dtypes' DTypes (casts.c: mf_find_ml_dtypes),
 *   - adds the casts between them and ours, both ways,
 *   - adds ufunc promoters for (ml_dtypes X, minifloat Y) operands.
 *
 * Adding casts after both DTypes exist: NumPy 2.4's C API has no public call
 * for it (PyArray_AddCastingImplementation_FromSpec is internal).  The one
 * public route is the cast list of PyArrayInitDTypeMeta_FromSpec, which
 * registers every cast in the list, whichever DTypes it names.  So the link
 * creates one private, empty DType (no instances, no arrays: its descriptor
 * cannot be made) whose spec carries the ml_dtypes <-> minifloat casts.
 */
#include "../core/minifloat.h"

static int linked = 0;
static PyObject *linked_names = NULL;       /* tuple of the names linked */

/* ------------------------------------------------ the carrier DType */

static PyObject *
carrier_scalar_new(PyTypeObject *NPY_UNUSED(t), PyObject *NPY_UNUSED(a), PyObject *NPY_UNUSED(k))
{
    PyErr_SetString(PyExc_TypeError, "minifloat's ml_dtypes link has no values");
    return NULL;
}

static PyTypeObject carrier_scalar_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "minifloat._core._MLDtypesLinkScalar",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Private: carries the casts between ml_dtypes' and minifloat's DTypes.",
    .tp_new = carrier_scalar_new,
};

static PyArray_DTypeMeta carrier_dtype;

static PyArray_Descr *
carrier_no_descr(PyArray_DTypeMeta *NPY_UNUSED(cls))
{
    PyErr_SetString(PyExc_TypeError, "minifloat's ml_dtypes link is not a usable dtype");
    return NULL;
}

static PyArray_Descr *
carrier_ensure_canonical(PyArray_Descr *self)
{
    Py_INCREF(self);
    return self;
}

static int
carrier_setitem(PyArray_Descr *NPY_UNUSED(d), PyObject *NPY_UNUSED(o), char *NPY_UNUSED(p))
{
    carrier_no_descr(NULL);
    return -1;
}

static PyObject *
carrier_getitem(PyArray_Descr *NPY_UNUSED(d), char *NPY_UNUSED(p))
{
    carrier_no_descr(NULL);
    return NULL;
}

static PyObject *
carrier_repr(PyObject *NPY_UNUSED(self))
{
    return PyUnicode_FromString("minifloat._core._MLDtypesLinkDType()");
}

static PyType_Slot carrier_slots[] = {
    {NPY_DT_default_descr, (void *)carrier_no_descr},
    {NPY_DT_ensure_canonical, (void *)carrier_ensure_canonical},
    {NPY_DT_setitem, (void *)carrier_setitem},
    {NPY_DT_getitem, (void *)carrier_getitem},
    {0, NULL},
};

/* its own (required) cast to itself: never runs, there are no instances */
static NPY_CASTING
carrier_self_resolve(struct PyArrayMethodObject_tag *NPY_UNUSED(m),
                     PyArray_DTypeMeta *const NPY_UNUSED(dtypes[2]),
                     PyArray_Descr *const given[2], PyArray_Descr *loop[2],
                     npy_intp *view_offset)
{
    Py_INCREF(given[0]);
    loop[0] = given[0];
    Py_INCREF(given[0]);
    loop[1] = given[0];
    *view_offset = 0;
    return NPY_NO_CASTING;
}

static int
carrier_self_loop(PyArrayMethod_Context *NPY_UNUSED(c), char *const NPY_UNUSED(data[]),
                  npy_intp const NPY_UNUSED(dims[]), npy_intp const NPY_UNUSED(strides[]),
                  NpyAuxData *NPY_UNUSED(aux))
{
    return 0;
}

static PyType_Slot carrier_self_slots[] = {
    {NPY_METH_resolve_descriptors, (void *)carrier_self_resolve},
    {NPY_METH_strided_loop, (void *)carrier_self_loop},
    {NPY_METH_unaligned_strided_loop, (void *)carrier_self_loop},
    {0, NULL},
};

static PyArray_DTypeMeta *carrier_self_dtypes[2] = {NULL, NULL};

static PyArrayMethod_Spec carrier_self_spec = {
    .name = "minifloat_ml_dtypes_link_self_cast",
    .nin = 1,
    .nout = 1,
    .casting = NPY_NO_CASTING,
    .flags = NPY_METH_SUPPORTS_UNALIGNED,
    .dtypes = carrier_self_dtypes,
    .slots = carrier_self_slots,
};

static int
register_casts(void)
{
    PyArrayMethod_Spec **ml = mf_get_ml_cast_specs();
    int n = 0;
    while (ml[n] != NULL) {
        n++;
    }
    PyArrayMethod_Spec **casts = PyMem_Calloc((size_t)n + 2, sizeof(*casts));
    if (casts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    casts[0] = &carrier_self_spec;
    memcpy(casts + 1, ml, (size_t)n * sizeof(*casts));

    carrier_scalar_type.tp_base = &PyGenericArrType_Type;
    if (PyType_Ready(&carrier_scalar_type) < 0) {
        PyMem_Free(casts);
        return -1;
    }
    PyTypeObject *t = (PyTypeObject *)&carrier_dtype;
    Py_SET_REFCNT(t, 1);
    Py_SET_TYPE(t, &PyArrayDTypeMeta_Type);
    t->tp_name = "minifloat._core._MLDtypesLinkDType";
    t->tp_basicsize = sizeof(PyArray_Descr);
    t->tp_flags = Py_TPFLAGS_DEFAULT;
    t->tp_base = &PyArrayDescr_Type;
    t->tp_repr = carrier_repr;
    t->tp_str = carrier_repr;
    t->tp_doc = "Private: carries the casts between ml_dtypes' and minifloat's DTypes.";
    if (PyType_Ready(t) < 0) {
        PyMem_Free(casts);
        return -1;
    }
    PyArrayDTypeMeta_Spec spec = {
        .typeobj = &carrier_scalar_type,
        .flags = 0,
        .casts = casts,
        .slots = carrier_slots,
        .baseclass = NULL,
    };
    int r = PyArrayInitDTypeMeta_FromSpec(&carrier_dtype, &spec);
    PyMem_Free(casts);
    return r;
}

/* --------------------------------------------------------- the link */

/*
 * _core._link_ml_dtypes(ml_dtypes_module) -> tuple of the format names
 * linked.  Once per process; later calls return the first result.
 */
PyObject *
mf_py_link_ml_dtypes(PyObject *NPY_UNUSED(self), PyObject *ml)
{
    if (linked) {
        if (linked_names == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "minifloat: linking to ml_dtypes failed earlier");
            return NULL;
        }
        Py_INCREF(linked_names);
        return linked_names;
    }
    if (!PyModule_Check(ml)) {
        PyErr_SetString(PyExc_TypeError, "_link_ml_dtypes takes the ml_dtypes module");
        return NULL;
    }
    linked = 1;             /* casts and promoters can be added only once */
    int n = mf_find_ml_dtypes(ml);
    if (n > 0 && (register_casts() < 0 || mf_add_ml_dtypes_promoters() < 0)) {
        /* promotion must not send ml_dtypes operands to casts that are missing */
        for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
            Py_CLEAR(mf_ml_dtypes[id]);
        }
        return NULL;
    }
    PyObject *names = PyTuple_New(n);
    if (names == NULL) {
        return NULL;
    }
    for (int id = 0, k = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        if (mf_ml_dtypes[id] != NULL) {
            PyObject *s = PyUnicode_FromString(mf_formats[id].name);
            if (s == NULL) {
                Py_DECREF(names);
                return NULL;
            }
            PyTuple_SET_ITEM(names, k++, s);
        }
    }
    linked_names = names;
    Py_INCREF(linked_names);
    return linked_names;
}
