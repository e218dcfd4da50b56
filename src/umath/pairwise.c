/*
 * float32 sums in NumPy's pairwise order, for mean/var/std (patch
 * "statistics" in minifloat/_numpy_patches.py).
 *
 * NumPy computes the mean of a float16 array (and, through that patch, of
 * a minifloat float format) as the float32 sum of its values divided by the
 * count.  Reached through np.add.reduce(a, dtype=float32), that sum is
 * NumPy's float32 add loop over the iterator's cast buffers: the values are
 * decoded one buffer at a time, and the bits depend on the buffer size.
 * Here the sum is what NumPy's float32 add.reduce gives for the float32
 * values themselves, np.add.reduce(a.astype(np.float32), axis), bit for bit
 * (the tests compare the two): each output is 0.0f + pairwise(run), where
 * the run is the reduced values of that output (contiguous, C order) and
 * pairwise is NumPy's: under 8 values a sequential sum from 0; up to 128,
 * eight accumulators r[j] += x[i + j], added as ((r0 + r1) + (r2 + r3)) +
 * ((r4 + r5) + (r6 + r7)), then the rest in order; above 128, the two halves
 * split at n / 2 rounded down to a multiple of 8, each summed pairwise.
 *
 * The values are decoded by the level's decode_f32 a window at a time;
 * threads take whole runs, or subtrees of one run (the tree is fixed by n,
 * so the bits do not depend on the thread count).  Only which NaN a sum of
 * two NaNs returns may differ from NumPy's compiled loop (it depends on the
 * operand order its compiler chose).
 *
 * Covered: C-contiguous, aligned arrays of a float format in native byte
 * order, non-empty, reducing every axis or a trailing block of axes (axes of
 * length 1 ignored), as NumPy's iterator then gives its loop one run per
 * output.  Anything else is NotImplemented and the caller takes NumPy's
 * route.
 */
#include <fenv.h>
#include <string.h>
#include "umath.h"
#include "../kernels/parallel.h"

#define PW_BLOCK 128                 /* NumPy's PW_BLOCKSIZE */
#define PW_WIN 4096                  /* values decoded at a time */
#define PW_SUBTREE_MIN ((npy_intp)1 << 15)
#define PW_DEPTH_MAX 6

typedef float pw_f4 __attribute__((vector_size(16)));
typedef uint16_t pw_u16x8 __attribute__((vector_size(16)));

/* lane shuffles: clang's and GCC 12's builtin, older GCC's */
#if defined(__clang__) || __GNUC__ >= 12
#define PW_SHUF4(v, a, b, c, d) __builtin_shufflevector(v, v, a, b, c, d)
#define PW_SHUF8(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
typedef int32_t pw_i4 __attribute__((vector_size(16)));
typedef int16_t pw_i8 __attribute__((vector_size(16)));
#define PW_SHUF4(v, a, b, c, d) __builtin_shuffle(v, (pw_i4){a, b, c, d})
#define PW_SHUF8(x, y, ...) __builtin_shuffle(x, y, (pw_i8){__VA_ARGS__})
#endif

typedef struct {
    const mf_kernels *k;
    const mf_format *f;
    const char *x;                   /* the run's codes */
    npy_intp base, len;              /* buf holds values [base, base + len) */
    npy_intp n;                      /* the run's length */
    float m;                         /* DEV: the run's mean */
    float buf[PW_WIN];
} pw_src;

/* values [i, i + m) of the run, m <= PW_BLOCK; windows move forward only */
static const float *
pw_values(pw_src *s, npy_intp i, npy_intp m)
{
    if (i < s->base || i + m > s->base + s->len) {
        npy_intp len = s->n - i < PW_WIN ? s->n - i : PW_WIN;
        s->k->decode_f32(s->f, s->x + i * s->f->itemsize, s->buf, len);
        s->base = i;
        s->len = len;
    }
    return s->buf + (i - s->base);
}

/* Leaves: BF16, the codes read as they are (a bfloat16 is the top half of
 * its float32), else the decoded window; DEV, each value v taken as
 * (v - m) * (v - m), the float32 subtract and square _var computes before
 * its sum. */
#define PW_LEAF(NAME, BF16, DEV)                                                        \
static float                                                                            \
NAME(pw_src *s, npy_intp i0, npy_intp n)                                                \
{                                                                                       \
    const uint16_t *c = (const uint16_t *)s->x + i0;                                    \
    const float *a = BF16 ? NULL : pw_values(s, i0, n);                                 \
    const float m = s->m;                                                               \
    npy_intp i = 0;                                                                     \
    float res;                                                                          \
    if (n >= 8) {                                                                       \
        pw_f4 r0, r1, t0, t1;                                                           \
        pw_load8(c, a, 0, BF16, &r0, &r1);                                              \
        if (DEV) {                                                                      \
            r0 -= m;                                                                    \
            r1 -= m;                                                                    \
            r0 *= r0;                                                                   \
            r1 *= r1;                                                                   \
        }                                                                               \
        for (i = 8; i < n - (n % 8); i += 8) {                                          \
            pw_load8(c, a, i, BF16, &t0, &t1);                                          \
            if (DEV) {                                                                  \
                t0 -= m;                                                                \
                t1 -= m;                                                                \
                t0 *= t0;                                                               \
                t1 *= t1;                                                               \
            }                                                                           \
            r0 += t0;                                                                   \
            r1 += t1;                                                                   \
        }                                                                               \
        res = pw_tree8(r0, r1);                                                         \
    }                                                                                   \
    else {                                                                              \
        res = 0.0f;                                                                     \
    }                                                                                   \
    for (; i < n; i++) {                                                                \
        float v = BF16 ? pw_bf16(c[i]) : a[i];                                          \
        if (DEV) {                                                                      \
            v -= m;                                                                     \
            v *= v;                                                                     \
        }                                                                               \
        res += v;                                                                       \
    }                                                                                   \
    return res;                                                                         \
}                                                                                       \
static float                                                                            \
NAME##_tree(pw_src *s, npy_intp i, npy_intp n)                                          \
{                                                                                       \
    if (n <= PW_BLOCK) {                                                                \
        return NAME(s, i, n);                                                           \
    }                                                                                   \
    npy_intp n2 = n / 2;                                                                \
    n2 -= n2 % 8;                                                                       \
    float lo = NAME##_tree(s, i, n2);                                                   \
    float hi = NAME##_tree(s, i + n2, n - n2);                                          \
    return lo + hi;                                                                     \
}

static inline float
pw_bf16(uint16_t c)
{
    uint32_t b = (uint32_t)c << 16;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) of the lanes of lo, hi
 * in registers, each addition's operands in that order (lane 0 of a sum is
 * its first operand's lane 0 plus the shuffled lane 1, ...) */
static inline __attribute__((always_inline)) float
pw_tree8(pw_f4 lo, pw_f4 hi)
{
    lo += PW_SHUF4(lo, 1, 0, 3, 2);      /* r0 + r1, r2 + r3 */
    hi += PW_SHUF4(hi, 1, 0, 3, 2);      /* r4 + r5, r6 + r7 */
    lo += PW_SHUF4(lo, 2, 3, 0, 1);
    hi += PW_SHUF4(hi, 2, 3, 0, 1);
    return lo[0] + hi[0];
}

/* values i .. i + 7 as float32 into *lo, *hi: bfloat16 codes widened (each
 * code the top half of a 32-bit lane), or the decoded window's */
static inline __attribute__((always_inline)) void
pw_load8(const uint16_t *c, const float *a, npy_intp i, const int bf16, pw_f4 *lo, pw_f4 *hi)
{
    if (bf16) {
        pw_u16x8 h, z = {0};
        memcpy(&h, c + i, sizeof h);
        pw_u16x8 l8 = PW_SHUF8(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
        pw_u16x8 h8 = PW_SHUF8(z, h, 4, 12, 5, 13, 6, 14, 7, 15);
        memcpy(lo, &l8, sizeof *lo);
        memcpy(hi, &h8, sizeof *hi);
    }
    else {
        memcpy(lo, a + i, sizeof *lo);
        memcpy(hi, a + i + 4, sizeof *hi);
    }
}

PW_LEAF(pw_leaf, 0, 0)
PW_LEAF(pw_leaf_bf16, 1, 0)
PW_LEAF(pw_leaf_dev, 0, 1)
PW_LEAF(pw_leaf_bf16_dev, 1, 1)

/* the run's pairwise sum (of squared deviations from s->m with dev) */
static float
pw_sum(pw_src *s, npy_intp n, int dev)
{
    if (s->f->id == MF_BFLOAT16) {
        return dev ? pw_leaf_bf16_dev_tree(s, 0, n) : pw_leaf_bf16_tree(s, 0, n);
    }
    return dev ? pw_leaf_dev_tree(s, 0, n) : pw_leaf_tree(s, 0, n);
}

/* The subtrees of a run of n at depth d: with starts != NULL, their
 * starts and lengths in order; returns how many (a node of at most
 * PW_BLOCK values is a leaf at any depth). */
static npy_intp
pw_subtrees(npy_intp i, npy_intp n, int d, npy_intp *starts, npy_intp *lens, npy_intp m)
{
    if (d == 0 || n <= PW_BLOCK) {
        if (starts != NULL) {
            starts[m] = i;
            lens[m] = n;
        }
        return m + 1;
    }
    npy_intp n2 = n / 2;
    n2 -= n2 % 8;
    m = pw_subtrees(i, n2, d - 1, starts, lens, m);
    return pw_subtrees(i + n2, n - n2, d - 1, starts, lens, m);
}

/* the sum of a run of n at depth d from its subtrees' sums, consumed in order */
static float
pw_combine(npy_intp n, int d, const float *part, npy_intp *m)
{
    if (d == 0 || n <= PW_BLOCK) {
        return part[(*m)++];
    }
    npy_intp n2 = n / 2;
    n2 -= n2 % 8;
    float lo = pw_combine(n2, d - 1, part, m);
    float hi = pw_combine(n - n2, d - 1, part, m);
    return lo + hi;
}

typedef struct {
    const mf_kernels *k;
    const mf_format *f;
    const char *x;
    npy_intp rows, n;
    int depth;
    npy_intp nsub;                   /* subtrees a run */
    const npy_intp *starts, *lens;   /* of run 0 (the same offsets in every run) */
    const float *mean;               /* NULL, or each run's mean: squared deviations */
    float *part;                     /* rows * nsub subtree sums */
    npy_intp nitems, per_task, ntasks, next;
    fenv_t env;
    int flags;
} pw_job;

static void
pw_worker(void *ctx, int w)
{
    pw_job *J = (pw_job *)ctx;
    fenv_t saved;
    if (w != 0) {
        fegetenv(&saved);
        fesetenv(&J->env);
        feclearexcept(FE_ALL_EXCEPT);
    }
    pw_src s;
    s.k = J->k;
    s.f = J->f;
    for (;;) {
        npy_intp t = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (t >= J->ntasks) {
            break;
        }
        npy_intp i1 = (t + 1) * J->per_task < J->nitems ? (t + 1) * J->per_task : J->nitems;
        for (npy_intp it = t * J->per_task; it < i1; it++) {
            npy_intp r = it / J->nsub, q = it % J->nsub;
            s.x = J->x + (r * J->n + J->starts[q]) * J->f->itemsize;
            s.n = J->lens[q];
            s.base = 0;
            s.len = 0;
            s.m = J->mean != NULL ? J->mean[r] : 0.0f;
            J->part[it] = pw_sum(&s, s.n, J->mean != NULL);
        }
    }
    if (w != 0) {
        int fl = fetestexcept(FE_ALL_EXCEPT);
        if (fl) {
            __atomic_fetch_or(&J->flags, fl, __ATOMIC_RELAXED);
        }
        fesetenv(&saved);
    }
}

/* out[r] = 0.0f + pairwise(run r) for rows runs of n values at x (with
 * mean: of (v - mean[r])^2); -1: no memory */
static int
pw_run(const mf_format *f, const char *x, npy_intp rows, npy_intp n, const float *mean, float *out)
{
    npy_intp bytes = rows * n * f->itemsize;
    int T = 1;
    if (bytes >= MF_PAR_MIN_REDUCE_BYTES) {
        T = mf_get_num_threads();
        npy_intp most = bytes / MF_PAR_THREAD_BYTES;
        T = most < T ? (int)most : T;
        T = T < 1 ? 1 : T;
    }
    /* split runs into subtrees while there are fewer than 4 items a thread */
    int depth = 0;
    while (T > 1 && depth < PW_DEPTH_MAX && rows * ((npy_intp)1 << depth) < 4 * (npy_intp)T
           && (n >> (depth + 1)) >= PW_SUBTREE_MIN) {
        depth++;
    }
    pw_job J;
    memset(&J, 0, sizeof J);
    J.k = mf_k;
    J.f = f;
    J.x = x;
    J.rows = rows;
    J.n = n;
    J.depth = depth;
    J.mean = mean;
    J.nsub = pw_subtrees(0, n, depth, NULL, NULL, 0);
    npy_intp *sl = malloc((size_t)J.nsub * 2 * sizeof *sl);
    float *part = depth > 0 ? malloc((size_t)(rows * J.nsub) * sizeof *part) : out;
    if (sl == NULL || part == NULL) {
        free(sl);
        if (part != out) {
            free(part);
        }
        return -1;
    }
    pw_subtrees(0, n, depth, sl, sl + J.nsub, 0);
    J.starts = sl;
    J.lens = sl + J.nsub;
    J.part = part;
    J.nitems = rows * J.nsub;
    npy_intp per = J.nitems / (4 * (npy_intp)T);
    npy_intp least = ((npy_intp)64 << 10) / (n / J.nsub * f->itemsize + 1) + 1;
    J.per_task = per < least ? least : per;
    J.ntasks = (J.nitems + J.per_task - 1) / J.per_task;
    fegetenv(&J.env);
    if (T <= 1 || mf_pool_run(pw_worker, &J, T) == 0) {
        pw_worker(&J, 0);
    }
    for (npy_intp r = 0; r < rows; r++) {
        float s;
        if (depth > 0) {
            npy_intp m = 0;
            s = pw_combine(n, depth, part + r * J.nsub, &m);
        }
        else {
            s = part[r];
        }
        out[r] = 0.0f + s;          /* add.reduce's initial value, then the loop's += */
    }
    free(sl);
    if (part != out) {
        free(part);
    }
    if (J.flags) {
        feraiseexcept(J.flags);
    }
    return 0;
}

/*
 * _sum_f32(a, axis, keepdims, mean=None): np.add.reduce(a.astype(np.float32),
 * axis, keepdims=keepdims) without the float32 copy, or NotImplemented.  With
 * mean (float32, C-contiguous, one value per output: _var's mean, kept
 * dimensions), the sum of np.square(a.astype(np.float32) - mean) instead.
 */
PyObject *
mf_py_sum_f32(PyObject *NPY_UNUSED(self), PyObject *args)
{
    PyObject *a_obj, *axis, *mean_obj = Py_None;
    int keepdims;
    if (!PyArg_ParseTuple(args, "OOp|O:_sum_f32", &a_obj, &axis, &keepdims, &mean_obj)) {
        return NULL;
    }
    if (!PyArray_CheckExact(a_obj)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    int fid = mf_dtype_index(NPY_DTYPE(descr));
    int nd = PyArray_NDIM(a);
    if (fid < 0 || mf_formats[fid].kind != MF_KIND_FLOAT || mf_descr_swapped(descr)
            || PyArray_SIZE(a) == 0 || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || nd == 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int red[NPY_MAXDIMS];
    for (int d = 0; d < nd; d++) {
        red[d] = axis == Py_None;
    }
    if (axis != Py_None) {
        PyObject *seq = PyTuple_Check(axis) ? axis : NULL;
        Py_ssize_t na = seq ? PyTuple_GET_SIZE(seq) : 1;
        if (na == 0) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        for (Py_ssize_t i = 0; i < na; i++) {
            PyObject *item = seq ? PyTuple_GET_ITEM(seq, i) : axis;
            if (!PyLong_CheckExact(item)) {
                Py_RETURN_NOTIMPLEMENTED;
            }
            long v = PyLong_AsLong(item);
            if (v == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                Py_RETURN_NOTIMPLEMENTED;
            }
            v = v < 0 ? v + nd : v;
            if (v < 0 || v >= nd || red[v]) {
                Py_RETURN_NOTIMPLEMENTED;     /* NumPy raises its own error */
            }
            red[v] = 1;
        }
    }
    /* the axes longer than 1: reduced ones after every kept one */
    const npy_intp *shape = PyArray_SHAPE(a);
    npy_intp rows = 1, n = 1;
    int seen_red = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) {
            continue;
        }
        if (red[d]) {
            seen_red = 1;
            n *= shape[d];
        }
        else if (seen_red) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        else {
            rows *= shape[d];
        }
    }
    const float *mean = NULL;
    if (mean_obj != Py_None) {
        PyArrayObject *m = (PyArrayObject *)mean_obj;
        if (!PyArray_Check(mean_obj) || PyArray_TYPE(m) != NPY_FLOAT32 || !PyArray_ISNOTSWAPPED(m)
                || !PyArray_IS_C_CONTIGUOUS(m) || !PyArray_ISALIGNED(m) || PyArray_SIZE(m) != rows) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        mean = (const float *)PyArray_DATA(m);
    }
    npy_intp oshape[NPY_MAXDIMS];
    int ond = 0;
    for (int d = 0; d < nd; d++) {
        if (!red[d]) {
            oshape[ond++] = shape[d];
        }
        else if (keepdims) {
            oshape[ond++] = 1;
        }
    }
    PyArrayObject *res = (PyArrayObject *)PyArray_SimpleNew(ond, oshape, NPY_FLOAT32);
    if (res == NULL) {
        return NULL;
    }
    const mf_format *f = &mf_formats[fid];
    int rc, fl;
    Py_BEGIN_ALLOW_THREADS
    feclearexcept(FE_ALL_EXCEPT);
    rc = pw_run(f, PyArray_BYTES(a), rows, n, mean, (float *)PyArray_DATA(res));
    fl = fetestexcept(FE_ALL_EXCEPT);
    feclearexcept(FE_ALL_EXCEPT);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    int fpe = ((fl & FE_DIVBYZERO) ? NPY_FPE_DIVIDEBYZERO : 0) | ((fl & FE_OVERFLOW) ? NPY_FPE_OVERFLOW : 0)
              | ((fl & FE_UNDERFLOW) ? NPY_FPE_UNDERFLOW : 0) | ((fl & FE_INVALID) ? NPY_FPE_INVALID : 0);
    if (fpe && PyUFunc_GiveFloatingpointErrors("reduce", fpe) < 0) {
        Py_DECREF(res);
        return NULL;
    }
    return PyArray_Return(res);
}
