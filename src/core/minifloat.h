/*
 * Shared declarations of the C core (module _core).
 */
#ifndef MF_MINIFLOAT_H
#define MF_MINIFLOAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define PY_ARRAY_UNIQUE_SYMBOL minifloat_ARRAY_API
#define PY_UFUNC_UNIQUE_SYMBOL minifloat_UFUNC_API
#define NPY_TARGET_VERSION NPY_2_0_API_VERSION
#ifndef MF_IMPORT_ARRAY_HERE
#define NO_IMPORT_ARRAY
#define NO_IMPORT_UFUNC
#endif
#include <numpy/arrayobject.h>
#include <numpy/ufuncobject.h>
#include <numpy/dtype_api.h>
#include <numpy/arrayscalars.h>

#include "format_table.h"
#include "codec.h"

/* ---- scalars (numpy/scalar.c) ---- */
typedef struct {
    PyObject_HEAD
    uint16_t code;
} MFScalarObject;

extern PyTypeObject *mf_scalar_types[MF_NUM_PUBLIC_FORMATS];
int mf_init_scalars(PyObject *module);
/* the `dtype` class attribute of every scalar type (after mf_init_dtypes) */
int mf_scalars_set_dtype(void);
/* format id of a minifloat scalar object, or -1 */
int mf_scalar_format_of(PyObject *obj);
PyObject *mf_scalar_from_code(int fmt_id, uint32_t code);
/* shortest decimal (as a double) that round-trips to `code` in the format */
double mf_shortest_double(const mf_format *f, uint32_t code);
/* Python float or int -> code with the cast's rounding; -1 with error set */
int mf_code_from_pyobject(const mf_format *f, PyObject *obj, uint32_t *code);

/* ---- dtypes (numpy/dtype.c) ---- */
extern PyArray_DTypeMeta mf_dtypes[MF_NUM_PUBLIC_FORMATS];
extern PyArray_Descr *mf_singletons[MF_NUM_PUBLIC_FORMATS];
int mf_init_dtypes(PyObject *module);
/* format id of a DType class that is one of ours, or -1 */
static inline int
mf_dtype_index(PyArray_DTypeMeta *DType)
{
    if (DType >= &mf_dtypes[0] && DType < &mf_dtypes[MF_NUM_PUBLIC_FORMATS]) {
        return (int)(DType - &mf_dtypes[0]);
    }
    return -1;
}
/* the format of a descriptor of one of our DTypes (any byte order) */
static inline const mf_format *
mf_descr_format(PyArray_Descr *descr)
{
    return &mf_formats[mf_dtype_index(NPY_DTYPE(descr))];
}
/* is this descriptor of ours stored in the other byte order */
static inline int
mf_descr_swapped(PyArray_Descr *descr)
{
    return descr->elsize > 1 && !PyArray_ISNBO(descr->byteorder);
}
/* is this format's storage one uint16 (else one uint8) */
static inline int mf_is_16bit(const mf_format *f) { return f->itemsize == 2; }

static inline uint32_t
mf_load_code(const mf_format *f, const char *p)
{
    if (f->itemsize == 2) { uint16_t v; memcpy(&v, p, 2); return v; }
    return (uint8_t)*p;
}
static inline void
mf_store_code(const mf_format *f, char *p, uint32_t c)
{
    if (f->itemsize == 2) { uint16_t v = (uint16_t)c; memcpy(p, &v, 2); }
    else { *p = (char)(uint8_t)c; }
}

/* NumPy's DType class of a builtin type number (borrowed: NumPy owns it) */
static inline PyArray_DTypeMeta *
mf_builtin_DType(int type_num)
{
    PyArray_Descr *d = PyArray_DescrFromType(type_num);
    PyArray_DTypeMeta *DT = NPY_DTYPE(d);
    Py_DECREF(d);
    return DT;
}

/* np.dot's ArrFuncs.dotfunc and vecdot: out[o] = dot(a[o, :], b[o, :]) (umath/matmul.c) */
int mf_strided_dots(const mf_format *f, int out_f32, npy_intp N, npy_intp k,
                    const char *a0, npy_intp sa, npy_intp sak, const char *b0, npy_intp sb,
                    npy_intp sbk, char *c0, npy_intp sc);

/* ---- casts (numpy/casts.c) ---- */
PyArrayMethod_Spec **mf_get_cast_specs(int fmt_id);
extern PyArray_DTypeMeta *mf_ml_dtypes[MF_NUM_PUBLIC_FORMATS];
/* ml_dtypes' DTypes from its module (neighbours.c calls it); how many */
int mf_find_ml_dtypes(PyObject *ml_module);
/* casts between the ml_dtypes DTypes found and ours, NULL-terminated */
PyArrayMethod_Spec **mf_get_ml_cast_specs(void);
/* is every value of format a exactly representable in format b */
int mf_format_casts_safely(const mf_format *a, const mf_format *b);
extern int mf_cast_safety_table[MF_NUM_FORMATS][MF_NUM_FORMATS];
int mf_builtin_safe_to_format(int type_num, const mf_format *f);
int mf_format_safe_to_builtin(const mf_format *f, int type_num);
void mf_compute_cast_safety(void);

/* ---- sorting and ArrFuncs (numpy/sort.c) ---- */
int mf_sort(void *start, npy_intp num, void *arr);
int mf_argsort(void *start, npy_intp *idx, npy_intp num, void *arr);
int mf_argmax(void *data, npy_intp n, npy_intp *max_ind, void *arr);
int mf_argmin(void *data, npy_intp n, npy_intp *min_ind, void *arr);
/* whether the codes of f order as sign and magnitude (argmax/argmin's and
 * max/min's kernels, kernels/stream/argext.h, take f), and their NaN limit */
int mf_arg_key_lim(const mf_format *f, int16_t *lim);
int mf_fill(void *buffer, npy_intp length, void *arr);
int mf_fillwithscalar(void *buffer, npy_intp length, void *value, void *arr);
int mf_sort_init(void);
int mf_casts_init(void);      /* the bool cast's tables (numpy/casts.c) */
/* code != 0 by value (NaN true), per format: 1-byte formats by table, 2-byte
 * formats as (code & mask) != 0 where the mask is not 0 (numpy/casts.c) */
extern npy_bool mf_truth8[MF_NUM_PUBLIC_FORMATS][256];
extern uint16_t mf_truth16_mask[MF_NUM_PUBLIC_FORMATS];
/* a 1-byte format's truth as (code & mask) != 0, checked against mf_truth8
 * for every byte: the mask, 0x100 when every code is True, -1 for none */
extern int mf_truth8_mask[MF_NUM_PUBLIC_FORMATS];
/* compare and nonzero of each public format (numpy/sort.c) */
extern PyArray_CompareFunc *const mf_compare_of[MF_NUM_PUBLIC_FORMATS];
extern PyArray_NonzeroFunc *const mf_nonzero_of[MF_NUM_PUBLIC_FORMATS];
int mf_fromstr(char *str, void *ip, char **endptr, PyArray_Descr *descr);
void mf_copyswapn_sized(int itemsize, void *dst, npy_intp dstride, void *src, npy_intp sstride,
                        npy_intp n, int swap);
int mf_scanfunc(FILE *fp, void *dptr, char *ignore, PyArray_Descr *descr);

/* ---- ufuncs (umath/) ---- */
int mf_init_ufuncs(PyObject *module);
/* promoters for (ml_dtypes DType, minifloat DType, ...) calls */
int mf_add_ml_dtypes_promoters(void);
extern PyObject *mf_ComplexWarning;

/* ---- minifloat.cast's rounding modes (numpy/rounding.c) ---- */
int mf_init_rounding(PyObject *module);
/* ---- block-scaled formats (bindings/block_formats.c) ---- */
int mf_init_blocks(PyObject *module);
/* the float format of an array's dtype (IEEE float16 included), or NULL
 * (bindings/checkpoint_stats.c) */
const mf_format *mf_float_format_of(PyArray_Descr *d);
/* ---- packed integer checkpoint weights (bindings/checkpoint_unpack.c) ---- */
int mf_init_checkpoint_unpack(PyObject *module);
/* FastPath: the C front of a NumPy work-around (numpy/fastpath.c) */
int mf_init_fastpath(PyObject *module);

/* ---- DLPack (dlpack/) ---- */
int mf_init_dlpack(PyObject *module);

/* ---- ml_dtypes, when the user imports it (numpy/neighbours.c) ---- */
PyObject *mf_py_link_ml_dtypes(PyObject *self, PyObject *ml_module);

/* ---- misc ---- */
PyObject *mf_formats_info(PyObject *self, PyObject *args);

#endif
