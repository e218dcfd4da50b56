/*
 * Python entry points of the block-scaled kernels (kernels/blocks/), used
 * by minifloat/blocks.py, which checks shapes and dtypes before calling.
 */
#include "../core/minifloat.h"
#include "../kernels/blocks/blocks.h"

int
mf_block_params_from(mf_block_params *p, int kind, int elem_id, int block, int mode, double s_enc)
{
    if (kind < MF_BLOCK_MX || kind > MF_BLOCK_NV || block <= 0 || block % 2
        || 256 % block || mode < 0 || mode > MF_SCALE_RCEIL) {
        PyErr_SetString(PyExc_ValueError, "bad block parameters");
        return -1;
    }
    memset(p, 0, sizeof *p);
    p->kind = (mf_block_kind)kind;
    p->block = block;
    p->mode = (mf_scale_mode)mode;
    p->s_enc = (float)s_enc;
    if (kind == MF_BLOCK_MXINT8) {
        p->elem = NULL;
        p->emax = 0;
        p->elem_mbits = 6;
        p->elem_max = 127.0f / 64.0f;
        return 0;
    }
    if (elem_id < 0 || elem_id >= MF_NUM_PUBLIC_FORMATS || mf_formats[elem_id].itemsize != 1
        || mf_formats[elem_id].kind != MF_KIND_FLOAT || !mf_formats[elem_id].has_sign) {
        PyErr_SetString(PyExc_ValueError, "bad element format");
        return -1;
    }
    const mf_format *f = &mf_formats[elem_id];
    p->elem = f;
    /* every element fact comes from the format table */
    uint32_t maxc = mf_max_finite_mag(f);
    p->elem_max = mf_decode_f32(f, maxc);
    p->emax = (int)(maxc >> f->mant_bits) - f->bias;
    p->elem_mbits = f->mant_bits;
    return 0;
}

static int
check(PyArrayObject *a, int type, int nd, const char *what)
{
    if (PyArray_TYPE(a) != type || PyArray_NDIM(a) != nd || !PyArray_IS_C_CONTIGUOUS(a)
        || !PyArray_ISALIGNED(a)) {
        PyErr_Format(PyExc_ValueError, "%s: expected an aligned C-contiguous %d-d array of "
                     "type number %d", what, nd, type);
        return -1;
    }
    return 0;
}

/* _block_quantize(x f32 (rows,k), codes u8/i8 (rows,c), scales u8 (rows,nb),
 *                 kind, elem_id, block, mode, s_enc) */
static PyObject *
py_block_quantize(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *x, *codes, *scales;
    int kind, elem_id, block, mode;
    double s_enc;
    if (!PyArg_ParseTuple(args, "O!O!O!iiiid", &PyArray_Type, &x, &PyArray_Type, &codes,
                          &PyArray_Type, &scales, &kind, &elem_id, &block, &mode, &s_enc)) {
        return NULL;
    }
    mf_block_params p;
    if (mf_block_params_from(&p, kind, elem_id, block, mode, s_enc) < 0
        || check(x, NPY_FLOAT32, 2, "x") < 0 || check(codes, NPY_UINT8, 2, "codes") < 0
        || check(scales, NPY_UINT8, 2, "scales") < 0) {
        return NULL;
    }
    npy_intp rows = PyArray_DIM(x, 0), k = PyArray_DIM(x, 1);
    npy_intp nb = (k + block - 1) / block;
    npy_intp crow = (p.elem && p.elem->bits == 4) ? nb * block / 2 : nb * block;
    if (PyArray_DIM(codes, 0) != rows || PyArray_DIM(codes, 1) != crow
        || PyArray_DIM(scales, 0) != rows || PyArray_DIM(scales, 1) != nb
        || !PyArray_ISWRITEABLE(codes) || !PyArray_ISWRITEABLE(scales)) {
        PyErr_SetString(PyExc_ValueError, "codes/scales have the wrong shape or are read-only");
        return NULL;
    }
    NPY_BEGIN_THREADS_DEF;
    NPY_BEGIN_THREADS;
    mf_block_quantize(&p, (const float *)PyArray_DATA(x), rows, k, (uint8_t *)PyArray_DATA(codes),
                      (uint8_t *)PyArray_DATA(scales));
    NPY_END_THREADS;
    Py_RETURN_NONE;
}

/* _block_dequantize(codes, scales, out f32 (rows,k), kind, elem_id, block, s_dec) */
static PyObject *
py_block_dequantize(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *out, *codes, *scales;
    int kind, elem_id, block;
    double s_dec;
    if (!PyArg_ParseTuple(args, "O!O!O!iiid", &PyArray_Type, &codes, &PyArray_Type, &scales,
                          &PyArray_Type, &out, &kind, &elem_id, &block, &s_dec)) {
        return NULL;
    }
    mf_block_params p;
    if (mf_block_params_from(&p, kind, elem_id, block, 0, 1.0) < 0
        || check(out, NPY_FLOAT32, 2, "out") < 0 || check(codes, NPY_UINT8, 2, "codes") < 0
        || check(scales, NPY_UINT8, 2, "scales") < 0) {
        return NULL;
    }
    npy_intp rows = PyArray_DIM(out, 0), k = PyArray_DIM(out, 1);
    npy_intp nb = (k + block - 1) / block;
    npy_intp crow = (p.elem && p.elem->bits == 4) ? nb * block / 2 : nb * block;
    if (PyArray_DIM(codes, 0) != rows || PyArray_DIM(codes, 1) != crow
        || PyArray_DIM(scales, 0) != rows || PyArray_DIM(scales, 1) != nb
        || !PyArray_ISWRITEABLE(out)) {
        PyErr_SetString(PyExc_ValueError, "codes/scales/out have inconsistent shapes");
        return NULL;
    }
    NPY_BEGIN_THREADS_DEF;
    NPY_BEGIN_THREADS;
    mf_block_dequantize(&p, (const uint8_t *)PyArray_DATA(codes),
                        (const uint8_t *)PyArray_DATA(scales), rows, k, (float)s_dec,
                        (float *)PyArray_DATA(out));
    NPY_END_THREADS;
    Py_RETURN_NONE;
}

/* the codes/scales of one operand of _block_matmul: (rows, crow) and (rows, nb) */
static int
check_operand(PyArrayObject *codes, PyArrayObject *scales, const mf_block_params *p,
              npy_intp rows, npy_intp k, const char *what)
{
    if (check(codes, NPY_UINT8, 2, what) < 0 || check(scales, NPY_UINT8, 2, what) < 0) {
        return -1;
    }
    npy_intp nb = (k + p->block - 1) / p->block;
    npy_intp crow = (p->elem && p->elem->bits == 4) ? nb * p->block / 2 : nb * p->block;
    if (PyArray_DIM(codes, 0) != rows || PyArray_DIM(codes, 1) != crow
        || PyArray_DIM(scales, 0) != rows || PyArray_DIM(scales, 1) != nb) {
        PyErr_Format(PyExc_ValueError, "%s: codes/scales do not match %zd rows of %zd elements",
                     what, (Py_ssize_t)rows, (Py_ssize_t)k);
        return -1;
    }
    return 0;
}

/* _block_matmul(a_codes, a_scales, a_kind, a_elem, a_block, a_ts,
 *               b_codes, b_scales, b_kind, b_elem, b_block, b_ts, k, out)
 * out (M, N) float32 = A @ B, A's rows and B's columns blocked along k */
static PyObject *
py_block_matmul(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyArrayObject *ac, *as, *bc, *bs, *out;
    int akind, aelem, ablock, bkind, belem, bblock;
    double ats, bts;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "O!O!iiidO!O!iiidnO!", &PyArray_Type, &ac, &PyArray_Type, &as,
                          &akind, &aelem, &ablock, &ats, &PyArray_Type, &bc, &PyArray_Type, &bs,
                          &bkind, &belem, &bblock, &bts, &k, &PyArray_Type, &out)) {
        return NULL;
    }
    mf_block_params pa, pb;
    if (mf_block_params_from(&pa, akind, aelem, ablock, 0, 1.0) < 0
        || mf_block_params_from(&pb, bkind, belem, bblock, 0, 1.0) < 0
        || check(out, NPY_FLOAT32, 2, "out") < 0) {
        return NULL;
    }
    if (k < 0 || !PyArray_ISWRITEABLE(out)) {
        PyErr_SetString(PyExc_ValueError, "_block_matmul: bad depth or read-only out");
        return NULL;
    }
    npy_intp M = PyArray_DIM(out, 0), N = PyArray_DIM(out, 1);
    if (check_operand(ac, as, &pa, M, k, "a") < 0 || check_operand(bc, bs, &pb, N, k, "b") < 0) {
        return NULL;
    }
    int r;
    NPY_BEGIN_THREADS_DEF;
    NPY_BEGIN_THREADS;
    r = mf_block_matmul(&pa, (const uint8_t *)PyArray_DATA(ac), (const uint8_t *)PyArray_DATA(as),
                        (float)ats, &pb, (const uint8_t *)PyArray_DATA(bc),
                        (const uint8_t *)PyArray_DATA(bs), (float)bts, M, N, k,
                        (float *)PyArray_DATA(out));
    NPY_END_THREADS;
    if (r < 0) {
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* _finite_amax(x f32 contiguous) -> float */
static PyObject *
py_finite_amax(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    if (!PyArray_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected an ndarray");
        return NULL;
    }
    PyArrayObject *x = (PyArrayObject *)arg;
    const mf_format *f = PyArray_TYPE(x) == NPY_FLOAT32 ? NULL
                                                       : mf_float_format_of(PyArray_DESCR(x));
    if ((PyArray_TYPE(x) != NPY_FLOAT32 && f == NULL) || !PyArray_IS_C_CONTIGUOUS(x)
            || !PyArray_ISALIGNED(x)) {
        PyErr_SetString(PyExc_ValueError, "x: expected an aligned C-contiguous array of "
                        "float32, float16 or a minifloat float format");
        return NULL;
    }
    float r;
    NPY_BEGIN_THREADS_DEF;
    NPY_BEGIN_THREADS;
    r = f == NULL ? mf_finite_amax((const float *)PyArray_DATA(x), PyArray_SIZE(x))
                  : mf_finite_amax_codes(f, PyArray_DATA(x), PyArray_SIZE(x));
    NPY_END_THREADS;
    return PyFloat_FromDouble(r);
}

static PyMethodDef block_methods[] = {
    {"_block_quantize", py_block_quantize, METH_VARARGS,
     "_block_quantize(x, codes, scales, kind, elem_id, block, mode, s_enc) (minifloat.blocks)."},
    {"_block_dequantize", py_block_dequantize, METH_VARARGS,
     "_block_dequantize(codes, scales, out, kind, elem_id, block, s_dec) (minifloat.blocks)."},
    {"_block_matmul", py_block_matmul, METH_VARARGS,
     "_block_matmul(a_codes, a_scales, a_kind, a_elem, a_block, a_ts, b_codes, b_scales, "
     "b_kind, b_elem, b_block, b_ts, k, out) (minifloat.blocks.block_matmul)."},
    {"_finite_amax", py_finite_amax, METH_O,
     "_finite_amax(x): the largest |x| over x's finite elements as float32 (0 if none); x "
     "float32, float16 or a minifloat float format."},
    {NULL, NULL, 0, NULL},
};

int
mf_init_blocks(PyObject *module)
{
    return PyModule_AddFunctions(module, block_methods);
}
