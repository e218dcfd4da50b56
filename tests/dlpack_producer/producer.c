/*
 * A test-only DLPack producer: capsules made by hand, with any version,
 * flags, device, dtype, shape, strides and byte_offset (malformed ones
 * included), and a deleter that counts its calls.  It tests minifloat's
 * importer from the producer's side, without any framework.
 *
 * Not part of the package: tests/_dlpack_producer.py compiles it on first use
 * into the extension module dlpack_test_producer.  It needs only Python.h and
 * two headers of the package (src/dlpack/dlpack.h: the ABI; capsule.h: deleter
 * calls and the producer capsule's destructor), so that the tests and the
 * importer share one declaration of the ABI.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <string.h>

#include "dlpack.h"
#include "capsule.h"

typedef struct {
    Py_buffer view;
    int has_view;
} test_ctx;

/* per thread, so that tests running in many threads at once (pytest-run-parallel)
 * each count their own capsules; the all-threads total is for the test whose
 * deleter runs in another thread */
static _Thread_local long long test_deleter_calls, test_deleter_calls_without_gil;
static long long test_deleter_calls_all;
static unsigned long test_deleter_last_thread;

static void
test_release(void *mem, test_ctx *ctx)
{
    int had_gil = PyGILState_Check();
    PyGILState_STATE st = PyGILState_Ensure();
    test_deleter_calls++;
    test_deleter_calls_all++;      /* under the GIL */
    if (!had_gil) {
        test_deleter_calls_without_gil++;
    }
    test_deleter_last_thread = PyThread_get_thread_ident();
    if (ctx->has_view) {
        PyBuffer_Release(&ctx->view);
    }
    PyMem_RawFree(mem);
    PyGILState_Release(st);
}

static void
test_deleter_versioned(mfdl_managed_v *m)
{
    test_release(m, (test_ctx *)m->manager_ctx);
}

static void
test_deleter_legacy(mfdl_managed *m)
{
    test_release(m, (test_ctx *)m->manager_ctx);
}

static int
int64_tuple(PyObject *obj, int64_t *out, int max, int *n, const char *what)
{
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple or None", what);
        return -1;
    }
    Py_ssize_t len = PySequence_Size(obj);
    if (len > max) {
        PyErr_Format(PyExc_ValueError, "%s is too long", what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *it = PySequence_GetItem(obj, i);
        if (it == NULL) {
            return -1;
        }
        out[i] = PyLong_AsLongLong(it);
        Py_DECREF(it);
        if (out[i] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    *n = (int)len;
    return 0;
}

/* test capsules made without a deleter can never be freed by their consumer
 * (that is what they test): keep them reachable, so LeakSanitizer's report
 * (the sanitizer leg) lists only real leaks */
static void **test_orphans;
static size_t test_norphans, test_orphans_cap;

static void
test_keep_orphan(void *mem)
{
    if (test_norphans == test_orphans_cap) {
        size_t cap = test_orphans_cap ? 2 * test_orphans_cap : 64;
        void **p = (void **)PyMem_RawRealloc(test_orphans, cap * sizeof(void *));
        if (p == NULL) {
            return;
        }
        test_orphans = p;
        test_orphans_cap = cap;
    }
    test_orphans[test_norphans++] = mem;
}

static PyObject *
make_capsule(PyObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"data", "address", "shape", "strides", "ndim", "dtype", "device",
                             "byte_offset", "versioned", "version", "flags", "deleter", NULL};
    PyObject *data = Py_None, *shape = Py_None, *strides = Py_None, *ndim_obj = Py_None;
    unsigned long long address = 0, byte_offset = 0, flags = 0;
    int code = MFDL_FLOAT, bits = 32, lanes = 1, dev_type = MFDL_CPU, dev_id = 0;
    int versioned = 1, with_deleter = 1;
    unsigned int vmajor = MFDL_MAJOR, vminor = MFDL_MINOR;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OKOOO(iii)(ii)Kp(II)Kp", kwlist,
                                     &data, &address, &shape, &strides, &ndim_obj,
                                     &code, &bits, &lanes, &dev_type, &dev_id, &byte_offset,
                                     &versioned, &vmajor, &vminor, &flags, &with_deleter)) {
        return NULL;
    }
    int64_t shp[64], str[64];
    int nshape = 0, nstrides = 0;
    if (shape != Py_None && int64_tuple(shape, shp, 64, &nshape, "shape") < 0) {
        return NULL;
    }
    if (strides != Py_None && int64_tuple(strides, str, 64, &nstrides, "strides") < 0) {
        return NULL;
    }
    long ndim = nshape;
    if (ndim_obj != Py_None) {
        ndim = PyLong_AsLong(ndim_obj);
        if (ndim == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    size_t head = versioned ? sizeof(mfdl_managed_v) : sizeof(mfdl_managed);
    head = (head + 7) / 8 * 8;
    size_t total = head + sizeof(test_ctx) + 8 + 2 * 64 * sizeof(int64_t);
    char *mem = (char *)PyMem_RawCalloc(1, total);
    if (mem == NULL) {
        return PyErr_NoMemory();
    }
    test_ctx *ctx = (test_ctx *)(mem + head);
    int64_t *shape_mem = (int64_t *)(mem + head + (sizeof(test_ctx) + 7) / 8 * 8);
    int64_t *strides_mem = shape_mem + 64;
    void *ptr = (void *)(uintptr_t)address;
    if (data != Py_None) {
        if (PyObject_GetBuffer(data, &ctx->view, PyBUF_SIMPLE) < 0) {
            PyMem_RawFree(mem);
            return NULL;
        }
        ctx->has_view = 1;
        ptr = ctx->view.buf;
    }
    memcpy(shape_mem, shp, sizeof(int64_t) * (size_t)nshape);
    memcpy(strides_mem, str, sizeof(int64_t) * (size_t)nstrides);
    mfdl_tensor *t;
    if (versioned) {
        mfdl_managed_v *m = (mfdl_managed_v *)mem;
        m->version.major = vmajor;
        m->version.minor = vminor;
        m->manager_ctx = ctx;
        m->deleter = with_deleter ? test_deleter_versioned : NULL;
        m->flags = flags;
        t = &m->dl_tensor;
    }
    else {
        mfdl_managed *m = (mfdl_managed *)mem;
        m->manager_ctx = ctx;
        m->deleter = with_deleter ? test_deleter_legacy : NULL;
        t = &m->dl_tensor;
    }
    if (!with_deleter) {
        test_keep_orphan(mem);
    }
    t->data = ptr;
    t->device.device_type = dev_type;
    t->device.device_id = dev_id;
    t->ndim = (int32_t)ndim;
    t->dtype.code = (uint8_t)code;
    t->dtype.bits = (uint8_t)bits;
    t->dtype.lanes = (uint16_t)lanes;
    t->shape = shape == Py_None ? NULL : shape_mem;
    t->strides = strides == Py_None ? NULL : strides_mem;
    t->byte_offset = byte_offset;
    PyObject *cap = PyCapsule_New(mem, versioned ? MFDL_NAME_VERSIONED : MFDL_NAME_LEGACY,
                                  mfdl_producer_capsule_destructor);
    if (cap == NULL) {
        if (ctx->has_view) {
            PyBuffer_Release(&ctx->view);
        }
        PyMem_RawFree(mem);
    }
    return cap;
}

static PyObject *
deleter_stats(PyObject *self, PyObject *args)
{
    return Py_BuildValue("{s:L,s:L,s:L,s:k}", "calls", test_deleter_calls,
                         "calls_without_gil", test_deleter_calls_without_gil,
                         "calls_all_threads", test_deleter_calls_all,
                         "last_thread", test_deleter_last_thread);
}

/* call a capsule's deleter from a thread that does not hold the GIL, as a
 * foreign consumer may (tests): the capsule is marked used first */
static PyObject *
consume_without_gil(PyObject *self, PyObject *cap)
{
    int versioned = PyCapsule_IsValid(cap, MFDL_NAME_VERSIONED);
    if (!versioned && !PyCapsule_IsValid(cap, MFDL_NAME_LEGACY)) {
        PyErr_SetString(PyExc_ValueError, "expected an unused DLPack capsule");
        return NULL;
    }
    void *p = PyCapsule_GetPointer(cap, versioned ? MFDL_NAME_VERSIONED : MFDL_NAME_LEGACY);
    if (p == NULL || mfdl_mark_taken(cap, versioned) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    mfdl_call_deleter(p, versioned);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"make_capsule", (PyCFunction)(void (*)(void))make_capsule, METH_VARARGS | METH_KEYWORDS,
     "make_capsule(data=None, address=0, shape=None, strides=None, ndim=None,\n"
     "             dtype=(code, bits, lanes), device=(type, id), byte_offset=0,\n"
     "             versioned=True, version=(major, minor), flags=0, deleter=True)\n"
     "A DLPack capsule made by hand, viewing `data` (a buffer) or `address`."},
    {"deleter_stats", deleter_stats, METH_NOARGS,
     "How often the deleter of these capsules ran, and how: a dict with calls and\n"
     "calls_without_gil (this thread), calls_all_threads and last_thread."},
    {"consume_without_gil", consume_without_gil, METH_O,
     "Consume a capsule and run its deleter without the GIL, as a foreign consumer may."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "dlpack_test_producer",
    "A test-only DLPack producer (tests/dlpack_producer/producer.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit_dlpack_test_producer(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "DLPACK_MAJOR_VERSION", MFDL_MAJOR) < 0
            || PyModule_AddIntConstant(m, "DLPACK_MINOR_VERSION", MFDL_MINOR) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
