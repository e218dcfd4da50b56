/*
 * What DLPack import and export share: the dtype mapping both ways, device
 * names and copy= parsing; and the registration of the DLPack functions into
 * minifloat._core (mf_init_dlpack).
 *
 * Every dtype mapping for minifloat's formats comes from the format table
 * (mf_formats[].dlpack_code / dlpack_bits); the codes in dlpack.h are DLPack's
 * own ABI constants (device types, flags and the built-in dtype codes).
 */
#include "internal.h"

const char *
mfdl_device_name(int32_t type)
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

int
mfdl_parse_copy(PyObject *obj, copy_mode *mode)
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
PyArray_Descr *
mfdl_descr_from_dl(int code, int bits, int *subbits)
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
int
mfdl_dl_from_descr(PyArray_Descr *d, uint8_t *code, uint8_t *bits, int *subbyte)
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
    int r = mfdl_dl_from_descr(d, &code, &bits, &subbyte);
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
    PyArray_Descr *d = mfdl_descr_from_dl(code, bits, &subbits);
    if (d == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return Py_BuildValue("Ni", (PyObject *)d, subbits);
}

static PyMethodDef dtype_methods[] = {
    {"_dlpack_dtype", py_dlpack_dtype, METH_O,
     "_dlpack_dtype(dtype) -> (code, bits, subbyte): the DLPack type of an exportable dtype."},
    {"_dtype_from_dlpack", py_dtype_from_dlpack, METH_VARARGS,
     "_dtype_from_dlpack(code, bits) -> (dtype, subbits) or None."},
    {NULL, NULL, 0, NULL},
};

int
mf_init_dlpack(PyObject *module)
{
    if (mfdl_init_import() < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "DLPACK_MAJOR_VERSION", MFDL_MAJOR) < 0
            || PyModule_AddIntConstant(module, "DLPACK_MINOR_VERSION", MFDL_MINOR) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, mfdl_import_methods) < 0
            || PyModule_AddFunctions(module, mfdl_export_methods) < 0
            || PyModule_AddFunctions(module, mfdl_packing_methods) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(module, dtype_methods);
}
