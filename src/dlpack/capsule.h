/*
 * The capsule side of DLPack's Python protocol, written once for minifloat's
 * importer and exporter and for the test-only producer
 * (tests/dlpack_producer/producer.c): calling a managed tensor's deleter,
 * marking a capsule consumed, and the destructor of a producer's capsule.
 * Needs only Python.h and dlpack.h.
 */
#ifndef MF_DLPACK_CAPSULE_H
#define MF_DLPACK_CAPSULE_H

#include <Python.h>
#include <string.h>

#include "dlpack.h"

static inline void
mfdl_call_deleter(void *managed, int versioned)
{
    if (versioned) {
        mfdl_managed_v *m = (mfdl_managed_v *)managed;
        if (m->deleter != NULL) {
            m->deleter(m);
        }
    }
    else {
        mfdl_managed *m = (mfdl_managed *)managed;
        if (m->deleter != NULL) {
            m->deleter(m);
        }
    }
}

/* Call a deleter from a destructor without disturbing an exception in flight. */
static inline void
mfdl_call_deleter_preserving_error(void *managed, int versioned)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    mfdl_call_deleter(managed, versioned);
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(NULL);
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(type, value, tb);
#endif
}

/* a consumer took the tensor: rename the capsule "used_*" (a NULL capsule,
 * for a tensor from the C exchange API, has nothing to rename) */
static inline int
mfdl_mark_taken(PyObject *capsule, int versioned)
{
    if (capsule == NULL) {
        return 0;
    }
    return PyCapsule_SetName(capsule, versioned ? MFDL_NAME_USED_VERSIONED : MFDL_NAME_USED_LEGACY);
}

/* the destructor of a producer's capsule: frees the tensor only if no
 * consumer took it (the name is still unused) */
static inline void
mfdl_producer_capsule_destructor(PyObject *cap)
{
    const char *name = PyCapsule_GetName(cap);
    if (name == NULL) {
        PyErr_Clear();
        return;
    }
    int versioned;
    if (strcmp(name, MFDL_NAME_VERSIONED) == 0) {
        versioned = 1;
    }
    else if (strcmp(name, MFDL_NAME_LEGACY) == 0) {
        versioned = 0;
    }
    else {
        return;   /* "used_*": a consumer owns it now */
    }
    void *p = PyCapsule_GetPointer(cap, name);
    if (p == NULL) {
        PyErr_WriteUnraisable(cap);
        return;
    }
    mfdl_call_deleter_preserving_error(p, versioned);
}

#endif
