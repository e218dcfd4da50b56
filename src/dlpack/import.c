/*
 * DLPack exchange (issue 4): importing and exporting DLManagedTensor and
 * DLManagedTensorVersioned capsules for minifloat and NumPy dtypes.
 * Registered into minifloat._core by mf_init_dlpack().
 *
 * Import (from_dlpack): the producer's memory becomes the data of an ndarray
 * built with PyArray_NewFromDescr; the array's base is a small capsule that
 * owns the managed tensor and calls the producer's deleter when the last view
 * is gone.  Where the producer's type offers the DLPack C exchange API
 * (__dlpack_c_exchange_api__, DLPack 1.3), the managed tensor is obtained
 * through it, without the Python-level __dlpack__ call.
 *
 * Export (_dlpack_export): a managed tensor whose manager_ctx is a strong
 * reference to the array (or to a copy of it).
 *
 * Sub-byte formats (float6, float4, int4, int2, int1) are stored one value per
 * byte by minifloat.  DLPack packs them (little bit-endian) unless the
 * IS_SUBBYTE_TYPE_PADDED flag says one value per byte: padded data is viewed,
 * packed data is unpacked into a new array (only if a copy is allowed).
 *
 * Every dtype mapping for minifloat's formats comes from the format table
 * (mf_formats[].dlpack_code / dlpack_bits); the codes below are DLPack's own
 * ABI constants (device types, flags and the built-in dtype codes).
 */
#include "minifloat.h"
#include <pythread.h>

/* ------------------------------------------------------------------ */
/* The DLPack ABI, version 1.3 (declared here from the specification)  */
/* ------------------------------------------------------------------ */

#define MFDL_MAJOR 1
#define MFDL_MINOR 3
/* sub-byte float codes and the IS_SUBBYTE_TYPE_PADDED flag exist since 1.1 */
#define MFDL_MINOR_SUBBYTE 1

enum { /* DLDataTypeCode: built-in codes; minifloat's come from the format table */
    MFDL_INT = 0, MFDL_UINT = 1, MFDL_FLOAT = 2, MFDL_OPAQUE_HANDLE = 3,
    MFDL_BFLOAT = 4, MFDL_COMPLEX = 5, MFDL_BOOL = 6,
};

enum { /* DLDeviceType */
    MFDL_CPU = 1, MFDL_CUDA = 2, MFDL_CUDA_HOST = 3, MFDL_ROCM = 10,
    MFDL_ROCM_HOST = 11, MFDL_CUDA_MANAGED = 13, MFDL_NUM_DEVICE_NAMES = 19,
};

#define MFDL_FLAG_READ_ONLY       (UINT64_C(1) << 0)
#define MFDL_FLAG_IS_COPIED       (UINT64_C(1) << 1)
#define MFDL_FLAG_SUBBYTE_PADDED  (UINT64_C(1) << 2)

typedef struct { uint32_t major, minor; } mfdl_version;
typedef struct { int32_t device_type, device_id; } mfdl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } mfdl_dtype;

typedef struct {
    void *data;
    mfdl_device device;
    int32_t ndim;
    mfdl_dtype dtype;
    int64_t *shape;
    int64_t *strides;      /* in elements; NULL means C-contiguous (before 1.2) */
    uint64_t byte_offset;
} mfdl_tensor;

typedef struct mfdl_managed {            /* DLManagedTensor (legacy, "dltensor") */
    mfdl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct mfdl_managed *self);
} mfdl_managed;

typedef struct mfdl_managed_v {          /* DLManagedTensorVersioned */
    mfdl_version version;
    void *manager_ctx;
    void (*deleter)(struct mfdl_managed_v *self);
    uint64_t flags;
    mfdl_tensor dl_tensor;
} mfdl_managed_v;

/* The C exchange API (DLPack 1.3): type(x).__dlpack_c_exchange_api__ */
typedef struct mfdl_api_header {
    mfdl_version version;
    struct mfdl_api_header *prev_api;
} mfdl_api_header;

typedef struct {
    mfdl_api_header header;
    int (*managed_tensor_allocator)(mfdl_tensor *prototype, mfdl_managed_v **out, void *error_ctx,
                                    void (*set_error)(void *, const char *, const char *));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, mfdl_managed_v **out);
    int (*managed_tensor_to_py_object_no_sync)(mfdl_managed_v *tensor, void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, mfdl_tensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} mfdl_exchange_api;

/* Capsule names (static strings, as the protocol requires) */
static const char NAME_LEGACY[] = "dltensor";
static const char NAME_VERSIONED[] = "dltensor_versioned";
static const char NAME_USED_LEGACY[] = "used_dltensor";
static const char NAME_USED_VERSIONED[] = "used_dltensor_versioned";
static const char NAME_API[] = "dlpack_exchange_api";
/* the base object of an imported array: owns the producer's managed tensor */
static const char NAME_OWNER_LEGACY[] = "minifloat.dlpack_owner";
static const char NAME_OWNER_VERSIONED[] = "minifloat.dlpack_owner_versioned";

typedef enum { COPY_IF_NEEDED = 0, COPY_ALWAYS = 1, COPY_NEVER = 2 } copy_mode;

/* interned strings and constant tuples, made once in mf_init_dlpack */
static PyObject *s_dlpack, *s_dlpack_device, *s_api_attr, *s_requires_grad, *s_is_conj, *s_is_neg;
static PyObject *kwnames_dlpack;     /* ("stream", "max_version", "dl_device", "copy") */
static PyObject *t_max_version;      /* (1, 3) */
static PyObject *t_cpu_device;       /* (1, 0) */

static int use_exchange_api = 1;

/* ------------------------------------------------------------------ */
/* small helpers                                                        */
/* ------------------------------------------------------------------ */

static const char *
device_name(int32_t type)
{
    static const char *names[MFDL_NUM_DEVICE_NAMES] = {
        [1] = "kDLCPU", [2] = "kDLCUDA", [3] = "kDLCUDAHost", [4] = "kDLOpenCL",
        [7] = "kDLVulkan", [8] = "kDLMetal", [9] = "kDLVPI", [10] = "kDLROCM",
        [11] = "kDLROCMHost", [12] = "kDLExtDev", [13] = "kDLCUDAManaged",
        [14] = "kDLOneAPI", [15] = "kDLWebGPU", [16] = "kDLHexagon", [17] = "kDLMAIA",
        [18] = "kDLTrn",
    };
    if (type >= 0 && type < MFDL_NUM_DEVICE_NAMES && names[type] != NULL) {
        return names[type];
    }
    return "unknown device type";
}

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

static void
call_deleter(void *managed, int versioned)
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
static void
call_deleter_preserving_error(void *managed, int versioned)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    call_deleter(managed, versioned);
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(NULL);
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(type, value, tb);
#endif
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
    call_deleter_preserving_error(p, name == NAME_OWNER_VERSIONED);
}

/* destructor of a producer capsule (ours, or the test producer's): frees the
 * tensor only if no consumer took it (the name is still unused) */
static void
producer_capsule_destructor(PyObject *cap)
{
    const char *name = PyCapsule_GetName(cap);
    if (name == NULL) {
        PyErr_Clear();
        return;
    }
    int versioned;
    if (strcmp(name, NAME_VERSIONED) == 0) {
        versioned = 1;
    }
    else if (strcmp(name, NAME_LEGACY) == 0) {
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
    call_deleter_preserving_error(p, versioned);
}

static int
parse_copy(PyObject *obj, copy_mode *mode)
{
    if (obj == NULL || obj == Py_None) {
        *mode = COPY_IF_NEEDED;
        return 0;
    }
    int t = PyObject_IsTrue(obj);
    if (t < 0) {
        return -1;
    }
    *mode = t ? COPY_ALWAYS : COPY_NEVER;
    return 0;
}

/* ------------------------------------------------------------------ */
/* dtype mapping                                                        */
/* ------------------------------------------------------------------ */

/*
 * (code, bits) -> dtype (new reference), or NULL without an error set when
 * neither NumPy nor minifloat has it.  *subbits is the DLPack bit width when
 * the format is narrower than its one-byte storage (float6, float4, int4...),
 * else 0.
 */
static PyArray_Descr *
descr_from_dl(int code, int bits, int *subbits)
{
    int typenum = -1;
    *subbits = 0;
    switch (code) {
        case MFDL_BOOL:
            typenum = bits == 8 ? NPY_BOOL : -1;
            break;
        case MFDL_INT:
            typenum = bits == 8 ? NPY_INT8 : bits == 16 ? NPY_INT16 : bits == 32 ? NPY_INT32
                    : bits == 64 ? NPY_INT64 : -1;
            break;
        case MFDL_UINT:
            typenum = bits == 8 ? NPY_UINT8 : bits == 16 ? NPY_UINT16 : bits == 32 ? NPY_UINT32
                    : bits == 64 ? NPY_UINT64 : -1;
            break;
        case MFDL_FLOAT:
            typenum = bits == 16 ? NPY_HALF : bits == 32 ? NPY_FLOAT : bits == 64 ? NPY_DOUBLE : -1;
            break;
        case MFDL_COMPLEX:
            typenum = bits == 64 ? NPY_CFLOAT : bits == 128 ? NPY_CDOUBLE : -1;
            break;
        default:
            break;
    }
    if (typenum >= 0) {
        return PyArray_DescrFromType(typenum);
    }
    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        const mf_format *f = &mf_formats[i];
        if (f->dlpack_code == code && f->dlpack_bits == bits) {
            if (bits < 8 * f->itemsize) {
                *subbits = bits;
            }
            Py_INCREF(mf_singletons[i]);
            return mf_singletons[i];
        }
    }
    return NULL;
}

/*
 * dtype -> (code, bits) for export; *subbyte is set for formats whose DLPack
 * bit width is below their storage.  -1 with BufferError when not exportable.
 */
static int
dl_from_descr(PyArray_Descr *d, uint8_t *code, uint8_t *bits, int *subbyte)
{
    *subbyte = 0;
    int idx = mf_dtype_index(NPY_DTYPE(d));
    if (idx >= 0) {
        const mf_format *f = &mf_formats[idx];
        if (mf_descr_swapped(d)) {
            PyErr_Format(PyExc_BufferError,
                         "DLPack only supports native byte order; got %s in the other byte "
                         "order. Convert it first, e.g. a.astype(a.dtype.newbyteorder('='))",
                         f->name);
            return -1;
        }
        *code = (uint8_t)f->dlpack_code;
        *bits = (uint8_t)f->dlpack_bits;
        *subbyte = f->dlpack_bits < 8 * f->itemsize;
        return 0;
    }
    int t = d->type_num;
    if (t >= 0 && t < NPY_NTYPES_LEGACY) {
        if (PyDataType_ISBYTESWAPPED(d)) {
            PyErr_Format(PyExc_BufferError,
                         "DLPack only supports native byte order; got %R. Convert it first, "
                         "e.g. a.astype(a.dtype.newbyteorder('='))", (PyObject *)d);
            return -1;
        }
        int ok = 1;
        if (t == NPY_BOOL) {
            *code = MFDL_BOOL;
        }
        else if (PyTypeNum_ISSIGNED(t)) {
            *code = MFDL_INT;
        }
        else if (PyTypeNum_ISUNSIGNED(t)) {
            *code = MFDL_UINT;
        }
        else if (PyTypeNum_ISFLOAT(t) && t != NPY_LONGDOUBLE) {
            *code = MFDL_FLOAT;
        }
        else if (PyTypeNum_ISCOMPLEX(t) && t != NPY_CLONGDOUBLE) {
            *code = MFDL_COMPLEX;
        }
        else {
            ok = 0;
        }
        if (ok && d->elsize <= 16) {
            *bits = (uint8_t)(8 * d->elsize);
            return 0;
        }
    }
    PyErr_Format(PyExc_BufferError,
                 "DLPack cannot describe dtype %R: it exports bool, integers, float16/32/64, "
                 "complex64/128 and minifloat's formats (ml_dtypes arrays go through "
                 "minifloat.dlpack(a)); convert the array first, e.g. with a.astype(np.float32)",
                 (PyObject *)d);
    return -1;
}

/* ------------------------------------------------------------------ */
/* sub-byte packing (DLPack's layout: little bit-endian, no padding)    */
/* ------------------------------------------------------------------ */

static inline int64_t
floor_div8(int64_t x)
{
    return x >= 0 ? x / 8 : -((-x + 7) / 8);
}

/*
 * Unpack a packed sub-byte tensor into a new C-contiguous array of shape
 * shape (+ (lanes,) when lanes > 1), one value per byte in the low bits.
 * Value (element e, lane l) sits at bit (byte_offset*8 + (e*lanes + l)*bits)
 * of the little bit-endian stream starting at data; e is the element offset
 * given by the strides (in elements).  Steals descr.
 */
static PyObject *
unpack_subbyte(const mfdl_tensor *t, PyArray_Descr *descr, int bits, int lanes)
{
    int ndim = t->ndim;
    npy_intp dims[NPY_MAXDIMS];
    int64_t estride[NPY_MAXDIMS];
    for (int i = 0; i < ndim; i++) {
        dims[i] = (npy_intp)t->shape[i];
    }
    int out_nd = ndim;
    if (lanes > 1) {
        dims[out_nd++] = lanes;
    }
    PyArrayObject *out = (PyArrayObject *)PyArray_NewFromDescr(
            &PyArray_Type, descr, out_nd, dims, NULL, NULL, 0, NULL);
    if (out == NULL) {
        return NULL;
    }
    npy_intp size = 1;
    for (int i = 0; i < ndim; i++) {
        size *= dims[i];
    }
    if (size == 0) {
        return (PyObject *)out;
    }
    if (t->strides != NULL) {
        for (int i = 0; i < ndim; i++) {
            estride[i] = t->strides[i];
        }
    }
    else {
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            estride[i] = s;
            s *= t->shape[i];
        }
    }
    /* byte_offset is added to the pointer, not to the bit position: byte_offset * 8
     * may not fit in int64 (tensor_extent_ok checked the rest) */
    const uint8_t *base = (const uint8_t *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    uint8_t *o = (uint8_t *)PyArray_DATA(out);
    const uint32_t mask = (1u << bits) - 1u;
    int64_t idx[NPY_MAXDIMS] = {0};
    int64_t off = 0;   /* element offset of the current index */
    for (npy_intp n = 0; n < size; n++) {
        for (int l = 0; l < lanes; l++) {
            int64_t pos = (off * lanes + l) * bits;
            int64_t byte = floor_div8(pos);
            int shift = (int)(pos - byte * 8);
            uint32_t v = (uint32_t)base[byte] >> shift;
            if (shift + bits > 8) {
                v |= (uint32_t)base[byte + 1] << (8 - shift);
            }
            *o++ = (uint8_t)(v & mask);
        }
        /* next index in C order */
        for (int k = ndim - 1; k >= 0; k--) {
            if (++idx[k] < t->shape[k]) {
                off += estride[k];
                break;
            }
            off -= estride[k] * (t->shape[k] - 1);
            idx[k] = 0;
        }
    }
    return (PyObject *)out;
}

/*
 * Arrays minifloat allocates for export (copy=True, packed sub-byte copies) are
 * 64-byte aligned: TensorFlow aborts the process (Check failed: IsAligned()) at
 * the first operation on a DLPack import that is not, and JAX views only
 * 64-byte-aligned host memory (it copies otherwise).  A C-contiguous view into
 * a uint8 buffer over-allocated by EXPORT_ALIGN - 1 bytes; docs/design.md has
 * the measured cost (none).
 */
#define EXPORT_ALIGN 64

static PyArrayObject *
new_aligned_array(PyArray_Descr *descr, int nd, const npy_intp *dims)
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
    PyArrayObject *out = new_aligned_array(PyArray_DESCR(arr), PyArray_NDIM(arr),
                                           PyArray_DIMS(arr));
    if (out != NULL && PyArray_CopyInto(out, arr) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

/*
 * Pack the values of a one-value-per-byte array (C order) into DLPack's
 * packed layout: a new 1-d uint8 array of ceil(size * bits / 8) bytes,
 * 64-byte aligned.
 */
static PyArrayObject *
pack_subbyte(PyArrayObject *arr, int bits)
{
    PyArrayObject *c = PyArray_GETCONTIGUOUS(arr);
    if (c == NULL) {
        return NULL;
    }
    npy_intp n = PyArray_SIZE(c);
    npy_intp nbytes = (npy_intp)(((int64_t)n * bits + 7) / 8);
    PyArray_Descr *u8 = PyArray_DescrFromType(NPY_UINT8);
    PyArrayObject *out = new_aligned_array(u8, 1, &nbytes);
    Py_DECREF(u8);
    if (out == NULL) {
        Py_DECREF(c);
        return NULL;
    }
    memset(PyArray_DATA(out), 0, (size_t)nbytes);
    const uint8_t *in = (const uint8_t *)PyArray_DATA(c);
    uint8_t *o = (uint8_t *)PyArray_DATA(out);
    const uint32_t mask = (1u << bits) - 1u;
    for (npy_intp i = 0; i < n; i++) {
        uint32_t v = in[i] & mask;
        int64_t pos = (int64_t)i * bits;
        int shift = (int)(pos & 7);
        o[pos >> 3] |= (uint8_t)(v << shift);
        if (shift + bits > 8) {
            o[(pos >> 3) + 1] |= (uint8_t)(v >> (8 - shift));
        }
    }
    Py_DECREF(c);
    return out;
}

/* ------------------------------------------------------------------ */
/* import                                                               */
/* ------------------------------------------------------------------ */

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

static int
mark_taken(PyObject *capsule, int versioned)
{
    if (capsule == NULL) {
        return 0;
    }
    return PyCapsule_SetName(capsule, versioned ? NAME_USED_VERSIONED : NAME_USED_LEGACY);
}

static void
set_device_error(const mfdl_tensor *t, int cpu_requested)
{
    const char *name = device_name(t->device.device_type);
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
    PyArray_Descr *descr = descr_from_dl(code, bits, &subbits);
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
        PyObject *out = unpack_subbyte(t, descr, bits, lanes);
        if (out == NULL) {
            return NULL;
        }
        if (mark_taken(capsule, versioned) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        *taken = 1;
        call_deleter(managed, versioned);
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
        if (mark_taken(capsule, versioned) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        *taken = 1;
        call_deleter(managed, versioned);
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
        if (mark_taken(capsule, versioned) < 0) {
            Py_DECREF(c);
            return NULL;
        }
        *taken = 1;
        call_deleter(managed, versioned);
        return c;
    }
    PyObject *owner = PyCapsule_New(managed, versioned ? NAME_OWNER_VERSIONED : NAME_OWNER_LEGACY,
                                    owner_destructor);
    if (owner == NULL) {
        Py_DECREF(arr);
        return NULL;
    }
    if (mark_taken(capsule, versioned) < 0) {
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
    if (PyCapsule_IsValid(capsule, NAME_VERSIONED)) {
        versioned = 1;
    }
    else if (PyCapsule_IsValid(capsule, NAME_LEGACY)) {
        versioned = 0;
    }
    else if (PyCapsule_CheckExact(capsule)) {
        const char *name = PyCapsule_GetName(capsule);
        if (name == NULL) {
            PyErr_Clear();
        }
        if (name != NULL && (strcmp(name, NAME_USED_LEGACY) == 0
                             || strcmp(name, NAME_USED_VERSIONED) == 0)) {
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
    void *managed = PyCapsule_GetPointer(capsule, versioned ? NAME_VERSIONED : NAME_LEGACY);
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
        if (PyCapsule_IsValid(cap, NAME_API)) {
            const mfdl_exchange_api *a = (const mfdl_exchange_api *)PyCapsule_GetPointer(cap, NAME_API);
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
        if (dl_from_descr(PyArray_DESCR((PyArrayObject *)x), &code, &bits, &subbyte) == 0) {
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
            call_deleter(m, 1);
        }
        else {
            int taken;
            PyObject *res = import_managed(m, 1, NULL, copy, cpu_requested, &taken);
            if (res == NULL && !taken) {
                call_deleter_preserving_error(m, 1);
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
    if (parse_copy(copy_obj, &copy) < 0) {
        return NULL;
    }
    return from_dlpack_impl(args[0], cpu_requested, copy);
}

/* ------------------------------------------------------------------ */
/* export                                                               */
/* ------------------------------------------------------------------ */

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
    PyObject *cap = PyCapsule_New(mem, versioned ? NAME_VERSIONED : NAME_LEGACY,
                                  producer_capsule_destructor);
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
                         device_name(dt), dt, di);
            return NULL;
        }
    }
    copy_mode copy;
    if (parse_copy(copy_obj, &copy) < 0) {
        return NULL;
    }
    uint8_t code, bits;
    int subbyte;
    if (dl_from_descr(PyArray_DESCR(arr), &code, &bits, &subbyte) < 0) {
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
        PyArrayObject *packed = pack_subbyte(arr, bits);
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
    mfdl_tensor *t = strcmp(name, NAME_VERSIONED) == 0 ? &((mfdl_managed_v *)mem)->dl_tensor
                                                       : &((mfdl_managed *)mem)->dl_tensor;
    t->dtype.code = (uint8_t)mf_formats[MF_FLOAT4_E2M1FN].dlpack_code;
    t->dtype.bits = (uint8_t)mf_formats[MF_FLOAT4_E2M1FN].dlpack_bits;
    t->dtype.lanes = 2;
    return cap;
}

/* _dlpack_dtype(dtype) -> (code, bits, subbyte) or BufferError */
static PyObject *
py_dlpack_dtype(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    PyArray_Descr *d;
    if (!PyArray_DescrConverter(arg, &d)) {
        return NULL;
    }
    uint8_t code, bits;
    int subbyte;
    int r = dl_from_descr(d, &code, &bits, &subbyte);
    Py_DECREF(d);
    if (r < 0) {
        return NULL;
    }
    return Py_BuildValue("iiO", code, bits, subbyte ? Py_True : Py_False);
}

/* _dtype_from_dlpack(code, bits) -> (dtype, subbits) or None */
static PyObject *
py_dtype_from_dlpack(PyObject *NPY_UNUSED(self), PyObject *args)
{
    int code, bits, subbits;
    if (!PyArg_ParseTuple(args, "ii", &code, &bits)) {
        return NULL;
    }
    PyArray_Descr *d = descr_from_dl(code, bits, &subbits);
    if (d == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return Py_BuildValue("Ni", (PyObject *)d, subbits);
}

/* _pack_subbyte(a) -> the values of a one-value-per-byte array, packed (C order) */
static PyObject *
py_pack_subbyte(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    if (!PyArray_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected an ndarray");
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    int idx = mf_dtype_index(NPY_DTYPE(PyArray_DESCR(a)));
    if (idx < 0 || mf_formats[idx].dlpack_bits >= 8 * mf_formats[idx].itemsize) {
        PyErr_Format(PyExc_TypeError, "expected an array of a sub-byte minifloat format, got %R",
                     (PyObject *)PyArray_DESCR(a));
        return NULL;
    }
    return (PyObject *)pack_subbyte(a, mf_formats[idx].dlpack_bits);
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

/* ------------------------------------------------------------------ */
/* a test-only producer: capsules made by hand                          */
/* ------------------------------------------------------------------ */

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
py_test_make_capsule(PyObject *NPY_UNUSED(self), PyObject *args, PyObject *kwds)
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
    PyObject *cap = PyCapsule_New(mem, versioned ? NAME_VERSIONED : NAME_LEGACY,
                                  producer_capsule_destructor);
    if (cap == NULL) {
        if (ctx->has_view) {
            PyBuffer_Release(&ctx->view);
        }
        PyMem_RawFree(mem);
    }
    return cap;
}

static PyObject *
py_test_deleter_stats(PyObject *NPY_UNUSED(self), PyObject *NPY_UNUSED(args))
{
    return Py_BuildValue("{s:L,s:L,s:L,s:k}", "calls", test_deleter_calls,
                         "calls_without_gil", test_deleter_calls_without_gil,
                         "calls_all_threads", test_deleter_calls_all,
                         "last_thread", test_deleter_last_thread);
}

/* call a capsule's deleter from a thread that does not hold the GIL, as a
 * foreign consumer may (tests): the capsule is marked used first */
static PyObject *
py_test_consume_without_gil(PyObject *NPY_UNUSED(self), PyObject *cap)
{
    int versioned = PyCapsule_IsValid(cap, NAME_VERSIONED);
    if (!versioned && !PyCapsule_IsValid(cap, NAME_LEGACY)) {
        PyErr_SetString(PyExc_ValueError, "expected an unused DLPack capsule");
        return NULL;
    }
    void *p = PyCapsule_GetPointer(cap, versioned ? NAME_VERSIONED : NAME_LEGACY);
    if (p == NULL || mark_taken(cap, versioned) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    call_deleter(p, versioned);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ */

static PyMethodDef dlpack_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))py_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None)\n--\n\n"
     "Create a NumPy array from an object implementing the ``__dlpack__`` protocol\n"
     "(or from a DLPack capsule), usually as a view of its memory.  Like\n"
     "np.from_dlpack, and also for bfloat16 and every float8/float6/float4 and\n"
     "int4/int2/int1 DLPack type, which become minifloat dtypes."},
    {"_dlpack_export", (PyCFunction)(void (*)(void))py_dlpack_export, METH_FASTCALL,
     "_dlpack_export(array, stream, max_version, dl_device, copy) -> capsule"},
    {"_dlpack_export_fp4x2", (PyCFunction)(void (*)(void))py_dlpack_export_fp4x2, METH_FASTCALL,
     "_dlpack_export_fp4x2(uint8 array, stream, max_version, dl_device, copy) -> capsule "
     "(packed float4 pairs as kDLFloat4_e2m1fn, 4 bits, 2 lanes)"},
    {"_dlpack_dtype", py_dlpack_dtype, METH_O,
     "_dlpack_dtype(dtype) -> (code, bits, subbyte): the DLPack type of an exportable dtype."},
    {"_dtype_from_dlpack", py_dtype_from_dlpack, METH_VARARGS,
     "_dtype_from_dlpack(code, bits) -> (dtype, subbits) or None."},
    {"_pack_subbyte", py_pack_subbyte, METH_O,
     "_pack_subbyte(a) -> uint8 array: a sub-byte array's values in DLPack's packed layout."},
    {"_set_exchange_api", py_set_exchange_api, METH_O,
     "_set_exchange_api(enabled) -> previous: use producers' DLPack C exchange API (tests, benchmarks)."},
    {"_test_make_capsule", (PyCFunction)(void (*)(void))py_test_make_capsule,
     METH_VARARGS | METH_KEYWORDS, "Test only: a DLPack capsule made by hand."},
    {"_test_deleter_stats", py_test_deleter_stats, METH_NOARGS,
     "Test only: how often the test producer's deleter ran, and how."},
    {"_test_consume_without_gil", py_test_consume_without_gil, METH_O,
     "Test only: consume a capsule and run its deleter without the GIL."},
    {NULL, NULL, 0, NULL},
};

int
mf_init_dlpack(PyObject *module)
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
    if (PyModule_AddIntConstant(module, "DLPACK_MAJOR_VERSION", MFDL_MAJOR) < 0
            || PyModule_AddIntConstant(module, "DLPACK_MINOR_VERSION", MFDL_MINOR) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, dlpack_methods);
}
