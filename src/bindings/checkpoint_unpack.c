/*
 * _core._unpack_affine: the values of packed integer weights (compressed-
 * tensors pack-quantized, MLX affine), a block of whole rows at a time, for
 * minifloat/io/packed_int.py; _core._unpack_e2m1: packed e2m1 codes times a
 * float32 scale per block (MXFP4, NVFP4) for minifloat/io/layouts.py.  The
 * work is kernels/packed/serial.c's; this
 * file checks that every array agrees with the others, so the kernel never
 * reads or writes outside them.
 */
#include "../core/minifloat.h"
#include "../kernels/kernels.h"

static int
check2d_in(const char *fn, PyObject *o, const char *what, int f32, int writable)
{
    if (!PyArray_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be an ndarray", fn, what);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)o;
    int t = PyArray_TYPE(a);
    int type_ok = f32 ? t == NPY_FLOAT32 : (t == NPY_INT32 || t == NPY_UINT32);
    if (!type_ok || PyArray_NDIM(a) != 2 || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)
            || !PyArray_ISNBO(PyArray_DESCR(a)->byteorder)) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be a 2-d C-contiguous aligned "
                     "native %s array", fn, what, f32 ? "float32" : "int32 or uint32");
        return -1;
    }
    if (writable && !PyArray_ISWRITEABLE(a)) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be writable", fn, what);
        return -1;
    }
    return 0;
}

static int
check2d(PyObject *o, const char *what, int f32, int writable)
{
    return check2d_in("_unpack_affine", o, what, f32, writable);
}

/* _unpack_affine(words, scale, z, out, bits, group, kind, offset, round_to) */
static PyObject *
py_unpack_affine(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *wo, *so, *zo, *oo, *ro;
    int bits, kind, offset;
    Py_ssize_t group;
    if (!PyArg_ParseTuple(args, "OOOOiniiO", &wo, &so, &zo, &oo, &bits, &group, &kind, &offset,
                          &ro)) {
        return NULL;
    }
    if (check2d(wo, "words", 0, 0) < 0 || check2d(so, "scale", 1, 0) < 0
            || (zo != Py_None && check2d(zo, "z", 1, 0) < 0) || check2d(oo, "out", 1, 1) < 0) {
        return NULL;
    }
    if (bits < 1 || bits > 8) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: bits must be 1 to 8, not %d", bits);
        return NULL;
    }
    if (group < 1) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: group must be >= 1, not %zd", group);
        return NULL;
    }
    if (kind != MF_AFFINE_ZP && kind != MF_AFFINE_BIAS) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: kind must be 0 (zero point) or 1 (bias), "
                     "not %d", kind);
        return NULL;
    }
    if (kind == MF_AFFINE_BIAS && zo == Py_None) {
        PyErr_SetString(PyExc_ValueError, "_unpack_affine: kind 1 (bias) needs the biases z");
        return NULL;
    }
    const mf_format *rnd = NULL;
    if (ro != Py_None) {
        const char *name = PyUnicode_AsUTF8(ro);
        if (name == NULL) {
            return NULL;
        }
        if (strcmp(name, "bfloat16") == 0) {
            rnd = &mf_formats[MF_BFLOAT16];
        }
        else if (strcmp(name, "float16") == 0) {
            rnd = &mf_formats[MF_IEEE_FLOAT16];
        }
        else if (strcmp(name, "float32") != 0) {
            PyErr_Format(PyExc_ValueError, "_unpack_affine: round_to must be None, 'float32', "
                         "'bfloat16' or 'float16', not %R", ro);
            return NULL;
        }
    }
    PyArrayObject *w = (PyArrayObject *)wo, *s = (PyArrayObject *)so, *out = (PyArrayObject *)oo;
    PyArrayObject *z = zo != Py_None ? (PyArrayObject *)zo : NULL;
    npy_intp rows = PyArray_DIM(out, 0), k = PyArray_DIM(out, 1);
    npy_intp ldw = PyArray_DIM(w, 1), groups = k == 0 ? 0 : (k - 1) / group + 1;
    if (PyArray_DIM(w, 0) != rows || PyArray_DIM(s, 0) != rows) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: rows disagree: words %zd, scale %zd, "
                     "out %zd", (Py_ssize_t)PyArray_DIM(w, 0), (Py_ssize_t)PyArray_DIM(s, 0),
                     (Py_ssize_t)rows);
        return NULL;
    }
    /* k * bits cannot overflow: out holds k float32 per row */
    npy_intp need = (k * bits + 31) / 32;
    if (ldw < need) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: words has %zd words per row; %zd fields "
                     "of %d bits need %zd", (Py_ssize_t)ldw, (Py_ssize_t)k, bits, (Py_ssize_t)need);
        return NULL;
    }
    if (PyArray_DIM(s, 1) != groups) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: scale has %zd columns; %zd columns in "
                     "groups of %zd need %zd", (Py_ssize_t)PyArray_DIM(s, 1), (Py_ssize_t)k,
                     (Py_ssize_t)group, (Py_ssize_t)groups);
        return NULL;
    }
    if (z != NULL && (PyArray_DIM(z, 0) != rows || PyArray_DIM(z, 1) != groups)) {
        PyErr_Format(PyExc_ValueError, "_unpack_affine: z has shape (%zd, %zd); the scale's is "
                     "(%zd, %zd)", (Py_ssize_t)PyArray_DIM(z, 0), (Py_ssize_t)PyArray_DIM(z, 1),
                     (Py_ssize_t)rows, (Py_ssize_t)groups);
        return NULL;
    }
    const uint32_t *wd = PyArray_DATA(w);
    const float *sd = PyArray_DATA(s), *zd = z != NULL ? PyArray_DATA(z) : NULL;
    float *od = PyArray_DATA(out);
    if (rows > 0 && k > 0) {
        Py_BEGIN_ALLOW_THREADS
        mf_unpack_affine(wd, ldw, rows, k, bits, group, sd, zd, groups, (mf_affine_kind)kind,
                         (int32_t)offset, rnd, od, k);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* the codes and scales of _unpack_e2m1 and _e2m1_ref2 checked: codes u8
 * (rows, k/2) with contiguous rows, scales f32 (rows, ceil(k / block)) with
 * contiguous rows, block even; -1 with an error set otherwise */
static int
e2m1_args(const char *fn, PyArrayObject *c, PyArrayObject *s, Py_ssize_t block)
{
    /* codes: rows of bytes, any row stride (a band of a wider tensor) */
    if (PyArray_TYPE(c) != NPY_UINT8 || PyArray_NDIM(c) != 2
            || (PyArray_SIZE(c) > 0
                && ((PyArray_DIM(c, 1) > 1 && PyArray_STRIDE(c, 1) != 1)
                    || (PyArray_DIM(c, 0) > 1 && PyArray_STRIDE(c, 0) < PyArray_DIM(c, 1))))) {
        PyErr_Format(PyExc_ValueError, "%s: codes must be a 2-d uint8 array with contiguous "
                     "rows", fn);
        return -1;
    }
    /* scales: rows of float32, any row stride (a band of an expert's scales) */
    if (PyArray_TYPE(s) != NPY_FLOAT32 || PyArray_NDIM(s) != 2 || !PyArray_ISALIGNED(s)
            || !PyArray_ISNBO(PyArray_DESCR(s)->byteorder)
            || (PyArray_SIZE(s) > 0
                && ((PyArray_DIM(s, 1) > 1 && PyArray_STRIDE(s, 1) != 4)
                    || (PyArray_DIM(s, 0) > 1
                        && (PyArray_STRIDE(s, 0) < 4 * PyArray_DIM(s, 1)
                            || PyArray_STRIDE(s, 0) % 4))))) {
        PyErr_Format(PyExc_ValueError, "%s: scales must be a 2-d aligned native float32 array "
                     "with contiguous rows", fn);
        return -1;
    }
    if (block < 2 || block % 2) {
        PyErr_Format(PyExc_ValueError, "%s: block must be even and >= 2, not %zd", fn, block);
        return -1;
    }
    npy_intp rows = PyArray_DIM(c, 0), k = 2 * PyArray_DIM(c, 1);
    npy_intp nb = k == 0 ? 0 : (k - 1) / block + 1;
    if (PyArray_DIM(s, 0) != rows || PyArray_DIM(s, 1) != nb) {
        PyErr_Format(PyExc_ValueError, "%s: %zd rows of %zd codes need scales (%zd, %zd)", fn,
                     (Py_ssize_t)rows, (Py_ssize_t)k, (Py_ssize_t)rows, (Py_ssize_t)nb);
        return -1;
    }
    return 0;
}

/* _unpack_e2m1(codes u8 (rows, k/2), scales f32 (rows, nb), out, block, transposed):
 * out float32, or uint16 for bfloat16 codes (each value rounded once) */
static PyObject *
py_unpack_e2m1(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *c, *s, *out;
    Py_ssize_t block;
    int transposed;
    if (!PyArg_ParseTuple(args, "O!O!O!np", &PyArray_Type, &c, &PyArray_Type, &s,
                          &PyArray_Type, &out, &block, &transposed)) {
        return NULL;
    }
    if (e2m1_args("_unpack_e2m1", c, s, block) < 0) {
        return NULL;
    }
    const int bf16 = PyArray_TYPE(out) == NPY_UINT16;
    if ((!bf16 && PyArray_TYPE(out) != NPY_FLOAT32) || PyArray_NDIM(out) != 2
            || !PyArray_IS_C_CONTIGUOUS(out) || !PyArray_ISALIGNED(out)
            || !PyArray_ISNBO(PyArray_DESCR(out)->byteorder)) {
        PyErr_SetString(PyExc_ValueError, "_unpack_e2m1: out must be a 2-d C-contiguous aligned "
                        "native float32 (or uint16: bfloat16 codes) array");
        return NULL;
    }
    if (!PyArray_ISWRITEABLE(out)) {
        PyErr_SetString(PyExc_ValueError, "_unpack_e2m1: out must be writable");
        return NULL;
    }
    npy_intp rows = PyArray_DIM(c, 0), k = 2 * PyArray_DIM(c, 1);
    npy_intp orow = transposed ? k : rows, ocol = transposed ? rows : k;
    if (PyArray_DIM(out, 0) != orow || PyArray_DIM(out, 1) != ocol) {
        PyErr_Format(PyExc_ValueError, "_unpack_e2m1: %zd rows of %zd codes need out (%zd, %zd)",
                     (Py_ssize_t)rows, (Py_ssize_t)k, (Py_ssize_t)orow, (Py_ssize_t)ocol);
        return NULL;
    }
    int rc = 0;
    if (rows > 0 && k > 0) {
        const uint8_t *cd = PyArray_DATA(c);
        npy_intp ldc = rows > 1 ? PyArray_STRIDE(c, 0) : k / 2;
        const float *sd = PyArray_DATA(s);
        npy_intp nb = (k - 1) / block + 1;
        npy_intp lds = rows > 1 ? PyArray_STRIDE(s, 0) / 4 : nb;
        void *od = PyArray_DATA(out);
        Py_BEGIN_ALLOW_THREADS
        if (bf16) {
            rc = mf_unpack_e2m1_bf16(cd, ldc, rows, k, block, sd, lds, od, ocol, transposed);
        }
        else {
            mf_unpack_e2m1(cd, ldc, rows, k, block, sd, lds, od, ocol, transposed);
        }
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* _e2m1_ref2(codes, scales, block) -> float */
static PyObject *
py_e2m1_ref2(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *c, *s;
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "O!O!n", &PyArray_Type, &c, &PyArray_Type, &s, &block)) {
        return NULL;
    }
    if (e2m1_args("_e2m1_ref2", c, s, block) < 0) {
        return NULL;
    }
    npy_intp rows = PyArray_DIM(c, 0), k = 2 * PyArray_DIM(c, 1);
    double r = 0.0;
    if (rows > 0 && k > 0) {
        npy_intp nb = (k - 1) / block + 1;
        const uint8_t *cd = PyArray_DATA(c);
        const float *sd = PyArray_DATA(s);
        npy_intp ldc = rows > 1 ? PyArray_STRIDE(c, 0) : k / 2;
        npy_intp lds = rows > 1 ? PyArray_STRIDE(s, 0) / 4 : nb;
        Py_BEGIN_ALLOW_THREADS
        r = mf_e2m1_ref2(cd, ldc, rows, k, block, sd, lds);
        Py_END_ALLOW_THREADS
    }
    return PyFloat_FromDouble(r);
}

static PyMethodDef unpack_methods[] = {
    {"_unpack_e2m1", py_unpack_e2m1, METH_VARARGS,
     "_unpack_e2m1(codes, scales, out, block, transposed): packed e2m1 codes (low nibble first) "
     "times a float32 scale per block of a row, into out (rows, k), or (k, rows) transposed "
     "(minifloat.io.layouts); out uint16: bfloat16 codes, each value rounded once."},
    {"_e2m1_ref2", py_e2m1_ref2, METH_VARARGS,
     "_e2m1_ref2(codes, scales, block): the float64 sum of the squares of the finite values "
     "_unpack_e2m1 gives (convert's reference sum)."},
    {"_unpack_affine", py_unpack_affine, METH_VARARGS,
     "_unpack_affine(words, scale, z, out, bits, group, kind, offset, round_to): the values of "
     "packed integer codes, kind 0: (u - offset - z) * scale (compressed-tensors), kind 1: "
     "scale * u + z (MLX), rounded as in the scale's dtype round_to (minifloat.io.packed_int)."},
    {NULL, NULL, 0, NULL},
};

int
mf_init_checkpoint_unpack(PyObject *module)
{
    return PyModule_AddFunctions(module, unpack_methods);
}
