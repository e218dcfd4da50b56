/*
 * Sub-byte formats (float6, float4, int4, int2, int1) are stored one value per
 * byte by minifloat.  DLPack packs them (little bit-endian, no padding) unless
 * the IS_SUBBYTE_TYPE_PADDED flag says one value per byte: the importer views
 * padded data and unpacks packed data into a new array (only if a copy is
 * allowed); the exporter packs a copy for a consumer older than DLPack 1.1.
 */
#include "internal.h"

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
PyObject *
mfdl_unpack_subbyte(const mfdl_tensor *t, PyArray_Descr *descr, int bits, int lanes)
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
 * Pack the values of a one-value-per-byte array (C order) into DLPack's
 * packed layout: a new 1-d uint8 array of ceil(size * bits / 8) bytes,
 * 64-byte aligned.
 */
PyArrayObject *
mfdl_pack_subbyte(PyArrayObject *arr, int bits)
{
    PyArrayObject *c = PyArray_GETCONTIGUOUS(arr);
    if (c == NULL) {
        return NULL;
    }
    npy_intp n = PyArray_SIZE(c);
    npy_intp nbytes = (npy_intp)(((int64_t)n * bits + 7) / 8);
    PyArray_Descr *u8 = PyArray_DescrFromType(NPY_UINT8);
    PyArrayObject *out = mfdl_new_aligned_array(u8, 1, &nbytes);
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
    return (PyObject *)mfdl_pack_subbyte(a, mf_formats[idx].dlpack_bits);
}

PyMethodDef mfdl_packing_methods[] = {
    {"_pack_subbyte", py_pack_subbyte, METH_O,
     "_pack_subbyte(a) -> uint8 array: a sub-byte array's values in DLPack's packed layout."},
    {NULL, NULL, 0, NULL},
};
