/*
 * The ArrFuncs NumPy still asks a dtype for: compare (searchsorted,
 * partition, generic sorts), sort/argsort, argmax/argmin, nonzero, fill.
 *
 * Ordering is by value with NaN last (NumPy's order for floats); -0 and +0
 * compare equal.  Sorting maps each code to an order key and radix-sorts
 * the keys: O(n), and a permutation of the input (NaN payloads kept).
 */
#include "../core/minifloat.h"
#include "../kernels/kernels.h"
#include "../kernels/parallel.h"
#include <fenv.h>
#include "../kernels/stream/argkey.h"

/* order key: unsigned, increasing with the value, NaN above everything */
static inline uint32_t
order_key(const mf_format *f, uint32_t c)
{
    c &= mf_code_mask(f);     /* bits above the format's width are ignored */
    if (f->kind == MF_KIND_SINT) {
        return c ^ (1u << (f->bits - 1));
    }
    if (f->kind == MF_KIND_UINT) {
        return c;
    }
    uint32_t sbit = mf_sign_bit(f);
    uint32_t top = 1u << f->bits;            /* keys live in [0, 2*top) */
    if (mf_code_isnan(f, c)) {
        return 2 * top - 1;
    }
    if (!f->has_sign) {
        return top + c;
    }
    uint32_t mag = c & ~sbit;
    return (c & sbit) ? top - mag : top + mag;
}

/* every code of each format sorted by key (ties: lower code first), built
 * once at import: the counting sort emits its counts in this order */
static uint32_t *codes_by_key[MF_NUM_PUBLIC_FORMATS];

/*
 * argmax/argmin keys in int16, one table per use, built from order_key at
 * import: for argmax the order key (NaN is the largest), for argmin the
 * order key with every NaN below everything (NumPy returns the first NaN
 * for both).  1-byte formats look their keys up (256 entries).  Formats
 * whose sign-magnitude codes order as integers (bfloat16, float8_e4m3fn,
 * float8_e5m2, ...) go to the level's kernel instead (arg_extreme8/16,
 * kernels/stream/argext.h), which computes keys in vector registers;
 * arith_ok[id] says that argkey.h's key orders every code as order_key
 * does and marks exactly the NaNs (checked for every code at import), with
 * arith_lim[id] its parameter.
 */
static int16_t key8_max[MF_NUM_PUBLIC_FORMATS][256];
static int16_t key8_min[MF_NUM_PUBLIC_FORMATS][256];
static char arith_ok[MF_NUM_PUBLIC_FORMATS];
static int16_t arith_lim[MF_NUM_PUBLIC_FORMATS];   /* largest magnitude that is not NaN */

/* argkey.h's key of code c of a format of `bits` (8 or 16) */
static int32_t
arith_key(int bits, uint32_t c, int16_t lim, int want_max)
{
    if (bits == 8) {
        return ae8_key((uint8_t)c, (int8_t)lim, want_max ? INT8_MAX : INT8_MIN);
    }
    return ae16_key((uint16_t)c, lim, want_max ? INT16_MAX : INT16_MIN);
}

static void
build_arg_keys(int id)
{
    const mf_format *f = &mf_formats[id];
    if (f->itemsize == 1) {
        for (uint32_t c = 0; c < 256; c++) {
            const uint32_t k = order_key(f, c);                /* < 512 for 8 bits */
            key8_max[id][c] = (int16_t)k;
            key8_min[id][c] = (f->kind == MF_KIND_FLOAT && mf_code_isnan(f, c & mf_code_mask(f)))
                              ? (int16_t)-1 : (int16_t)k;
        }
    }
    const int bits = 8 * f->itemsize;
    const uint32_t sbit = 1u << (bits - 1), ncodes = 1u << bits;
    if (f->kind != MF_KIND_FLOAT || !f->has_sign || f->bits != bits || mf_sign_bit(f) != sbit) {
        return;
    }
    uint32_t lim = 0;
    for (uint32_t c = 0; c < sbit; c++) {
        if (!mf_code_isnan(f, c)) {
            lim = c;
        }
    }
    if (lim >= sbit - 1) {          /* the NaN key must be above every number's */
        return;
    }
    /* the key must order every pair of codes as order_key does: walk the
     * codes in key order (codes_by_key) and check it is non-decreasing,
     * equal exactly where the order keys are; and it must mark exactly the
     * NaNs */
    const uint32_t *ord = codes_by_key[id];
    const int32_t nan_min = bits == 8 ? INT8_MIN : INT16_MIN;
    for (uint32_t i = 0; i < ncodes; i++) {
        const uint32_t b = ord[i];
        const int32_t xb = arith_key(bits, b, (int16_t)lim, 1);
        if (i > 0) {
            const uint32_t a = ord[i - 1];
            const int same = order_key(f, a) == order_key(f, b);
            const int32_t xa = arith_key(bits, a, (int16_t)lim, 1);
            if (same ? xa != xb : xa >= xb) {
                return;
            }
        }
        if (mf_code_isnan(f, b) != (arith_key(bits, b, (int16_t)lim, 0) == nan_min)) {
            return;
        }
    }
    arith_lim[id] = (int16_t)lim;
    arith_ok[id] = 1;
}

int
mf_sort_init(void)
{
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        const mf_format *f = &mf_formats[id];
        uint32_t ncodes = 1u << (8 * f->itemsize);   /* every storage pattern */
        uint32_t nkeys = 2u << f->bits;
        uint32_t *order = PyMem_RawMalloc(ncodes * sizeof(uint32_t));
        uint32_t *start = PyMem_RawCalloc(nkeys + 1, sizeof(uint32_t));
        if (order == NULL || start == NULL) {
            PyMem_RawFree(order);
            PyMem_RawFree(start);
            PyErr_NoMemory();
            return -1;
        }
        for (uint32_t c = 0; c < ncodes; c++) {
            start[order_key(f, c) + 1]++;
        }
        for (uint32_t k = 0; k < nkeys; k++) {
            start[k + 1] += start[k];
        }
        for (uint32_t c = 0; c < ncodes; c++) {
            order[start[order_key(f, c)]++] = c;
        }
        PyMem_RawFree(start);
        codes_by_key[id] = order;
        build_arg_keys(id);
    }
    return 0;
}

static inline const mf_format *
arr_format(void *arr)
{
    return mf_descr_format(PyArray_DESCR((PyArrayObject *)arr));
}

/*
 * compare and nonzero, one function per format.  NumPy calls them once an
 * element (or pair): np.partition (and so np.median, np.percentile,
 * np.quantile) sorts with its generic quicksort and compare where a dtype
 * has no partition function, searchsorted compares, np.count_nonzero,
 * np.nonzero and np.argwhere test each element.  mf_compare's general
 * decode took ~10 ns a call (np.partition of (1024, 1024) bfloat16: 140
 * ms); these read the format's keys (key8_max, argkey.h's key where
 * arith_ok) and truth tables (casts.c) without finding the format first.
 */
static inline int32_t
compare_key(int id, const void *p)
{
    const mf_format *f = &mf_formats[id];
    if (f->itemsize == 1) {
        return key8_max[id][*(const uint8_t *)p];
    }
    if (arith_ok[id]) {
        uint16_t c;
        memcpy(&c, p, 2);
        return ae16_key(c, arith_lim[id], INT16_MAX);
    }
    return (int32_t)order_key(f, mf_load_code(f, p));
}

static inline npy_bool
nonzero_id(int id, const void *p)
{
    const mf_format *f = &mf_formats[id];
    if (f->itemsize == 1) {
        return mf_truth8[id][*(const uint8_t *)p];
    }
    if (mf_truth16_mask[id] != 0) {
        uint16_t c;
        memcpy(&c, p, 2);
        return (c & mf_truth16_mask[id]) != 0;
    }
    return mf_decode_f64(f, mf_load_code(f, p)) != 0.0;
}

#define MF_PER_FORMAT(i)                                                                  \
    static int compare_##i(const void *a, const void *b, void *NPY_UNUSED(arr))          \
    {                                                                                     \
        const int32_t ka = compare_key(i, a), kb = compare_key(i, b);                     \
        return (ka > kb) - (ka < kb);                                                     \
    }                                                                                     \
    static npy_bool nonzero_##i(void *p, void *NPY_UNUSED(arr))                          \
    {                                                                                     \
        return nonzero_id(i, p);                                                          \
    }
MF_PER_FORMAT(0) MF_PER_FORMAT(1) MF_PER_FORMAT(2) MF_PER_FORMAT(3) MF_PER_FORMAT(4)
MF_PER_FORMAT(5) MF_PER_FORMAT(6) MF_PER_FORMAT(7) MF_PER_FORMAT(8) MF_PER_FORMAT(9)
MF_PER_FORMAT(10) MF_PER_FORMAT(11) MF_PER_FORMAT(12) MF_PER_FORMAT(13) MF_PER_FORMAT(14)
MF_PER_FORMAT(15) MF_PER_FORMAT(16) MF_PER_FORMAT(17)
#undef MF_PER_FORMAT

typedef char mf_one_compare_per_format[(MF_NUM_PUBLIC_FORMATS == 18) ? 1 : -1];

PyArray_CompareFunc *const mf_compare_of[MF_NUM_PUBLIC_FORMATS] = {
    compare_0, compare_1, compare_2, compare_3, compare_4, compare_5, compare_6, compare_7,
    compare_8, compare_9, compare_10, compare_11, compare_12, compare_13, compare_14,
    compare_15, compare_16, compare_17,
};
PyArray_NonzeroFunc *const mf_nonzero_of[MF_NUM_PUBLIC_FORMATS] = {
    nonzero_0, nonzero_1, nonzero_2, nonzero_3, nonzero_4, nonzero_5, nonzero_6, nonzero_7,
    nonzero_8, nonzero_9, nonzero_10, nonzero_11, nonzero_12, nonzero_13, nonzero_14,
    nonzero_15, nonzero_16, nonzero_17,
};

/* ---- radix sort of codes by key ---- */

/*
 * The radix sorts below sort 32-bit entries: a code's key in the high
 * `keybits` bits, the element's index under it, so that equal keys keep
 * their order (stable) and a pass moves 4 bytes an element.  The key is
 * argkey.h's 16-bit one for a 16-bit format where it orders every code as
 * order_key does (arith_ok: bfloat16), else the order key (9 bits for a
 * 1-byte format, 17 for a 16-bit one); the index then has 32 - keybits
 * bits.  (4096, 4096) bfloat16 np.sort(axis=1) on Zen 4: 64-bit entries of
 * order key and code, the key computed by a call an element, 127 ms; these,
 * 72 ms.
 */
static int
entry_keybits(const mf_format *f)
{
    return (f->itemsize == 2 && arith_ok[f->id]) ? 16 : f->bits + 1;
}

static inline uint32_t
entry_key(const mf_format *f, uint32_t c)
{
    if (f->itemsize == 1) {
        return (uint32_t)key8_max[f->id][c & 0xFFu];
    }
    if (arith_ok[f->id]) {
        return (uint32_t)((int32_t)ae16_key((uint16_t)c, arith_lim[f->id], INT16_MAX) + 32768);
    }
    return order_key(f, c);
}

/* stable LSD radix sort of n entries by their top `keybits` bits, in one
 * or two passes (digits of at most 9 bits, the high one 8 when there are
 * two), both digits counted in one pass; tmp: scratch of n entries */
static void
radix_entries(uint32_t *ent, uint32_t *tmp, npy_intp n, int keybits)
{
    const int ib = 32 - keybits;
    const int two = keybits > 9;
    const int w0 = two ? keybits - 8 : keybits;
    const uint32_t m0 = (1u << w0) - 1u;
    npy_intp c0[513] = {0}, c1[257] = {0};
    const int s1 = two ? ib + w0 : 31;        /* one digit: c1 is not used */
    for (npy_intp i = 0; i < n; i++) {
        const uint32_t e = ent[i];
        c0[((e >> ib) & m0) + 1]++;
        c1[(e >> s1) + 1]++;
    }
    for (uint32_t b = 0; b < m0 + 1; b++) {
        c0[b + 1] += c0[b];
    }
    for (int b = 0; b < 256; b++) {
        c1[b + 1] += c1[b];
    }
    for (npy_intp i = 0; i < n; i++) {
        const uint32_t e = ent[i];
        tmp[c0[(e >> ib) & m0]++] = e;
    }
    if (!two) {
        memcpy(ent, tmp, n * sizeof(uint32_t));
        return;
    }
    for (npy_intp i = 0; i < n; i++) {
        const uint32_t e = tmp[i];
        ent[c1[e >> s1]++] = e;
    }
}


static int
sort_codes(const mf_format *f, char *data, npy_intp n)
{
    if (n < 2) {
        return 0;
    }
    int nkeybits = f->bits + 1;
    npy_intp nbuckets = (npy_intp)1 << nkeybits;
    if (f->itemsize == 1 || n >= nbuckets / 4) {
        /* counting sort over all storage patterns, emitted in key order */
        npy_intp ncodes = (npy_intp)1 << (8 * f->itemsize);
        npy_intp *count = PyMem_RawCalloc(ncodes, sizeof(npy_intp));
        if (count == NULL) {
            return -1;
        }
        for (npy_intp i = 0; i < n; i++) {
            count[mf_load_code(f, data + i * f->itemsize)]++;
        }
        const uint32_t *order = codes_by_key[f->id];
        npy_intp pos = 0;
        for (npy_intp r = 0; r < ncodes && pos < n; r++) {
            uint32_t c = order[r];
            for (npy_intp k = count[c]; k > 0; k--) {
                mf_store_code(f, data + (pos++) * f->itemsize, c);
            }
        }
        PyMem_RawFree(count);
        return 0;
    }
    /* 16-bit codes, fewer elements than buckets (n < 2^15): the stable
     * radix sort of entries (radix_entries), the codes read back through
     * the indices */
    const int keybits = entry_keybits(f);
    const int ib = 32 - keybits;
    uint32_t *ent = PyMem_RawMalloc(n * sizeof(uint32_t));
    uint32_t *tmp = PyMem_RawMalloc(n * sizeof(uint32_t));
    uint16_t *codes = PyMem_RawMalloc(n * sizeof(uint16_t));
    if (ent == NULL || tmp == NULL || codes == NULL) {
        PyMem_RawFree(ent);
        PyMem_RawFree(tmp);
        PyMem_RawFree(codes);
        return -1;
    }
    memcpy(codes, data, n * sizeof(uint16_t));
    for (npy_intp i = 0; i < n; i++) {
        ent[i] = (entry_key(f, codes[i]) << ib) | (uint32_t)i;
    }
    radix_entries(ent, tmp, n, keybits);
    const uint32_t im = (uint32_t)(((uint64_t)1 << ib) - 1u);
    uint16_t *out = (uint16_t *)tmp;            /* data may be unaligned */
    for (npy_intp i = 0; i < n; i++) {
        out[i] = codes[ent[i] & im];
    }
    memcpy(data, out, n * sizeof(uint16_t));
    PyMem_RawFree(ent);
    PyMem_RawFree(tmp);
    PyMem_RawFree(codes);
    return 0;
}

int
mf_sort(void *start, npy_intp num, void *arr)
{
    return sort_codes(arr_format(arr), (char *)start, num);
}

/* stable LSD radix argsort on the keys: of entries (radix_entries) where
 * the index fits under the key, else of 64-bit index and key arrays */
static int argsort_codes(const mf_format *f, const char *data, npy_intp *idx, npy_intp num);

int
mf_argsort(void *start, npy_intp *idx, npy_intp num, void *arr)
{
    return argsort_codes(arr_format(arr), (const char *)start, idx, num);
}

static int
argsort_codes(const mf_format *f, const char *data, npy_intp *idx, npy_intp num)
{
    if (num < 2) {
        return 0;
    }
    /* NumPy hands each row's indices as 0, 1, ..., n-1; others (a caller
     * of the slot with its own order) are read through a copy, which is a
     * random gather: only for rows that stay in the caches */
    int identity = 1;
    for (npy_intp i = 0; i < num && identity; i++) {
        identity = idx[i] == i;
    }
    const int keybits = entry_keybits(f), ib = 32 - keybits;
    if (num <= ((npy_intp)1 << ib) && (identity || num <= 65536)) {
        uint32_t *ent = PyMem_RawMalloc(num * sizeof(uint32_t));
        uint32_t *etmp = PyMem_RawMalloc(num * sizeof(uint32_t));
        npy_intp *orig = identity ? NULL : PyMem_RawMalloc(num * sizeof(npy_intp));
        if (ent == NULL || etmp == NULL || (!identity && orig == NULL)) {
            PyMem_RawFree(ent);
            PyMem_RawFree(etmp);
            PyMem_RawFree(orig);
            return -1;
        }
        if (!identity) {
            memcpy(orig, idx, num * sizeof(npy_intp));
        }
        for (npy_intp i = 0; i < num; i++) {
            const uint32_t c = mf_load_code(f, data + idx[i] * f->itemsize);
            ent[i] = (entry_key(f, c) << ib) | (uint32_t)i;
        }
        radix_entries(ent, etmp, num, keybits);
        const uint32_t im = (uint32_t)(((uint64_t)1 << ib) - 1u);
        for (npy_intp i = 0; i < num; i++) {
            const npy_intp j = (npy_intp)(ent[i] & im);
            idx[i] = identity ? j : orig[j];
        }
        PyMem_RawFree(ent);
        PyMem_RawFree(etmp);
        PyMem_RawFree(orig);
        return 0;
    }
    npy_intp *tmp = PyMem_RawMalloc(num * sizeof(npy_intp));
    uint32_t *k = PyMem_RawMalloc(num * sizeof(uint32_t));
    uint32_t *ktmp = PyMem_RawMalloc(num * sizeof(uint32_t));
    if (tmp == NULL || k == NULL || ktmp == NULL) {
        PyMem_RawFree(tmp);
        PyMem_RawFree(k);
        PyMem_RawFree(ktmp);

        return -1;
    }
    for (npy_intp i = 0; i < num; i++) {
        k[i] = order_key(f, mf_load_code(f, data + idx[i] * f->itemsize));
    }
    int nkeybits = f->bits + 1;
    for (int shift = 0; shift < nkeybits; shift += 9) {
        npy_intp count[513] = {0};
        for (npy_intp i = 0; i < num; i++) {
            count[((k[i] >> shift) & 511u) + 1]++;
        }
        for (int b = 0; b < 512; b++) {
            count[b + 1] += count[b];
        }
        for (npy_intp i = 0; i < num; i++) {
            npy_intp dst = count[(k[i] >> shift) & 511u]++;
            tmp[dst] = idx[i];
            ktmp[dst] = k[i];
        }
        memcpy(idx, tmp, num * sizeof(npy_intp));
        memcpy(k, ktmp, num * sizeof(uint32_t));
    }
    PyMem_RawFree(tmp);
    PyMem_RawFree(k);
    PyMem_RawFree(ktmp);
    return 0;
}

/*
 * argmax/argmin: the first NaN if there is one (NumPy's rule), else the
 * first extreme.  With int16 keys (key8_*) the data is scanned
 * in blocks: the block's extreme key, and only when it beats the best so
 * far, the first index of it in the block; a NaN's key is the extreme, so
 * the scan stops at its block.  Formats with arithmetic keys (arith_ok) go
 * to the level's kernel (arg_extreme8/16, kernels/stream/argext.h: the same
 * scan, its loops vectorized at the level's width).
 */
enum { ARG_BLOCK = 2048 };

#define ARG_SCAN(KEY, BETTER, STOP)                                             \
    do {                                                                        \
        int16_t best = 0;                                                       \
        for (npy_intp b0 = 0; b0 < n; b0 += ARG_BLOCK) {                        \
            const npy_intp len = n - b0 < ARG_BLOCK ? n - b0 : ARG_BLOCK;       \
            int16_t m = KEY(b0);                                                \
            for (npy_intp i = 1; i < len; i++) {                                \
                const int16_t k = KEY(b0 + i);                                  \
                m = BETTER(k, m) ? k : m;                                       \
            }                                                                   \
            if (b0 == 0 || BETTER(m, best)) {                                   \
                npy_intp i = 0;                                                 \
                while (KEY(b0 + i) != m) {                                      \
                    i++;                                                        \
                }                                                               \
                *ind = b0 + i;                                                  \
                best = m;                                                       \
                if (best == (STOP)) {                                           \
                    return 0;                                                   \
                }                                                               \
            }                                                                   \
        }                                                                       \
        return 0;                                                               \
    } while (0)

#define GREATER(a, b) ((a) > (b))
#define LESS(a, b) ((a) < (b))

int
mf_arg_key_lim(const mf_format *f, int16_t *lim)
{
    const int id = (int)(f - mf_formats);
    if (id < 0 || id >= MF_NUM_PUBLIC_FORMATS || !arith_ok[id]) {
        return 0;
    }
    *lim = arith_lim[id];
    return 1;
}

static int
arg_keys(const mf_format *f, const char *p, npy_intp n, npy_intp *ind, int want_max)
{
    const int id = (int)(f - mf_formats);
    *ind = 0;
    if (arith_ok[id]) {
        /* the same scan with the keys computed (argkey.h), in the level's kernel */
        *ind = f->itemsize == 1
               ? mf_k->arg_extreme8((const uint8_t *)p, n, (int8_t)arith_lim[id], want_max)
               : mf_k->arg_extreme16((const uint16_t *)p, n, arith_lim[id], want_max);
        return 0;
    }
    const uint8_t *c = (const uint8_t *)p;
    const int16_t *key = want_max ? key8_max[id] : key8_min[id];
    int16_t stop = want_max ? (int16_t)(f->kind == MF_KIND_FLOAT ? (2 << f->bits) - 1 : -2)
                            : (int16_t)(f->kind == MF_KIND_FLOAT ? -1 : -2);
#define KEY8(i) key[c[i]]
    if (want_max) {
        ARG_SCAN(KEY8, GREATER, stop);
    }
    ARG_SCAN(KEY8, LESS, stop);
#undef KEY8
}

static int
has_arg_keys(const mf_format *f)
{
    const int id = (int)(f - mf_formats);
    return id >= 0 && id < MF_NUM_PUBLIC_FORMATS && (f->itemsize == 1 || arith_ok[id]);
}

int
mf_argmax(void *data, npy_intp n, npy_intp *max_ind, void *arr)
{
    const mf_format *f = arr_format(arr);
    const char *p = (const char *)data;
    *max_ind = 0;
    if (n <= 0) {
        return 0;
    }
    if (has_arg_keys(f)) {
        return arg_keys(f, p, n, max_ind, 1);
    }
    uint32_t best = order_key(f, mf_load_code(f, p));
    uint32_t nan_key = (f->kind == MF_KIND_FLOAT) ? 2 * (1u << f->bits) - 1 : 0xFFFFFFFFu;
    if (best == nan_key) {
        return 0;
    }
    for (npy_intp i = 1; i < n; i++) {
        uint32_t k = order_key(f, mf_load_code(f, p + i * f->itemsize));
        if (k > best) {
            best = k;
            *max_ind = i;
            if (k == nan_key) {
                break;
            }
        }
    }
    return 0;
}

int
mf_argmin(void *data, npy_intp n, npy_intp *min_ind, void *arr)
{
    const mf_format *f = arr_format(arr);
    const char *p = (const char *)data;
    *min_ind = 0;
    if (n <= 0) {
        return 0;
    }
    if (has_arg_keys(f)) {
        return arg_keys(f, p, n, min_ind, 0);
    }
    int is_float = f->kind == MF_KIND_FLOAT;
    uint32_t c0 = mf_load_code(f, p);
    if (is_float && mf_code_isnan(f, c0)) {
        return 0;
    }
    uint32_t best = order_key(f, c0);
    for (npy_intp i = 1; i < n; i++) {
        uint32_t c = mf_load_code(f, p + i * f->itemsize);
        if (is_float && mf_code_isnan(f, c)) {
            *min_ind = i;
            return 0;
        }
        uint32_t k = order_key(f, c);
        if (k < best) {
            best = k;
            *min_ind = i;
        }
    }
    return 0;
}

/* arange: buffer[0], buffer[1] are set; continue start + i*delta */
int
mf_fill(void *buffer, npy_intp length, void *arr)
{
    const mf_format *f = arr_format(arr);
    char *p = (char *)buffer;
    if (length < 2) {
        return 0;
    }
    double start = mf_decode_f64(f, mf_load_code(f, p));
    double delta = mf_decode_f64(f, mf_load_code(f, p + f->itemsize)) - start;
    if (f->kind == MF_KIND_FLOAT && f->itemsize <= 2) {
        /* blocks of the float64 values, rounded once by the encode kernel
         * (codec.h mf_f64_to_f32_odd); arange raises no warning, so the
         * kernel's overflow flag is dropped (5.8 -> 1.9 ms for 2^20) */
        fexcept_t flags;
        fegetexceptflag(&flags, FE_ALL_EXCEPT);
        double buf[512];
        for (npy_intp i = 2; i < length; i += 512) {
            npy_intp len = length - i < 512 ? length - i : 512;
            for (npy_intp j = 0; j < len; j++) {
                buf[j] = start + (double)(i + j) * delta;
            }
            mf_encode_f64_codes(mf_k, f, buf, p + i * f->itemsize, len);
        }
        fesetexceptflag(&flags, FE_ALL_EXCEPT);
        return 0;
    }
    for (npy_intp i = 2; i < length; i++) {
        double v = start + (double)i * delta;
        uint32_t c = f->kind == MF_KIND_FLOAT ? mf_encode_f64(f, v) : mf_encode_int_from_f64(f, v);
        mf_store_code(f, p + i * f->itemsize, c);
    }
    return 0;
}

int
mf_fillwithscalar(void *buffer, npy_intp length, void *value, void *arr)
{
    const mf_format *f = arr_format(arr);
    uint32_t c = mf_load_code(f, (const char *)value);
    for (npy_intp i = 0; i < length; i++) {
        mf_store_code(f, (char *)buffer + i * f->itemsize, c);
    }
    return 0;
}

/* np.fromstring / np.fromfile with sep: parse a float, round once */
int
mf_fromstr(char *str, void *ip, char **endptr, PyArray_Descr *descr)
{
    const mf_format *f = mf_descr_format(descr);
    double v = PyOS_string_to_double(str, endptr, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    uint32_t c = f->kind == MF_KIND_FLOAT ? mf_encode_f64(f, v) : mf_encode_int_from_f64(f, v);
    mf_store_code(f, (char *)ip, c);
    return 0;
}

int
mf_scanfunc(FILE *fp, void *dptr, char *ignore, PyArray_Descr *descr)
{
    const mf_format *f = mf_descr_format(descr);
    double v;
    int r = fscanf(fp, "%lg", &v);
    if (r == 1) {
        uint32_t c = f->kind == MF_KIND_FLOAT ? mf_encode_f64(f, v) : mf_encode_int_from_f64(f, v);
        mf_store_code(f, (char *)dptr, c);
    }
    return r;
}

/* copy n elements of `itemsize` bytes (src NULL: in place), swapping the
 * bytes of 2-byte elements when asked (NumPy's copyswapn) */
void
mf_copyswapn_sized(int itemsize, void *dst, npy_intp dstride, void *src, npy_intp sstride,
                   npy_intp n, int swap)
{
    char *d = (char *)dst;
    const char *s = (const char *)src;
    if (s != NULL && !swap && itemsize == 2) {
        /* a fixed-size move an element (the casts' self copy does the same) */
        for (npy_intp i = 0; i < n; i++, d += dstride) {
            uint16_t v;
            memcpy(&v, s + i * sstride, 2);
            memcpy(d, &v, 2);
        }
        return;
    }
    for (npy_intp i = 0; i < n; i++, d += dstride) {
        if (s != NULL) {
            memcpy(d, s + i * sstride, itemsize);
        }
        if (swap && itemsize == 2) {
            char t = d[0];
            d[0] = d[1];
            d[1] = t;
        }
    }
}

/*
 * argmax / argmin along an axis k that is not the last, of a C-ordered
 * array seen as (A, L, B): NumPy makes a transposed copy and scans each
 * column as a row (the column's elements a row of B apart).  Here a row of
 * up to ARG_COLS columns advances together, each column keeping its best
 * key and its index: the scan of arg_keys (argkey.h's key, the first of
 * equal keys kept, the first NaN winning), so NumPy's indices.  Formats
 * whose codes order as sign and magnitude only (arith_ok); blocks of
 * columns go to the threads.
 */
#define ARG_COLS 512

typedef struct {
    int want_max, itemsize;
    int16_t lim;
    const char *in;
    npy_intp *out;
    npy_intp L, B, blocks;
} arg_cols_job;

static void
arg_cols_range(void *ctx, mf_intp t0, mf_intp nt)
{
    const arg_cols_job *J = (const arg_cols_job *)ctx;
    const npy_intp L = J->L, B = J->B, sz = J->itemsize;
    const int16_t nan = J->want_max ? INT16_MAX : INT16_MIN;
    int16_t best[ARG_COLS];
    int32_t idx[ARG_COLS];
    for (mf_intp t = t0; t < t0 + nt; t++) {
        const npy_intp a = t / J->blocks, c0 = (t % J->blocks) * ARG_COLS;
        const npy_intp w = B - c0 < ARG_COLS ? B - c0 : ARG_COLS;
        const char *p = J->in + (a * L * B + c0) * sz;
        for (npy_intp j = 0; j < w; j++) {
            best[j] = sz == 1 ? (int16_t)ae8_key(((const uint8_t *)p)[j], (int8_t)J->lim,
                                                 J->want_max ? INT8_MAX : INT8_MIN)
                              : ae16_key(((const uint16_t *)p)[j], J->lim, nan);
            idx[j] = 0;
        }
        for (npy_intp i = 1; i < L; i++) {
            const char *r = p + i * B * sz;
            if (sz == 1) {
                const int8_t n8 = J->want_max ? INT8_MAX : INT8_MIN;
                for (npy_intp j = 0; j < w; j++) {
                    const int16_t k = ae8_key(((const uint8_t *)r)[j], (int8_t)J->lim, n8);
                    const int m = J->want_max ? k > best[j] : k < best[j];
                    best[j] = m ? k : best[j];
                    idx[j] = m ? (int32_t)i : idx[j];
                }
            }
            else if (J->want_max) {
                for (npy_intp j = 0; j < w; j++) {
                    const int16_t k = ae16_key(((const uint16_t *)r)[j], J->lim, INT16_MAX);
                    const int m = k > best[j];
                    best[j] = m ? k : best[j];
                    idx[j] = m ? (int32_t)i : idx[j];
                }
            }
            else {
                for (npy_intp j = 0; j < w; j++) {
                    const int16_t k = ae16_key(((const uint16_t *)r)[j], J->lim, INT16_MIN);
                    const int m = k < best[j];
                    best[j] = m ? k : best[j];
                    idx[j] = m ? (int32_t)i : idx[j];
                }
            }
        }
        npy_intp *o = J->out + a * B + c0;
        for (npy_intp j = 0; j < w; j++) {
            o[j] = idx[j];
        }
    }
}

PyObject *
mf_py_arg_axis(PyObject *NPY_UNUSED(self), PyObject *args)
{
    int want_max;
    PyObject *a_obj, *axis;
    if (!PyArg_ParseTuple(args, "iOO:_arg_axis", &want_max, &a_obj, &axis)) {
        return NULL;
    }
    if (!PyArray_CheckExact(a_obj) || !PyIndex_Check(axis)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    const int fid = mf_dtype_index(NPY_DTYPE(descr));
    const int nd = PyArray_NDIM(a);
    if (fid < 0 || fid >= MF_NUM_PUBLIC_FORMATS || !arith_ok[fid] || mf_descr_swapped(descr)
            || nd < 2 || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_ssize_t v = PyNumber_AsSsize_t(axis, NULL);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (v < 0) {
        v += nd;
    }
    if (v < 0 || v >= nd - 1) {
        Py_RETURN_NOTIMPLEMENTED;      /* the last axis (NumPy's own scan is fast), or an error */
    }
    const npy_intp L = PyArray_DIM(a, (int)v);
    npy_intp B = 1, A = 1;
    for (int d = 0; d < nd; d++) {
        if (d < v) {
            A *= PyArray_DIM(a, d);
        }
        else if (d > v) {
            B *= PyArray_DIM(a, d);
        }
    }
    if (L < 1 || L > INT32_MAX || A * B == 0) {
        Py_RETURN_NOTIMPLEMENTED;      /* NumPy raises for an empty axis */
    }
    npy_intp shape[NPY_MAXDIMS];
    for (int d = 0, e = 0; d < nd; d++) {
        if (d != v) {
            shape[e++] = PyArray_DIM(a, d);
        }
    }
    PyArrayObject *res = (PyArrayObject *)PyArray_SimpleNew(nd - 1, shape, NPY_INTP);
    if (res == NULL) {
        return NULL;
    }
    arg_cols_job J = {want_max != 0, (int)mf_formats[fid].itemsize, arith_lim[fid],
                      PyArray_BYTES(a), (npy_intp *)PyArray_DATA(res), L, B,
                      (B + ARG_COLS - 1) / ARG_COLS};
    Py_BEGIN_ALLOW_THREADS
    mf_par_range(arg_cols_range, &J, A * J.blocks, 1,
                 (mf_intp)(L * (B < ARG_COLS ? B : ARG_COLS) * J.itemsize));
    Py_END_ALLOW_THREADS
    return (PyObject *)res;
}

/*
 * np.sort, np.argsort, np.partition, np.median, np.argpartition along the
 * last axis of a C-contiguous array (the "fast_sort", "fast_partition" and
 * _wrapfunc fronts): the rows sorted (or argsorted) on the pool's threads,
 * where NumPy's ndarray.sort / argsort call the format's sort a row at a
 * time on one thread.  Each row goes through sort_codes / argsort_codes, as
 * ndarray.sort / argsort take it, so the codes and indices are the same.
 */
typedef struct {
    const mf_format *f;
    char *data;
    npy_intp *idx;        /* argsort: the indices, a row of n each; else NULL */
    npy_intp n;           /* elements a row */
    int failed;           /* a row's scratch could not be allocated */
} sort_rows_job;

static void
sort_rows_range(void *ctx, mf_intp r0, mf_intp nr)
{
    sort_rows_job *J = (sort_rows_job *)ctx;
    const npy_intp n = J->n, rb = n * J->f->itemsize;
    for (mf_intp r = r0; r < r0 + nr; r++) {
        int rc;
        if (J->idx != NULL) {
            npy_intp *ix = J->idx + r * n;
            for (npy_intp i = 0; i < n; i++) {
                ix[i] = i;
            }
            rc = argsort_codes(J->f, J->data + r * rb, ix, n);
        }
        else {
            rc = sort_codes(J->f, J->data + r * rb, n);
        }
        if (rc < 0) {
            __atomic_store_n(&J->failed, 1, __ATOMIC_RELAXED);
        }
    }
}

/* the format of an array _sort_rows / _argsort_rows take, or -1 */
static int
rows_format(PyObject *a_obj)
{
    if (!PyArray_CheckExact(a_obj)) {
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    PyArray_Descr *descr = PyArray_DESCR(a);
    const int fid = mf_dtype_index(NPY_DTYPE(descr));
    if (fid < 0 || fid >= MF_NUM_PUBLIC_FORMATS || mf_descr_swapped(descr)
            || PyArray_NDIM(a) < 1 || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
        return -1;
    }
    return fid;
}

/* _sort_rows (arg 0: a sorted C-ordered copy) and _argsort_rows (arg 1:
 * the indices ndarray.argsort(kind="stable") gives, as np.argsort and
 * np.argpartition want them), the rows on the threads */
static PyObject *
sort_rows_call(PyObject *a_obj, int arg)
{
    const int fid = rows_format(a_obj);
    if (fid < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyArrayObject *a = (PyArrayObject *)a_obj;
    const int nd = PyArray_NDIM(a);
    PyArrayObject *res = arg ? (PyArrayObject *)PyArray_SimpleNew(nd, PyArray_DIMS(a), NPY_INTP)
                             : (PyArrayObject *)PyArray_NewCopy(a, NPY_CORDER);
    if (res == NULL) {
        return NULL;
    }
    const npy_intp n = PyArray_DIM(a, nd - 1), size = PyArray_SIZE(a);
    if (size == 0 || (!arg && n < 2)) {
        return (PyObject *)res;
    }
    sort_rows_job J = {&mf_formats[fid], PyArray_BYTES(arg ? a : res),
                       arg ? (npy_intp *)PyArray_DATA(res) : NULL, n, 0};
    /* a row's sort reads and writes it (and its indices) a few times:
     * split by those bytes */
    const npy_intp per = J.f->itemsize + (arg ? (npy_intp)sizeof(npy_intp) : 0);
    Py_BEGIN_ALLOW_THREADS
    mf_par_range(sort_rows_range, &J, size / n, 1, (mf_intp)(n * per));
    Py_END_ALLOW_THREADS
    if (J.failed) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    return (PyObject *)res;
}

PyObject *
mf_py_argsort_rows(PyObject *NPY_UNUSED(self), PyObject *a_obj)
{
    return sort_rows_call(a_obj, 1);
}

PyObject *
mf_py_sort_rows(PyObject *NPY_UNUSED(self), PyObject *a_obj)
{
    return sort_rows_call(a_obj, 0);
}
