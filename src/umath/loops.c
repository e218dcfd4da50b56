/*
 * The strided loops behind every minifloat ufunc loop (see umath.h).
 */
#include <float.h>
#include <math.h>
#include "umath.h"
#include "../kernels/scalar_ops.h"
#include "../kernels/nan_order.h"
#include "../kernels/parallel.h"
#include "../kernels/stream/argkey.h"

#define BLOCK 512

PyUFuncGenericFunction mf_f32_fns[128];
void *mf_f32_data[128];

/* ------------------------------------------------------------ helpers */

static inline int
is_contig_aligned(const char *p, npy_intp stride, npy_intp itemsize)
{
    return stride == itemsize && ((uintptr_t)p % (uintptr_t)itemsize) == 0;
}

/* decode n codes at p (stride s) into dst: one code repeated (a scalar
 * operand, stride 0) decoded once, other strides gathered into a block for
 * the level's decode (mf_dec_code decodes as the kernels do).  Decoded one
 * at a time, `x >= x[0, 0]` of (4096, 4096) bfloat16 took 15.9 ms against
 * 3.8 ms for `x >= 0.5` (the float64 comparison loop) */
static inline void
decode_block(const mf_format *f, const char *p, npy_intp s, float *dst, npy_intp n)
{
    if (is_contig_aligned(p, s, f->itemsize)) {
        mf_k->decode_f32(f, p, dst, n);
        return;
    }
    if (s == 0) {
        const float v = mf_dec_code(f, mf_load_code(f, p));
        for (npy_intp i = 0; i < n; i++) {
            dst[i] = v;
        }
        return;
    }
    char codes[BLOCK * 2];
    for (npy_intp i = 0; i < n; i += BLOCK) {
        const npy_intp len = n - i < BLOCK ? n - i : BLOCK;
        mf_move_codes(codes, f->itemsize, p + i * s, s, len, f->itemsize);
        mf_k->decode_f32(f, codes, dst + i, len);
    }
}

/* round n float32 values into codes at p (stride s) */
static inline void
encode_block(const mf_format *f, const float *src, char *p, npy_intp s, npy_intp n)
{
    if (is_contig_aligned(p, s, f->itemsize)) {
        mf_k->encode_f32(f, src, p, n);
        return;
    }
    int ovf = 0;
    for (npy_intp i = 0; i < n; i++, p += s) {
        mf_store_code(f, p, mf_enc1_ovf(f, src[i], &ovf));
    }
    if (ovf) {
        mf_raise_overflow();
    }
}

static int
sig_nin(const char *sig)
{
    return (int)(strchr(sig, '-') - sig);
}

/* ----------------------------------------------- the NumPy float32 loop */

static inline void
call_f32(const mf_loop_aux *aux, char **args, npy_intp n, npy_intp *steps)
{
    aux->f32fn(args, &n, steps, aux->f32data);
}

/*
 * The elementwise path works on blocks of EW_BLOCK elements: the operands of
 * a block are widened into float32 buffers that stay in the L1/L2 cache,
 * NumPy's float32 loop runs on them, and the results are rounded once into
 * the output.  Three calls per block (decode, NumPy's loop, encode): 2048
 * elements took 10% less time than 512 for exp, log and tanh of bfloat16 on
 * one Cascade Lake core, and 4096 no less (docs/design.md).  Up to 4 float32
 * buffers (clip) and one integer buffer (frexp, ldexp): 48 KiB of stack.
 */
#define EW_BLOCK 2048

/*
 * One block of a general elementwise call: operands may be minifloat (decoded
 * into float32 buffers), bool (passed through), or C ints (copied through
 * an aligned buffer; a signature has at most one).
 */
static void
via_f32_block(const mf_loop_aux *aux, int nin, int nargs, char *const data[],
              const npy_intp strides[], npy_intp start, npy_intp len)
{
    const mf_format *f = aux->fmt;
    const char *sig = aux->def->sig;
    float fbuf[4][EW_BLOCK];
    int64_t ibuf[EW_BLOCK];
    char *args[4];
    npy_intp steps[4];
    for (int k = 0; k < nargs; k++) {
        char t = sig[k < nin ? k : k + 2];      /* skip "->" */
        char *p = data[k] + start * strides[k];
        if (t == 'M') {
            if (k < nin) {
                decode_block(f, p, strides[k], fbuf[k], len);
            }
            args[k] = (char *)fbuf[k];
            steps[k] = sizeof(float);
        }
        else if (t == '?') {
            args[k] = p;
            steps[k] = strides[k];
        }
        else {
            size_t isz = (t == 'i') ? sizeof(int) : sizeof(long);
            if (k < nin) {
                for (npy_intp i = 0; i < len; i++) {
                    memcpy((char *)ibuf + i * isz, p + i * strides[k], isz);
                }
            }
            args[k] = (char *)ibuf;
            steps[k] = (npy_intp)isz;
        }
    }
    call_f32(aux, args, len, steps);
    for (int k = nin; k < nargs; k++) {
        char t = sig[k + 2];
        char *p = data[k] + start * strides[k];
        if (t == 'M') {
            encode_block(f, fbuf[k], p, strides[k], len);
        }
        else if (t == 'i' || t == 'l') {
            size_t isz = (t == 'i') ? sizeof(int) : sizeof(long);
            for (npy_intp i = 0; i < len; i++) {
                memcpy(p + i * strides[k], (char *)ibuf + i * isz, isz);
            }
        }
    }
}

typedef struct {
    const mf_loop_aux *aux;
    int nin, nargs;
    char *const *data;
    const npy_intp *strides;
} ew_job;

/* elements [start, start + len) of an elementwise call, block by block */
static void
ew_range(void *ctx, mf_intp start, mf_intp len)
{
    const ew_job *J = (const ew_job *)ctx;
    for (npy_intp s = start; s < start + len; s += EW_BLOCK) {
        npy_intp l = start + len - s < EW_BLOCK ? start + len - s : EW_BLOCK;
        via_f32_block(J->aux, J->nin, J->nargs, J->data, J->strides, s, l);
    }
}

/* the bytes [lo, hi) that n elements at p with stride s touch */
static void
extent(const char *p, npy_intp s, npy_intp n, npy_intp size, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)(p + (n - 1) * s);
    *lo = a < b ? a : b;
    *hi = (a < b ? b : a) + (uintptr_t)size;
}

static npy_intp
operand_size(const mf_format *f, char t)
{
    switch (t) {
        case 'M': return f->itemsize;
        case '?': return 1;
        case 'i': return sizeof(int);
        case 'l': return sizeof(long);
        default: return 8;
    }
}

/*
 * Whether elements may be computed in any order: every output either shares
 * no byte with any other operand or is exactly an input (the same address
 * and stride: an in-place call).  NumPy copies operands that overlap
 * otherwise before calling a loop, except in the inner loops of reductions
 * and accumulations, which the callers recognise first; this keeps anything
 * else on the sequential path.
 */
static int
independent_elements(const mf_loop_aux *aux, int nin, int nargs, char *const data[],
                     const npy_intp strides[], npy_intp n)
{
    const char *sig = aux->def->sig;
    for (int k = nin; k < nargs; k++) {
        uintptr_t klo, khi;
        extent(data[k], strides[k], n, operand_size(aux->fmt, sig[k + 2]), &klo, &khi);
        for (int j = 0; j < nargs; j++) {
            if (j == k) {
                continue;
            }
            uintptr_t jlo, jhi;
            extent(data[j], strides[j], n, operand_size(aux->fmt, sig[j < nin ? j : j + 2]),
                   &jlo, &jhi);
            if (jhi <= klo || khi <= jlo) {
                continue;
            }
            if (j < nin && data[j] == data[k] && strides[j] == strides[k]
                    && sig[j] == sig[k + 2]) {
                continue;
            }
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------ unary ufuncs by table */

/*
 * A unary ufunc of a format of at most 16 bits is a function of the stored
 * code: for large calls its results for every code are computed once, by
 * the path above (decode, NumPy's float32 loop, one rounding), and kept, so
 * that every later element is a table look-up: the same bits by
 * construction, and less work than NumPy's float32 loop for any ufunc but
 * the sign operations (docs/design.md).
 *
 * Floating-point errors stay NumPy's: the codes whose computation raises a
 * flag (exp's overflow, log of a negative, sqrt of -1, a signalling NaN)
 * are found when the table is made, each computed alone, and their flags
 * kept next to the result; a call raises the flags of the codes it met.
 * The table holds the results of round-to-nearest without flush-to-zero;
 * in any other floating-point mode the direct path runs.
 */

/* entry c: the result's code, and in bits 16-19 the floating-point flags
 * that computing code c raises (one load per element tells both) */
typedef uint32_t mf_lut;
#define LUT_FLAGS (FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)

uint32_t
mf_lut_flag_bits(int fe)
{
    return ((fe & FE_DIVBYZERO) ? 1u << 16 : 0) | ((fe & FE_OVERFLOW) ? 1u << 17 : 0)
           | ((fe & FE_UNDERFLOW) ? 1u << 18 : 0) | ((fe & FE_INVALID) ? 1u << 19 : 0);
}

int
mf_lut_fe(uint32_t bits)
{
    return ((bits & (1u << 16)) ? FE_DIVBYZERO : 0) | ((bits & (1u << 17)) ? FE_OVERFLOW : 0)
           | ((bits & (1u << 18)) ? FE_UNDERFLOW : 0) | ((bits & (1u << 19)) ? FE_INVALID : 0);
}

#define LUT_DEFS 128
static mf_lut *luts[LUT_DEFS][MF_NUM_FORMATS];

/* run the direct path on codes [start, start + len) into `res`; the flags */
static int
lut_compute(const mf_loop_aux *aux, char *codes, char *res, npy_intp start, npy_intp len)
{
    npy_intp sz = aux->fmt->itemsize;
    char *data[2] = {codes, res};
    npy_intp strides[2] = {sz, sz};
    feclearexcept(FE_ALL_EXCEPT);
    via_f32_block(aux, 1, 2, data, strides, start, len);
    return fetestexcept(LUT_FLAGS);
}

/* the flags of each code of a block that raised some: each code alone,
 * the flags cleared only after one raised some (clearing costs more than
 * the code); the same decode, float32 loop and rounding (the serial form,
 * bit-identical at every level, overflow included) */
/* the flags raised so far and by one code computed alone: decode, NumPy's
 * loop on one element, the serial rounding with its overflow test.  spos <
 * 0: a unary call; else a binary one with the scalar s in operand place
 * spos (scalar_lut_build) */
static int
one_code_flags(const mf_loop_aux *aux, int spos, float s, uint32_t code)
{
    const mf_format *f = aux->fmt;
    float v[2], r;
    const int k = spos < 0 ? 0 : 1 - spos;
    v[k] = mf_dec_code(f, code);
    if (spos >= 0) {
        v[spos] = s;
    }
    char *args[3] = {(char *)&v[0], (char *)&v[1], (char *)&r};
    npy_intp steps[3] = {sizeof(float), sizeof(float), sizeof(float)};
    if (spos < 0) {
        args[1] = (char *)&r;
    }
    call_f32(aux, args, 1, steps);
    int ovf = 0;
    (void)mf_enc1_ovf(f, r, &ovf);
    return fetestexcept(LUT_FLAGS) | (ovf ? FE_OVERFLOW : 0);
}

static void
lut_flags(const mf_loop_aux *aux, const char *codes, npy_intp start, npy_intp len, mf_lut *L)
{
    const mf_format *f = aux->fmt;
    npy_intp sz = f->itemsize;
    feclearexcept(FE_ALL_EXCEPT);
    for (npy_intp c = start; c < start + len; c++) {
        int fe = one_code_flags(aux, -1, 0.0f, mf_load_code(f, codes + c * sz));
        if (fe) {
            L[c] = mf_lut_flag_bits(fe);
            feclearexcept(FE_ALL_EXCEPT);
        }
    }
}

char *
mf_every_code(npy_intp sz)
{
    const npy_intp ncodes = (npy_intp)1 << (8 * sz);
    char *codes = (char *)malloc((size_t)(ncodes * sz));
    for (npy_intp c = 0; codes != NULL && c < ncodes; c++) {
        if (sz == 2) {
            ((uint16_t *)codes)[c] = (uint16_t)c;
        }
        else {
            ((uint8_t *)codes)[c] = (uint8_t)c;
        }
    }
    return codes;
}

/* a zeroed table of every code of size sz, every code in order, and room
 * for their results; 0 (nothing allocated) if there is no memory */
static int
lut_buffers(npy_intp sz, mf_lut **L, char **codes, char **res)
{
    const npy_intp ncodes = (npy_intp)1 << (8 * sz);
    *L = (mf_lut *)calloc((size_t)ncodes, sizeof(mf_lut));
    *codes = mf_every_code(sz);
    *res = (char *)malloc((size_t)(ncodes * sz));
    if (*L == NULL || *codes == NULL || *res == NULL) {
        free(*L);
        free(*codes);
        free(*res);
        return 0;
    }
    return 1;
}

static mf_lut *
lut_build(const mf_loop_aux *aux)
{
    npy_intp sz = aux->fmt->itemsize, ncodes = (npy_intp)1 << (8 * sz);
    mf_lut *L;
    char *codes, *res;
    if (!lut_buffers(sz, &L, &codes, &res)) {
        return NULL;
    }
    /* the caller's flags are kept aside: the table's making raises none */
    fenv_t saved;
    feholdexcept(&saved);
    for (npy_intp c = 0; c < ncodes; c += EW_BLOCK) {
        npy_intp len = ncodes - c < EW_BLOCK ? ncodes - c : EW_BLOCK;
        if (lut_compute(aux, codes, res, c, len)) {
            lut_flags(aux, codes, c, len, L);
        }
    }
    fesetenv(&saved);
    for (npy_intp c = 0; c < ncodes; c++) {
        L[c] |= sz == 2 ? ((uint16_t *)res)[c] : ((uint8_t *)res)[c];
    }
    free(codes);
    free(res);
    return L;
}

/* round-to-nearest and no flush of subnormals (inputs or results) to zero:
 * the mode the tables are made and valid in */
int
mf_default_fp_mode(void)
{
    if (fegetround() != FE_TONEAREST) {
        return 0;
    }
    fexcept_t flags;
    fegetexceptflag(&flags, FE_ALL_EXCEPT);
    volatile float sub = 1e-40f, one = 1.0f, mn = FLT_MIN, half = 0.5f;
    int ok = sub * one != 0.0f && mn * half != 0.0f;
    fesetexceptflag(&flags, FE_ALL_EXCEPT);
    return ok;
}

/* elements of large calls computed the direct way, per ufunc and format */
static npy_intp lut_direct[LUT_DEFS][MF_NUM_FORMATS];

/*
 * The table of a unary call of n elements, or NULL.  Calls of at least 4
 * elements per code use one; it is made once the large calls of that ufunc
 * and format have brought 256 elements per code (2^24 for bfloat16, that
 * call included): making it costs about half of computing that many (the
 * codes that raise a flag, up to half of them, are each computed alone,
 * 10 ms for bfloat16 on one Cascade Lake core), so the work done before it
 * pays for it, and every later call gains.  Kept for the life of the
 * process (256 KiB per ufunc and 16-bit format, 1 KiB for 8 bits).
 */
static const mf_lut *
lut_for(const mf_loop_aux *aux, int def_index, npy_intp n)
{
    const mf_format *f = aux->fmt;
    int bits = 8 * f->itemsize;
    if (f->itemsize > 2 || def_index < 0 || def_index >= LUT_DEFS
            || n < ((npy_intp)4 << bits) || !mf_default_fp_mode()) {
        return NULL;
    }
    mf_lut **slot = &luts[def_index][f->id];
    mf_lut *L = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (L != NULL) {
        return L;
    }
    npy_intp *done = &lut_direct[def_index][f->id];
    if (__atomic_add_fetch(done, n, __ATOMIC_RELAXED) < ((npy_intp)256 << bits)) {
        return NULL;
    }
    L = lut_build(aux);
    if (L == NULL) {
        return NULL;
    }
    mf_lut *expected = NULL;
    if (!__atomic_compare_exchange_n(slot, &expected, L, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(L);                    /* another thread made it first */
        L = expected;
    }
    return L;
}

typedef struct {
    const mf_loop_aux *aux;
    const mf_lut *lut;
    char *const *data;
    const npy_intp *strides;
} lut_job;

/* out = table[in], and the or of the entries met (their flags) */
#define LUT_LOOKUP(T)                                                                     \
    if (is == (npy_intp)sizeof(T) && os == (npy_intp)sizeof(T)) {                         \
        const T *a = (const T *)in;                                                       \
        T *o = (T *)out;                                                                  \
        for (npy_intp i = 0; i < len; i++) {                                              \
            mf_lut v = lut[a[i]];                                                         \
            hit |= v;                                                                     \
            o[i] = (T)v;                                                                  \
        }                                                                                 \
    }                                                                                     \
    else {                                                                                \
        const char *p = in;                                                               \
        char *q = out;                                                                    \
        for (npy_intp i = 0; i < len; i++, p += is, q += os) {                            \
            mf_lut v = lut[*(const T *)p];                                                \
            hit |= v;                                                                     \
            *(T *)q = (T)v;                                                               \
        }                                                                                 \
    }

/* contiguous 8-bit codes through a table by the level's lut8 kernel (a
 * byte permute of 64 or 32 codes at a time where the level has one): the
 * entries' codes and flags packed into 16 bits; the flags of the entries
 * met are raised */
static void
lut8_run(const mf_lut *L, const uint8_t *in, uint8_t *out, npy_intp len)
{
    uint16_t t[256];
    for (int c = 0; c < 256; c++) {
        t[c] = (uint16_t)((L[c] & 0xFFu) | (((L[c] >> 16) & 0xFu) << 8));
    }
    const uint32_t fl = mf_k->lut8(in, out, t, len);
    if (fl) {
        feraiseexcept(mf_lut_fe(fl << 16));
    }
}

/* elements [start, start + len) of a unary call by table; the flags of the
 * codes met are raised (on this thread: a worker's reach the caller) */
static void
lut_range(void *ctx, mf_intp start, mf_intp len)
{
    const lut_job *J = (const lut_job *)ctx;
    const mf_lut *lut = J->lut;
    npy_intp is = J->strides[0], os = J->strides[1];
    const char *in = J->data[0] + start * is;
    char *out = J->data[1] + start * os;
    if (J->aux->fmt->itemsize == 1 && is == 1 && os == 1) {
        lut8_run(lut, (const uint8_t *)in, (uint8_t *)out, len);
        return;
    }
    mf_lut hit = 0;
    if (J->aux->fmt->itemsize == 2) {
        LUT_LOOKUP(uint16_t)
    }
    else {
        LUT_LOOKUP(uint8_t)
    }
    if (hit >> 16) {
        feraiseexcept(mf_lut_fe(hit));
    }
}

/*
 * A binary call of a float format with one operand a scalar and the other a
 * large array (x ** 2.2, np.fmod(x, 0.7), np.logaddexp(x, 0), np.hypot(x,
 * 1)): the result of every code with that scalar is made into a table for
 * this call by the float32 route itself (NumPy's float32 loop on blocks of
 * EW_BLOCK codes, the scalar decoded into a whole buffer as via_f32_block
 * does for a stride of 0), and the array is looked up in it: the same bits
 * and flags as the route, element for element.  The codes of a block that
 * raised a flag are marked SLUT_UNKNOWN; the first look-up that meets such
 * a code finds its flags (the code alone, as lut_flags does) and stores
 * them in the entry, so that only codes the data holds cost that (~100 ns
 * each; x ** 2.2 has every negative code raise "invalid").  Entries are read
 * and written with relaxed atomics (two threads may both find a code's
 * flags: the same value).  Not kept after the call.  Used for calls of at
 * least 32 elements a code for the 8-bit formats (8192: a table of 256 codes
 * costs next to nothing) and 256 for the 16-bit ones (2^24): a table of
 * 65536 codes costs 2-8 ms on Zen 4 (NumPy's AVX-512 power runs a slow
 * path for the NaN, inf, negative and overflowing codes), about what
 * computing 2^24 elements of a cheap ufunc costs (copysign, power: 10-17
 * ms at two threads; by table 10-16), where libm's fmod, logaddexp and
 * hypot took 38-162 ms (by table 9.5-12).
 */
#define SLUT_UNKNOWN (1u << 20)

typedef struct {
    const mf_loop_aux *aux;
    mf_lut *lut;
    const char *in;
    char *out;
    npy_intp is, os;
    int spos;           /* the scalar's operand place, 0 or 1 */
    float s;            /* its value */
} slut_job;

/* the flags of `code` with the scalar s in operand place spos, the code
 * alone (as lut_flags finds a unary code's) */
static int
scalar_code_flags(const mf_loop_aux *aux, int spos, float s, uint32_t code)
{
    feclearexcept(FE_ALL_EXCEPT);
    return one_code_flags(aux, spos, s, code);
}

/* the entry of `code` with its own flags, stored in the table */
static mf_lut
slut_resolve(const slut_job *J, uint32_t code)
{
    const int fe = scalar_code_flags(J->aux, J->spos, J->s, code);
    mf_lut e = (__atomic_load_n(&J->lut[code], __ATOMIC_RELAXED) & 0xFFFFu) | mf_lut_flag_bits(fe);
    __atomic_store_n(&J->lut[code], e, __ATOMIC_RELAXED);
    return e;
}

/* the table's fields in locals: a store through out could otherwise be
 * taken to change them, and they were reloaded every element */
#define SLUT_LOOKUP(T)                                                                    \
    {                                                                                     \
        const T *a = (const T *)in;                                                       \
        T *o = (T *)out;                                                                  \
        const npy_intp sa = is / (npy_intp)sizeof(T), so = os / (npy_intp)sizeof(T);      \
        for (npy_intp i = 0; i < len; i++) {                                              \
            const T c = a[i * sa];                                                        \
            mf_lut v = __atomic_load_n(&lut[c], __ATOMIC_RELAXED);                        \
            if (v & SLUT_UNKNOWN) {                                                       \
                if (!held) {                                                              \
                    feholdexcept(&saved); /* finding flags raises none of its own */      \
                    held = 1;                                                             \
                }                                                                         \
                v = slut_resolve(J, c);                                                   \
            }                                                                             \
            hit |= v;                                                                     \
            o[i * so] = (T)v;                                                             \
        }                                                                                 \
    }

/* elements [start, start + len) of a call with a scalar, by its table; the
 * flags of the codes met are raised, as lut_range does */
static void
slut_range(void *ctx, mf_intp start, mf_intp len)
{
    const slut_job *J = (const slut_job *)ctx;
    mf_lut *const lut = J->lut;
    const npy_intp is = J->is, os = J->os;
    const char *in = J->in + start * is;
    char *out = J->out + start * os;
    if (J->aux->fmt->itemsize == 1 && is == 1 && os == 1) {
        /* an 8-bit table has no unknown flags (scalar_lut_build) */
        lut8_run(lut, (const uint8_t *)in, (uint8_t *)out, len);
        return;
    }
    mf_lut hit = 0;
    int held = 0;
    fenv_t saved;
    if (J->aux->fmt->itemsize == 2) {
        SLUT_LOOKUP(uint16_t)
    }
    else {
        SLUT_LOOKUP(uint8_t)
    }
    if (held) {
        fesetenv(&saved);
    }
    if (hit & 0xF0000u) {
        feraiseexcept(mf_lut_fe(hit));
    }
}
#undef SLUT_LOOKUP

/* the table of every code with the scalar at `scalar` in operand place
 * spos (flags SLUT_UNKNOWN where a block raised some), or NULL (no memory) */
static mf_lut *
scalar_lut_build(const mf_loop_aux *aux, int spos, const char *scalar)
{
    const mf_format *f = aux->fmt;
    npy_intp sz = f->itemsize, ncodes = (npy_intp)1 << (8 * sz);
    mf_lut *L;
    char *codes, *res;
    if (!lut_buffers(sz, &L, &codes, &res)) {
        return NULL;
    }
    char *data[3];
    npy_intp strides[3] = {sz, sz, sz};
    data[spos] = (char *)scalar;
    strides[spos] = 0;
    data[1 - spos] = codes;
    data[2] = res;
    /* the caller's flags are kept aside: the table's making raises none */
    fenv_t saved;
    feholdexcept(&saved);
    for (npy_intp c = 0; c < ncodes; c += EW_BLOCK) {
        npy_intp len = ncodes - c < EW_BLOCK ? ncodes - c : EW_BLOCK;
        feclearexcept(FE_ALL_EXCEPT);
        via_f32_block(aux, 2, 3, data, strides, c, len);
        const mf_lut mark = fetestexcept(LUT_FLAGS) ? SLUT_UNKNOWN : 0;
        for (npy_intp k = c; k < c + len; k++) {
            L[k] = mark | (sz == 2 ? ((uint16_t *)res)[k] : ((uint8_t *)res)[k]);
        }
    }
    if (sz == 1) {
        /* 256 codes: their flags now, so that the look-up needs none */
        const float s = mf_dec_code(f, mf_load_code(f, scalar));
        for (npy_intp c = 0; c < ncodes; c++) {
            if (L[c] & SLUT_UNKNOWN) {
                L[c] = (L[c] & 0xFFFFu) | mf_lut_flag_bits(scalar_code_flags(aux, spos, s, (uint32_t)c));
            }
        }
    }
    fesetenv(&saved);
    free(codes);
    free(res);
    return L;
}

/* which operand of a binary call is the scalar (0 or 1) where a table
 * serves it, else -1 */
static int
scalar_lut_operand(const mf_loop_aux *aux, int nin, int nargs, char *const data[],
                   const npy_intp strides[], npy_intp n)
{
    const mf_format *f = aux->fmt;
    const npy_intp sz = f->itemsize;
    /* the size first: small calls (a broadcast's rows) pay no string compare */
    if (nin != 2 || nargs != 3 || sz > 2 || n < ((npy_intp)(sz == 1 ? 32 : 256) << (8 * sz))
            || f->kind != MF_KIND_FLOAT || strcmp(aux->def->sig, "MM->M") != 0
            || strcmp(aux->def->f32sig, "ff->f") != 0 || !mf_default_fp_mode()) {
        return -1;
    }
    for (int k = 0; k < 3; k++) {
        if ((uintptr_t)data[k] % (uintptr_t)sz != 0 || strides[k] % sz != 0) {
            return -1;
        }
    }
    if (strides[2] == 0 || (strides[0] == 0) == (strides[1] == 0)) {
        return -1;
    }
    return strides[0] == 0 ? 0 : 1;
}

/*
 * maximum, minimum, fmax, fmin and clip of a format whose codes order as
 * sign and magnitude (bfloat16, float8_e4m3fn, ...: sort.c's check,
 * mf_arg_key_lim): the result is one of the operands, so it is chosen by
 * comparing the codes' keys (argkey.h: -0 and +0 both 0), without decoding
 * or rounding.  That is NumPy's float32 loop's result except where an
 * operand is a NaN, or where two compared zeros differ in sign and NumPy's
 * loop was not seen to take the second operand as keyed.h does
 * (keyed_ties_checked): a block that has such an element is computed by
 * via_f32_block over the same elements, as before.  The
 * choice is the level's kernel (stream/keyed.h, vectorized per level),
 * written straight into a contiguous output that no input of the block
 * touches; otherwise (in place, the output another operand) into a buffer
 * first, so that the inputs are intact for that route.
 */
enum { KEYED_NONE = 0, KEYED_MAX = MF_KEYED_MAX, KEYED_MIN = MF_KEYED_MIN,
       KEYED_CLIP = MF_KEYED_CLIP };

/* one block by the level's keyed kernel; 0 if it must go NumPy's way */
#define KEYED_BLOCK(U, S, K)                                                            \
    static int                                                                          \
    keyed_block_##U(int op, S lim, char *const data[], const npy_intp strides[],        \
                    npy_intp s, npy_intp len)                                           \
    {                                                                                   \
        const npy_intp isz = (npy_intp)sizeof(U);                                       \
        const int clip = (op & ~MF_KEYED_TIES) == KEYED_CLIP, nout = clip ? 3 : 2;      \
        const U *c = clip ? (const U *)(data[2] + s * strides[2]) : NULL;               \
        U *o = (U *)(data[nout] + s * strides[nout]);                                   \
        const npy_intp so = strides[nout] / isz;                                        \
        /* straight into a contiguous output that no input of the block touches */      \
        /* (a flagged block is then recomputed from the intact inputs) */               \
        int direct = so == 1;                                                           \
        for (int k = 0; k < nout && direct; k++) {                                      \
            const char *p = data[k] + s * strides[k];                                   \
            const char *lo = strides[k] < 0 ? p + (len - 1) * strides[k] : p;           \
            const char *hi = p + isz + (strides[k] < 0 ? 0 : (len - 1) * strides[k]);   \
            direct = hi <= (const char *)o || lo >= (const char *)(o + len);            \
        }                                                                               \
        U buf[EW_BLOCK];                                                                \
        U *r = direct ? o : buf;                                                        \
        if (mf_k->K(op, lim, (const U *)(data[0] + s * strides[0]), strides[0] / isz,   \
                    (const U *)(data[1] + s * strides[1]), strides[1] / isz, c,         \
                    clip ? strides[2] / isz : 0, r, len)) {                             \
            return 0;                                                                   \
        }                                                                               \
        if (direct) {                                                                   \
            return 1;                                                                   \
        }                                                                               \
        if (so == 1) {                                                                  \
            memcpy(o, r, (size_t)len * sizeof(U));                                      \
        }                                                                               \
        else {                                                                          \
            for (npy_intp i = 0; i < len; i++) {                                        \
                o[i * so] = r[i];                                                       \
            }                                                                           \
        }                                                                               \
        return 1;                                                                       \
    }
KEYED_BLOCK(uint8_t, int8_t, keyed8)
KEYED_BLOCK(uint16_t, int16_t, keyed16)
#undef KEYED_BLOCK

typedef struct {
    ew_job ew;
    int op;
    int16_t lim;
} keyed_job;

/* elements [start, start + len) of a keyed call, block by block as ew_range */
static void
keyed_range(void *ctx, mf_intp start, mf_intp len)
{
    const keyed_job *J = (const keyed_job *)ctx;
    const ew_job *E = &J->ew;
    for (npy_intp s = start; s < start + len; s += EW_BLOCK) {
        npy_intp l = start + len - s < EW_BLOCK ? start + len - s : EW_BLOCK;
        int done = E->aux->fmt->itemsize == 1
                   ? keyed_block_uint8_t(J->op, (int8_t)J->lim, E->data, E->strides, s, l)
                   : keyed_block_uint16_t(J->op, J->lim, E->data, E->strides, s, l);
        if (!done) {
            via_f32_block(E->aux, E->nin, E->nargs, E->data, E->strides, s, l);
        }
    }
}

/*
 * Whether NumPy's float32 loop of a keyed ufunc returns the second of two
 * equal operands (for clip, min(max(x, lo), hi) so: lo, then hi) at every
 * position, as keyed.h's choice does: then a block's zeros of different
 * signs need not go NumPy's way (MF_KEYED_TIES).  Zeros are the only equal
 * operands whose codes differ.  NumPy 2.4's and 2.5's loops on Zen 4 do; a loop that
 * took the first in its scalar tail, or the positive zero (Arm's FMAX), or
 * differed by position in any way (fmax, fmin there), keeps the flag.
 * Checked once a ufunc, on the loop itself called as via_f32_block calls
 * it (contiguous float32 buffers; every length up to 128, which covers the
 * tails of loops unrolled up to 128 floats, and the full block; two
 * alignments), with every combination of -1, -0, +0, 1 at every position:
 * about 0.5 ms for maximum, 4 for clip (Zen 4), once.  Racing threads only repeat
 * the check.
 */
static int
keyed_ties_checked(const mf_loop_aux *aux, int op)
{
    static signed char ok[256];        /* 0: not checked, 1: yes, -1: no */
    const int d = (int)(aux->def - mf_ufunc_defs);
    if (d < 0 || d >= (int)sizeof(ok)) {
        return 0;
    }
    int v = __atomic_load_n(&ok[d], __ATOMIC_RELAXED);
    if (v != 0) {
        return v > 0;
    }
    static const float vals[4] = {-1.0f, -0.0f, 0.0f, 1.0f};
    const int nops = op == KEYED_CLIP ? 3 : 2;
    const int ncomb = nops == 3 ? 64 : 16;
    const npy_intp cap = EW_BLOCK + 1;
    float *buf = malloc((size_t)(nops + 2) * (size_t)cap * sizeof(float));
    if (buf == NULL) {
        return 0;
    }
    v = 1;
    for (npy_intp n = 1; n <= EW_BLOCK && v > 0; n = n < 128 ? n + 1 : n < EW_BLOCK - 1 ? EW_BLOCK - 1 : n + 1) {
        for (int off = 0; off < 2 && v > 0; off++) {
            char *args[4];
            npy_intp steps[4] = {sizeof(float), sizeof(float), sizeof(float), sizeof(float)};
            float *in[3], *out = buf + (size_t)nops * (size_t)cap + off, *want = out + cap;
            for (int k = 0; k < nops; k++) {
                in[k] = buf + (size_t)k * (size_t)cap + off;
                args[k] = (char *)in[k];
            }
            args[nops] = (char *)out;
            for (int p = 0; p < ncomb && v > 0; p++) {
                for (npy_intp i = 0; i < n; i++) {
                    const int comb = (int)((i + p) & (ncomb - 1));
                    const float x = vals[comb & 3], y = vals[(comb >> 2) & 3];
                    in[0][i] = x;
                    in[1][i] = y;
                    float m = op == KEYED_MIN ? (x < y ? x : y) : (x > y ? x : y);
                    if (nops == 3) {
                        const float z = vals[comb >> 4];
                        in[2][i] = z;
                        m = m < z ? m : z;
                    }
                    want[i] = m;
                }
                call_f32(aux, args, n, steps);
                v = memcmp(out, want, (size_t)n * sizeof(float)) == 0 ? 1 : -1;
            }
        }
    }
    free(buf);
    __atomic_store_n(&ok[d], (signed char)v, __ATOMIC_RELAXED);
    return v > 0;
}

/* which keyed operation a loop is (KEYED_NONE: not one), and its limit */
static int
keyed_op(const mf_loop_aux *aux, int nargs, char *const data[], const npy_intp strides[],
         int16_t *lim)
{
    const char *u = aux->def->ufunc, *sig = aux->def->sig;
    int op = KEYED_NONE;
    if (strcmp(sig, "MM->M") == 0) {
        op = (!strcmp(u, "maximum") || !strcmp(u, "fmax")) ? KEYED_MAX
             : (!strcmp(u, "minimum") || !strcmp(u, "fmin")) ? KEYED_MIN : KEYED_NONE;
    }
    else if (strcmp(sig, "MMM->M") == 0 && !strcmp(u, "clip")) {
        op = KEYED_CLIP;
    }
    if (op == KEYED_NONE || !mf_arg_key_lim(aux->fmt, lim)) {
        return KEYED_NONE;
    }
    const npy_intp sz = aux->fmt->itemsize;
    for (int k = 0; k < nargs; k++) {
        if ((uintptr_t)data[k] % (uintptr_t)sz != 0 || strides[k] % sz != 0) {
            return KEYED_NONE;
        }
    }
    return keyed_ties_checked(aux, op) ? op | MF_KEYED_TIES : op;
}

/*
 * Unary ufuncs whose float32 loop is a single vector instruction in NumPy
 * (the roundings, sqrt, reciprocal, square): a table look-up (a scalar load
 * a code) costs more than the work.  Their contiguous calls run the fused
 * kernels (kernels.h, the one-operand ops of `binary`): decode, the
 * instruction and the rounding in registers, at every level bit-identical
 * to the serial kernel (floorf, ..., sqrtf, 1 / a, then the encoder), which
 * is NumPy's float32 loop's value rounded once, with its flags.  -1: not
 * one of them.
 */
static int
cheap_unary_op(const mf_loop_aux *aux)
{
    static const struct {
        const char *name;
        mf_binary_op op;
    } ops[] = {{"floor", MF_OP_FLOOR}, {"ceil", MF_OP_CEIL}, {"trunc", MF_OP_TRUNC},
               {"rint", MF_OP_RINT}, {"sqrt", MF_OP_SQRT}, {"reciprocal", MF_OP_RECIPROCAL},
               {"square", MF_OP_MUL}};
    if (strcmp(aux->def->sig, "M->M") != 0 || strcmp(aux->def->f32sig, "f->f") != 0
            || aux->fmt->kind != MF_KIND_FLOAT) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (strcmp(aux->def->ufunc, ops[i].name) == 0) {
            return (int)ops[i].op;
        }
    }
    return -1;
}

/*
 * np.sign of bfloat16 by its codes: a NaN -> the quiet NaN of its sign,
 * +-0 -> +0, other codes -> +-1, in a loop the compiler vectorizes, instead of a table
 * look-up a code.  Used only where the table (NumPy's float32 loop on every
 * code, rounded once, with its flags) says exactly that for all 65536 codes,
 * checked once, the first time the table is there.  Zen 4, (4096, 4096)
 * bfloat16 into out=, two threads: see docs/design.md.
 */
static uint16_t
sign_bf16(uint16_t c)
{
    const uint16_t mag = (uint16_t)(c & 0x7FFFu), sgn = (uint16_t)(c & 0x8000u);
    const uint16_t nan = (uint16_t)(sgn | 0x7FC0u), one = (uint16_t)(sgn | 0x3F80u);
    return mag > 0x7F80u ? nan : (mag == 0 ? (uint16_t)0 : one);
}

static int
sign_bf16_is_table(const mf_lut *L)
{
    static int ok = -1;        /* -1: not checked; races only repeat the check */
    int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
    if (v < 0) {
        v = 1;
        for (uint32_t c = 0; c < 65536u && v; c++) {
            v = L[c] == (mf_lut)sign_bf16((uint16_t)c);
        }
        __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
    }
    return v;
}

typedef struct {
    const uint16_t *in;
    uint16_t *out;
} sign_job_bf16;

static void
sign_bf16_range(void *ctx, mf_intp start, mf_intp len)
{
    const sign_job_bf16 *J = (const sign_job_bf16 *)ctx;
    const uint16_t *a = J->in + start;
    uint16_t *o = J->out + start;
    for (mf_intp i = 0; i < len; i++) {
        o[i] = sign_bf16(a[i]);
    }
}

/*
 * A general elementwise call: large ones are split between the threads
 * (NumPy's float32 loops are plain C; each element is computed on its own,
 * so the split does not change any result), small ones run here.
 */
static void
via_f32_elementwise(const mf_loop_aux *aux, int nin, int nargs, char *const data[],
                    const npy_intp strides[], npy_intp n)
{
    ew_job J = {aux, nin, nargs, data, strides};
    if (n >= 2 && !independent_elements(aux, nin, nargs, data, strides, n)) {
        ew_range(&J, 0, n);
        return;
    }
    npy_intp sz = aux->fmt->itemsize;
    keyed_job K = {J, KEYED_NONE, 0};
    K.op = keyed_op(aux, nargs, data, strides, &K.lim);
    if (K.op != KEYED_NONE) {
        /* moves codes only: split by their bytes */
        mf_par_range(keyed_range, &K, n, EW_BLOCK, nargs * sz);
        return;
    }
    int spos = scalar_lut_operand(aux, nin, nargs, data, strides, n);
    if (spos >= 0) {
        mf_lut *L = scalar_lut_build(aux, spos, data[spos]);
        if (L != NULL) {
            const mf_format *f = aux->fmt;
            slut_job SJ = {aux, L, data[1 - spos], data[2], strides[1 - spos], strides[2],
                           spos, mf_dec_code(f, mf_load_code(f, data[spos]))};
            mf_par_range(slut_range, &SJ, n, EW_BLOCK, 2 * sz);
            free(L);
            return;
        }
    }
    int uop = nin == 1 && nargs == 2 ? cheap_unary_op(aux) : -1;
    if (uop >= 0 && is_contig_aligned(data[0], strides[0], sz)
            && is_contig_aligned(data[1], strides[1], sz)) {
        /* b = a: the one-operand ops do not read it, square multiplies a by a */
        const int stream = mf_par_stream;
        mf_par_stream = stream | mf_par_run_long(data[1], n * sz);
        mf_par_binary((mf_binary_op)uop, aux->fmt, data[0], data[0], data[1], n);
        mf_par_stream = stream;
        return;
    }
    if (nin == 1 && nargs == 2 && strcmp(aux->def->sig, "M->M") == 0
            && (uintptr_t)data[0] % (uintptr_t)sz == 0 && strides[0] % sz == 0
            && (uintptr_t)data[1] % (uintptr_t)sz == 0 && strides[1] % sz == 0) {
        const mf_lut *L = lut_for(aux, (int)(aux->def - mf_ufunc_defs), n);
        if (L != NULL && aux->fmt->id == MF_BFLOAT16 && !strcmp(aux->def->ufunc, "sign")
                && is_contig_aligned(data[0], strides[0], sz)
                && is_contig_aligned(data[1], strides[1], sz) && sign_bf16_is_table(L)) {
            sign_job_bf16 SJ = {(const uint16_t *)data[0], (uint16_t *)data[1]};
            mf_par_range(sign_bf16_range, &SJ, n, EW_BLOCK, 2 * sz);
            return;
        }
        if (L != NULL) {
            lut_job LJ = {aux, L, data, strides};
            /* a look-up moves the element's bytes only: split by those */
            mf_par_range(lut_range, &LJ, n, EW_BLOCK, 2 * sz);
            return;
        }
    }
    mf_par_range(ew_range, &J, n, EW_BLOCK, (mf_intp)sizeof(float));
}

/* out[0] = op(out[0], in[i]) for all i: a reduction's inner loop */
static void
reduce_inner(mf_loop_aux *aux, char *out, const char *in, npy_intp is, npy_intp n)
{
    const mf_format *f = aux->fmt;
    float acc;
    mf_shadow_get(aux->shadow, f, out, 0, 1, &acc);
    float buf[BLOCK];
    for (npy_intp start = 0; start < n; start += BLOCK) {
        npy_intp len = n - start < BLOCK ? n - start : BLOCK;
        decode_block(f, in + start * is, is, buf, len);
        char *args[3] = {(char *)&acc, (char *)buf, (char *)&acc};
        npy_intp steps[3] = {0, sizeof(float), 0};
        call_f32(aux, args, len, steps);
    }
    encode_block(f, &acc, out, 0, 1);
    mf_shadow_put(aux->shadow, f, out, 0, 1, &acc);
}

/* one step of cumsum's / cumprod's float32 chain: the carry the first
 * operand, so its NaN is the one kept (nan_order.h) */
static inline float
chain_step(int mul, float carry, float x)
{
    float r = mul ? carry * x : carry + x;
    return r == r ? r : mf_ordered2(carry, x, r);
}

/* out[i] = op(out[i-1], in[i]): an accumulation's inner loop; the running
 * value is kept in float32 and each stored value is rounded once */
static void
accumulate_inner(mf_loop_aux *aux, char *prev, const char *in, npy_intp is,
                 char *out, npy_intp os, npy_intp n)
{
    const mf_format *f = aux->fmt;
    /* decoded as the kernels and casts decode (a signaling NaN stays one):
     * the float32 cumsum of the float32 values, bits and flags */
    float carry = mf_dec_code(f, mf_load_code(f, prev));
    if (aux->def->kind == MF_LOOP_ARITH && (aux->def->op == MF_OP_ADD || aux->def->op == MF_OP_MUL)) {
        /* cumsum / cumprod: the float32 running value, each output rounded
         * once; a block of inputs decoded by the kernels, the chain (carry
         * the first operand: its NaN is the one kept, nan_order.h), the
         * block of running values encoded by the kernels.  Only the chain's
         * operation is on the critical path.  Reading the whole block before
         * writing it is right for in = out (NumPy copies other overlaps). */
        const int mul = aux->def->op == MF_OP_MUL;
        float buf[BLOCK];
        for (npy_intp start = 0; start < n; start += BLOCK) {
            npy_intp len = n - start < BLOCK ? n - start : BLOCK;
            decode_block(f, in + start * is, is, buf, len);
            for (npy_intp i = 0; i < len; i++) {
                buf[i] = carry = chain_step(mul, carry, buf[i]);
            }
            encode_block(f, buf, out + start * os, os, len);
        }
        return;
    }
    for (npy_intp i = 0; i < n; i++) {
        float x = mf_dec_code(f, mf_load_code(f, in + i * is));
        float r;
        char *args[3] = {(char *)&carry, (char *)&x, (char *)&r};
        npy_intp steps[3] = {0, 0, 0};
        call_f32(aux, args, 1, steps);
        mf_store_code(f, out + i * os, mf_enc1(f, r));
        carry = r;
    }
}

/* out[j] = op(out[j], in[j]) where out is also the first input: the inner
 * loop of a reduction over an outer axis; partials kept across calls */
static void
inplace_partials(mf_loop_aux *aux, char *out, npy_intp os, const char *in, npy_intp is, npy_intp n)
{
    const mf_format *f = aux->fmt;
    float a[BLOCK], b[BLOCK];
    for (npy_intp start = 0; start < n; start += BLOCK) {
        npy_intp len = n - start < BLOCK ? n - start : BLOCK;
        char *o = out + start * os;
        mf_shadow_get(aux->shadow, f, o, os, len, a);
        decode_block(f, in + start * is, is, b, len);
        char *args[3] = {(char *)a, (char *)b, (char *)a};
        npy_intp steps[3] = {sizeof(float), sizeof(float), sizeof(float)};
        call_f32(aux, args, len, steps);
        encode_block(f, a, o, os, len);
        mf_shadow_put(aux->shadow, f, o, os, len, a);
    }
}

/* ------------------------------------------------ integer formats */

/* codes -> int32 (sign-extended for signed formats) */
static inline void
idecode_block(const mf_format *f, const char *p, npy_intp s, int32_t *dst, npy_intp n)
{
    for (npy_intp i = 0; i < n; i++, p += s) {
        dst[i] = (int32_t)mf_decode_f64(f, mf_load_code(f, p));
    }
}

/* int32 -> codes, wrapping to the format's width (ml_dtypes' arithmetic) */
static inline void
iencode_block(const mf_format *f, const int32_t *src, char *p, npy_intp s, npy_intp n)
{
    uint32_t mask = mf_code_mask(f);
    for (npy_intp i = 0; i < n; i++, p += s) {
        mf_store_code(f, p, (uint32_t)src[i] & mask);
    }
}

/*
 * Integer formats: NumPy's int32 loop between decode and a wrap-around
 * encode.  Reductions and accumulations wrap too (add and multiply are
 * ring operations, so wrapping once at the end equals wrapping each step).
 */
static int
int_loop(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
         npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    mf_loop_aux *aux = (mf_loop_aux *)auxdata;
    const mf_format *f = aux->fmt;
    const char *sig = aux->def->sig;
    int nin = sig_nin(sig);
    int nargs = nin + (int)strlen(sig + nin + 2);
    npy_intp n = dimensions[0];
    int32_t buf[4][BLOCK];

    if (nin == 2 && nargs == 3 && sig[4] == 'M') {
        if (data[0] == data[2] && strides[0] == 0 && strides[2] == 0) {
            int32_t acc;
            idecode_block(f, data[0], 0, &acc, 1);
            for (npy_intp start = 0; start < n; start += BLOCK) {
                npy_intp len = n - start < BLOCK ? n - start : BLOCK;
                idecode_block(f, data[1] + start * strides[1], strides[1], buf[1], len);
                char *args[3] = {(char *)&acc, (char *)buf[1], (char *)&acc};
                npy_intp steps[3] = {0, 4, 0};
                call_f32(aux, args, len, steps);
            }
            iencode_block(f, &acc, data[0], 0, 1);
            return 0;
        }
        if (strides[0] == strides[2] && strides[0] != 0 && data[2] == data[0] + strides[0]) {
            int32_t carry;
            idecode_block(f, data[0], 0, &carry, 1);
            for (npy_intp i = 0; i < n; i++) {
                int32_t x, r;
                idecode_block(f, data[1] + i * strides[1], 0, &x, 1);
                char *args[3] = {(char *)&carry, (char *)&x, (char *)&r};
                npy_intp steps[3] = {0, 0, 0};
                call_f32(aux, args, 1, steps);
                iencode_block(f, &r, data[2] + i * strides[2], 0, 1);
                idecode_block(f, data[2] + i * strides[2], 0, &carry, 1);
            }
            return 0;
        }
    }
    for (npy_intp start = 0; start < n; start += BLOCK) {
        npy_intp len = n - start < BLOCK ? n - start : BLOCK;
        char *args[4];
        npy_intp steps[4];
        for (int k = 0; k < nargs; k++) {
            char t = sig[k < nin ? k : k + 2];
            char *p = data[k] + start * strides[k];
            if (t == 'M') {
                if (k < nin) {
                    idecode_block(f, p, strides[k], buf[k], len);
                }
                args[k] = (char *)buf[k];
                steps[k] = 4;
            }
            else {                     /* bool */
                args[k] = p;
                steps[k] = strides[k];
            }
        }
        call_f32(aux, args, len, steps);
        for (int k = nin; k < nargs; k++) {
            if (sig[k + 2] == 'M') {
                iencode_block(f, buf[k], data[k] + start * strides[k], strides[k], len);
            }
        }
    }
    return 0;
}

static int
generic_loop(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
             npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    mf_loop_aux *aux = (mf_loop_aux *)auxdata;
    const char *sig = aux->def->sig;
    int nin = sig_nin(sig);
    int nargs = nin + (int)strlen(sig + nin + 2);
    npy_intp n = dimensions[0];

    if (nin == 2 && nargs == 3 && sig[0] == 'M' && sig[1] == 'M' && sig[4] == 'M') {
        if (data[0] == data[2] && strides[0] == 0 && strides[2] == 0) {
            reduce_inner(aux, data[0], data[1], strides[1], n);
            return 0;
        }
        if (strides[0] == strides[2] && strides[0] != 0 && data[2] == data[0] + strides[0]) {
            accumulate_inner(aux, data[0], data[1], strides[1], data[2], strides[2], n);
            return 0;
        }
        if (aux->shadow && data[0] == data[2] && strides[0] == strides[2]) {
            inplace_partials(aux, data[2], strides[2], data[1], strides[1], n);
            return 0;
        }
    }
    via_f32_elementwise(aux, nin, nargs, data, strides, n);
    return 0;
}

/*
 * An in-place call (out is also the first input) on an output this loop
 * already wrote in-place during the same ufunc call can only be a
 * reduction step NumPy did not announce (with initial=, no initial value is
 * asked for): keep partials from now on.
 */
static void
notice_inplace(mf_loop_aux *aux, char *ptr, npy_intp stride)
{
    if (aux->shadow != NULL || !aux->def->keeps_partials) {
        return;
    }
    for (int i = 0; i < aux->nseen; i++) {
        if (aux->seen_ptr[i] == ptr && aux->seen_stride[i] == stride) {
            aux->shadow = mf_shadow_new();
            return;
        }
    }
    int k = aux->nseen < 8 ? aux->nseen++ : (int)((uintptr_t)ptr % 8);
    aux->seen_ptr[k] = ptr;
    aux->seen_stride[k] = stride;
}

/* + - * / of an array and a scalar (one input of stride 0): the fused
 * kernel on blocks, the scalar's code repeated in a buffer (the same
 * operations, operands in the same places, as two arrays get) */
typedef struct {
    mf_binary_op op;
    const mf_format *f;
    char *const *data;
    int scalar;                  /* which input is the scalar: 0 or 1 */
} scalar_job;

static void
scalar_range(void *ctx, mf_intp start, mf_intp len)
{
    const scalar_job *J = (const scalar_job *)ctx;
    const npy_intp sz = J->f->itemsize;
    char rep[EW_BLOCK * 2];
    mf_move_codes(rep, sz, J->data[J->scalar], 0, len < EW_BLOCK ? len : EW_BLOCK, sz);
    const char *arr = J->data[1 - J->scalar];
    for (npy_intp s = start; s < start + len; s += EW_BLOCK) {
        npy_intp l = start + len - s < EW_BLOCK ? start + len - s : EW_BLOCK;
        const char *x = arr + s * sz;
        mf_k->binary(J->op, J->f, J->scalar ? x : rep, J->scalar ? rep : x, J->data[2] + s * sz, l);
    }
}

/* + - * /: the fused kernels on contiguous operands (or an array and a
 * scalar), the general path else */
static int
arith_loop(PyArrayMethod_Context *context, char *const data[],
           npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    mf_loop_aux *aux = (mf_loop_aux *)auxdata;
    const mf_format *f = aux->fmt;
    npy_intp sz = f->itemsize;
    npy_intp n = dimensions[0];
    int inplace = data[0] == data[2];
    if (inplace && strides[0] == strides[2]) {
        notice_inplace(aux, data[0], strides[0]);
    }
    /* an accumulation's loop (out[i] = out[i-1] op in[i]) overlaps itself:
     * the general path runs it sequentially */
    int accumulating = strides[0] == strides[2] && strides[0] != 0 && data[2] == data[0] + strides[0];
    /* a row of a large array (NumPy calls the loop row after row when an
     * operand is broadcast): once the rows written reach a large output's
     * size, the rest streams past the caches as a large output does */
    const int stream = mf_par_stream;
    if (!(aux->shadow && inplace) && !accumulating
            && is_contig_aligned(data[0], strides[0], sz) && is_contig_aligned(data[1], strides[1], sz)
            && is_contig_aligned(data[2], strides[2], sz)) {
        mf_par_stream = stream | mf_par_run_long(data[2], n * sz);
        mf_par_binary((mf_binary_op)aux->def->op, f, data[0], data[1], data[2], n);
        mf_par_stream = stream;
        return 0;
    }
    for (int sc = 0; sc < 2; sc++) {
        if (!aux->shadow && !accumulating && strides[sc] == 0 && n >= 2
                && (uintptr_t)data[sc] % (uintptr_t)sz == 0
                && is_contig_aligned(data[1 - sc], strides[1 - sc], sz)
                && is_contig_aligned(data[2], strides[2], sz)
                && (data[2] != data[sc] || n == 1)) {
            scalar_job S = {(mf_binary_op)aux->def->op, f, data, sc};
            mf_par_stream = stream | mf_par_run_long(data[2], n * sz);
            mf_par_range(scalar_range, &S, n, EW_BLOCK, 3 * sz);
            mf_par_stream = stream;
            return 0;
        }
    }
    if (aux->def->op == MF_OP_ADD && inplace && strides[0] == 0 && strides[2] == 0) {
        /* sum along the inner axis, in the kernels' summation order */
        float start_value;
        mf_shadow_get(aux->shadow, f, data[0], 0, 1, &start_value);
        double acc = (double)start_value;
        const char *in = data[1];
        npy_intp is = strides[1];
        if (is_contig_aligned(in, is, sz)) {
            acc = mf_add_first(mf_par_sum(f, in, n), acc);
        }
        else {
            char codes[BLOCK * 2];
            for (npy_intp start = 0; start < n; start += BLOCK) {
                npy_intp len = n - start < BLOCK ? n - start : BLOCK;
                mf_move_codes(codes, sz, in + start * is, is, len, sz);
                acc = mf_add_first(mf_k->sum(f, codes, len), acc);
            }
        }
        float accf = (float)acc;   /* partials are kept in float32 */
        int ovf = 0;
        mf_store_code(f, data[0], mf_encode_f64_ovf(f, acc, &ovf));
        if (ovf) {
            mf_raise_overflow();
        }
        mf_shadow_put(aux->shadow, f, data[0], 0, 1, &accf);
        return 0;
    }
    return generic_loop(context, data, dimensions, strides, auxdata);
}

/* ---------------------------------------------------- native loops */

static int
nextafter_loop(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
               npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    const mf_format *f = ((mf_loop_aux *)auxdata)->fmt;
    npy_intp n = dimensions[0];
    for (npy_intp i = 0; i < n; i++) {
        uint32_t a = mf_load_code(f, data[0] + i * strides[0]);
        uint32_t b = mf_load_code(f, data[1] + i * strides[1]);
        mf_store_code(f, data[2] + i * strides[2], mf_nextafter_code(f, a, mf_decode_f64(f, b)));
    }
    return 0;
}

/* distance to the next value away from zero (NumPy's spacing) */
static int
spacing_loop(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
             npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    const mf_format *f = ((mf_loop_aux *)auxdata)->fmt;
    npy_intp n = dimensions[0];
    for (npy_intp i = 0; i < n; i++) {
        uint32_t c = mf_load_code(f, data[0] + i * strides[0]);
        double x = mf_decode_f64(f, c);
        double r;
        if (isnan(x) || isinf(x)) {
            r = NAN;
        }
        else {
            double away = signbit(x) ? -INFINITY : INFINITY;
            uint32_t nc = mf_nextafter_code(f, c, away);
            double nx = mf_decode_f64(f, nc);
            r = isinf(nx) || isnan(nx) ? NAN : nx - x;
            if (isnan(r)) {
                /* at the largest finite value the next step overflows:
                 * NumPy gives inf for float types with inf, so do we */
                r = mf_has_inf(f) ? (signbit(x) ? -INFINITY : INFINITY) : NAN;
            }
        }
        mf_store_code(f, data[1] + i * strides[1], mf_encode_f64(f, r));
    }
    return 0;
}

/*
 * Sign operations (IEEE 754 5.5.1: negate, abs, copySign) act on the sign
 * bit alone, so NaN payloads, signaling NaNs and -0 come through unchanged
 * and no floating-point flag is raised; positive and conjugate copy the
 * code.  A fnuz format has no -0: its code 1000...0 is its only NaN, so the
 * sign of a zero or of that NaN never changes (negative(NaN) is NaN, abs(NaN)
 * is NaN, copysign(0, -1) is 0 where ml_dtypes returns the NaN).  Codes are
 * masked to the format's width, as the decoder reads them.  The same code
 * runs at every kernel level (no SIMD variant to keep bit-identical); the
 * contiguous loops below are plain enough for the compiler to vectorise.
 */
#if defined(__GNUC__) || defined(__clang__)
#define MF_SIGN_INLINE static inline __attribute__((always_inline))
#else
#define MF_SIGN_INLINE static inline
#endif

/* One element; op and fnuz are constants where this is inlined, so each
 * loop below is a branch-free loop the compiler can vectorise. */
#define MF_SIGN_RUN(T)                                                                  \
    MF_SIGN_INLINE T sign1_##T(const int op, const int fnuz, T a, T b, T s, T m, T ns)  \
    {                                                                                   \
        a &= m;                                                                         \
        T r = op == MF_SIGN_NEGATE ? (T)(a ^ s)                                         \
              : op == MF_SIGN_ABS ? (T)(a & ns)                                         \
              : op == MF_SIGN_COPYSIGN ? (T)((a & ns) | (b & s)) : a;                   \
        return (fnuz && (a & ns) == 0) ? a : r;      /* +0 and the NaN unchanged */     \
    }                                                                                   \
    MF_SIGN_INLINE void sign_run_##T(const int op, const int fnuz, const char *in0,     \
                                     npy_intp s0, const char *in1, npy_intp s1,         \
                                     char *out, npy_intp so, npy_intp n, T s, T m,      \
                                     int contig)                                        \
    {                                                                                   \
        const T ns = (T)(m & ~s);                                                       \
        if (contig == 2) {          /* copysign by a scalar */                          \
            const T *a = (const T *)in0, b = *(const T *)in1;                           \
            T *o = (T *)out;                                                            \
            for (npy_intp i = 0; i < n; i++) {                                          \
                o[i] = sign1_##T(MF_SIGN_COPYSIGN, fnuz, a[i], b, s, m, ns);            \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        if (contig) {                                                                   \
            const T *a = (const T *)in0, *b = (const T *)in1;                           \
            T *o = (T *)out;                                                            \
            for (npy_intp i = 0; i < n; i++) {                                          \
                o[i] = sign1_##T(op, fnuz, a[i], op == MF_SIGN_COPYSIGN ? b[i] : 0,     \
                                 s, m, ns);                                             \
            }                                                                           \
            return;                                                                     \
        }                                                                               \
        for (npy_intp i = 0; i < n; i++) {                                              \
            T a, b = 0, r;                                                              \
            memcpy(&a, in0 + i * s0, sizeof(T));                                        \
            if (op == MF_SIGN_COPYSIGN) {                                               \
                memcpy(&b, in1 + i * s1, sizeof(T));                                    \
            }                                                                           \
            r = sign1_##T(op, fnuz, a, b, s, m, ns);                                    \
            memcpy(out + i * so, &r, sizeof(T));                                        \
        }                                                                               \
    }                                                                                   \
    static void sign_dispatch_##T(mf_sign_op op, int fnuz, const char *in0,             \
                                  npy_intp s0, const char *in1, npy_intp s1,            \
                                  char *out, npy_intp so, npy_intp n, T s, T m,         \
                                  int contig)                                           \
    {                                                                                   \
        switch (op * 2 + (fnuz != 0)) {                                                 \
            case MF_SIGN_NEGATE * 2: sign_run_##T(MF_SIGN_NEGATE, 0, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
            case MF_SIGN_NEGATE * 2 + 1: sign_run_##T(MF_SIGN_NEGATE, 1, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
            case MF_SIGN_ABS * 2: sign_run_##T(MF_SIGN_ABS, 0, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
            case MF_SIGN_ABS * 2 + 1: sign_run_##T(MF_SIGN_ABS, 1, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
            case MF_SIGN_COPYSIGN * 2: sign_run_##T(MF_SIGN_COPYSIGN, 0, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
            case MF_SIGN_COPYSIGN * 2 + 1: sign_run_##T(MF_SIGN_COPYSIGN, 1, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
            default: sign_run_##T(MF_SIGN_COPY, 0, in0, s0, in1, s1, out, so, n, s, m, contig); break; \
        }                                                                               \
    }
MF_SIGN_RUN(uint8_t)
MF_SIGN_RUN(uint16_t)

typedef struct {
    mf_sign_op op;
    int fnuz;
    npy_intp sz;
    const char *in0, *in1;
    char *out;
    uint32_t sign, mask;
    int contig;         /* 1: every operand contiguous; 2: in1 a scalar */
} sign_job;

/* elements [start, start + len) of a contiguous sign operation */
static void
sign_range(void *ctx, mf_intp start, mf_intp len)
{
    const sign_job *J = (const sign_job *)ctx;
    const npy_intp o = start * J->sz;
    const char *in1 = J->in1 ? J->in1 + (J->contig == 2 ? 0 : o) : NULL;
    if (J->sz == 2) {
        sign_dispatch_uint16_t(J->op, J->fnuz, J->in0 + o, 2, in1, 2, J->out + o, 2, len,
                               (uint16_t)J->sign, (uint16_t)J->mask, J->contig);
    }
    else {
        sign_dispatch_uint8_t(J->op, J->fnuz, J->in0 + o, 1, in1, 1, J->out + o, 1, len,
                              (uint8_t)J->sign, (uint8_t)J->mask, J->contig);
    }
}

static int
sign_loop(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
          npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    mf_loop_aux *aux = (mf_loop_aux *)auxdata;
    const mf_format *f = aux->fmt;
    mf_sign_op op = (mf_sign_op)aux->def->op;
    int binary = op == MF_SIGN_COPYSIGN;
    const uint32_t S = mf_sign_bit(f), mask = mf_code_mask(f);
    const int fnuz = f->special == MF_SPECIAL_FNUZ;
    npy_intp n = dimensions[0], sz = f->itemsize;
    const char *in0 = data[0], *in1 = binary ? data[1] : NULL;
    char *out = data[binary ? 2 : 1];
    npy_intp s0 = strides[0], s1 = binary ? strides[1] : 0, so = strides[binary ? 2 : 1];
    /* the contiguous loops may read ahead of what they wrote: not for an
     * accumulation (out[i] = op(out[i-1], b[i])), which overlaps itself */
    int overlaps = binary && out == in0 + s0;
    /* copysign by a scalar (np.copysign(x, -1.0): NumPy passes it with a
     * stride of 0): its own contiguous loop (2), not the strided one */
    const int bscalar = binary && s1 == 0 && (uintptr_t)in1 % (uintptr_t)sz == 0;
    int contig = !overlaps && is_contig_aligned(in0, s0, sz) && is_contig_aligned(out, so, sz)
                 && (!binary || is_contig_aligned(in1, s1, sz) || bscalar);
    if (contig && bscalar) {
        contig = 2;
    }
    if (contig && n >= 2 && independent_elements(aux, binary ? 2 : 1, binary ? 3 : 2, data, strides, n)) {
        /* each element on its own: large calls are split between the threads */
        sign_job J = {op, fnuz, sz, in0, in1, out, S, mask, contig};
        mf_par_range(sign_range, &J, n, EW_BLOCK, (binary ? 3 : 2) * sz);
        return 0;
    }
    if (sz == 2) {
        sign_dispatch_uint16_t(op, fnuz, in0, s0, in1, s1, out, so, n, (uint16_t)S,
                               (uint16_t)mask, contig);
    }
    else {
        sign_dispatch_uint8_t(op, fnuz, in0, s0, in1, s1, out, so, n, (uint8_t)S,
                              (uint8_t)mask, contig);
    }
    return 0;
}

/*
 * A float format compared with float64 (what a Python number becomes, see
 * ufuncs.c), by value.  The decoded values are float32 (exact), so against
 * one number y the comparison is a float32 one: y itself when float32 holds
 * it, else its float32 neighbours lo < y < hi (x < y is x <= lo, x > y is
 * x >= hi, x == y is never true).  Elementwise against float64 arrays the
 * values are compared as doubles.  The comparisons are C99's quiet ones
 * (isless, ...): a NaN raises no "invalid" flag, as in NumPy's loops.
 */
static int
mf_cmp_apply(mf_cmp_op op, double a, double b)
{
    switch (op) {
        case MF_CMP_EQ: return a == b;
        case MF_CMP_NE: return a != b;
        case MF_CMP_LT: return isless(a, b);
        case MF_CMP_LE: return islessequal(a, b);
        case MF_CMP_GT: return isgreater(a, b);
        default: return isgreaterequal(a, b);
    }
}

/* x op y for float32 x as x op2 y2 in float32; -1, or the constant result */
static int
mf_cmp_to_f32(mf_cmp_op op, double y, mf_cmp_op *op2, float *y2)
{
    *op2 = op;
    if (isnan(y)) {
        return op == MF_CMP_NE;
    }
    float lo, hi;
    if (y > FLT_MAX && !isinf(y)) {
        lo = FLT_MAX;
        hi = INFINITY;
    }
    else if (y < -FLT_MAX && !isinf(y)) {
        lo = -INFINITY;
        hi = -FLT_MAX;
    }
    else {
        float yf = (float)y;
        if ((double)yf == y) {
            *y2 = yf;
            return -1;
        }
        lo = (double)yf < y ? yf : nextafterf(yf, -INFINITY);
        hi = (double)yf > y ? yf : nextafterf(yf, INFINITY);
    }
    switch (op) {
        case MF_CMP_EQ: return 0;
        case MF_CMP_NE: return 1;
        case MF_CMP_LT:
        case MF_CMP_LE: *op2 = MF_CMP_LE; *y2 = lo; return -1;
        default: *op2 = MF_CMP_GE; *y2 = hi; return -1;
    }
}

#define MF_CMP_F32(EXPR)                                                                \
    for (npy_intp i = 0; i < len; i++) {                                               \
        float a = buf[i];                                                              \
        o[i] = (char)(EXPR);                                                           \
    }

static int
cmp64_loop(PyArrayMethod_Context *NPY_UNUSED(context), char *const data[],
           npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *auxdata)
{
    mf_loop_aux *aux = (mf_loop_aux *)auxdata;
    const mf_format *f = aux->fmt;
    int mfirst = aux->def->sig[0] == 'M';
    mf_cmp_op op = (mf_cmp_op)aux->def->op;
    const char *pm = data[mfirst ? 0 : 1], *pd = data[mfirst ? 1 : 0];
    npy_intp sm = strides[mfirst ? 0 : 1], sd = strides[mfirst ? 1 : 0];
    char *po = data[2];
    npy_intp so = strides[2], n = dimensions[0];
    float buf[BLOCK];
    char obuf[BLOCK];
    /* with the format's operand first: y < x is x > y */
    static const mf_cmp_op flipped[] = {MF_CMP_EQ, MF_CMP_NE, MF_CMP_GT, MF_CMP_GE,
                                        MF_CMP_LT, MF_CMP_LE};
    mf_cmp_op xop = mfirst ? op : flipped[op];
    for (npy_intp start = 0; start < n; start += BLOCK) {
        npy_intp len = n - start < BLOCK ? n - start : BLOCK;
        decode_block(f, pm + start * sm, sm, buf, len);
        char *o = so == 1 ? po + start : obuf;
        if (sd == 0) {
            double y;
            memcpy(&y, pd, sizeof(double));
            mf_cmp_op op2;
            float b = 0.0f;
            int k = mf_cmp_to_f32(xop, y, &op2, &b);
            if (k >= 0) {
                memset(o, k, (size_t)len);
            }
            else {
                switch (op2) {
                    case MF_CMP_EQ: MF_CMP_F32(a == b) break;
                    case MF_CMP_NE: MF_CMP_F32(a != b) break;
                    case MF_CMP_LT: MF_CMP_F32(isless(a, b)) break;
                    case MF_CMP_LE: MF_CMP_F32(islessequal(a, b)) break;
                    case MF_CMP_GT: MF_CMP_F32(isgreater(a, b)) break;
                    default: MF_CMP_F32(isgreaterequal(a, b)) break;
                }
            }
        }
        else {
            for (npy_intp i = 0; i < len; i++) {
                double y;
                memcpy(&y, pd + (start + i) * sd, sizeof(double));
                o[i] = (char)mf_cmp_apply(xop, (double)buf[i], y);
            }
        }
        if (o == obuf) {
            for (npy_intp i = 0; i < len; i++) {
                po[(start + i) * so] = obuf[i];
            }
        }
    }
    return 0;
}

/* ------------------------------------- cumsum / cumprod of many rows */

/*
 * NumPy accumulates along the last axis of a C-ordered array one row per
 * inner-loop call, on one thread, and the loop above is bound by its chain's
 * latency (each step waits for the last).  _accumulate(op, a, axis) does all
 * rows in one call: ACC_ROWS rows at a time, their chains interleaved (the
 * CPU runs the independent steps side by side), the groups split between
 * the threads.  Each row is exactly accumulate_inner's: the first code
 * copied, then the float32 chain of the decoded values, each result rounded
 * once (the blocks decoded and encoded by the kernels): the same bits and
 * flags as NumPy's route (patch "fast_accumulate", minifloat/_numpy_patches.py).
 */
#define ACC_ROWS 8
/* a row's block; rows ACC_PAD floats past a multiple of 4 KiB apart: rows
 * 4 KiB apart made each load wait for the stores of another row (4K
 * aliasing) */
#define ACC_BLOCK 1024
#define ACC_PAD 16

typedef struct {
    const mf_format *f;
    int mul;
    const char *in;
    char *out;
    npy_intp nrows, len;      /* rows of len elements, C order */
} acc_job;

static void
acc_range(void *ctx, mf_intp g0, mf_intp ng)
{
    const acc_job *J = (const acc_job *)ctx;
    const mf_format *f = J->f;
    const npy_intp sz = f->itemsize, L = J->len;
    float buf[ACC_ROWS][ACC_BLOCK + ACC_PAD];
    for (mf_intp g = g0; g < g0 + ng; g++) {
        const npy_intp r0 = g * ACC_ROWS;
        const int R = (int)(J->nrows - r0 < ACC_ROWS ? J->nrows - r0 : ACC_ROWS);
        float carry[ACC_ROWS];
        for (int r = 0; r < R; r++) {
            const char *in = J->in + (r0 + r) * L * sz;
            char *out = J->out + (r0 + r) * L * sz;
            memcpy(out, in, (size_t)sz);             /* the first code, as NumPy copies it */
            carry[r] = mf_dec_code(f, mf_load_code(f, out));
        }
        for (npy_intp s = 1; s < L; s += ACC_BLOCK) {
            const npy_intp n = L - s < ACC_BLOCK ? L - s : ACC_BLOCK;
            for (int r = 0; r < R; r++) {
                decode_block(f, J->in + ((r0 + r) * L + s) * sz, sz, buf[r], n);
            }
            if (R == ACC_ROWS) {
                for (npy_intp i = 0; i < n; i++) {
                    for (int r = 0; r < ACC_ROWS; r++) {
                        buf[r][i] = carry[r] = chain_step(J->mul, carry[r], buf[r][i]);
                    }
                }
            }
            else {
                for (int r = 0; r < R; r++) {
                    for (npy_intp i = 0; i < n; i++) {
                        buf[r][i] = carry[r] = chain_step(J->mul, carry[r], buf[r][i]);
                    }
                }
            }
            for (int r = 0; r < R; r++) {
                encode_block(f, buf[r], J->out + ((r0 + r) * L + s) * sz, sz, n);
            }
        }
    }
}

/*
 * Along another axis k of a C-ordered array, seen as (A, L, B) with L the
 * axis and B > 1 the elements after it, NumPy calls the loop once per chain,
 * down a column B elements apart (a page or more apart for wide arrays: a
 * TLB miss a step).  Here the B chains of each of the A slabs advance
 * together, a row of up to ACC_COLS at a time: each chain is exactly
 * accumulate_inner's (the first code copied, then the float32 chain of the
 * kernels' decoded values, each result rounded once by the kernels), so the
 * bits and flags are NumPy's route's; the chains of a row are independent,
 * so nothing waits on the chain's latency.  Column blocks go to the threads.
 */
#define ACC_COLS 512

typedef struct {
    const mf_format *f;
    int mul;
    const char *in;
    char *out;
    npy_intp L, B, blocks;    /* (A, L, B), B split into `blocks` of ACC_COLS */
} acc_cols_job;

static void
acc_cols_range(void *ctx, mf_intp t0, mf_intp nt)
{
    const acc_cols_job *J = (const acc_cols_job *)ctx;
    const mf_format *f = J->f;
    const npy_intp sz = f->itemsize, L = J->L, B = J->B;
    float carry[ACC_COLS], buf[ACC_COLS];
    for (mf_intp t = t0; t < t0 + nt; t++) {
        const npy_intp a = t / J->blocks, c0 = (t % J->blocks) * ACC_COLS;
        const npy_intp w = B - c0 < ACC_COLS ? B - c0 : ACC_COLS;
        const char *in = J->in + (a * L * B + c0) * sz;
        char *out = J->out + (a * L * B + c0) * sz;
        memcpy(out, in, (size_t)(w * sz));        /* the first codes, as NumPy copies them */
        for (npy_intp j = 0; j < w; j++) {
            carry[j] = mf_dec_code(f, mf_load_code(f, out + j * sz));
        }
        for (npy_intp i = 1; i < L; i++) {
            decode_block(f, in + i * B * sz, sz, buf, w);
            for (npy_intp j = 0; j < w; j++) {
                buf[j] = carry[j] = chain_step(J->mul, carry[j], buf[j]);
            }
            encode_block(f, buf, out + i * B * sz, sz, w);
        }
    }
}

/*
 * _accumulate(op, a, axis): op 0 cumsum, 1 cumprod, of a float format
 * along any axis of a C-contiguous array (axis None: the flattened array).
 * A new array, or NotImplemented for anything else (NumPy's route runs).
 */
PyObject *
mf_py_accumulate(PyObject *NPY_UNUSED(self), PyObject *args)
{
    int op;
    PyObject *a_obj, *axis;
    if (!PyArg_ParseTuple(args, "iOO:_accumulate", &op, &a_obj, &axis)) {
        return NULL;
    }
    if (!PyArray_CheckExact(a_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    int fid = mf_dtype_index(NPY_DTYPE(descr));
    int nd = PyArray_NDIM(a);
    if (fid < 0 || mf_formats[fid].kind != MF_KIND_FLOAT || mf_descr_swapped(descr) || nd < 1
            || (op != 0 && op != 1) || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    /* axis None: the flattened array (C order), one row; else (A, L, B) */
    npy_intp size = PyArray_SIZE(a), L, B = 1;
    int rnd = nd;
    if (axis == Py_None) {
        L = size;
        rnd = 1;
    }
    else {
        /* an int or anything with __index__ (np.int64); else NumPy's route says */
        Py_ssize_t v = PyIndex_Check(axis) ? PyNumber_AsSsize_t(axis, NULL) : nd;
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (v < 0) {
            v += nd;
        }
        if (v < 0 || v >= nd) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        L = PyArray_DIM(a, (int)v);
        for (int d = (int)v + 1; d < nd; d++) {
            B *= PyArray_DIM(a, d);
        }
    }
    if (L < 2 || size == 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_INCREF(descr);
    PyArrayObject *res = (PyArrayObject *)PyArray_NewFromDescr(
        &PyArray_Type, descr, rnd, rnd == nd ? PyArray_SHAPE(a) : &size, NULL, NULL, 0, NULL);
    if (res == NULL) {
        return NULL;
    }
    acc_job J = {&mf_formats[fid], op == 1, PyArray_BYTES(a), PyArray_BYTES(res), size / L, L};
    const mf_intp groups = (J.nrows + ACC_ROWS - 1) / ACC_ROWS;
    acc_cols_job C = {J.f, J.mul, J.in, J.out, L, B, (B + ACC_COLS - 1) / ACC_COLS};
    int fl;
    Py_BEGIN_ALLOW_THREADS
    feclearexcept(FE_ALL_EXCEPT);
    if (B > 1) {
        mf_par_range(acc_cols_range, &C, size / (L * B) * C.blocks, 1,
                     (mf_intp)(L * (B < ACC_COLS ? B : ACC_COLS) * 2 * J.f->itemsize));
    }
    else {
        mf_par_range(acc_range, &J, groups, 1, (mf_intp)(ACC_ROWS * L * 2 * J.f->itemsize));
    }
    fl = fetestexcept(FE_ALL_EXCEPT);
    feclearexcept(FE_ALL_EXCEPT);
    Py_END_ALLOW_THREADS
    int fpe = mf_fpe_bits(fl);
    if (fpe && PyUFunc_GiveFloatingpointErrors("accumulate", fpe) < 0) {
        Py_DECREF(res);
        return NULL;
    }
    return (PyObject *)res;
}

/* ------------------------------------------------------- get_loop */

_Thread_local PyArrayMethod_Context *mf_reduction_context = NULL;

/* sum: +0 (NumPy's float sums start there too: sum([-0.0]) is 0.0);
 * product: 1; others: no initial value */
int
mf_get_reduction_initial(int def_index, PyArrayMethod_Context *context,
                         npy_bool reduction_is_empty, void *initial)
{
    const mf_ufunc_def *def = &mf_ufunc_defs[def_index];
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    mf_reduction_context = context;
    if (def->identity == 1) {
        if (!mf_has_zero(f)) {
            return 0;
        }
        mf_store_code(f, (char *)initial, mf_encode_f64(f, 0.0));
        return 1;
    }
    if (def->identity == 2) {
        mf_store_code(f, (char *)initial, mf_encode_f64(f, 1.0));
        return 1;
    }
    return 0;
}

static void
aux_free(NpyAuxData *data)
{
    mf_loop_aux *aux = (mf_loop_aux *)data;
    if (aux->shadow) {
        mf_shadow_free(aux->shadow);
    }
    PyMem_RawFree(aux);
}

static NpyAuxData *
aux_clone(NpyAuxData *data)
{
    mf_loop_aux *src = (mf_loop_aux *)data;
    mf_loop_aux *dst = PyMem_RawMalloc(sizeof(mf_loop_aux));
    if (dst == NULL) {
        return NULL;
    }
    *dst = *src;
    dst->shadow = src->shadow ? mf_shadow_new() : NULL;
    return (NpyAuxData *)dst;
}

int
mf_generic_get_loop(int def_index, PyArrayMethod_Context *context, int NPY_UNUSED(aligned),
                    int NPY_UNUSED(move_references), const npy_intp *NPY_UNUSED(strides),
                    PyArrayMethod_StridedLoop **out_loop, NpyAuxData **out_transferdata,
                    NPY_ARRAYMETHOD_FLAGS *flags)
{
    const mf_ufunc_def *def = &mf_ufunc_defs[def_index];
    mf_loop_aux *aux = PyMem_RawCalloc(1, sizeof(mf_loop_aux));
    if (aux == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    aux->base.free = aux_free;
    aux->base.clone = aux_clone;
    aux->def = def;
    aux->f32fn = mf_f32_fns[def_index];
    aux->f32data = mf_f32_data[def_index];
    /* the format: the first minifloat operand */
    int k = (int)(strchr(def->sig, 'M') - def->sig);
    if (k > sig_nin(def->sig)) {
        k -= 2;
    }
    aux->fmt = mf_descr_format(context->descriptors[k]);
    /* a reduction asks for its initial value just before its loop, with
     * the same context: then keep partials across the inner loop calls */
    if (def->keeps_partials && context == mf_reduction_context) {
        aux->shadow = mf_shadow_new();
        if (aux->shadow == NULL) {
            PyMem_RawFree(aux);
            PyErr_NoMemory();
            return -1;
        }
    }
    mf_reduction_context = NULL;
    switch (def->kind) {
        case MF_LOOP_INT: *out_loop = int_loop; break;
        case MF_LOOP_ARITH: *out_loop = arith_loop; break;
        case MF_LOOP_NEXTAFTER: *out_loop = nextafter_loop; break;
        case MF_LOOP_SPACING: *out_loop = spacing_loop; break;
        case MF_LOOP_SIGN: *out_loop = mf_sign_bit(aux->fmt) ? sign_loop : generic_loop; break;
        case MF_LOOP_CMP64: *out_loop = cmp64_loop; break;
        default: *out_loop = generic_loop; break;
    }
    *out_transferdata = (NpyAuxData *)aux;
    *flags = 0;   /* NumPy checks the FP status after the loop */
    if (*out_loop == sign_loop || *out_loop == cmp64_loop) {
        *flags = NPY_METH_NO_FLOATINGPOINT_ERRORS;   /* bit operations, quiet compares */
    }
    return 0;
}

/* ------------------------------------------- find NumPy's float32 loops */

static int
typechar_num(char t)
{
    switch (t) {
        case 'f': return NPY_FLOAT;
        case 'I': return NPY_INT;      /* an int32 operand standing for an integer format */
        case 'd': return NPY_DOUBLE;
        case '?': return NPY_BOOL;
        case 'i': return NPY_INT;
        case 'l': return NPY_LONG;
        default: return -1;
    }
}

int
mf_find_f32_loops(void)
{
    PyObject *np = PyImport_ImportModule("numpy._core.umath");
    if (np == NULL) {
        return -1;
    }
    for (int d = 0; d < mf_num_ufunc_defs; d++) {
        const mf_ufunc_def *def = &mf_ufunc_defs[d];
        mf_f32_fns[d] = NULL;
        if (def->f32sig == NULL) {
            continue;
        }
        PyUFuncObject *uf = (PyUFuncObject *)PyObject_GetAttrString(np, def->ufunc);
        if (uf == NULL) {
            Py_DECREF(np);
            return -1;
        }
        int want[4];
        int nin = sig_nin(def->f32sig);
        int nargs = nin + (int)strlen(def->f32sig + nin + 2);
        for (int k = 0; k < nargs; k++) {
            want[k] = typechar_num(def->f32sig[k < nin ? k : k + 2]);
        }
        for (int i = 0; i < uf->ntypes && uf->nargs == nargs; i++) {
            int match = 1;
            for (int k = 0; k < nargs; k++) {
                if (uf->types[i * nargs + k] != want[k]) {
                    match = 0;
                    break;
                }
            }
            if (match) {
                mf_f32_fns[d] = uf->functions[i];
                mf_f32_data[d] = uf->data ? uf->data[i] : NULL;
                break;
            }
        }
        Py_DECREF(uf);
        if (mf_f32_fns[d] == NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "minifloat: NumPy's np.%s has no %s loop to build on",
                         def->ufunc, def->f32sig);
            Py_DECREF(np);
            return -1;
        }
    }
    Py_DECREF(np);
    return 0;
}
