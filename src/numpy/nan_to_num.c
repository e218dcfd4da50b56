/*
 * np.nan_to_num of a float format in one pass (patch "fast_nan_to_num",
 * minifloat/_numpy_patches.py): every NaN code becomes the code of `nan`,
 * +inf the code of `posinf`, -inf the code of `neginf` (the three codes
 * made by NumPy's own copyto of the caller's values, so its casts, warnings
 * and errors), every other code, bits above a sub-byte format's width
 * included, stays as it is.  NumPy's route classifies every element first
 * (isnan, isposinf, isneginf) and then assigns, so a replacement is never
 * classified again; so here, where each code is classified as read.  The
 * classification is the ufuncs' (isnan, isinf and signbit read the code
 * masked to the format's width).
 */
#include "../core/minifloat.h"
#include "../kernels/parallel.h"

typedef struct {
    int itemsize;
    uint8_t map8[256];         /* 1-byte formats: every byte's result */
    uint16_t rep[3];           /* bfloat16: the codes for NaN, +inf, -inf */
    char *data;
} special_job;

static void
special_range(void *ctx, mf_intp start, mf_intp len)
{
    const special_job *J = (const special_job *)ctx;
    if (J->itemsize == 1) {
        uint8_t *p = (uint8_t *)J->data + start;
        for (mf_intp i = 0; i < len; i++) {
            p[i] = J->map8[p[i]];
        }
        return;
    }
    /* bfloat16: branch-free, so that the compiler vectorizes it */
    uint16_t *p = (uint16_t *)J->data + start;
    const uint16_t rn = J->rep[0], rp = J->rep[1], rm = J->rep[2];
    for (mf_intp i = 0; i < len; i++) {
        const uint16_t c = p[i], mag = (uint16_t)(c & 0x7FFFu);
        const uint16_t inf = (uint16_t)(c & 0x8000u ? rm : rp);
        const uint16_t r = mag > 0x7F80u ? rn : (mag == 0x7F80u ? inf : c);
        p[i] = r;
    }
}

/* _replace_special(x, rep): in place, x a writeable aligned C-contiguous
 * array of a float format of at most 8 bits or bfloat16, rep 3 codes of its
 * dtype; NotImplemented for anything else */
PyObject *
mf_py_replace_special(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *x_obj, *rep_obj;
    if (!PyArg_ParseTuple(args, "OO:_replace_special", &x_obj, &rep_obj)) {
        return NULL;
    }
    if (!PyArray_CheckExact(x_obj) || !PyArray_CheckExact(rep_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *x = (PyArrayObject *)x_obj, *rep = (PyArrayObject *)rep_obj;
    PyArray_Descr *d = PyArray_DESCR(x);
    const int fid = mf_dtype_index(NPY_DTYPE(d));
    if (fid < 0 || fid >= MF_NUM_PUBLIC_FORMATS || mf_descr_swapped(d)
            || !PyArray_EquivTypes(d, PyArray_DESCR(rep)) || PyArray_SIZE(rep) != 3
            || !PyArray_IS_C_CONTIGUOUS(rep) || !PyArray_IS_C_CONTIGUOUS(x)
            || !PyArray_ISALIGNED(x) || !PyArray_ISWRITEABLE(x)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    const mf_format *f = &mf_formats[fid];
    if (f->kind != MF_KIND_FLOAT || (f->itemsize != 1 && f->id != MF_BFLOAT16)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    special_job J;
    J.itemsize = (int)f->itemsize;
    J.data = PyArray_BYTES(x);
    if (f->itemsize == 1) {
        /* the stored byte, as NumPy's copyto leaves it */
        uint8_t rb[3];
        memcpy(rb, PyArray_BYTES(rep), 3);
        const uint32_t mask = mf_code_mask(f);
        for (uint32_t b = 0; b < 256; b++) {
            const uint32_t c = b & mask;
            J.map8[b] = mf_code_isnan(f, c) ? rb[0]
                        : mf_code_isinf(f, c) ? ((c & mf_sign_bit(f)) ? rb[2] : rb[1])
                        : (uint8_t)b;
        }
    }
    else {
        memcpy(J.rep, PyArray_BYTES(rep), sizeof(J.rep));    /* the three stored codes */
    }
    const npy_intp n = PyArray_SIZE(x);
    Py_BEGIN_ALLOW_THREADS
    mf_par_range(special_range, &J, n, 64, 2 * f->itemsize);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
