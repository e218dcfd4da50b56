/*
 * DLPack export (_dlpack_export, behind minifloat.dlpack and the arrays'
 * __dlpack__): a managed tensor whose manager_ctx is a strong reference to the
 * array (or to a copy of it), in a "dltensor_versioned" or legacy "dltensor"
 * capsule, as the consumer's max_version asks.
 */
#include "internal.h"

/*
 * Arrays minifloat allocates for export (copy=True, packed sub-byte copies) are
 * 64-byte aligned: TensorFlow aborts the process (Check failed: IsAligned()) at
 * the first operation on a DLPack import that is not, and JAX views only
 * 64-byte-aligned host memory (it copies otherwise).  A C-contiguous view into
 * a uint8 buffer over-allocated by EXPORT_ALIGN - 1 bytes; docs/design.md has
 * the measured cost (none).
 */
#define EXPORT_ALIGN 64

PyArrayObject *
mfdl_new_aligned_array(PyArray_Descr *descr, int nd, const npy_intp *dims)
{
    npy_intp n = 1;
    for (int i = 0; i < nd; i++) {
        n *= dims[i];
    }
    npy_intp nbytes = n * (npy_intp)PyDataType_ELSIZE(descr) + (EXPORT_ALIGN - 1);
    PyArrayObject *buf = (PyArrayObject *)PyArray_EMPTY(1, &nbytes, NPY_UINT8, 0);
    if (buf == NULL) {
        return NULL;
    }
    char *p = (char *)PyArray_DATA(buf);
    p += (EXPORT_ALIGN - (uintptr_t)p % EXPORT_ALIGN) % EXPORT_ALIGN;
    Py_INCREF(descr);
    PyArrayObject *out = (PyArrayObject *)PyArray_NewFromDescr(
        &PyArray_Type, descr, nd, (npy_intp *)dims, NULL, p, NPY_ARRAY_CARRAY, NULL);
    if (out == NULL) {
        Py_DECREF(buf);
        return NULL;
    }
    if (PyArray_SetBaseObject(out, (PyObject *)buf) < 0) {   /* steals buf */
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* a 64-byte-aligned C-contiguous copy of arr */
static PyArrayObject *
aligned_copy(PyArrayObject *arr)
{
    PyArrayObject *out = mfdl_new_aligned_array(PyArray_DESCR(arr), PyArray_NDIM(arr),
                                           PyArray_DIMS(arr));
    if (out != NULL && PyArray_CopyInto(out, arr) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

/* deleters of the managed tensors we export: may run on any thread, with or
 * without the GIL */
static void
export_release(void *mem, PyObject *owner)
{
    if (!Py_IsInitialized()) {
        return;   /* interpreter gone: leak rather than crash */
    }
    PyGILState_STATE st = PyGILState_Ensure();
    PyMem_RawFree(mem);
    Py_XDECREF(owner);
    PyGILState_Release(st);
}

static void
export_deleter_versioned(mfdl_managed_v *self)
{
    export_release(self, (PyObject *)self->manager_ctx);
}

static void
export_deleter_legacy(mfdl_managed *self)
{
    export_release(self, (PyObject *)self->manager_ctx);
}

/*
 * Make a capsule for `src` (the array whose memory is exported; a strong
 * reference is taken).  packed_bits > 0: src is a packed uint8 buffer holding
 * `shape_of` values of packed_bits each (C order).
 */
static PyObject *
make_export_capsule(PyArrayObject *src, PyArrayObject *shape_of, int versioned,
                    uint32_t minor, uint64_t flags, uint8_t code, uint8_t bits,
                    int packed_bits)
{
    int ndim = PyArray_NDIM(shape_of);
    size_t head = versioned ? sizeof(mfdl_managed_v) : sizeof(mfdl_managed);
    head = (head + 7) / 8 * 8;
    char *mem = (char *)PyMem_RawMalloc(head + 2 * sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
    if (mem == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    mfdl_tensor *t;
    if (versioned) {
        mfdl_managed_v *m = (mfdl_managed_v *)mem;
        m->version.major = MFDL_MAJOR;
        m->version.minor = minor;
        m->manager_ctx = src;
        m->deleter = export_deleter_versioned;
        m->flags = flags;
        t = &m->dl_tensor;
    }
    else {
        mfdl_managed *m = (mfdl_managed *)mem;
        m->manager_ctx = src;
        m->deleter = export_deleter_legacy;
        t = &m->dl_tensor;
    }
    int64_t *shape = (int64_t *)(mem + head);
    int64_t *strides = shape + ndim;
    t->data = PyArray_DATA(src);
    t->device.device_type = MFDL_CPU;
    t->device.device_id = 0;
    t->ndim = ndim;
    t->dtype.code = code;
    t->dtype.bits = bits;
    t->dtype.lanes = 1;
    t->byte_offset = 0;
    t->shape = ndim ? shape : NULL;
    t->strides = ndim ? strides : NULL;
    npy_intp itemsize = PyArray_ITEMSIZE(src);
    int64_t cstride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        npy_intp n = PyArray_DIM(shape_of, i);
        shape[i] = n;
        if (packed_bits || n <= 1 || PyArray_SIZE(shape_of) == 0) {
            strides[i] = cstride;   /* the stride of a length-1 axis is arbitrary */
        }
        else {
            strides[i] = PyArray_STRIDE(src, i) / itemsize;
        }
        cstride *= n;
    }
    Py_INCREF(src);
    PyObject *cap = PyCapsule_New(mem, versioned ? MFDL_NAME_VERSIONED : MFDL_NAME_LEGACY,
                                  mfdl_producer_capsule_destructor);
    if (cap == NULL) {
        Py_DECREF(src);
        PyMem_RawFree(mem);
        return NULL;
    }
    return cap;
}

static PyObject *
export_array(PyArrayObject *arr, PyObject *stream, PyObject *max_version, PyObject *dl_device,
             PyObject *copy_obj)
{
    if (stream != Py_None) {
        PyErr_Format(PyExc_ValueError,
                     "minifloat exports host memory (kDLCPU), for which the stream must be None; "
                     "got stream=%R", stream);
        return NULL;
    }
    long major = 0, minor = 0;
    if (max_version != Py_None) {
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) != 2) {
            PyErr_SetString(PyExc_TypeError,
                            "max_version must be None or a tuple (major, minor)");
            return NULL;
        }
        major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
        if (major == -1 && PyErr_Occurred()) {
            return NULL;
        }
        minor = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 1));
        if (minor == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (dl_device != Py_None) {
        int dt, di;
        if (!PyTuple_Check(dl_device) || !PyArg_ParseTuple(dl_device, "ii", &dt, &di)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "dl_device must be None or a tuple (device_type, device_id), got %R",
                         dl_device);
            return NULL;
        }
        if (dt != MFDL_CPU || di != 0) {
            PyErr_Format(PyExc_BufferError,
                         "unsupported device requested: %s (%d), device %d; minifloat arrays "
                         "live in host memory and are exported as (kDLCPU, 0) only",
                         mfdl_device_name(dt), dt, di);
            return NULL;
        }
    }
    copy_mode copy;
    if (mfdl_parse_copy(copy_obj, &copy) < 0) {
        return NULL;
    }
    uint8_t code, bits;
    int subbyte;
    if (mfdl_dl_from_descr(PyArray_DESCR(arr), &code, &bits, &subbyte) < 0) {
        return NULL;
    }
    int versioned = major >= 1;
    uint32_t out_minor = major > MFDL_MAJOR ? MFDL_MINOR
                       : (uint32_t)(minor < 0 ? 0 : minor > MFDL_MINOR ? MFDL_MINOR : minor);
    int padded_ok = versioned && (major > MFDL_MAJOR || minor >= MFDL_MINOR_SUBBYTE);
    int writeable = PyArray_ISWRITEABLE(arr);

    if (subbyte && !padded_ok && copy != COPY_ALWAYS) {
        PyErr_Format(PyExc_BufferError,
                     "a %s array is stored one value per byte, which DLPack can say only from "
                     "version 1.1 on (IS_SUBBYTE_TYPE_PADDED), but the consumer asked for "
                     "max_version=%R; pass copy=True to export a packed copy",
                     PyArray_DESCR(arr)->typeobj->tp_name, max_version);
        return NULL;
    }
    if (!versioned && !writeable && copy != COPY_ALWAYS) {
        PyErr_SetString(PyExc_BufferError,
                        "Cannot export readonly array since signalling readonly is unsupported "
                        "by DLPack (supported by newer DLPack version); the consumer asked for "
                        "a legacy capsule: pass copy=True to export a writeable copy");
        return NULL;
    }
    npy_intp itemsize = PyArray_ITEMSIZE(arr);
    if (copy != COPY_ALWAYS && PyArray_SIZE(arr) > 1) {
        for (int i = 0; i < PyArray_NDIM(arr); i++) {
            if (PyArray_DIM(arr, i) > 1 && PyArray_STRIDE(arr, i) % itemsize != 0) {
                PyErr_SetString(PyExc_BufferError,
                                "DLPack only supports strides which are a multiple of itemsize; "
                                "pass copy=True or export np.ascontiguousarray(a)");
                return NULL;
            }
        }
    }
    if (subbyte && !padded_ok) {   /* copy == COPY_ALWAYS: a packed copy */
        PyArrayObject *packed = mfdl_pack_subbyte(arr, bits);
        if (packed == NULL) {
            return NULL;
        }
        PyObject *cap = make_export_capsule(packed, arr, versioned, out_minor,
                                            MFDL_FLAG_IS_COPIED, code, bits, bits);
        Py_DECREF(packed);
        return cap;
    }
    uint64_t flags = 0;
    PyArrayObject *src = arr;
    Py_INCREF(src);
    if (copy == COPY_ALWAYS) {
        Py_SETREF(src, aligned_copy(arr));
        if (src == NULL) {
            return NULL;
        }
        flags |= MFDL_FLAG_IS_COPIED;
    }
    if (!PyArray_ISWRITEABLE(src)) {
        flags |= MFDL_FLAG_READ_ONLY;
    }
    if (subbyte) {
        flags |= MFDL_FLAG_SUBBYTE_PADDED;
    }
    PyObject *cap = make_export_capsule(src, src, versioned, out_minor, flags, code, bits, 0);
    Py_DECREF(src);
    return cap;
}

static PyObject *
py_dlpack_export(PyObject *NPY_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "_dlpack_export(array, stream, max_version, dl_device, copy)");
        return NULL;
    }
    if (!PyArray_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "expected an ndarray, got %.200s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    return export_array((PyArrayObject *)args[0], args[1], args[2], args[3], args[4]);
}

/*
 * _dlpack_export_fp4x2(uint8 array, stream, max_version, dl_device, copy):
 * the bytes of packed float4 (two codes a byte, element 2j in the low
 * nibble) as DLPack's (kDLFloat4_e2m1fn, 4 bits, 2 lanes), torch's
 * float4_e2m1fn_x2 (minifloat.blocks).
 */
static PyObject *
py_dlpack_export_fp4x2(PyObject *NPY_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "_dlpack_export_fp4x2(array, stream, max_version, dl_device, copy)");
        return NULL;
    }
    if (!PyArray_Check(args[0]) || PyArray_TYPE((PyArrayObject *)args[0]) != NPY_UINT8) {
        PyErr_SetString(PyExc_TypeError, "expected a uint8 ndarray of packed float4 pairs");
        return NULL;
    }
    PyObject *cap = export_array((PyArrayObject *)args[0], args[1], args[2], args[3], args[4]);
    if (cap == NULL) {
        return NULL;
    }
    const char *name = PyCapsule_GetName(cap);
    void *mem = PyCapsule_GetPointer(cap, name);
    if (mem == NULL) {
        Py_DECREF(cap);
        return NULL;
    }
    mfdl_tensor *t = strcmp(name, MFDL_NAME_VERSIONED) == 0 ? &((mfdl_managed_v *)mem)->dl_tensor
                                                       : &((mfdl_managed *)mem)->dl_tensor;
    t->dtype.code = (uint8_t)mf_formats[MF_FLOAT4_E2M1FN].dlpack_code;
    t->dtype.bits = (uint8_t)mf_formats[MF_FLOAT4_E2M1FN].dlpack_bits;
    t->dtype.lanes = 2;
    return cap;
}

PyMethodDef mfdl_export_methods[] = {
    {"_dlpack_export", (PyCFunction)(void (*)(void))py_dlpack_export, METH_FASTCALL,
     "_dlpack_export(array, stream, max_version, dl_device, copy) -> capsule"},
    {"_dlpack_export_fp4x2", (PyCFunction)(void (*)(void))py_dlpack_export_fp4x2, METH_FASTCALL,
     "_dlpack_export_fp4x2(uint8 array, stream, max_version, dl_device, copy) -> capsule "
     "(packed float4 pairs as kDLFloat4_e2m1fn, 4 bits, 2 lanes)"},
    {NULL, NULL, 0, NULL},
};
