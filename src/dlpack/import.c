/*
 * DLPack import (from_dlpack): the producer's memory becomes the data of an
 * ndarray built with PyArray_NewFromDescr; the array's base is a small capsule
 * that owns the managed tensor and calls the producer's deleter when the last
 * view is gone.  Where the producer's type offers the DLPack C exchange API
 * (__dlpack_c_exchange_api__, DLPack 1.3), the managed tensor is obtained
 * through it, without the Python-level __dlpack__ call.  Packed sub-byte data
 * is unpacked into a new array (packing.c).
 */
#include "internal.h"

/* the base object of an imported array: owns the producer's managed tensor */
static const char NAME_OWNER_LEGACY[] = "minifloat.dlpack_owner";
static const char NAME_OWNER_VERSIONED[] = "minifloat.dlpack_owner_versioned";

/* interned strings and constant tuples, made once by mfdl_init_import */
static PyObject *s_dlpack, *s_dlpack_device, *s_api_attr, *s_requires_grad, *s_is_conj, *s_is_neg;
static PyObject *kwnames_dlpack;     /* ("stream", "max_version", "dl_device", "copy") */
static PyObject *t_max_version;      /* (1, 3) */
static PyObject *t_cpu_device;       /* (1, 0) */

static int use_exchange_api = 1;

/* memory a CPU may dereference: host, pinned host and unified memory */
static int
device_is_cpu_addressable(int32_t type)
{
    return type == MFDL_CPU || type == MFDL_CUDA_HOST || type == MFDL_ROCM_HOST
           || type == MFDL_CUDA_MANAGED;
}

/* a name for a dtype code, for error messages */
static const char *
dtype_code_name(int code)
{
    static const char *builtin[] = {"kDLInt", "kDLUInt", "kDLFloat", "kDLOpaqueHandle",
                                    "kDLBfloat", "kDLComplex", "kDLBool"};
    if (code >= 0 && code <= MFDL_BOOL) {
        return builtin[code];
    }
    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        if (mf_formats[i].dlpack_code == code) {
            return mf_formats[i].name;
        }
    }
    return "unknown code";
}

/* base object of an imported array: its name says which kind of tensor it owns */
static void
owner_destructor(PyObject *cap)
{
    const char *name = PyCapsule_GetName(cap);
    void *p = name ? PyCapsule_GetPointer(cap, name) : NULL;
    if (p == NULL) {
        PyErr_WriteUnraisable(cap);
        return;
    }
    mfdl_call_deleter_preserving_error(p, name == NAME_OWNER_VERSIONED);
}

/* a * b and a + b in int64, 0 on overflow (portable: no compiler builtins) */
static int
mul_i64(int64_t a, int64_t b, int64_t *r)
{
    if (a != 0 && b != 0) {
        if ((a > 0 && b > 0 && a > INT64_MAX / b) || (a < 0 && b < 0 && a < INT64_MAX / b)
                || (a > 0 && b < 0 && b < INT64_MIN / a) || (a < 0 && b > 0 && a < INT64_MIN / b)) {
            return 0;
        }
    }
    *r = a * b;
    return 1;
}

static int
add_i64(int64_t a, int64_t b, int64_t *r)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) {
        return 0;
    }
    *r = a + b;
    return 1;
}

/*
 * Whether the memory a non-empty tensor claims is describable: the offsets of
 * its first and last bytes (bits when `unit_bits`) from data, strides times
 * (shape - 1) summed per sign, plus byte_offset, must fit in npy_intp (NumPy
 * computes the bounds of a view with npy_intp, and unpack_subbyte the bit
 * positions with int64).  `unit` is the size of one element: bytes for a view,
 * lanes * bits for packed sub-byte data.  A tensor failing this cannot lie
 * inside any address space; fuzzing found byte_offset * 8 overflowing.
 */
static int
tensor_extent_ok(const mfdl_tensor *t, int64_t unit, int unit_bits)
{
    int64_t lo = 0, hi = 0, contiguous = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int64_t stride = t->strides != NULL ? t->strides[i] : contiguous;
        int64_t span;
        if (!mul_i64(stride, t->shape[i] - 1, &span)
                || !add_i64(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi)
                || !mul_i64(contiguous, t->shape[i], &contiguous)) {
            return 0;
        }
    }
    int64_t first, last, off = (int64_t)t->byte_offset;
    if (!mul_i64(lo, unit, &first) || !add_i64(hi, 1, &last) || !mul_i64(last, unit, &last)) {
        return 0;
    }
    if (unit_bits) {
        /* bits from base = data + byte_offset: byte_offset itself is added to the pointer */
        return first > NPY_MIN_INTP / 2 && last < NPY_MAX_INTP / 2;
    }
    return add_i64(first, off, &first) && add_i64(last, off, &last)
           && first >= NPY_MIN_INTP && last <= NPY_MAX_INTP;
}

static void
set_device_error(const mfdl_tensor *t, int cpu_requested)
{
    const char *name = mfdl_device_name(t->device.device_type);
    if (cpu_requested) {
        PyErr_Format(PyExc_BufferError,
                     "%s (%d), device %d is not addressable from the CPU, and the producer "
                     "returned it although a CPU copy (dl_device=(kDLCPU, 0)) was requested "
                     "(a producer older than the 2023.12 protocol ignores that request); copy "
                     "it to host memory with the producer's own API first (tensor.cpu() in "
                     "torch, cupy.asnumpy(x) in CuPy)",
                     name, (int)t->device.device_type, (int)t->device.device_id);
    }
    else {
        PyErr_Format(PyExc_BufferError,
                     "%s (%d), device %d is not addressable from the CPU; pass device='cpu' "
                     "(with copy=None or copy=True) to have the producer copy it to host "
                     "memory, use minifloat.asnumpy(x), or copy it yourself first "
                     "(tensor.cpu() in torch, cupy.asnumpy(x) in CuPy)",
                     name, (int)t->device.device_type, (int)t->device.device_id);
    }
}

/*
 * Turn one managed tensor into an ndarray.
 *
 * On success the tensor's ownership has moved: into the array's base object
 * (a view), or it was released after a copy; `capsule` (if any) is renamed
 * "used_*".  On failure *taken says whether ownership was already taken (then
 * the deleter has run or will run with the base object); if not, the caller
 * still owns the tensor (a capsule keeps its name, so its own destructor frees
 * it).
 */
static PyObject *
import_managed(void *managed, int versioned, PyObject *capsule, copy_mode copy,
               int cpu_requested, int *taken)
{
    *taken = 0;
    mfdl_tensor *t;
    uint64_t flags = 0;
    if (versioned) {
        mfdl_managed_v *m = (mfdl_managed_v *)managed;
        if (m->version.major != MFDL_MAJOR) {
            PyErr_Format(PyExc_BufferError,
                         "the DLPack tensor has major version %u (minor %u); minifloat "
                         "implements major version %d (up to %d.%d) and cannot read it: "
                         "upgrade minifloat, or ask the producer for an older version",
                         (unsigned)m->version.major, (unsigned)m->version.minor,
                         MFDL_MAJOR, MFDL_MAJOR, MFDL_MINOR);
            return NULL;
        }
        t = &m->dl_tensor;
        flags = m->flags;
    }
    else {
        t = &((mfdl_managed *)managed)->dl_tensor;
    }

    /* --- validate everything before touching the data --- */
    int ndim = t->ndim;
    if (ndim < 0 || ndim > NPY_MAXDIMS) {
        PyErr_Format(PyExc_BufferError,
                     "malformed DLTensor: ndim is %d; NumPy supports 0 to %d dimensions",
                     ndim, NPY_MAXDIMS);
        return NULL;
    }
    if (ndim > 0 && t->shape == NULL) {
        PyErr_Format(PyExc_BufferError, "malformed DLTensor: ndim is %d but shape is NULL", ndim);
        return NULL;
    }
    npy_intp size = 1;
    for (int i = 0; i < ndim; i++) {
        int64_t s = t->shape[i];
        if (s < 0) {
            PyErr_Format(PyExc_BufferError,
                         "malformed DLTensor: shape[%d] is %lld (negative)", i, (long long)s);
            return NULL;
        }
        if (s > NPY_MAX_INTP || (size != 0 && s != 0 && size > NPY_MAX_INTP / s)) {
            PyErr_SetString(PyExc_BufferError,
                            "malformed DLTensor: the number of elements overflows");
            return NULL;
        }
        size *= (npy_intp)s;
    }
    if (!device_is_cpu_addressable(t->device.device_type)) {
        set_device_error(t, cpu_requested);
        return NULL;
    }
    int code = t->dtype.code, bits = t->dtype.bits, lanes = t->dtype.lanes;
    if (lanes == 0) {
        PyErr_SetString(PyExc_BufferError, "malformed DLTensor: dtype lanes is 0");
        return NULL;
    }
    int subbits;
    PyArray_Descr *descr = mfdl_descr_from_dl(code, bits, &subbits);
    if (descr == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        PyErr_Format(PyExc_BufferError,
                     "Unsupported dtype in DLTensor: code %d (%s), bits %d, lanes %d; neither "
                     "NumPy nor minifloat has this type. Convert it in the producer first "
                     "(e.g. tensor.float())", code, dtype_code_name(code), bits, lanes);
        return NULL;
    }
    if (lanes != 1 && subbits == 0) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_BufferError,
                     "Unsupported lanes in DLTensor dtype: code %d (%s), bits %d, lanes %d; "
                     "vector types are imported only for sub-byte formats (e.g. torch's "
                     "float4_e2m1fn_x2)", code, dtype_code_name(code), bits, lanes);
        return NULL;
    }
    if (t->data == NULL && size != 0) {
        Py_DECREF(descr);
        PyErr_SetString(PyExc_BufferError,
                        "malformed DLTensor: data is NULL but the tensor is not empty");
        return NULL;
    }
    if (t->byte_offset > (uint64_t)NPY_MAX_INTP) {
        Py_DECREF(descr);
        PyErr_SetString(PyExc_BufferError, "malformed DLTensor: byte_offset overflows");
        return NULL;
    }
    int padded = versioned && (flags & MFDL_FLAG_SUBBYTE_PADDED);
    int readonly = versioned ? (flags & MFDL_FLAG_READ_ONLY) != 0
                             : 1;   /* legacy capsules cannot say; NumPy's convention */
    npy_intp itemsize = descr->elsize;
    /* bytes one element (all lanes) occupies in memory, for a viewable layout */
    npy_intp elem_bytes = itemsize * lanes;
    if (t->strides != NULL) {
        for (int i = 0; i < ndim; i++) {
            int64_t s = t->strides[i];
            int64_t lim = (subbits && !padded) ? (NPY_MAX_INTP / 64) / lanes : NPY_MAX_INTP / elem_bytes;
            if (s > lim || s < -lim) {
                Py_DECREF(descr);
                PyErr_Format(PyExc_BufferError,
                             "malformed DLTensor: strides[%d] = %lld overflows", i, (long long)s);
                return NULL;
            }
        }
    }

    if (size != 0 && !tensor_extent_ok(t, (subbits && !padded) ? (int64_t)lanes * bits : elem_bytes,
                                       subbits && !padded)) {
        Py_DECREF(descr);
        PyErr_SetString(PyExc_BufferError,
                        "malformed DLTensor: the memory its shape, strides and byte_offset "
                        "describe does not fit in an address space");
        return NULL;
    }

    /* --- packed sub-byte data: one value per byte needs a new array --- */
    if (subbits && !padded) {
        if (copy == COPY_NEVER) {
            Py_DECREF(descr);
            PyErr_Format(PyExc_BufferError,
                         "the DLTensor holds packed %d-bit %s values (DLPack's sub-byte layout, "
                         "no IS_SUBBYTE_TYPE_PADDED flag); minifloat stores one value per byte, "
                         "so they cannot be viewed without a copy. Pass copy=None or copy=True "
                         "to unpack them into a new array", bits, descr->typeobj->tp_name);
            return NULL;
        }
        if (ndim + (lanes > 1) > NPY_MAXDIMS) {
            Py_DECREF(descr);
            PyErr_SetString(PyExc_BufferError, "too many dimensions with the lanes axis");
            return NULL;
        }
        PyObject *out = mfdl_unpack_subbyte(t, descr, bits, lanes);
        if (out == NULL) {
            return NULL;
        }
        if (mfdl_mark_taken(capsule, versioned) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        *taken = 1;
        mfdl_call_deleter(managed, versioned);
        return out;
    }

    /* --- a view of the producer's memory --- */
    npy_intp dims[NPY_MAXDIMS], strides[NPY_MAXDIMS];
    int out_nd = ndim;
    npy_intp *strides_arg = NULL;
    for (int i = 0; i < ndim; i++) {
        dims[i] = (npy_intp)t->shape[i];
    }
    if (lanes > 1) {   /* padded sub-byte vector type: a trailing axis of lanes */
        if (ndim + 1 > NPY_MAXDIMS) {
            Py_DECREF(descr);
            PyErr_SetString(PyExc_BufferError, "too many dimensions with the lanes axis");
            return NULL;
        }
        dims[out_nd] = lanes;
        strides[out_nd] = itemsize;
        out_nd++;
    }
    if (t->strides != NULL || lanes > 1) {
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            int64_t es = t->strides != NULL ? t->strides[i] : s;
            strides[i] = (npy_intp)es * elem_bytes;
            s *= t->shape[i];
        }
        strides_arg = strides;
    }
    if (t->data == NULL) {
        /* an empty tensor without memory: a new empty array, the tensor is released */
        PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, out_nd, dims, NULL, NULL,
                                             0, NULL);
        if (out == NULL) {
            return NULL;
        }
        if (readonly) {
            PyArray_CLEARFLAGS((PyArrayObject *)out, NPY_ARRAY_WRITEABLE);
        }
        if (mfdl_mark_taken(capsule, versioned) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        *taken = 1;
        mfdl_call_deleter(managed, versioned);
        return out;
    }
    /* in integers: a producer may give data below byte_offset (UBSan: pointer overflow) */
    char *data = (char *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, out_nd, dims, strides_arg, data,
                                         readonly ? 0 : NPY_ARRAY_WRITEABLE, NULL);
    if (arr == NULL) {
        return NULL;
    }
    if (copy == COPY_ALWAYS && !(versioned && (flags & MFDL_FLAG_IS_COPIED))) {
        /* the array does not own or reference the memory yet: copy, then release */
        PyObject *c = PyArray_NewCopy((PyArrayObject *)arr, NPY_KEEPORDER);
        Py_DECREF(arr);
        if (c == NULL) {
            return NULL;
        }
        if (mfdl_mark_taken(capsule, versioned) < 0) {
            Py_DECREF(c);
            return NULL;
        }
        *taken = 1;
        mfdl_call_deleter(managed, versioned);
        return c;
    }
    PyObject *owner = PyCapsule_New(managed, versioned ? NAME_OWNER_VERSIONED : NAME_OWNER_LEGACY,
                                    owner_destructor);
    if (owner == NULL) {
        Py_DECREF(arr);
        return NULL;
    }
    if (mfdl_mark_taken(capsule, versioned) < 0) {
        PyCapsule_SetDestructor(owner, NULL);
        Py_DECREF(owner);
        Py_DECREF(arr);
        return NULL;
    }
    *taken = 1;
    /* steals owner; on failure owner is released, and with it the tensor */
    if (PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* import a capsule produced by __dlpack__ (or passed directly) */
static PyObject *
import_capsule(PyObject *capsule, copy_mode copy, int cpu_requested)
{
    int versioned;
    if (PyCapsule_IsValid(capsule, MFDL_NAME_VERSIONED)) {
        versioned = 1;
    }
    else if (PyCapsule_IsValid(capsule, MFDL_NAME_LEGACY)) {
        versioned = 0;
    }
    else if (PyCapsule_CheckExact(capsule)) {
        const char *name = PyCapsule_GetName(capsule);
        if (name == NULL) {
            PyErr_Clear();
        }
        if (name != NULL && (strcmp(name, MFDL_NAME_USED_LEGACY) == 0
                             || strcmp(name, MFDL_NAME_USED_VERSIONED) == 0)) {
            PyErr_Format(PyExc_ValueError,
                         "the DLPack capsule was already consumed (it is named \"%s\"); a "
                         "capsule can be imported once: call x.__dlpack__() again for a new one",
                         name);
        }
        else {
            PyErr_Format(PyExc_ValueError,
                         "expected a DLPack capsule named \"dltensor\" or \"dltensor_versioned\", "
                         "got one named %s%s%s", name ? "\"" : "", name ? name : "NULL",
                         name ? "\"" : "");
        }
        return NULL;
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "__dlpack__() must return a PyCapsule, got %.200s",
                     Py_TYPE(capsule)->tp_name);
        return NULL;
    }
    void *managed = PyCapsule_GetPointer(capsule, versioned ? MFDL_NAME_VERSIONED : MFDL_NAME_LEGACY);
    if (managed == NULL) {
        return NULL;
    }
    int taken;
    return import_managed(managed, versioned, capsule, copy, cpu_requested, &taken);
}

/* ---- the C exchange API: which types offer it (a small cache) ---- */

typedef struct {
    PyTypeObject *type;              /* strong reference */
    unsigned int tag;                /* tp_version_tag when cached */
    const mfdl_exchange_api *api;    /* NULL: no usable API */
    int is_torch;
} api_cache_entry;

#define API_CACHE_SIZE 8
static api_cache_entry api_cache[API_CACHE_SIZE];
static int api_cache_next;

static int
type_is_torch_tensor(PyTypeObject *type)
{
    PyObject *mro = type->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        const char *n = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_name;
        if (strcmp(n, "torch._C.TensorBase") == 0 || strcmp(n, "torch._C._TensorBase") == 0) {
            return 1;
        }
    }
    return 0;
}

/*
 * The exchange API of `type`, or NULL.  It is used only when the class that
 * defines __dlpack_c_exchange_api__ also provides the __dlpack__ that `type`
 * resolves to: a subclass overriding __dlpack__ gets its own method called.
 */
static const mfdl_exchange_api *
find_exchange_api(PyTypeObject *type, int *is_torch)
{
    *is_torch = 0;
    for (int i = 0; i < API_CACHE_SIZE; i++) {
        api_cache_entry *e = &api_cache[i];
        if (e->type == type && e->tag != 0 && type->tp_version_tag == e->tag) {
            *is_torch = e->is_torch;
            return e->api;
        }
    }
    const mfdl_exchange_api *api = NULL;
    PyObject *cap = PyObject_GetAttr((PyObject *)type, s_api_attr);
    if (cap == NULL) {
        PyErr_Clear();
    }
    else {
        if (PyCapsule_IsValid(cap, MFDL_NAME_API)) {
            const mfdl_exchange_api *a = (const mfdl_exchange_api *)PyCapsule_GetPointer(cap, MFDL_NAME_API);
            /* walk to a version with our major */
            const mfdl_api_header *h = a ? &a->header : NULL;
            while (h != NULL && h->version.major != MFDL_MAJOR) {
                h = h->prev_api;
            }
            if (h != NULL && ((const mfdl_exchange_api *)h)->managed_tensor_from_py_object_no_sync) {
                api = (const mfdl_exchange_api *)h;
            }
        }
        Py_DECREF(cap);
        if (api != NULL) {
            /* the defining class, and whether __dlpack__ is still its own */
            PyObject *mro = type->tp_mro;
            PyTypeObject *owner = NULL;
            for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
                PyTypeObject *k = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
#if PY_VERSION_HEX >= 0x030C0000
                PyObject *dict = PyType_GetDict(k);
#else
                PyObject *dict = Py_XNewRef(k->tp_dict);
#endif
                int found = dict != NULL && PyDict_GetItemWithError(dict, s_api_attr) != NULL;
                Py_XDECREF(dict);
                if (found) {
                    owner = k;
                    break;
                }
            }
            PyErr_Clear();
            PyObject *m1 = PyObject_GetAttr((PyObject *)type, s_dlpack);
            PyObject *m2 = owner ? PyObject_GetAttr((PyObject *)owner, s_dlpack) : NULL;
            PyErr_Clear();
            if (m1 == NULL || m2 == NULL || m1 != m2) {
                api = NULL;
            }
            Py_XDECREF(m1);
            Py_XDECREF(m2);
        }
    }
    *is_torch = type_is_torch_tensor(type);
    unsigned int tag = type->tp_version_tag;   /* assigned by the lookups above */
    if (tag != 0) {
        api_cache_entry *e = &api_cache[api_cache_next];
        api_cache_next = (api_cache_next + 1) % API_CACHE_SIZE;
        Py_XSETREF(e->type, (PyTypeObject *)Py_NewRef((PyObject *)type));
        e->tag = tag;
        e->api = api;
        e->is_torch = *is_torch;
    }
    return api;
}

/*
 * torch's exchange API and __dlpack__ export tensors whose values are not in
 * memory as stored: with the conjugate or negative bit set (torch 2.13's
 * __dlpack__ checks conj but not neg, the C API checks neither), and tensors
 * that require grad (writes would bypass autograd).  Refuse them like
 * torch.Tensor.numpy() does.  0 ok, -1 error set.
 */
static int
torch_checks(PyObject *x, int all)
{
    if (!all) {
        goto bits;   /* torch's __dlpack__ checks requires_grad and conj itself */
    }
    PyObject *r = PyObject_GetAttr(x, s_requires_grad);
    if (r == NULL) {
        return -1;
    }
    int rg = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (rg < 0) {
        return -1;
    }
    if (rg) {
        PyErr_SetString(PyExc_BufferError,
                        "cannot import a torch tensor that requires grad (writes through the "
                        "array would bypass autograd); use tensor.detach()");
        return -1;
    }
bits:;
    PyObject *names[2] = {s_is_conj, s_is_neg};
    const char *msgs[2] = {
        "the torch tensor has its conjugate bit set, so its memory does not hold its values; "
        "use tensor.resolve_conj()",
        "the torch tensor has its negative bit set, so its memory does not hold its values; "
        "use tensor.resolve_neg()",
    };
    for (int i = all ? 0 : 1; i < 2; i++) {
        PyObject *args[1] = {x};
        PyObject *v = PyObject_VectorcallMethod(names[i], args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (v == NULL) {
            return -1;
        }
        int b = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (b < 0) {
            return -1;
        }
        if (b) {
            PyErr_SetString(PyExc_BufferError, msgs[i]);
            return -1;
        }
    }
    return 0;
}

/* ---- from_dlpack ---- */

static PyObject *
from_dlpack_impl(PyObject *x, int cpu_requested, copy_mode copy)
{
    if (PyCapsule_CheckExact(x)) {
        return import_capsule(x, copy, cpu_requested);
    }
    if (PyArray_Check(x)) {
        /* an ndarray: what a round trip through its own DLPack export would give */
        uint8_t code, bits;
        int subbyte;
        if (mfdl_dl_from_descr(PyArray_DESCR((PyArrayObject *)x), &code, &bits, &subbyte) == 0) {
            if (copy == COPY_ALWAYS) {
                return PyArray_NewCopy((PyArrayObject *)x, NPY_KEEPORDER);
            }
            return PyArray_View((PyArrayObject *)x, NULL, &PyArray_Type);
        }
        PyErr_Clear();   /* let NumPy's own __dlpack__ say why not */
    }

    PyTypeObject *type = Py_TYPE(x);
    int is_torch = 0;
    const mfdl_exchange_api *api = use_exchange_api ? find_exchange_api(type, &is_torch) : NULL;
    if (!use_exchange_api) {
        is_torch = type_is_torch_tensor(type);
    }
    if (is_torch && torch_checks(x, api != NULL) < 0) {
        return NULL;
    }
    if (api != NULL) {
        mfdl_managed_v *m = NULL;
        if (api->managed_tensor_from_py_object_no_sync(x, &m) != 0 || m == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_BufferError,
                                "the producer's DLPack C exchange API failed without an error");
            }
            return NULL;
        }
        if (m->dl_tensor.device.device_type != MFDL_CPU) {
            /* The C API neither synchronises streams nor copies between devices:
             * pinned, managed and device memory go through __dlpack__, which does
             * (stream=None, and dl_device when a host copy is wanted). */
            mfdl_call_deleter(m, 1);
        }
        else {
            int taken;
            PyObject *res = import_managed(m, 1, NULL, copy, cpu_requested, &taken);
            if (res == NULL && !taken) {
                mfdl_call_deleter_preserving_error(m, 1);
            }
            return res;
        }
    }

    /*
     * __dlpack__(stream=None, max_version=(1, 3), dl_device=..., copy=...).
     * copy=True is not forwarded: when the memory is addressable, copying it
     * here makes exactly one copy (a producer answering with a legacy capsule
     * could not tell us it had copied already).
     */
    PyObject *fwd_copy = copy == COPY_NEVER ? Py_False : Py_None;
    PyObject *args[5] = {x, Py_None, t_max_version, cpu_requested ? t_cpu_device : Py_None,
                         fwd_copy};
    PyObject *capsule = PyObject_VectorcallMethod(s_dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                  kwnames_dlpack);
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* a producer older than the 2023.12 protocol: only `stream` */
        PyErr_Clear();
        capsule = PyObject_VectorcallMethod(s_dlpack, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (capsule == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError) && !PyObject_HasAttr(x, s_dlpack)) {
            PyErr_Format(PyExc_TypeError,
                         "from_dlpack() needs an object with __dlpack__ and __dlpack_device__ "
                         "(or a DLPack capsule); got %.200s. For other array-likes use "
                         "minifloat.asnumpy(x) or np.asarray(x)", type->tp_name);
        }
        return NULL;
    }
    PyObject *res = import_capsule(capsule, copy, cpu_requested);
    Py_DECREF(capsule);
    return res;
}

static PyObject *
py_from_dlpack(PyObject *NPY_UNUSED(self), PyObject *const *args, Py_ssize_t nargsf,
               PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *device = Py_None, *copy_obj = Py_None;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError,
                     "from_dlpack() takes exactly 1 positional argument (%zd given)", nargs);
        return NULL;
    }
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            PyObject *v = args[nargs + i];
            if (PyUnicode_CompareWithASCIIString(k, "device") == 0) {
                device = v;
            }
            else if (PyUnicode_CompareWithASCIIString(k, "copy") == 0) {
                copy_obj = v;
            }
            else {
                PyErr_Format(PyExc_TypeError,
                             "from_dlpack() got an unexpected keyword argument %R", k);
                return NULL;
            }
        }
    }
    int cpu_requested = 0;
    if (device != Py_None) {
        if (!PyUnicode_Check(device) || PyUnicode_CompareWithASCIIString(device, "cpu") != 0) {
            PyErr_Format(PyExc_ValueError,
                         "Device not understood. Only \"cpu\" is allowed, but received: %R",
                         device);
            return NULL;
        }
        cpu_requested = 1;
    }
    copy_mode copy;
    if (mfdl_parse_copy(copy_obj, &copy) < 0) {
        return NULL;
    }
    return from_dlpack_impl(args[0], cpu_requested, copy);
}

static PyObject *
py_set_exchange_api(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    int v = PyObject_IsTrue(arg);
    if (v < 0) {
        return NULL;
    }
    int prev = use_exchange_api;
    use_exchange_api = v;
    return PyBool_FromLong(prev);
}

PyMethodDef mfdl_import_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))py_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
     "Create a NumPy array from an object implementing the ``__dlpack__`` protocol\n"
     "(or from a DLPack capsule), usually as a view of its memory.  Like\n"
     "np.from_dlpack, and also for bfloat16 and every float8/float6/float4 and\n"
     "int4/int2/int1 DLPack type, which become minifloat dtypes."},
    {"_set_exchange_api", py_set_exchange_api, METH_O,
     "_set_exchange_api(enabled) -> previous: use producers' DLPack C exchange API (tests, benchmarks)."},
    {NULL, NULL, 0, NULL},
};

int
mfdl_init_import(void)
{
    s_dlpack = PyUnicode_InternFromString("__dlpack__");
    s_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    s_api_attr = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    s_requires_grad = PyUnicode_InternFromString("requires_grad");
    s_is_conj = PyUnicode_InternFromString("is_conj");
    s_is_neg = PyUnicode_InternFromString("is_neg");
    kwnames_dlpack = Py_BuildValue("(ssss)", "stream", "max_version", "dl_device", "copy");
    t_max_version = Py_BuildValue("(ii)", MFDL_MAJOR, MFDL_MINOR);
    t_cpu_device = Py_BuildValue("(ii)", MFDL_CPU, 0);
    if (!s_dlpack || !s_dlpack_device || !s_api_attr || !s_requires_grad || !s_is_conj
            || !s_is_neg || !kwnames_dlpack || !t_max_version || !t_cpu_device) {
        return -1;
    }
    return 0;
}
