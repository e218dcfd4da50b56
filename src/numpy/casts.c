/*
 * Casts (NEP 43 ArrayMethods) between every minifloat format and
 *   - itself and every other minifloat format (one rounding, directly),
 *   - NumPy's bool, integer, float and complex types,
 *   - str (U) and bytes (S).
 * Object casts come from NumPy, built on the dtype's getitem/setitem.
 *
 * Rounding: float sources are rounded once from their exact value.  Wide
 * sources (int64, uint64, long double) are first rounded to odd in a double,
 * which keeps the final rounding correct.
 *
 * Safety comes from the format table: A -> B is "safe" when every value of
 * A is exactly a value of B (computed once at import by trying all codes).
 */
#include "../core/minifloat.h"
#include "../kernels/kernels.h"
#include "../kernels/parallel.h"
#include "../kernels/scalar_ops.h"
#include <fenv.h>
#include "../umath/umath.h"

PyObject *mf_ComplexWarning = NULL;

int mf_cast_safety_table[MF_NUM_FORMATS][MF_NUM_FORMATS];

/* ------------------------------------------------------------ safety */

static int
values_survive(const mf_format *a, const mf_format *b)
{
    if (a->id == b->id) {
        return 1;
    }
    if (a->id == MF_IEEE_FLOAT32) {
        return b->id == MF_IEEE_FLOAT32;
    }
    if (b->id == MF_IEEE_FLOAT32) {
        return 1;                                   /* every format fits float32 */
    }
    uint32_t ncodes = mf_code_mask(a) + 1u;
    for (uint32_t c = 0; c < ncodes; c++) {
        double v = mf_decode_f64(a, c);
        if (isnan(v)) {
            if (!mf_has_nan(b)) {
                return 0;
            }
            continue;
        }
        if (b->kind != MF_KIND_FLOAT) {
            if (a->kind == MF_KIND_FLOAT) {
                return 0;
            }
            if (v < (double)mf_int_min(b) || v > (double)mf_int_max(b)) {
                return 0;
            }
            continue;
        }
        uint32_t cb = mf_encode_f64(b, v);
        double back = mf_decode_f64(b, cb);
        if (back != v) {
            return 0;
        }
        if (isinf(v) && !mf_has_inf(b)) {
            return 0;
        }
    }
    return 1;
}

void
mf_compute_cast_safety(void)
{
    for (int a = 0; a < MF_NUM_FORMATS; a++) {
        for (int b = 0; b < MF_NUM_FORMATS; b++) {
            mf_cast_safety_table[a][b] = values_survive(&mf_formats[a], &mf_formats[b]);
        }
    }
}

int
mf_format_casts_safely(const mf_format *a, const mf_format *b)
{
    return mf_cast_safety_table[a->id][b->id];
}

/* ------------------------------------------------- NumPy builtin types */

/* The NumPy types minifloat casts to and from directly. */
#define MF_BUILTINS(X)                                     \
    X(BOOL, npy_bool, BOOL)                                \
    X(BYTE, npy_byte, SINT)                                \
    X(UBYTE, npy_ubyte, UINT)                              \
    X(SHORT, npy_short, SINT)                              \
    X(USHORT, npy_ushort, UINT)                            \
    X(INT, npy_int, SINT)                                  \
    X(UINT, npy_uint, UINT)                                \
    X(LONG, npy_long, SINT)                                \
    X(ULONG, npy_ulong, UINT)                              \
    X(LONGLONG, npy_longlong, SINT)                        \
    X(ULONGLONG, npy_ulonglong, UINT)                      \
    X(HALF, npy_half, HALF)                                \
    X(FLOAT, npy_float, FLOAT)                             \
    X(DOUBLE, npy_double, DOUBLE)                          \
    X(LONGDOUBLE, npy_longdouble, LONGDOUBLE)              \
    X(CFLOAT, npy_cfloat, CFLOAT)                          \
    X(CDOUBLE, npy_cdouble, CDOUBLE)                       \
    X(CLONGDOUBLE, npy_clongdouble, CLONGDOUBLE)

/* integer range of a builtin integer type */
static void
builtin_int_range(int type_num, double *lo, double *hi)
{
    switch (type_num) {
        case NPY_BOOL: *lo = 0; *hi = 1; break;
        case NPY_BYTE: *lo = NPY_MIN_BYTE; *hi = NPY_MAX_BYTE; break;
        case NPY_UBYTE: *lo = 0; *hi = NPY_MAX_UBYTE; break;
        case NPY_SHORT: *lo = NPY_MIN_SHORT; *hi = NPY_MAX_SHORT; break;
        case NPY_USHORT: *lo = 0; *hi = NPY_MAX_USHORT; break;
        case NPY_INT: *lo = NPY_MIN_INT; *hi = NPY_MAX_INT; break;
        case NPY_UINT: *lo = 0; *hi = NPY_MAX_UINT; break;
        case NPY_LONG: *lo = (double)NPY_MIN_LONG; *hi = (double)NPY_MAX_LONG; break;
        case NPY_ULONG: *lo = 0; *hi = (double)NPY_MAX_ULONG; break;
        case NPY_LONGLONG: *lo = (double)NPY_MIN_LONGLONG; *hi = (double)NPY_MAX_LONGLONG; break;
        default: *lo = 0; *hi = (double)NPY_MAX_ULONGLONG; break;
    }
}

/* can every value of builtin type `type_num` be held exactly by format f */
int
mf_builtin_safe_to_format(int type_num, const mf_format *f)
{
    if (PyTypeNum_ISBOOL(type_num)) {
        /* False and True must be 0 and 1 (not so for e8m0 and int1) */
        if (f->kind == MF_KIND_FLOAT) {
            return mf_decode_f64(f, mf_encode_f64(f, 0.0)) == 0.0
                   && mf_decode_f64(f, mf_encode_f64(f, 1.0)) == 1.0;
        }
        return mf_int_min(f) <= 0 && mf_int_max(f) >= 1;
    }
    if (PyTypeNum_ISINTEGER(type_num)) {
        double lo, hi;
        builtin_int_range(type_num, &lo, &hi);
        if (f->kind != MF_KIND_FLOAT) {
            return lo >= (double)mf_int_min(f) && hi <= (double)mf_int_max(f);
        }
        /* all integers in [lo, hi] are values iff max(|lo|, hi) <= 2^(M+1)
         * and within the finite range */
        double need = fmax(-lo, hi);
        double maxv = mf_decode_f64(f, mf_max_finite_mag(f));
        return need <= ldexp(1.0, f->mant_bits + 1) && need <= maxv
               && (lo >= 0 || f->has_sign) && mf_has_zero(f);
    }
    if (type_num == NPY_HALF) {
        return mf_format_casts_safely(&mf_formats[MF_IEEE_FLOAT16], f);
    }
    return 0;   /* float32 and wider, complex: never into a minifloat format */
}

/* can every value of format f be held exactly by builtin type `type_num` */
int
mf_format_safe_to_builtin(const mf_format *f, int type_num)
{
    if (f->kind != MF_KIND_FLOAT) {
        if (PyTypeNum_ISINTEGER(type_num)) {
            double lo, hi;
            builtin_int_range(type_num, &lo, &hi);
            return lo <= (double)mf_int_min(f) && hi >= (double)mf_int_max(f);
        }
        if (type_num == NPY_HALF) {
            return mf_format_casts_safely(f, &mf_formats[MF_IEEE_FLOAT16]);
        }
        return PyTypeNum_ISFLOAT(type_num) || PyTypeNum_ISCOMPLEX(type_num);
    }
    if (type_num == NPY_HALF) {
        return mf_format_casts_safely(f, &mf_formats[MF_IEEE_FLOAT16]);
    }
    return PyTypeNum_ISFLOAT(type_num) || PyTypeNum_ISCOMPLEX(type_num);
}

/* NumPy's "kind" order for same_kind: b < u < i < f < c */
static int
kind_rank_builtin(int type_num)
{
    if (PyTypeNum_ISBOOL(type_num)) return 0;
    if (PyTypeNum_ISUNSIGNED(type_num)) return 1;
    if (PyTypeNum_ISSIGNED(type_num)) return 2;
    if (PyTypeNum_ISFLOAT(type_num)) return 3;
    return 4;
}

static int
kind_rank_format(const mf_format *f)
{
    return f->kind == MF_KIND_FLOAT ? 3 : (f->kind == MF_KIND_SINT ? 2 : 1);
}

static NPY_CASTING
casting_between_ranks(int safe, int from_rank, int to_rank)
{
    if (safe) {
        return NPY_SAFE_CASTING;
    }
    return from_rank <= to_rank ? NPY_SAME_KIND_CASTING : NPY_UNSAFE_CASTING;
}

/* ------------------------------------------------------ FP error helpers */

static inline uint32_t
enc_f64(const mf_format *f, double v, int *ovf)
{
    return mf_encode_f64_ovf(f, v, ovf);
}

static inline void
finish_overflow(int ovf)
{
    if (ovf) {
        mf_raise_overflow();
    }
}

/* ---------------------------------------------------- element readers */

static inline uint32_t
half_to_f32_bits(npy_half h)
{
    return mf_f32_bits(mf_decode_f32(&mf_formats[MF_IEEE_FLOAT16], h));
}

/* value of a builtin element as the double that rounds correctly */
#define READ_AS_DOUBLE_BOOL(T, p) (*(const npy_bool *)(p) ? 1.0 : 0.0)
#define READ_AS_DOUBLE_SINT(T, p) mf_int64_to_f64_odd((int64_t)load_##T(p))
#define READ_AS_DOUBLE_UINT(T, p) mf_uint64_to_f64_odd((uint64_t)load_##T(p))
#define READ_AS_DOUBLE_HALF(T, p) (double)mf_bits_f32(half_to_f32_bits(load_##T(p)))
#define READ_AS_DOUBLE_FLOAT(T, p) (double)load_##T(p)
#define READ_AS_DOUBLE_DOUBLE(T, p) load_##T(p)
#define READ_AS_DOUBLE_LONGDOUBLE(T, p) mf_longdouble_to_f64_odd(load_##T(p))
#define READ_AS_DOUBLE_CFLOAT(T, p) (double)npy_crealf(load_##T(p))
#define READ_AS_DOUBLE_CDOUBLE(T, p) npy_creal(load_##T(p))
#define READ_AS_DOUBLE_CLONGDOUBLE(T, p) mf_longdouble_to_f64_odd(npy_creall(load_##T(p)))

/* integer formats take integers exactly (wrapping) and floats truncated */
#define INT_CODE_BOOL(T, f, p) ((uint32_t)(*(const npy_bool *)(p) != 0))
#define INT_CODE_SINT(T, f, p) ((uint32_t)((uint64_t)(int64_t)load_##T(p) & mf_code_mask(f)))
#define INT_CODE_UINT(T, f, p) ((uint32_t)((uint64_t)load_##T(p) & mf_code_mask(f)))
#define INT_CODE_HALF(T, f, p) mf_encode_int_from_f64(f, READ_AS_DOUBLE_HALF(T, p))
#define INT_CODE_FLOAT(T, f, p) mf_encode_int_from_f64(f, READ_AS_DOUBLE_FLOAT(T, p))
#define INT_CODE_DOUBLE(T, f, p) mf_encode_int_from_f64(f, READ_AS_DOUBLE_DOUBLE(T, p))
#define INT_CODE_LONGDOUBLE(T, f, p) mf_encode_int_from_f64(f, (double)load_##T(p))
#define INT_CODE_CFLOAT(T, f, p) mf_encode_int_from_f64(f, READ_AS_DOUBLE_CFLOAT(T, p))
#define INT_CODE_CDOUBLE(T, f, p) mf_encode_int_from_f64(f, READ_AS_DOUBLE_CDOUBLE(T, p))
#define INT_CODE_CLONGDOUBLE(T, f, p) mf_encode_int_from_f64(f, (double)npy_creall(load_##T(p)))

/* write a minifloat value (given as double `v`, and as float `fv` where the
 * format is a float format) into a builtin element */
#define WRITE_BOOL(T, p, v) { npy_bool b_ = (v) != 0; memcpy((p), &b_, 1); }
/* float -> int follows NumPy's float32 casts: the C conversion of the
 * float32 value (NaN/inf/out of range raise "invalid" on x86) */
#define WRITE_SINT(T, p, v) { T t_ = (T)(float)(v); memcpy((p), &t_, sizeof(T)); }
#define WRITE_UINT(T, p, v) { T t_ = (T)(float)(v); memcpy((p), &t_, sizeof(T)); }
#define WRITE_HALF(T, p, v) { npy_half h_ = (npy_half)mf_enc1(&mf_formats[MF_IEEE_FLOAT16], (float)(v)); memcpy((p), &h_, 2); }
#define WRITE_FLOAT(T, p, v) { float x_ = (float)(v); memcpy((p), &x_, 4); }
#define WRITE_DOUBLE(T, p, v) { double x_ = (v); memcpy((p), &x_, 8); }
#define WRITE_LONGDOUBLE(T, p, v) { T x_ = (T)(v); memcpy((p), &x_, sizeof(T)); }
#define WRITE_CFLOAT(T, p, v) { T x_; npy_csetrealf(&x_, (float)(v)); npy_csetimagf(&x_, 0.0f); memcpy((p), &x_, sizeof(T)); }
#define WRITE_CDOUBLE(T, p, v) { T x_; npy_csetreal(&x_, (v)); npy_csetimag(&x_, 0.0); memcpy((p), &x_, sizeof(T)); }
#define WRITE_CLONGDOUBLE(T, p, v) { T x_; npy_csetreall(&x_, (npy_longdouble)(v)); npy_csetimagl(&x_, 0.0L); memcpy((p), &x_, sizeof(T)); }

/* integer formats write integers exactly */
#define IWRITE_BOOL(T, p, v) WRITE_BOOL(T, p, v)
#define IWRITE_SINT(T, p, v) { T t_ = (T)(int64_t)(v); memcpy((p), &t_, sizeof(T)); }
#define IWRITE_UINT(T, p, v) { T t_ = (T)(int64_t)(v); memcpy((p), &t_, sizeof(T)); }
#define IWRITE_HALF(T, p, v) WRITE_HALF(T, p, v)
#define IWRITE_FLOAT(T, p, v) WRITE_FLOAT(T, p, v)
#define IWRITE_DOUBLE(T, p, v) WRITE_DOUBLE(T, p, v)
#define IWRITE_LONGDOUBLE(T, p, v) WRITE_LONGDOUBLE(T, p, v)
#define IWRITE_CFLOAT(T, p, v) WRITE_CFLOAT(T, p, v)
#define IWRITE_CDOUBLE(T, p, v) WRITE_CDOUBLE(T, p, v)
#define IWRITE_CLONGDOUBLE(T, p, v) WRITE_CLONGDOUBLE(T, p, v)

/* unaligned-safe loads, one per C type */
static inline npy_bool load_npy_bool(const char *p) { npy_bool v; memcpy(&v, p, 1); return v; }
static inline npy_byte load_npy_byte(const char *p) { npy_byte v; memcpy(&v, p, 1); return v; }
static inline npy_ubyte load_npy_ubyte(const char *p) { npy_ubyte v; memcpy(&v, p, 1); return v; }
static inline npy_short load_npy_short(const char *p) { npy_short v; memcpy(&v, p, sizeof v); return v; }
static inline npy_ushort load_npy_ushort(const char *p) { npy_ushort v; memcpy(&v, p, sizeof v); return v; }
static inline npy_int load_npy_int(const char *p) { npy_int v; memcpy(&v, p, sizeof v); return v; }
static inline npy_uint load_npy_uint(const char *p) { npy_uint v; memcpy(&v, p, sizeof v); return v; }
static inline npy_long load_npy_long(const char *p) { npy_long v; memcpy(&v, p, sizeof v); return v; }
static inline npy_ulong load_npy_ulong(const char *p) { npy_ulong v; memcpy(&v, p, sizeof v); return v; }
static inline npy_longlong load_npy_longlong(const char *p) { npy_longlong v; memcpy(&v, p, sizeof v); return v; }
static inline npy_ulonglong load_npy_ulonglong(const char *p) { npy_ulonglong v; memcpy(&v, p, sizeof v); return v; }
static inline npy_half load_npy_half(const char *p) { npy_half v; memcpy(&v, p, sizeof v); return v; }
static inline npy_float load_npy_float(const char *p) { npy_float v; memcpy(&v, p, sizeof v); return v; }
static inline npy_double load_npy_double(const char *p) { npy_double v; memcpy(&v, p, sizeof v); return v; }
static inline npy_longdouble load_npy_longdouble(const char *p) { npy_longdouble v; memcpy(&v, p, sizeof v); return v; }
static inline npy_cfloat load_npy_cfloat(const char *p) { npy_cfloat v; memcpy(&v, p, sizeof v); return v; }
static inline npy_cdouble load_npy_cdouble(const char *p) { npy_cdouble v; memcpy(&v, p, sizeof v); return v; }
static inline npy_clongdouble load_npy_clongdouble(const char *p) { npy_clongdouble v; memcpy(&v, p, sizeof v); return v; }

/* ------------------------------------------------- builtin -> minifloat */

#define CAST_TO_MF(NAME, T, CAT)                                                          \
    static int                                                                            \
    cast_##NAME##_to_mf(PyArrayMethod_Context *context, char *const data[],               \
                        npy_intp const dimensions[], npy_intp const strides[],            \
                        NpyAuxData *NPY_UNUSED(aux))                                      \
    {                                                                                     \
        const mf_format *f = mf_descr_format(context->descriptors[1]);                    \
        npy_intp n = dimensions[0];                                                       \
        mf_write_epoch++;                                                                 \
        const char *in = data[0];                                                         \
        char *out = data[1];                                                              \
        npy_intp is = strides[0], os = strides[1];                                        \
        int ovf = 0;                                                                      \
        if (f->kind != MF_KIND_FLOAT) {                                                   \
            for (npy_intp i = 0; i < n; i++, in += is, out += os) {                       \
                mf_store_code(f, out, INT_CODE_##CAT(T, f, in));                           \
            }                                                                             \
            return 0;                                                                     \
        }                                                                                 \
        for (npy_intp i = 0; i < n; i++, in += is, out += os) {                           \
            mf_store_code(f, out, enc_f64(f, READ_AS_DOUBLE_##CAT(T, in), &ovf));          \
        }                                                                                 \
        finish_overflow(ovf);                                                             \
        return 0;                                                                         \
    }

/* float32 is the hot path: contiguous blocks go to the kernels */
static int
cast_FLOAT_to_mf(PyArrayMethod_Context *context, char *const data[],
                 npy_intp const dimensions[], npy_intp const strides[],
                 NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[1]);
    npy_intp n = dimensions[0];
    const char *in = data[0];
    char *out = data[1];
    npy_intp is = strides[0], os = strides[1];
    mf_write_epoch++;
    if (f->kind != MF_KIND_FLOAT) {
        for (npy_intp i = 0; i < n; i++, in += is, out += os) {
            mf_store_code(f, out, mf_encode_int_from_f64(f, (double)load_npy_float(in)));
        }
        return 0;
    }
    if (is == 4 && os == f->itemsize && ((uintptr_t)in % 4) == 0) {
        mf_par_encode_f32(f, (const float *)in, out, n);
        return 0;
    }
    float buf[512];
    while (n > 0) {
        npy_intp len = n < 512 ? n : 512;
        for (npy_intp i = 0; i < len; i++, in += is) {
            buf[i] = load_npy_float(in);
        }
        if (os == f->itemsize) {
            mf_k->encode_f32(f, buf, out, len);
            out += len * os;
        }
        else {
            for (npy_intp i = 0; i < len; i++, out += os) {
                mf_store_code(f, out, mf_enc1(f, buf[i]));
            }
        }
        n -= len;
    }
    return 0;
}

CAST_TO_MF(BOOL, npy_bool, BOOL)
CAST_TO_MF(BYTE, npy_byte, SINT)
CAST_TO_MF(UBYTE, npy_ubyte, UINT)
CAST_TO_MF(SHORT, npy_short, SINT)
CAST_TO_MF(USHORT, npy_ushort, UINT)
CAST_TO_MF(INT, npy_int, SINT)
CAST_TO_MF(UINT, npy_uint, UINT)
CAST_TO_MF(LONG, npy_long, SINT)
CAST_TO_MF(ULONG, npy_ulong, UINT)
CAST_TO_MF(LONGLONG, npy_longlong, SINT)
CAST_TO_MF(ULONGLONG, npy_ulonglong, UINT)
CAST_TO_MF(HALF_each, npy_half, HALF)

/* float16 -> a float format: contiguous arrays through the level's decode
 * (float16's values are float32's, so encoding that float32 rounds as
 * enc_f64 of its double does) and the format's encode, threaded */
static int
cast_HALF_to_mf(PyArrayMethod_Context *context, char *const data[],
                npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *aux)
{
    const mf_format *f = mf_descr_format(context->descriptors[1]);
    if (f->kind == MF_KIND_FLOAT && strides[0] == 2 && strides[1] == f->itemsize
            && (uintptr_t)data[0] % 2 == 0 && (uintptr_t)data[1] % (uintptr_t)f->itemsize == 0) {
        mf_write_epoch++;
        mf_par_convert_codes(&mf_formats[MF_IEEE_FLOAT16], data[0], f, data[1], dimensions[0]);
        return 0;
    }
    return cast_HALF_each_to_mf(context, data, dimensions, strides, aux);
}
CAST_TO_MF(DOUBLE_each, npy_double, DOUBLE)

/* float64 -> a float format: blocks through float32 rounded to odd and the
 * level's encode (one rounding, codec.h mf_f64_to_f32_odd), threaded for a
 * contiguous array: 4 ns an element one at a time (a (4096, 4096) cast 68
 * ms), the commonest source of all (NumPy's default dtype) */
static int
cast_DOUBLE_to_mf(PyArrayMethod_Context *context, char *const data[],
                  npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *aux)
{
    const mf_format *f = mf_descr_format(context->descriptors[1]);
    const npy_intp n = dimensions[0], is = strides[0], os = strides[1];
    if (f->kind != MF_KIND_FLOAT || f->itemsize > 2 || os != f->itemsize
            || (uintptr_t)data[1] % (uintptr_t)f->itemsize != 0) {
        return cast_DOUBLE_each_to_mf(context, data, dimensions, strides, aux);
    }
    mf_write_epoch++;
    if (is == 8 && (uintptr_t)data[0] % 8 == 0) {
        mf_par_encode_f64(f, (const double *)data[0], data[1], n);
        return 0;
    }
    double buf[512];
    const char *in = data[0];
    for (npy_intp i = 0; i < n; i += 512) {
        npy_intp len = n - i < 512 ? n - i : 512;
        for (npy_intp j = 0; j < len; j++, in += is) {
            buf[j] = load_npy_double(in);
        }
        mf_encode_f64_codes(mf_k, f, buf, data[1] + i * os, len);
    }
    return 0;
}
CAST_TO_MF(LONGDOUBLE, npy_longdouble, LONGDOUBLE)
CAST_TO_MF(CFLOAT, npy_cfloat, CFLOAT)
CAST_TO_MF(CDOUBLE, npy_cdouble, CDOUBLE)
CAST_TO_MF(CLONGDOUBLE, npy_clongdouble, CLONGDOUBLE)

/* ------------------------------------------------- minifloat -> builtin */

#define CAST_FROM_MF(NAME, T, CAT)                                                        \
    static int                                                                            \
    cast_mf_to_##NAME(PyArrayMethod_Context *context, char *const data[],                 \
                      npy_intp const dimensions[], npy_intp const strides[],              \
                      NpyAuxData *NPY_UNUSED(aux))                                        \
    {                                                                                     \
        const mf_format *f = mf_descr_format(context->descriptors[0]);                    \
        npy_intp n = dimensions[0];                                                       \
        const char *in = data[0];                                                         \
        char *out = data[1];                                                              \
        npy_intp is = strides[0], os = strides[1];                                        \
        if (f->kind != MF_KIND_FLOAT) {                                                   \
            for (npy_intp i = 0; i < n; i++, in += is, out += os) {                       \
                double v_ = mf_decode_f64(f, mf_load_code(f, in));                         \
                IWRITE_##CAT(T, out, v_);                                                  \
            }                                                                             \
            return 0;                                                                     \
        }                                                                                 \
        for (npy_intp i = 0; i < n; i++, in += is, out += os) {                           \
            /* through float32 (exact for every format): keeps NaN payloads */             \
            double v_ = (double)mf_dec_code(f, mf_load_code(f, in));                       \
            WRITE_##CAT(T, out, v_);                                                       \
        }                                                                                 \
        return 0;                                                                         \
    }

static int
cast_mf_to_FLOAT(PyArrayMethod_Context *context, char *const data[],
                 npy_intp const dimensions[], npy_intp const strides[],
                 NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    npy_intp n = dimensions[0];
    const char *in = data[0];
    char *out = data[1];
    npy_intp is = strides[0], os = strides[1];
    if (is == f->itemsize && os == 4 && ((uintptr_t)out % 4) == 0 && ((uintptr_t)in % f->itemsize) == 0) {
        mf_par_decode_f32(f, in, (float *)out, n);
        return 0;
    }
    for (npy_intp i = 0; i < n; i++, in += is, out += os) {
        float v = mf_dec_code(f, mf_load_code(f, in));
        memcpy(out, &v, 4);
    }
    return 0;
}

/*
 * To bool: the value != 0 (NaN is True, both zeros False), as the generic
 * loop above computes it through float32, from a table per 1-byte format and
 * `code & ~sign` for 2-byte formats whose zeros are exactly the codes with
 * no bit but the sign set (bfloat16), both made and checked against the
 * decode for every code at import (mf_casts_init).  np.any/np.all cast to
 * bool before NumPy's logical_or/and reduction.
 */
npy_bool mf_truth8[MF_NUM_PUBLIC_FORMATS][256];
uint16_t mf_truth16_mask[MF_NUM_PUBLIC_FORMATS];    /* 0: no fast path */
int mf_truth8_mask[MF_NUM_PUBLIC_FORMATS];

/* the mask m of a 1-byte format's truth table t, t[c] == ((c & m) != 0) for
 * every byte c: the bits whose code alone is True; 0x100 when every code is
 * True (e8m0: no zero), -1 when no mask gives the table */
static int
truth8_mask(const npy_bool *t)
{
    int m = 0, all = 1;
    for (int b = 0; b < 8; b++) {
        if (t[1u << b]) {
            m |= 1 << b;
        }
    }
    for (uint32_t c = 0; c < 256; c++) {
        all &= t[c] != 0;
    }
    if (all) {
        return 0x100;
    }
    for (uint32_t c = 0; c < 256; c++) {
        if ((t[c] != 0) != ((c & (uint32_t)m) != 0)) {
            return -1;
        }
    }
    return m;
}

int
mf_casts_init(void)
{
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        const mf_format *f = &mf_formats[id];
        if (f->itemsize == 1) {
            for (uint32_t c = 0; c < 256; c++) {
                mf_truth8[id][c] = f->kind == MF_KIND_FLOAT
                                ? mf_dec_code(f, c & mf_code_mask(f)) != 0.0f
                                : mf_decode_f64(f, c & mf_code_mask(f)) != 0.0;
            }
            mf_truth8_mask[id] = truth8_mask(mf_truth8[id]);
        }
        else if (f->itemsize == 2 && f->kind == MF_KIND_FLOAT && f->bits == 16) {
            const uint16_t mask = f->has_sign ? (uint16_t)~mf_sign_bit(f) : 0xFFFFu;
            int ok = 1;
            for (uint32_t c = 0; c < 65536u && ok; c++) {
                ok = (mf_dec_code(f, c) != 0.0f) == ((c & mask) != 0);
            }
            mf_truth16_mask[id] = ok ? mask : 0;
        }
    }
    return 0;
}

static int
cast_mf_to_BOOL(PyArrayMethod_Context *context, char *const data[],
                npy_intp const dimensions[], npy_intp const strides[],
                NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    const int id = (int)(f - mf_formats);
    const npy_intp n = dimensions[0], is = strides[0], os = strides[1];
    const char *in = data[0];
    char *out = data[1];
    const int known = id >= 0 && id < MF_NUM_PUBLIC_FORMATS;
    if (known && f->itemsize == 1) {
        const npy_bool *t = mf_truth8[id];
        if (is == 1 && os == 1) {
            for (npy_intp i = 0; i < n; i++) {
                out[i] = (char)t[(uint8_t)in[i]];
            }
        }
        else {
            for (npy_intp i = 0; i < n; i++, in += is, out += os) {
                *out = (char)t[*(const uint8_t *)in];
            }
        }
        return 0;
    }
    if (known && mf_truth16_mask[id] != 0) {
        const uint16_t mask = mf_truth16_mask[id];
        if (is == 2 && os == 1 && ((uintptr_t)in % 2) == 0) {
            const uint16_t *c = (const uint16_t *)in;
            for (npy_intp i = 0; i < n; i++) {
                out[i] = (char)((c[i] & mask) != 0);
            }
        }
        else {
            for (npy_intp i = 0; i < n; i++, in += is, out += os) {
                uint16_t c;
                memcpy(&c, in, 2);
                *out = (char)((c & mask) != 0);
            }
        }
        return 0;
    }
    for (npy_intp i = 0; i < n; i++, in += is, out += os) {
        double v_ = f->kind == MF_KIND_FLOAT ? (double)mf_dec_code(f, mf_load_code(f, in))
                                             : mf_decode_f64(f, mf_load_code(f, in));
        WRITE_BOOL(npy_bool, out, v_);
    }
    return 0;
}

CAST_FROM_MF(BYTE, npy_byte, SINT)
CAST_FROM_MF(UBYTE, npy_ubyte, UINT)
CAST_FROM_MF(SHORT, npy_short, SINT)
CAST_FROM_MF(USHORT, npy_ushort, UINT)
CAST_FROM_MF(INT, npy_int, SINT)
CAST_FROM_MF(UINT, npy_uint, UINT)
CAST_FROM_MF(LONG, npy_long, SINT)
CAST_FROM_MF(ULONG, npy_ulong, UINT)
CAST_FROM_MF(LONGLONG, npy_longlong, SINT)
CAST_FROM_MF(ULONGLONG, npy_ulonglong, UINT)
/* to float16 from the float32 value, never through a double: a signaling
 * NaN raises nothing, as in NumPy's float32 -> float16 cast */
static int
cast_mf_to_HALF(PyArrayMethod_Context *context, char *const data[],
                npy_intp const dimensions[], npy_intp const strides[],
                NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    npy_intp n = dimensions[0];
    const char *in = data[0];
    char *out = data[1];
    npy_intp is = strides[0], os = strides[1];
    const mf_format *h = &mf_formats[MF_IEEE_FLOAT16];
    if (f->kind == MF_KIND_FLOAT && is == f->itemsize && os == 2
            && (uintptr_t)in % (uintptr_t)f->itemsize == 0 && (uintptr_t)out % 2 == 0) {
        /* the level's decode and encode kernels, on the threads when large
         * (float16 is a format of the table: the same rounding as mf_enc1) */
        mf_par_convert_codes(f, in, h, out, n);
        return 0;
    }
    for (npy_intp i = 0; i < n; i++, in += is, out += os) {
        float v = f->kind == MF_KIND_FLOAT ? mf_dec_code(f, mf_load_code(f, in))
                                           : (float)mf_decode_f64(f, mf_load_code(f, in));
        npy_half hv = (npy_half)mf_enc1(h, v);
        memcpy(out, &hv, 2);
    }
    return 0;
}
CAST_FROM_MF(DOUBLE_each, npy_double, DOUBLE)

typedef struct {
    const mf_format *f;
    const char *in;
    double *out;
} widen_job;

/* codes [start, start + len) -> float32 by the level's decode -> float64 */
static void
widen_range(void *ctx, mf_intp start, mf_intp len)
{
    const widen_job *J = (const widen_job *)ctx;
    float buf[1024];
    for (mf_intp i = start; i < start + len; i += 1024) {
        mf_intp l = start + len - i < 1024 ? start + len - i : 1024;
        mf_k->decode_f32(J->f, J->in + i * J->f->itemsize, buf, l);
        for (mf_intp j = 0; j < l; j++) {
            J->out[i + j] = (double)buf[j];
        }
    }
}

/* a float format -> float64: the same float32 values widened (NaN payloads
 * kept, as the element loop keeps them), contiguous arrays by the decode
 * kernel on the threads: (4096, 4096) bfloat16 29.5 -> 10.7 ms */
static int
cast_mf_to_DOUBLE(PyArrayMethod_Context *context, char *const data[],
                  npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *aux)
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    if (f->kind == MF_KIND_FLOAT && strides[0] == f->itemsize && strides[1] == 8
            && (uintptr_t)data[0] % (uintptr_t)f->itemsize == 0 && (uintptr_t)data[1] % 8 == 0) {
        widen_job J = {f, data[0], (double *)data[1]};
        mf_par_range(widen_range, &J, dimensions[0], 1024, 8);
        return 0;
    }
    return cast_mf_to_DOUBLE_each(context, data, dimensions, strides, aux);
}
CAST_FROM_MF(LONGDOUBLE, npy_longdouble, LONGDOUBLE)
CAST_FROM_MF(CFLOAT, npy_cfloat, CFLOAT)
CAST_FROM_MF(CDOUBLE, npy_cdouble, CDOUBLE)
CAST_FROM_MF(CLONGDOUBLE, npy_clongdouble, CLONGDOUBLE)

/*
 * Float formats -> NumPy integers: exactly what NumPy's float32 -> integer
 * cast gives (values for NaN/inf/out of range, and its "invalid value"
 * warning), by decoding to float32 and letting NumPy cast that block.
 * Integer formats convert exactly (the macro loops above).
 */
static int
cast_mf_to_int_via_numpy(PyArrayMethod_Context *context, char *const data[],
                         npy_intp const dimensions[], npy_intp const strides[],
                         NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    PyArray_Descr *to = context->descriptors[1];
    npy_intp n = dimensions[0];
    const char *in = data[0];
    char *out = data[1];
    npy_intp is = strides[0], os = strides[1];
    /* blocks of 2^14 values (64 KiB, in L2): each costs two array objects
     * and NumPy's cast setup (~5 us; blocks of 1024 spent most of a large
     * cast there: (4096, 4096) bfloat16 -> int32 took 158 ms) */
    enum { B = 1 << 14 };
    float *buf = PyMem_RawMalloc(B * sizeof(float));
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int contig = is == f->itemsize && (uintptr_t)in % (uintptr_t)f->itemsize == 0;
    int r = 0;
    while (n > 0 && r == 0) {
        npy_intp len = n < B ? n : B;
        if (contig) {
            mf_k->decode_f32(f, in, buf, len);
            in += len * is;
        }
        else {
            for (npy_intp i = 0; i < len; i++, in += is) {
                buf[i] = mf_decode_f32(f, mf_load_code(f, in));
            }
        }
        PyArray_Descr *f32 = PyArray_DescrFromType(NPY_FLOAT);
        PyObject *src = PyArray_NewFromDescr(&PyArray_Type, f32, 1, &len, NULL, buf, 0, NULL);
        if (src == NULL) {
            r = -1;
            break;
        }
        Py_INCREF(to);
        PyObject *dst = PyArray_NewFromDescr(&PyArray_Type, to, 1, &len, &os, out,
                                             NPY_ARRAY_WRITEABLE, NULL);
        if (dst == NULL) {
            Py_DECREF(src);
            r = -1;
            break;
        }
        r = PyArray_CopyInto((PyArrayObject *)dst, (PyArrayObject *)src);
        Py_DECREF(src);
        Py_DECREF(dst);
        out += len * os;
        n -= len;
    }
    PyMem_RawFree(buf);
    return r < 0 ? -1 : 0;
}

#define INT_VIA_NUMPY(NAME)                                                               \
    static int                                                                            \
    cast_mf_to_##NAME##_any(PyArrayMethod_Context *context, char *const data[],           \
                            npy_intp const dimensions[], npy_intp const strides[],        \
                            NpyAuxData *aux)                                              \
    {                                                                                     \
        if (mf_descr_format(context->descriptors[0])->kind != MF_KIND_FLOAT) {            \
            return cast_mf_to_##NAME(context, data, dimensions, strides, aux);            \
        }                                                                                 \
        return cast_mf_to_int_via_numpy(context, data, dimensions, strides, aux);         \
    }
INT_VIA_NUMPY(BYTE)
INT_VIA_NUMPY(UBYTE)
INT_VIA_NUMPY(SHORT)
INT_VIA_NUMPY(USHORT)
INT_VIA_NUMPY(INT)
INT_VIA_NUMPY(UINT)
INT_VIA_NUMPY(LONG)
INT_VIA_NUMPY(ULONG)
INT_VIA_NUMPY(LONGLONG)
INT_VIA_NUMPY(ULONGLONG)

/* ------------------------------------------------ minifloat <-> minifloat */

/* ml_dtypes' DTypes, by format id, when ml_dtypes is installed: their arrays
 * hold the same codes as ours (same formats, same names) */
PyArray_DTypeMeta *mf_ml_dtypes[MF_NUM_PUBLIC_FORMATS];

static const mf_format *
format_of_descr(PyArray_Descr *d)
{
    PyArray_DTypeMeta *DT = NPY_DTYPE(d);
    int id = mf_dtype_index(DT);
    if (id >= 0) {
        return &mf_formats[id];
    }
    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        if (mf_ml_dtypes[i] == DT) {
            return &mf_formats[i];
        }
    }
    return NULL;
}

/* codes of format fa -> codes of format fb, one rounding */
static void
convert_codes(const mf_format *fa, const mf_format *fb, const char *in, npy_intp is,
              char *out, npy_intp os, npy_intp n)
{
    if (fa == fb) {
        /* a copy keeps codes and values: reductions' partials stay valid
         * (NumPy buffers operands with such copies).  NumPy copies arrays of
         * our formats through this loop (transposes, strided views, ...):
         * a fixed-size move an element (a memcpy of a run-time size was a
         * call an element: (64, 1024, 256) bfloat16 transposed 41 ms, uint16
         * 10 ms) */
        const npy_intp isz = fa->itemsize;
        if (is == isz && os == isz) {
            memmove(out, in, (size_t)(n * isz));
        }
        else {
            mf_move_codes(out, os, in, is, n, isz);
        }
        return;
    }
    mf_write_epoch++;
    if (fb->kind != MF_KIND_FLOAT) {
        for (npy_intp i = 0; i < n; i++, in += is, out += os) {
            double v = mf_decode_f64(fa, mf_load_code(fa, in));
            uint32_t c = fa->kind != MF_KIND_FLOAT
                         ? (uint32_t)((uint64_t)(int64_t)v & mf_code_mask(fb))
                         : mf_encode_int_from_f64(fb, v);
            mf_store_code(fb, out, c);
        }
        return;
    }
    if (fa->kind == MF_KIND_FLOAT && fb->itemsize <= 2) {
        /* Every float format decodes exactly to float32, so float32 ->
         * fb is the one rounding: decode and encode with the kernels,
         * block by block (the encode kernel raises the overflow warning
         * exactly as the per-element route does).  Measured 100-400x faster
         * than decoding to and encoding from float64 per element (design.md,
         * "Checkpoint speed"). */
        float buf[1024];
        char codes[1024 * 2];
        int in_contig = is == fa->itemsize, out_contig = os == fb->itemsize;
        if (in_contig && out_contig) {
            mf_par_convert_codes(fa, in, fb, out, n);     /* on threads when large */
            return;
        }
        while (n > 0) {
            npy_intp len = n < 1024 ? n : 1024;
            if (in_contig) {
                mf_k->decode_f32(fa, in, buf, len);
            }
            else {
                for (npy_intp i = 0; i < len; i++) {
                    buf[i] = mf_dec_code(fa, mf_load_code(fa, in + i * is));
                }
            }
            if (out_contig) {
                mf_k->encode_f32(fb, buf, out, len);
            }
            else {
                mf_k->encode_f32(fb, buf, codes, len);
                mf_move_codes(out, os, codes, fb->itemsize, len, fb->itemsize);
            }
            in += len * is;
            out += len * os;
            n -= len;
        }
        return;
    }
    int ovf = 0;
    if (fa->itemsize == 1) {
        /* a table for 8-bit sources */
        uint16_t table[256];
        uint8_t table_ovf[256];
        for (int c = 0; c < 256; c++) {
            int o = 0;
            table[c] = (uint16_t)enc_f64(fb, mf_decode_f64(fa, (uint32_t)c & mf_code_mask(fa)), &o);
            table_ovf[c] = (uint8_t)o;
        }
        for (npy_intp i = 0; i < n; i++, in += is, out += os) {
            uint8_t c = (uint8_t)*in;
            ovf |= table_ovf[c];
            mf_store_code(fb, out, table[c]);
        }
    }
    else {
        for (npy_intp i = 0; i < n; i++, in += is, out += os) {
            mf_store_code(fb, out, enc_f64(fb, mf_decode_f64(fa, mf_load_code(fa, in)), &ovf));
        }
    }
    finish_overflow(ovf);
}

static int
cast_mf_to_mf(PyArrayMethod_Context *context, char *const data[],
              npy_intp const dimensions[], npy_intp const strides[],
              NpyAuxData *NPY_UNUSED(aux))
{
    PyArray_Descr *d0 = context->descriptors[0], *d1 = context->descriptors[1];
    if (d0->elsize > 1 && mf_descr_swapped(d0) != mf_descr_swapped(d1)
            && NPY_DTYPE(d0) == NPY_DTYPE(d1)) {
        mf_copyswapn_sized(d0->elsize, data[1], strides[1], data[0], strides[0], dimensions[0], 1);
        return 0;
    }
    convert_codes(format_of_descr(context->descriptors[0]), format_of_descr(context->descriptors[1]),
                  data[0], strides[0], data[1], strides[1], dimensions[0]);
    return 0;
}

/* one code repeated into a contiguous run (`a.fill(v)`, `a[...] = v`,
 * np.full): from MF_PAR_MIN_BYTES on, the run cut between the threads (Zen
 * 4, (4096, 4096) bfloat16 `fill`: one thread 0.85 ms, two 0.51 ms); the
 * short runs of a masked assignment stay a plain call */
typedef struct {
    char *dst;
    const char *src;
    npy_intp sz;
} fill_job;

static void
fill_range(void *ctx, mf_intp start, mf_intp len)
{
    const fill_job *J = (const fill_job *)ctx;
    mf_move_codes(J->dst + start * J->sz, J->sz, J->src, 0, len, J->sz);
}

static void
copy_codes(char *const data[], npy_intp const dimensions[], npy_intp const strides[],
           npy_intp sz)
{
    const npy_intp n = dimensions[0];
    if (strides[0] == 0 && strides[1] == sz && n * sz >= MF_PAR_MIN_BYTES
            && (uintptr_t)data[1] % (uintptr_t)sz == 0) {
        fill_job J = {data[1], data[0], sz};
        mf_par_range(fill_range, &J, n, 4096, sz);
        return;
    }
    mf_move_codes(data[1], strides[1], data[0], strides[0], n, sz);
}

/*
 * The self cast's loop.  NumPy copies our arrays through it (layout changes,
 * buffers) and calls it once for every run of True of a masked assignment
 * (`a[mask] = 0`, `np.copyto(..., where=)`, `np.putmask`): runs of one or two
 * codes, where finding the formats and byte orders each call cost more than
 * the move (a[mask] = 0 of (4096, 4096) bfloat16 with a random mask: uint16's
 * 56 ms, ours 72-130).  A same-format copy in the native byte order is
 * chosen once here: a loop that only moves codes.
 */
static int
copy_codes2(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
            npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *NPY_UNUSED(aux))
{
    copy_codes(data, dimensions, strides, 2);
    return 0;
}

static int
copy_codes1(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
            npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *NPY_UNUSED(aux))
{
    copy_codes(data, dimensions, strides, 1);
    return 0;
}

static int
get_loop_self(PyArrayMethod_Context *context, int NPY_UNUSED(aligned),
              int NPY_UNUSED(move_references), const npy_intp *NPY_UNUSED(strides),
              PyArrayMethod_StridedLoop **out_loop, NpyAuxData **out_transferdata,
              NPY_ARRAYMETHOD_FLAGS *flags)
{
    PyArray_Descr *d0 = context->descriptors[0], *d1 = context->descriptors[1];
    const mf_format *fa = format_of_descr(d0), *fb = format_of_descr(d1);
    *out_transferdata = NULL;
    if (fa != NULL && fa == fb && mf_descr_swapped(d0) == mf_descr_swapped(d1)
            && (fa->itemsize == 1 || fa->itemsize == 2)) {
        *out_loop = fa->itemsize == 2 ? copy_codes2 : copy_codes1;
        *flags = NPY_METH_SUPPORTS_UNALIGNED | NPY_METH_NO_FLOATINGPOINT_ERRORS;
        return 0;
    }
    /* a rounding cast (another format) may overflow: NumPy checks the flags */
    *out_loop = cast_mf_to_mf;
    *flags = NPY_METH_SUPPORTS_UNALIGNED;
    return 0;
}

/* the native-byte-order version of a builtin descriptor (NumPy adds the
 * byte swap around the loop) */
static PyArray_Descr *
canonical_descr(PyArray_Descr *d)
{
    int id = mf_dtype_index(NPY_DTYPE(d));
    if (id >= 0 && mf_descr_swapped(d)) {
        /* ours in the other byte order: the self cast swaps around the loop */
        Py_INCREF(mf_singletons[id]);
        return mf_singletons[id];
    }
    if (PyArray_ISNBO(d->byteorder) || d->byteorder == '|') {
        Py_INCREF(d);
        return d;
    }
    return PyArray_DescrNewByteorder(d, NPY_NATIVE);
}

static NPY_CASTING
resolve_mf_to_mf(struct PyArrayMethodObject_tag *NPY_UNUSED(self), PyArray_DTypeMeta *const dtypes[2],
                 PyArray_Descr *const given_descrs[2], PyArray_Descr *loop_descrs[2],
                 npy_intp *view_offset)
{
    if (dtypes[0] == dtypes[1]) {
        /* the self cast: a copy, byte-swapping between byte orders */
        Py_INCREF(given_descrs[0]);
        loop_descrs[0] = given_descrs[0];
        if (given_descrs[1] == NULL) {
            loop_descrs[1] = canonical_descr(given_descrs[0]);
        }
        else {
            Py_INCREF(given_descrs[1]);
            loop_descrs[1] = given_descrs[1];
        }
        if (loop_descrs[0]->elsize > 1 && loop_descrs[0]->byteorder != loop_descrs[1]->byteorder
                && (mf_descr_swapped(loop_descrs[0]) || mf_descr_swapped(loop_descrs[1]))) {
            return NPY_EQUIV_CASTING;
        }
        *view_offset = 0;
        return NPY_NO_CASTING;
    }
    loop_descrs[0] = canonical_descr(given_descrs[0]);
    if (given_descrs[1] == NULL) {
        loop_descrs[1] = PyArray_GetDefaultDescr(dtypes[1]);
    }
    else {
        loop_descrs[1] = canonical_descr(given_descrs[1]);
    }
    const mf_format *fa = format_of_descr(loop_descrs[0]);
    const mf_format *fb = format_of_descr(loop_descrs[1]);
    if (fa == NULL || fb == NULL) {
        /* an ml_dtypes DType whose link failed part way (neighbours.c):
         * the cast was registered, the format it stands for was dropped */
        PyErr_Format(PyExc_TypeError,
                     "Cannot cast array data from %R to %R: minifloat's link to ml_dtypes "
                     "failed (see the RuntimeWarning at import); cast through float32",
                     loop_descrs[0], loop_descrs[1]);
        Py_CLEAR(loop_descrs[0]);
        Py_CLEAR(loop_descrs[1]);
        return -1;
    }
    if (fa == fb) {
        return NPY_SAFE_CASTING;     /* ml_dtypes' array of the same format */
    }
    return casting_between_ranks(mf_format_casts_safely(fa, fb),
                                 kind_rank_format(fa), kind_rank_format(fb));
}

/* --------------------------------------------------- resolve / get_loop */

/* a NumPy source (native byte order) into a minifloat target (its
 * singleton unless given) */
static int
descrs_into_format(PyArray_DTypeMeta *const dtypes[2], PyArray_Descr *const given_descrs[2],
                   PyArray_Descr *loop_descrs[2])
{
    loop_descrs[0] = canonical_descr(given_descrs[0]);
    if (loop_descrs[0] == NULL) {
        return -1;
    }
    if (given_descrs[1] == NULL) {
        loop_descrs[1] = PyArray_GetDefaultDescr(dtypes[1]);
    }
    else {
        loop_descrs[1] = canonical_descr(given_descrs[1]);
    }
    return 0;
}

static NPY_CASTING
resolve_builtin_to_mf(struct PyArrayMethodObject_tag *NPY_UNUSED(self), PyArray_DTypeMeta *const dtypes[2],
                      PyArray_Descr *const given_descrs[2], PyArray_Descr *loop_descrs[2],
                      npy_intp *NPY_UNUSED(view_offset))
{
    if (descrs_into_format(dtypes, given_descrs, loop_descrs) < 0) {
        return -1;
    }
    int type_num = dtypes[0]->type_num;
    const mf_format *f = mf_descr_format(loop_descrs[1]);
    return casting_between_ranks(mf_builtin_safe_to_format(type_num, f),
                                 kind_rank_builtin(type_num), kind_rank_format(f));
}

static NPY_CASTING
resolve_mf_to_builtin(struct PyArrayMethodObject_tag *NPY_UNUSED(self), PyArray_DTypeMeta *const dtypes[2],
                      PyArray_Descr *const given_descrs[2], PyArray_Descr *loop_descrs[2],
                      npy_intp *NPY_UNUSED(view_offset))
{
    loop_descrs[0] = canonical_descr(given_descrs[0]);
    if (given_descrs[1] == NULL) {
        loop_descrs[1] = PyArray_GetDefaultDescr(dtypes[1]);
    }
    else {
        loop_descrs[1] = canonical_descr(given_descrs[1]);
    }
    if (loop_descrs[1] == NULL) {
        Py_DECREF(loop_descrs[0]);
        return -1;
    }
    int type_num = dtypes[1]->type_num;
    const mf_format *f = mf_descr_format(loop_descrs[0]);
    return casting_between_ranks(mf_format_safe_to_builtin(f, type_num),
                                 kind_rank_format(f), kind_rank_builtin(type_num));
}

/* complex -> minifloat: warn like NumPy's complex -> real casts */
static int
get_loop_complex_to_mf(PyArrayMethod_Context *context, int NPY_UNUSED(aligned),
                       int NPY_UNUSED(move_references), const npy_intp *NPY_UNUSED(strides),
                       PyArrayMethod_StridedLoop **out_loop, NpyAuxData **out_transferdata,
                       NPY_ARRAYMETHOD_FLAGS *flags)
{
    if (PyErr_WarnEx(mf_ComplexWarning,
                     "Casting complex values to real discards the imaginary part", 1) < 0) {
        return -1;
    }
    switch (context->descriptors[0]->type_num) {
        case NPY_CFLOAT: *out_loop = cast_CFLOAT_to_mf; break;
        case NPY_CDOUBLE: *out_loop = cast_CDOUBLE_to_mf; break;
        default: *out_loop = cast_CLONGDOUBLE_to_mf; break;
    }
    *out_transferdata = NULL;
    *flags = NPY_METH_SUPPORTS_UNALIGNED;
    return 0;
}

/* ------------------------------------------------------- str and bytes */

static NPY_CASTING
resolve_string_to_mf(struct PyArrayMethodObject_tag *NPY_UNUSED(self), PyArray_DTypeMeta *const dtypes[2],
                     PyArray_Descr *const given_descrs[2], PyArray_Descr *loop_descrs[2],
                     npy_intp *NPY_UNUSED(view_offset))
{
    if (descrs_into_format(dtypes, given_descrs, loop_descrs) < 0) {
        return -1;
    }
    return NPY_UNSAFE_CASTING;
}

static int
string_to_mf_loop(PyArrayMethod_Context *context, char *const data[],
                  npy_intp const dimensions[], npy_intp const strides[],
                  NpyAuxData *NPY_UNUSED(aux))
{
    PyArray_Descr *sd = context->descriptors[0];
    const mf_format *f = mf_descr_format(context->descriptors[1]);
    int is_unicode = sd->type_num == NPY_UNICODE;
    npy_intp elsize = sd->elsize;
    npy_intp n = dimensions[0];
    const char *in = data[0];
    char *out = data[1];
    mf_write_epoch++;
    for (npy_intp i = 0; i < n; i++, in += strides[0], out += strides[1]) {
        PyObject *s;
        if (is_unicode) {
            npy_intp len = elsize / 4;
            Py_UCS4 buf[256];
            Py_UCS4 *chars = len <= 256 ? buf : PyMem_Malloc(len * sizeof(Py_UCS4));
            if (chars == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            memcpy(chars, in, len * sizeof(Py_UCS4));
            while (len > 0 && chars[len - 1] == 0) {
                len--;
            }
            s = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, chars, len);
            if (chars != buf) {
                PyMem_Free(chars);
            }
        }
        else {
            npy_intp len = elsize;
            while (len > 0 && in[len - 1] == 0) {
                len--;
            }
            s = PyBytes_FromStringAndSize(in, len);
        }
        if (s == NULL) {
            return -1;
        }
        uint32_t code;
        int r = mf_code_from_pyobject(f, s, &code);
        Py_DECREF(s);
        if (r < 0) {
            return -1;
        }
        mf_store_code(f, out, code);
    }
    return 0;
}

static NPY_CASTING
resolve_mf_to_string(struct PyArrayMethodObject_tag *NPY_UNUSED(self), PyArray_DTypeMeta *const dtypes[2],
                     PyArray_Descr *const given_descrs[2], PyArray_Descr *loop_descrs[2],
                     npy_intp *NPY_UNUSED(view_offset))
{
    loop_descrs[0] = canonical_descr(given_descrs[0]);
    if (given_descrs[1] == NULL) {
        /* like float32: wide enough for every shortest repr */
        int is_unicode = dtypes[1]->type_num == NPY_UNICODE;
        PyArray_Descr *d = PyArray_DescrNewFromType(is_unicode ? NPY_UNICODE : NPY_STRING);
        if (d == NULL) {
            Py_DECREF(loop_descrs[0]);
            return -1;
        }
        d->elsize = 32 * (is_unicode ? 4 : 1);
        loop_descrs[1] = d;
        return NPY_SAFE_CASTING;
    }
    loop_descrs[1] = canonical_descr(given_descrs[1]);
    if (loop_descrs[1] == NULL) {
        Py_DECREF(loop_descrs[0]);
        return -1;
    }
    int chars = (int)(loop_descrs[1]->elsize / (dtypes[1]->type_num == NPY_UNICODE ? 4 : 1));
    return chars >= 32 ? NPY_SAFE_CASTING : NPY_SAME_KIND_CASTING;
}

static int
mf_to_string_loop(PyArrayMethod_Context *context, char *const data[],
                  npy_intp const dimensions[], npy_intp const strides[],
                  NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    PyArray_Descr *sd = context->descriptors[1];
    int is_unicode = sd->type_num == NPY_UNICODE;
    npy_intp elsize = sd->elsize;
    npy_intp n = dimensions[0];
    const char *in = data[0];
    char *out = data[1];
    for (npy_intp i = 0; i < n; i++, in += strides[0], out += strides[1]) {
        PyObject *scalar = mf_scalar_from_code((int)f->id, mf_load_code(f, in));
        if (scalar == NULL) {
            return -1;
        }
        PyObject *s = PyObject_Str(scalar);
        Py_DECREF(scalar);
        if (s == NULL) {
            return -1;
        }
        memset(out, 0, elsize);
        if (is_unicode) {
            Py_ssize_t len = PyUnicode_GetLength(s);
            npy_intp cap = elsize / 4;
            if (len > cap) {
                len = cap;
            }
            if (PyUnicode_AsUCS4(s, (Py_UCS4 *)out, cap, 0) == NULL && len > 0) {
                /* AsUCS4 fails only when the buffer is short: copy what fits */
                PyErr_Clear();
                for (Py_ssize_t j = 0; j < len; j++) {
                    Py_UCS4 ch = PyUnicode_ReadChar(s, j);
                    memcpy(out + 4 * j, &ch, 4);
                }
            }
        }
        else {
            Py_ssize_t len;
            const char *u = PyUnicode_AsUTF8AndSize(s, &len);
            if (u == NULL) {
                Py_DECREF(s);
                return -1;
            }
            memcpy(out, u, len < elsize ? len : elsize);
        }
        Py_DECREF(s);
    }
    return 0;
}

/* --------------------------------------------------------- the specs */

#define MAX_SPECS 160
static PyArrayMethod_Spec spec_pool[MF_NUM_PUBLIC_FORMATS][MAX_SPECS];
static PyArrayMethod_Spec *spec_ptrs[MF_NUM_PUBLIC_FORMATS][MAX_SPECS + 1];
static PyArray_DTypeMeta *dtype_pairs[MF_NUM_PUBLIC_FORMATS][MAX_SPECS][2];

static PyType_Slot slots_self[] = {
    {NPY_METH_resolve_descriptors, (void *)resolve_mf_to_mf},
    {NPY_METH_get_loop, (void *)get_loop_self},
    {NPY_METH_strided_loop, (void *)cast_mf_to_mf},
    {NPY_METH_unaligned_strided_loop, (void *)cast_mf_to_mf},
    {0, NULL}};

#define SLOTS_TO(NAME, T, CAT)                                           \
    static PyType_Slot slots_##NAME##_to_mf[] = {                        \
        {NPY_METH_resolve_descriptors, (void *)resolve_builtin_to_mf},   \
        {NPY_METH_strided_loop, (void *)cast_##NAME##_to_mf},            \
        {NPY_METH_unaligned_strided_loop, (void *)cast_##NAME##_to_mf},  \
        {0, NULL}};                                                      \
    static PyType_Slot slots_mf_to_##NAME[] = {                          \
        {NPY_METH_resolve_descriptors, (void *)resolve_mf_to_builtin},   \
        {NPY_METH_strided_loop, (void *)cast_mf_to_##NAME},              \
        {NPY_METH_unaligned_strided_loop, (void *)cast_mf_to_##NAME},    \
        {0, NULL}};
MF_BUILTINS(SLOTS_TO)

#define SLOTS_TO_INT(NAME)                                                  \
    static PyType_Slot slots_mf_to_##NAME##_any[] = {                       \
        {NPY_METH_resolve_descriptors, (void *)resolve_mf_to_builtin},      \
        {NPY_METH_strided_loop, (void *)cast_mf_to_##NAME##_any},           \
        {NPY_METH_unaligned_strided_loop, (void *)cast_mf_to_##NAME##_any}, \
        {0, NULL}};
SLOTS_TO_INT(BYTE)
SLOTS_TO_INT(UBYTE)
SLOTS_TO_INT(SHORT)
SLOTS_TO_INT(USHORT)
SLOTS_TO_INT(INT)
SLOTS_TO_INT(UINT)
SLOTS_TO_INT(LONG)
SLOTS_TO_INT(ULONG)
SLOTS_TO_INT(LONGLONG)
SLOTS_TO_INT(ULONGLONG)

static PyType_Slot slots_complex_to_mf[] = {
    {NPY_METH_resolve_descriptors, (void *)resolve_builtin_to_mf},
    {NPY_METH_get_loop, (void *)get_loop_complex_to_mf},
    {0, NULL}};

static PyType_Slot slots_string_to_mf[] = {
    {NPY_METH_resolve_descriptors, (void *)resolve_string_to_mf},
    {NPY_METH_strided_loop, (void *)string_to_mf_loop},
    {NPY_METH_unaligned_strided_loop, (void *)string_to_mf_loop},
    {0, NULL}};

static PyType_Slot slots_mf_to_string[] = {
    {NPY_METH_resolve_descriptors, (void *)resolve_mf_to_string},
    {NPY_METH_strided_loop, (void *)mf_to_string_loop},
    {NPY_METH_unaligned_strided_loop, (void *)mf_to_string_loop},
    {0, NULL}};

static int nspecs[MF_NUM_PUBLIC_FORMATS];

static void
add_spec(int id, const char *name, PyArray_DTypeMeta *from, PyArray_DTypeMeta *to,
         NPY_CASTING casting, NPY_ARRAYMETHOD_FLAGS flags, PyType_Slot *slots)
{
    int k = nspecs[id]++;
    dtype_pairs[id][k][0] = from;
    dtype_pairs[id][k][1] = to;
    spec_pool[id][k] = (PyArrayMethod_Spec){
        .name = name,
        .nin = 1,
        .nout = 1,
        .casting = casting,
        .flags = flags,
        .dtypes = dtype_pairs[id][k],
        .slots = slots,
    };
    spec_ptrs[id][k] = &spec_pool[id][k];
    spec_ptrs[id][k + 1] = NULL;
}

/*
 * The casts of format `id`, for its DType spec.  NULL stands for the new
 * DType itself.  Formats with a smaller id exist already, so the casts
 * between the two are declared here, in both directions.
 */
PyArrayMethod_Spec **
mf_get_cast_specs(int id)
{
    nspecs[id] = 0;
    const NPY_ARRAYMETHOD_FLAGS U = NPY_METH_SUPPORTS_UNALIGNED;
    const NPY_ARRAYMETHOD_FLAGS UN = NPY_METH_SUPPORTS_UNALIGNED | NPY_METH_NO_FLOATINGPOINT_ERRORS;
    add_spec(id, "minifloat_self_cast", NULL, NULL, NPY_NO_CASTING, UN, slots_self);

#define ADD_BUILTIN(NAME, T, CAT)                                                          \
    if (NPY_##NAME == NPY_CFLOAT || NPY_##NAME == NPY_CDOUBLE || NPY_##NAME == NPY_CLONGDOUBLE) { \
        add_spec(id, "complex_to_minifloat", mf_builtin_DType(NPY_##NAME), NULL,              \
                 NPY_UNSAFE_CASTING, U, slots_complex_to_mf);                               \
    }                                                                                       \
    else {                                                                                  \
        add_spec(id, #NAME "_to_minifloat", mf_builtin_DType(NPY_##NAME), NULL,               \
                 NPY_UNSAFE_CASTING, U, slots_##NAME##_to_mf);                              \
    }                                                                                       \
    if (!PyTypeNum_ISINTEGER(NPY_##NAME)) {                                                 \
        /* widening to float32 and wider (and to bool) cannot overflow and,   \
         * like NumPy's float32 -> float64, reports nothing for a signaling   \
         * NaN; to float16 can overflow */                                      \
        add_spec(id, "minifloat_to_" #NAME, NULL, mf_builtin_DType(NPY_##NAME),               \
                 NPY_UNSAFE_CASTING, NPY_##NAME == NPY_HALF ? U : UN, slots_mf_to_##NAME);  \
    }
    MF_BUILTINS(ADD_BUILTIN)
#undef ADD_BUILTIN
    /* to NumPy integers: NumPy's own float32 -> int conversion does the work
     * (and reports its floating-point errors itself) */
    const NPY_ARRAYMETHOD_FLAGS INTF = NPY_METH_SUPPORTS_UNALIGNED | NPY_METH_REQUIRES_PYAPI
                                      | NPY_METH_NO_FLOATINGPOINT_ERRORS;
#define ADD_TO_INT(NAME) \
    add_spec(id, "minifloat_to_" #NAME, NULL, mf_builtin_DType(NPY_##NAME), NPY_UNSAFE_CASTING, \
             INTF, slots_mf_to_##NAME##_any);
    ADD_TO_INT(BYTE) ADD_TO_INT(UBYTE) ADD_TO_INT(SHORT) ADD_TO_INT(USHORT) ADD_TO_INT(INT)
    ADD_TO_INT(UINT) ADD_TO_INT(LONG) ADD_TO_INT(ULONG) ADD_TO_INT(LONGLONG) ADD_TO_INT(ULONGLONG)
#undef ADD_TO_INT

    add_spec(id, "unicode_to_minifloat", mf_builtin_DType(NPY_UNICODE), NULL,
             NPY_UNSAFE_CASTING, NPY_METH_REQUIRES_PYAPI | U, slots_string_to_mf);
    add_spec(id, "bytes_to_minifloat", mf_builtin_DType(NPY_STRING), NULL,
             NPY_UNSAFE_CASTING, NPY_METH_REQUIRES_PYAPI | U, slots_string_to_mf);
    add_spec(id, "minifloat_to_unicode", NULL, mf_builtin_DType(NPY_UNICODE),
             NPY_UNSAFE_CASTING, NPY_METH_REQUIRES_PYAPI | U, slots_mf_to_string);
    add_spec(id, "minifloat_to_bytes", NULL, mf_builtin_DType(NPY_STRING),
             NPY_UNSAFE_CASTING, NPY_METH_REQUIRES_PYAPI | U, slots_mf_to_string);

    for (int other = 0; other < id; other++) {
        add_spec(id, "minifloat_to_minifloat", &mf_dtypes[other], NULL,
                 NPY_UNSAFE_CASTING, U, slots_self);
        add_spec(id, "minifloat_to_minifloat", NULL, &mf_dtypes[other],
                 NPY_UNSAFE_CASTING, U, slots_self);
    }
    /* casts to and from ml_dtypes' arrays are added later, when ml_dtypes is
     * imported (mf_get_ml_cast_specs, neighbours.c) */
    return spec_ptrs[id];
}

/*
 * ml_dtypes' DTypes, from the module object ml_dtypes (which the user
 * imported; minifloat never imports it).  Returns how many formats were
 * found.
 */
int
mf_find_ml_dtypes(PyObject *ml)
{
    int found = 0;
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        PyObject *t = PyObject_GetAttrString(ml, mf_formats[id].name);
        if (t == NULL) {
            PyErr_Clear();
            continue;
        }
        PyArray_Descr *d = NULL;
        if (PyType_Check(t) && PyArray_DescrConverter(t, &d) && d != NULL
                && d->elsize == mf_formats[id].itemsize && mf_dtype_index(NPY_DTYPE(d)) < 0) {
            mf_ml_dtypes[id] = NPY_DTYPE(d);
            Py_INCREF(mf_ml_dtypes[id]);
            found++;
        }
        else {
            PyErr_Clear();
        }
        Py_XDECREF(d);
        Py_DECREF(t);
    }
    return found;
}

/*
 * The casts between every ml_dtypes DType found and every minifloat DType,
 * both ways: the codes are the same, so the minifloat <-> minifloat loop
 * does the work (format_of_descr knows ml_dtypes' descriptors).  dtypes are
 * all given (no NULL): neighbours.c registers them after both sides exist.
 */
static PyArrayMethod_Spec ml_spec_pool[2 * MF_NUM_PUBLIC_FORMATS * MF_NUM_PUBLIC_FORMATS];
static PyArrayMethod_Spec *ml_spec_ptrs[2 * MF_NUM_PUBLIC_FORMATS * MF_NUM_PUBLIC_FORMATS + 1];
static PyArray_DTypeMeta *ml_dtype_pairs[2 * MF_NUM_PUBLIC_FORMATS * MF_NUM_PUBLIC_FORMATS][2];

PyArrayMethod_Spec **
mf_get_ml_cast_specs(void)
{
    int k = 0;
    for (int ml = 0; ml < MF_NUM_PUBLIC_FORMATS; ml++) {
        if (mf_ml_dtypes[ml] == NULL) {
            continue;
        }
        for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
            for (int dir = 0; dir < 2; dir++) {
                ml_dtype_pairs[k][dir] = mf_ml_dtypes[ml];
                ml_dtype_pairs[k][1 - dir] = &mf_dtypes[id];
                ml_spec_pool[k] = (PyArrayMethod_Spec){
                    .name = dir == 0 ? "ml_dtypes_to_minifloat" : "minifloat_to_ml_dtypes",
                    .nin = 1,
                    .nout = 1,
                    .casting = NPY_UNSAFE_CASTING,
                    .flags = NPY_METH_SUPPORTS_UNALIGNED,
                    .dtypes = ml_dtype_pairs[k],
                    .slots = slots_self,
                };
                ml_spec_ptrs[k] = &ml_spec_pool[k];
                k++;
            }
        }
    }
    ml_spec_ptrs[k] = NULL;
    return ml_spec_ptrs;
}
