/*
 * Unrounded partial results of a reduction, kept across the inner-loop
 * calls NumPy makes for one ufunc.reduce.
 *
 * NumPy reduces along an outer axis by calling the inner loop once per
 * outer step with out = out + row; the output buffer has the dtype, so each
 * step would round to the format (NumPy's own float16 sums lose 4096 ones
 * that way).  The add/multiply loops of a reduction remember, for every
 * output segment they wrote, the float32 values before rounding and the
 * codes they stored.  On the next call for the same segment they continue
 * from the float32 values, provided memory still holds exactly the codes
 * they wrote and no cast into a minifloat format ran in between (a cast
 * there means NumPy refilled a buffer).  Otherwise they start again from
 * memory, which is what NumPy's float16 does always.
 */
#include "umath.h"

_Thread_local uint64_t mf_write_epoch = 0;

typedef struct {
    char *ptr;          /* key; NULL = empty slot */
    npy_intp stride;
    npy_intp n;
    uint64_t epoch;
    float *vals;
    uint16_t *codes;
} shadow_entry;

struct mf_shadow {
    shadow_entry *tab;
    size_t cap;         /* power of two */
    size_t used;
};

mf_shadow *
mf_shadow_new(void)
{
    mf_shadow *s = PyMem_RawCalloc(1, sizeof(mf_shadow));
    if (s == NULL) {
        return NULL;
    }
    s->cap = 16;
    s->tab = PyMem_RawCalloc(s->cap, sizeof(shadow_entry));
    if (s->tab == NULL) {
        PyMem_RawFree(s);
        return NULL;
    }
    return s;
}

void
mf_shadow_free(mf_shadow *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->cap; i++) {
        PyMem_RawFree(s->tab[i].vals);
        PyMem_RawFree(s->tab[i].codes);
    }
    PyMem_RawFree(s->tab);
    PyMem_RawFree(s);
}

static inline size_t
slot_of(const mf_shadow *s, const char *ptr)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & (s->cap - 1);
}

static shadow_entry *
find(mf_shadow *s, const char *ptr)
{
    size_t i = slot_of(s, ptr);
    while (s->tab[i].ptr != NULL) {
        if (s->tab[i].ptr == ptr) {
            return &s->tab[i];
        }
        i = (i + 1) & (s->cap - 1);
    }
    return NULL;
}

static int
grow(mf_shadow *s)
{
    size_t old_cap = s->cap;
    shadow_entry *old = s->tab;
    s->cap *= 2;
    s->tab = PyMem_RawCalloc(s->cap, sizeof(shadow_entry));
    if (s->tab == NULL) {
        s->tab = old;
        s->cap = old_cap;
        return -1;
    }
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].ptr != NULL) {
            size_t j = slot_of(s, old[i].ptr);
            while (s->tab[j].ptr != NULL) {
                j = (j + 1) & (s->cap - 1);
            }
            s->tab[j] = old[i];
        }
    }
    PyMem_RawFree(old);
    return 0;
}

float *
mf_shadow_lookup(mf_shadow *s, const mf_format *f, char *ptr, npy_intp stride, npy_intp n)
{
    if (s == NULL) {
        return NULL;
    }
    shadow_entry *e = find(s, ptr);
    if (e == NULL || e->stride != stride || e->n != n || e->epoch != mf_write_epoch) {
        return NULL;
    }
    for (npy_intp i = 0; i < n; i++) {
        if (mf_load_code(f, ptr + i * stride) != e->codes[i]) {
            return NULL;
        }
    }
    return e->vals;
}

int
mf_shadow_store(mf_shadow *s, const mf_format *f, char *ptr, npy_intp stride, npy_intp n,
                const float *vals)
{
    if (s == NULL) {
        return 0;
    }
    shadow_entry *e = find(s, ptr);
    if (e == NULL) {
        if (2 * (s->used + 1) > s->cap && grow(s) < 0) {
            return -1;
        }
        size_t i = slot_of(s, ptr);
        while (s->tab[i].ptr != NULL) {
            i = (i + 1) & (s->cap - 1);
        }
        e = &s->tab[i];
        e->ptr = ptr;
        s->used++;
    }
    if (e->n != n || e->vals == NULL) {
        PyMem_RawFree(e->vals);
        PyMem_RawFree(e->codes);
        e->vals = PyMem_RawMalloc(n * sizeof(float));
        e->codes = PyMem_RawMalloc(n * sizeof(uint16_t));
        if (e->vals == NULL || e->codes == NULL) {
            PyMem_RawFree(e->vals);
            PyMem_RawFree(e->codes);
            e->vals = NULL;
            e->codes = NULL;
            e->n = 0;
            return -1;
        }
    }
    e->stride = stride;
    e->n = n;
    e->epoch = mf_write_epoch;
    memcpy(e->vals, vals, n * sizeof(float));
    for (npy_intp i = 0; i < n; i++) {
        e->codes[i] = (uint16_t)mf_load_code(f, ptr + i * stride);
    }
    return 0;
}
