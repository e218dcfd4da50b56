/*
 * Unrounded partial results of a reduction, kept across the inner-loop
 * calls NumPy makes for one ufunc.reduce.
 *
 * NumPy reduces along an outer axis by calling the inner loop once per
 * outer step with out = out + row; the output buffer has the dtype, so each
 * step would round to the format (NumPy's own float16 sums lose 4096 ones
 * that way).  The add/multiply loops of a reduction remember, for every
 * output element they wrote, the float32 value before rounding and the code
 * they stored, in a window of the address space ("slab") indexed by element.
 * On the next call touching that element they continue from the float32
 * value, provided memory still holds exactly the code they wrote and no
 * cast into a minifloat format ran in between (which would mean NumPy
 * refilled a buffer with another element); otherwise they start again from
 * memory, which is what NumPy's float16 does always.  Element-wise storage
 * serves any segmentation of the output: rows, masked runs (where=), buffer
 * chunks.
 */
#include "umath.h"

_Thread_local uint64_t mf_write_epoch = 0;

/* at most this many elements are tracked (7 bytes each) */
#define MF_SHADOW_MAX_ELEMENTS (1 << 24)

struct mf_shadow {
    char *origin;           /* address of element index 0 */
    npy_intp itemsize;
    npy_intp lo, hi;        /* tracked element indices [lo, hi) */
    uint64_t epoch;         /* mf_write_epoch when last stored */
    float *vals;            /* indexed by (i - lo) */
    uint16_t *codes;
    uint8_t *valid;
};

mf_shadow *
mf_shadow_new(void)
{
    return PyMem_RawCalloc(1, sizeof(mf_shadow));
}

void
mf_shadow_free(mf_shadow *s)
{
    if (s == NULL) {
        return;
    }
    PyMem_RawFree(s->vals);
    PyMem_RawFree(s->codes);
    PyMem_RawFree(s->valid);
    PyMem_RawFree(s);
}

/* element index of ptr, or 0 with *ok = 0 when ptr is not on the grid */
static inline npy_intp
index_of(const mf_shadow *s, const char *ptr, int *ok)
{
    ptrdiff_t d = ptr - s->origin;
    if (d % s->itemsize != 0) {
        *ok = 0;
        return 0;
    }
    *ok = 1;
    return (npy_intp)(d / s->itemsize);
}

/* make [a, b) tracked; 0 on success, -1 if it cannot be (too large) */
static int
cover(mf_shadow *s, npy_intp a, npy_intp b)
{
    if (s->vals != NULL && a >= s->lo && b <= s->hi) {
        return 0;
    }
    npy_intp lo = s->vals ? (a < s->lo ? a : s->lo) : a;
    npy_intp hi = s->vals ? (b > s->hi ? b : s->hi) : b;
    if (hi - lo > MF_SHADOW_MAX_ELEMENTS) {
        return -1;
    }
    /* grow with slack so that row-by-row growth is not quadratic */
    npy_intp span = hi - lo;
    npy_intp slack = span / 2;
    if (span + slack > MF_SHADOW_MAX_ELEMENTS) {
        slack = MF_SHADOW_MAX_ELEMENTS - span;
    }
    if (s->vals != NULL) {
        if (a < s->lo) {
            lo -= slack;
        }
        else {
            hi += slack;
        }
    }
    npy_intp n = hi - lo;
    float *vals = PyMem_RawMalloc(n * sizeof(float));
    uint16_t *codes = PyMem_RawMalloc(n * sizeof(uint16_t));
    uint8_t *valid = PyMem_RawCalloc(n, 1);
    if (vals == NULL || codes == NULL || valid == NULL) {
        PyMem_RawFree(vals);
        PyMem_RawFree(codes);
        PyMem_RawFree(valid);
        return -1;
    }
    if (s->vals != NULL) {
        npy_intp off = s->lo - lo, m = s->hi - s->lo;
        memcpy(vals + off, s->vals, m * sizeof(float));
        memcpy(codes + off, s->codes, m * sizeof(uint16_t));
        memcpy(valid + off, s->valid, m);
        PyMem_RawFree(s->vals);
        PyMem_RawFree(s->codes);
        PyMem_RawFree(s->valid);
    }
    s->vals = vals;
    s->codes = codes;
    s->valid = valid;
    s->lo = lo;
    s->hi = hi;
    return 0;
}

static inline int
first_use(mf_shadow *s, const mf_format *f, char *ptr)
{
    if (s->origin == NULL) {
        s->origin = ptr;
        s->itemsize = f->itemsize;
        s->epoch = mf_write_epoch;
        return 1;
    }
    return 0;
}

int
mf_shadow_get(mf_shadow *s, const mf_format *f, char *ptr, npy_intp stride, npy_intp n,
              float *out)
{
    int hits = 0;
    int usable = s != NULL && s->vals != NULL && s->epoch == mf_write_epoch;
    int ok = 0;
    npy_intp i0 = 0, di = 0;
    if (usable) {
        i0 = index_of(s, ptr, &ok);
        usable = ok && stride % s->itemsize == 0;
        di = usable ? stride / s->itemsize : 0;
    }
    if (usable && di == 1 && i0 >= s->lo && i0 + n <= s->hi) {
        /* contiguous run inside the window: check all, copy all */
        npy_intp k0 = i0 - s->lo;
        const uint8_t *valid = s->valid + k0;
        const uint16_t *codes = s->codes + k0;
        int all = 1;
        if (f->itemsize == 2) {
            const uint16_t *m = (const uint16_t *)ptr;
            for (npy_intp j = 0; j < n; j++) {
                all &= valid[j] & (codes[j] == m[j]);
            }
        }
        else {
            const uint8_t *m = (const uint8_t *)ptr;
            for (npy_intp j = 0; j < n; j++) {
                all &= valid[j] & (codes[j] == m[j]);
            }
        }
        if (all) {
            memcpy(out, s->vals + k0, n * sizeof(float));
            return (int)n;
        }
    }
    for (npy_intp j = 0; j < n; j++) {
        const char *p = ptr + j * stride;
        uint32_t code = mf_load_code(f, p);
        npy_intp i = i0 + j * di;
        if (usable && i >= s->lo && i < s->hi && s->valid[i - s->lo]
                && s->codes[i - s->lo] == code) {
            out[j] = s->vals[i - s->lo];
            hits++;
        }
        else {
            out[j] = (float)mf_decode_f64(f, code);
        }
    }
    return hits;
}

int
mf_shadow_put(mf_shadow *s, const mf_format *f, char *ptr, npy_intp stride, npy_intp n,
              const float *vals)
{
    if (s == NULL || n <= 0) {
        return 0;
    }
    first_use(s, f, ptr);
    if (s->epoch != mf_write_epoch) {
        /* a cast into a minifloat format ran since the last store: what is
         * tracked may describe another element now; forget it */
        if (s->valid) {
            memset(s->valid, 0, s->hi - s->lo);
        }
        s->epoch = mf_write_epoch;
    }
    int ok;
    npy_intp i0 = index_of(s, ptr, &ok);
    if (!ok || stride % s->itemsize != 0) {
        return 0;
    }
    npy_intp di = stride / s->itemsize;
    npy_intp a = di >= 0 ? i0 : i0 + (n - 1) * di;
    npy_intp b = (di >= 0 ? i0 + (n - 1) * di : i0) + 1;
    if (cover(s, a, b) < 0) {
        return 0;          /* too large to track: these round per step */
    }
    if (di == 1 && ((uintptr_t)ptr % (uintptr_t)f->itemsize) == 0) {
        npy_intp k0 = i0 - s->lo;
        memcpy(s->vals + k0, vals, n * sizeof(float));
        if (f->itemsize == 2) {
            memcpy(s->codes + k0, ptr, n * sizeof(uint16_t));
        }
        else {
            const uint8_t *m = (const uint8_t *)ptr;
            uint16_t *codes = s->codes + k0;
            for (npy_intp j = 0; j < n; j++) {
                codes[j] = m[j];
            }
        }
        memset(s->valid + k0, 1, n);
        return 0;
    }
    for (npy_intp j = 0; j < n; j++) {
        npy_intp k = i0 + j * di - s->lo;
        s->vals[k] = vals[j];
        s->codes[k] = (uint16_t)mf_load_code(f, ptr + j * stride);
        s->valid[k] = 1;
    }
    return 0;
}
