/*
 * FastPath: the front of a NumPy work-around (minifloat/_numpy_patches.py).
 *
 * A patch replaces a NumPy function by a Python wrapper that handles
 * minifloat operands and calls the original for everything else.  Even a
 * wrapper that only checks and forwards costs a Python frame with *args and
 * **kwargs, which is measurable on small float32 arrays (np.mean of 16
 * values: +8%, np.einsum: +30%, measured).  A FastPath object stands where
 * the patched function was and decides in C, with vectorcall, whether the
 * call can involve minifloat at all; if not it calls NumPy's original
 * directly, so plain NumPy users pay a few type checks and nothing else.
 *
 *   kind 0: look at the first positional argument only (np.mean's _mean:
 *           the array comes first, dtype=/out= are checked by the wrapper);
 *   kind 1: every positional argument must be a str or an exact ndarray of
 *           a NumPy dtype, and no keyword may be a non-None dtype/out
 *           (c_einsum's operands and subscripts).
 * Anything else goes to the wrapper, which makes the full decision.
 */
#include "../core/minifloat.h"
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *orig;        /* NumPy's function */
    PyObject *wrapper;     /* the Python work-around */
    int kind;
    vectorcallfunc vectorcall;
} FastPathObject;

/* an exact ndarray whose dtype is not one of minifloat's */
static int
numpy_array(PyObject *o)
{
    return PyArray_CheckExact(o)
           && mf_dtype_index(NPY_DTYPE(PyArray_DESCR((PyArrayObject *)o))) < 0;
}

static PyObject *
fastpath_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastPathObject *self = (FastPathObject *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int plain;
    if (self->kind == 0) {
        plain = nargs >= 1 && numpy_array(args[0]);
    }
    else {
        plain = 1;
        for (Py_ssize_t i = 0; i < nargs && plain; i++) {
            plain = PyUnicode_CheckExact(args[i]) || numpy_array(args[i]);
        }
        Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        for (Py_ssize_t i = 0; i < nkw && plain; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            if ((PyUnicode_CompareWithASCIIString(name, "dtype") == 0
                    || PyUnicode_CompareWithASCIIString(name, "out") == 0)
                    && args[nargs + i] != Py_None) {
                plain = 0;
            }
        }
    }
    return PyObject_Vectorcall(plain ? self->orig : self->wrapper, args, nargsf, kwnames);
}

static PyObject *
fastpath_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *orig, *wrapper;
    int kind;
    if (!PyArg_ParseTuple(args, "OOi:FastPath", &orig, &wrapper, &kind)) {
        return NULL;
    }
    if (!PyCallable_Check(orig) || !PyCallable_Check(wrapper) || kind < 0 || kind > 1) {
        PyErr_SetString(PyExc_TypeError, "FastPath(orig, wrapper, kind): two callables, kind 0 or 1");
        return NULL;
    }
    FastPathObject *self = (FastPathObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(orig);
    Py_INCREF(wrapper);
    self->orig = orig;
    self->wrapper = wrapper;
    self->kind = kind;
    self->vectorcall = fastpath_vectorcall;
    return (PyObject *)self;
}

static void
fastpath_dealloc(FastPathObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->orig);
    Py_CLEAR(self->wrapper);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
fastpath_traverse(FastPathObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->orig);
    Py_VISIT(self->wrapper);
    return 0;
}

/* attributes the wrapper has (__name__, __qualname__, ...) read through */
static PyObject *
fastpath_getattro(PyObject *self, PyObject *name)
{
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return PyObject_GetAttr(((FastPathObject *)self)->wrapper, name);
    }
    return r;
}

/* a non-data descriptor that binds to nothing (as a staticmethod would):
 * so inspect.isroutine() holds and help(np.cumsum) renders NumPy's
 * function, not this type */
static PyObject *
fastpath_descr_get(PyObject *self, PyObject *NPY_UNUSED(obj), PyObject *NPY_UNUSED(type))
{
    Py_INCREF(self);
    return self;
}

/* __doc__: the wrapper's (NumPy's function's), as an instance attribute:
 * the type's docstring answered it (help(np.sinc) showed FastPath's), and
 * pydoc reads it past tp_getattro */
static PyObject *
fastpath_doc(PyObject *self, void *NPY_UNUSED(closure))
{
    return PyObject_GetAttrString(((FastPathObject *)self)->wrapper, "__doc__");
}

static PyGetSetDef fastpath_getset[] = {
    {"__doc__", fastpath_doc, NULL, NULL, NULL},
    {NULL},
};

/* pickled by reference, as the function it stands for (dask pickles
 * np.cumsum into its task graphs): its module and name (the wrapper's, which
 * are NumPy's) where this front is found there; else (a front that stands
 * elsewhere than its function's module: einsumfunc.c_einsum) as NumPy's
 * original, copy.copy(orig) */
static PyObject *
fastpath_reduce(PyObject *self, PyObject *NPY_UNUSED(args))
{
    FastPathObject *fp = (FastPathObject *)self;
    PyObject *modname = PyObject_GetAttrString(fp->wrapper, "__module__");
    PyObject *name = PyObject_GetAttrString(fp->wrapper, "__qualname__");
    PyObject *mod = (modname != NULL && PyUnicode_Check(modname)) ? PyImport_GetModule(modname) : NULL;
    PyObject *there = (mod != NULL && name != NULL) ? PyObject_GetAttr(mod, name) : NULL;
    PyErr_Clear();
    Py_XDECREF(modname);
    Py_XDECREF(mod);
    int same = there == self;
    Py_XDECREF(there);
    if (same) {
        return name;
    }
    Py_XDECREF(name);
    PyObject *copymod = PyImport_ImportModule("copy");
    PyObject *copyfn = copymod != NULL ? PyObject_GetAttrString(copymod, "copy") : NULL;
    Py_XDECREF(copymod);
    if (copyfn == NULL) {
        return NULL;
    }
    return Py_BuildValue("(N(O))", copyfn, fp->orig);
}

/* equal to NumPy's function, with its hash: a library that keyed a table
 * by np.sinc after minifloat was imported (its __array_function__ helpers)
 * holds this front, while NumPy's dispatcher hands it NumPy's function */
static Py_hash_t
fastpath_hash(PyObject *self)
{
    return PyObject_Hash(((FastPathObject *)self)->orig);
}

static PyObject *
fastpath_richcompare(PyObject *self, PyObject *other, int op)
{
    if (op != Py_EQ && op != Py_NE) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    FastPathObject *fp = (FastPathObject *)self;
    int same = other == self || other == fp->orig
               || (Py_TYPE(other) == Py_TYPE(self) && ((FastPathObject *)other)->orig == fp->orig);
    if (op == Py_NE) {
        same = !same;
    }
    return PyBool_FromLong(same);
}

static PyMethodDef fastpath_methods[] = {
    {"__reduce__", fastpath_reduce, METH_NOARGS, "pickled as its module and name"},
    {NULL},
};

static PyMemberDef fastpath_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(FastPathObject, orig), READONLY, "NumPy's function"},
    {"wrapper", T_OBJECT, offsetof(FastPathObject, wrapper), READONLY, "the work-around"},
    {NULL},
};

static PyTypeObject FastPath_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "minifloat._core.FastPath",
    .tp_basicsize = sizeof(FastPathObject),
    .tp_dealloc = (destructor)fastpath_dealloc,
    .tp_vectorcall_offset = offsetof(FastPathObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = fastpath_getattro,
    .tp_descr_get = fastpath_descr_get,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "FastPath(orig, wrapper, kind): calls orig when the arguments cannot involve "
              "minifloat, else wrapper (see src/numpy/fastpath.c)",
    .tp_traverse = (traverseproc)fastpath_traverse,
    .tp_members = fastpath_members,
    .tp_getset = fastpath_getset,
    .tp_methods = fastpath_methods,
    .tp_hash = fastpath_hash,
    .tp_richcompare = fastpath_richcompare,
    .tp_new = fastpath_new,
};

int
mf_init_fastpath(PyObject *module)
{
    if (PyType_Ready(&FastPath_Type) < 0) {
        return -1;
    }
    Py_INCREF(&FastPath_Type);
    if (PyModule_AddObject(module, "FastPath", (PyObject *)&FastPath_Type) < 0) {
        Py_DECREF(&FastPath_Type);
        return -1;
    }
    return 0;
}
