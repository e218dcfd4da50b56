/*
 * Ufunc loops for the minifloat float formats.
 *
 * Nearly every ufunc is computed the same way: decode the minifloat operands
 * of a block to float32, call NumPy's own float32 inner loop for that ufunc
 * (so results, special cases and floating-point errors are NumPy's float32
 * ones), and round the float32 results once into the format.  For + - * / and
 * sqrt this is correctly rounded (float32 has more than 2p+2 bits for every
 * format here), hence bit-identical to torch.
 *
 * add and multiply keep their partial results unrounded across the inner
 * loop calls of one reduction or accumulation (accumulate.c), so sums and
 * products along any axis accumulate in float32 and round once.
 */
#ifndef MF_UMATH_H
#define MF_UMATH_H

#include "../core/minifloat.h"
#include "../kernels/kernels.h"
#include "../kernels/nan_order.h"

/* operand letters in a loop signature:
 *   M  the minifloat format of the loop
 *   ?  bool   i  int32 (C int)   l  C long   d  float64 */
typedef enum {
    MF_LOOP_VIA_F32 = 0,   /* NumPy's float32 loop between decode and encode */
    MF_LOOP_ARITH,         /* + - * /: fused kernels when contiguous */
    MF_LOOP_NEXTAFTER,     /* native, on the format's own grid */
    MF_LOOP_SPACING,
    MF_LOOP_INT,           /* integer formats: NumPy's int32 loop, wrap-around */
    MF_LOOP_SIGN,          /* sign operations on the codes' bits (NaN payloads kept);
                            * formats without a sign bit (e8m0): NumPy's float32 loop */
    MF_LOOP_CMP64,         /* a comparison with a float64 operand, by value */
} mf_loop_kind;

/* the `op` of an MF_LOOP_CMP64 row */
typedef enum {
    MF_CMP_EQ = 0,
    MF_CMP_NE,
    MF_CMP_LT,
    MF_CMP_LE,
    MF_CMP_GT,
    MF_CMP_GE,
} mf_cmp_op;

/* the `op` of an MF_LOOP_SIGN row */
typedef enum {
    MF_SIGN_COPY = 0,      /* positive, conjugate */
    MF_SIGN_NEGATE,        /* negative */
    MF_SIGN_ABS,           /* absolute, fabs */
    MF_SIGN_COPYSIGN,      /* copysign */
} mf_sign_op;

typedef struct {
    const char *ufunc;       /* NumPy ufunc name */
    const char *sig;         /* our signature, e.g. "MM->M" */
    const char *f32sig;      /* NumPy float32 loop to borrow, e.g. "ff->f" */
    mf_loop_kind kind;
    int op;                  /* mf_binary_op for MF_LOOP_ARITH */
    int reorderable;
    int keeps_partials;      /* add/multiply: unrounded partials in reductions */
    int identity;            /* 0: none, 1: zero (sum), 2: one (product) */
} mf_ufunc_def;

extern const mf_ufunc_def mf_ufunc_defs[];
extern const int mf_num_ufunc_defs;

typedef struct mf_shadow mf_shadow;

typedef struct {
    NpyAuxData base;
    const mf_ufunc_def *def;
    PyUFuncGenericFunction f32fn;
    void *f32data;
    const mf_format *fmt;
    mf_shadow *shadow;        /* partials of a reduction (accumulate.c) */
    /* in-place calls seen before a reduction was recognised: a second call
     * on the same output (a reduction NumPy did not announce, e.g. with
     * initial=) starts the partials */
    char *seen_ptr[8];
    npy_intp seen_stride[8];
    int nseen;
} mf_loop_aux;

/* loops.c */
int mf_generic_get_loop(int def_index, PyArrayMethod_Context *context, int aligned,
                        int move_references, const npy_intp *strides,
                        PyArrayMethod_StridedLoop **out_loop, NpyAuxData **out_transferdata,
                        NPY_ARRAYMETHOD_FLAGS *flags);
int mf_find_f32_loops(void);
/* round-to-nearest without flush-to-zero: the mode value tables are made in */
int mf_default_fp_mode(void);
/* FE_* flags <-> bits 16-19 of a table entry */
uint32_t mf_lut_flag_bits(int fe);
int mf_lut_fe(uint32_t bits);
/* every code of an sz-byte format in order (0, 1, ..., 2^(8 sz) - 1), or NULL; free() it */
char *mf_every_code(npy_intp sz);
/* special.c: loops for other packages' unary ufuncs (scipy.special) */
PyObject *mf_py_add_special_loops(PyObject *self, PyObject *args);
PyObject *mf_py_special_ufuncs(PyObject *self, PyObject *args);
int mf_get_reduction_initial(int def_index, PyArrayMethod_Context *context,
                             npy_bool reduction_is_empty, void *initial);
extern _Thread_local PyArrayMethod_Context *mf_reduction_context;
extern PyUFuncGenericFunction mf_f32_fns[];
extern void *mf_f32_data[];

/* accumulate.c: unrounded partial results, per output element */
mf_shadow *mf_shadow_new(void);
void mf_shadow_free(mf_shadow *s);
/* out[j] = the float32 partial of element j (at ptr + j*stride) if this
 * reduction stored it and memory still holds the code it wrote, else the
 * value in memory; s may be NULL.  Returns the number of partials used. */
int mf_shadow_get(mf_shadow *s, const mf_format *f, char *ptr, npy_intp stride, npy_intp n,
                  float *out);
/* remember `vals` as the unrounded values just stored at ptr (s may be NULL) */
int mf_shadow_put(mf_shadow *s, const mf_format *f, char *ptr, npy_intp stride, npy_intp n,
                  const float *vals);
/* bumped by every cast into a minifloat format: a cast between two calls of
 * a reduction loop means NumPy refilled a buffer, so partials are stale */
extern _Thread_local uint64_t mf_write_epoch;

/* reduce.c: FE_* flags -> NPY_FPE_* bits (for PyUFunc_GiveFloatingpointErrors) */
int mf_fpe_bits(int fl);
/* loops.c: _accumulate(op, a, axis): cumsum/cumprod of rows, several at once */
PyObject *mf_py_accumulate(PyObject *self, PyObject *args);
/* reduce.c: a reduction's axis argument and result shape (reduce.c, pairwise.c) */
int mf_parse_axes(PyObject *axis, int nd, int *red, int *naxes);
int mf_reduced_block(int nd, const npy_intp *shape, const int *red, npy_intp *outer,
                     npy_intp *nred, npy_intp *inner);
int mf_kept_shape(int nd, const npy_intp *shape, const int *red, int keepdims, npy_intp *out);

/* matmul.c */
int mf_register_matmul(PyObject *numpy_umath);
/* matvec.c */
int mf_register_matvec(PyObject *numpy_umath);

/* n codes of sz bytes from src (stride ss bytes) to dst (stride ds):
 * fixed-size moves (a memcpy of a run-time size is a library call an
 * element: 45% of a strided sum's time).  One code repeated (ss == 0: a
 * scalar assigned, `a[...] = 1.0`, a broadcast operand NumPy buffers) into
 * a contiguous dst is a fill the compiler vectorizes: moved an element at a
 * time it took 9 ms for (4096, 4096) bfloat16, 12x a uint16 fill. */
static inline void
mf_move_codes(char *dst, npy_intp ds, const char *src, npy_intp ss, npy_intp n, npy_intp sz)
{
    if (n < 16) {
        /* short runs (a masked copy calls once per run of True): no library
         * call (a memmove of one code doubled `a[mask]`'s time) */
    }
    else if (ss == 0 && ds == sz && (sz == 1 || sz == 2)) {
        if (sz == 1) {
            memset(dst, *(const unsigned char *)src, (size_t)n);
            return;
        }
        uint16_t v;
        memcpy(&v, src, 2);
        if ((uintptr_t)dst % 2 == 0) {
            uint16_t *d = (uint16_t *)dst;
            for (npy_intp i = 0; i < n; i++) {
                d[i] = v;
            }
            return;
        }
    }
    else if (ss == sz && ds == sz) {
        memmove(dst, src, (size_t)(n * sz));
        return;
    }
    if (sz == 2) {
        for (npy_intp i = 0; i < n; i++, src += ss, dst += ds) {
            uint16_t v;
            memcpy(&v, src, 2);
            memcpy(dst, &v, 2);
        }
    }
    else if (sz == 1) {
        for (npy_intp i = 0; i < n; i++, src += ss, dst += ds) {
            *dst = *src;
        }
    }
    else {
        for (npy_intp i = 0; i < n; i++, src += ss, dst += ds) {
            memcpy(dst, src, (size_t)sz);
        }
    }
}

#endif
