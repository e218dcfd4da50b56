/*
 * np.matmul and np.vecdot for the float formats: float32 accumulation,
 * one rounding per output element.
 *
 * matmul:  C[i,j] = round(gemm_f32acc chain) -- the canonical "VDPBF16PS
 *          chain" documented in kernels/gemm/serial.c (k pairs, odd index
 *          first, DAZ/FTZ), bit-identical at every kernel level and for any
 *          number of threads.  NaN results are the format's canonical NaN.
 * vecdot:  the kernels' dot summation order (lanes, blocks in float64).
 */
#include <fenv.h>
#include "umath.h"
#include "../kernels/gemm/common.h"
#include "../kernels/parallel.h"
#include "../kernels/scalar_ops.h"

/* row pieces assembled in 64-bit words need the low-address element in
 * the low bits (every target this project builds for) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TRANSPOSE_WORDS 1
#else
#define TRANSPOSE_WORDS 0
#endif

/* columns [j_begin, j_end) of the transpose of a C-ordered matrix (the
 * (r x c) matrix whose column j is src's row j, cs bytes apart) into the
 * contiguous dst, in 32 x 32 tiles: the tile's 32 column pieces (a cache
 * line each) are copied to a buffer, then written out as 32 row pieces, so
 * each line of either matrix is touched once.  (Row by row, every element
 * was a line of its own: 1024^2 took 2 ms; tiles written in place revisited
 * 32 lines that, rows 4 KiB apart, share one L1 set: 2048^2 12 ms.) */
static void
transpose_strip(npy_intp sz, const char *src, npy_intp cs, npy_intp r, npy_intp c,
                npy_intp j_begin, npy_intp j_end, char *dst)
{
    uint16_t t2[32][32];
    uint8_t t1[32][32];
    for (npy_intp j0 = j_begin; j0 < j_end; j0 += 32) {
        npy_intp nj = j_end - j0 < 32 ? j_end - j0 : 32;
        for (npy_intp i0 = 0; i0 < r; i0 += 32) {
            npy_intp ni = r - i0 < 32 ? r - i0 : 32;
            for (npy_intp jj = 0; jj < nj; jj++) {
                const char *piece = src + (j0 + jj) * cs + i0 * sz;
                if (sz == 2 && ni == 32) {
                    memcpy(t2[jj], piece, 64);      /* a fixed size: no call */
                }
                else if (sz == 2) {
                    memcpy(t2[jj], piece, (size_t)ni * 2);
                }
                else {
                    memcpy(t1[jj], piece, (size_t)ni);
                }
            }
            for (npy_intp ii = 0; ii < ni; ii++) {
                if (sz == 2 && nj == 32 && TRANSPOSE_WORDS) {
                    /* the row piece assembled in 64-bit registers and
                     * stored a word at a time: element by element, each
                     * store waited for its line (58% of the time), and a
                     * piece gathered in memory stalled the loads that
                     * copied it out (stores forwarded to a wider load) */
                    char *d = dst + ((i0 + ii) * c + j0) * 2;
                    for (int q = 0; q < 32; q += 4) {
                        uint64_t w = (uint64_t)t2[q][ii] | (uint64_t)t2[q + 1][ii] << 16
                                     | (uint64_t)t2[q + 2][ii] << 32 | (uint64_t)t2[q + 3][ii] << 48;
                        memcpy(d + 2 * q, &w, 8);
                    }
                }
                else if (sz == 2) {
                    uint16_t *d = (uint16_t *)dst + (i0 + ii) * c + j0;
                    for (npy_intp jj = 0; jj < nj; jj++) {
                        d[jj] = t2[jj][ii];
                    }
                }
                else if (sz == 1 && nj == 32 && TRANSPOSE_WORDS) {
                    char *d = dst + (i0 + ii) * c + j0;
                    for (int q = 0; q < 32; q += 8) {
                        uint64_t w = 0;
                        for (int e = 0; e < 8; e++) {
                            w |= (uint64_t)t1[q + e][ii] << (8 * e);
                        }
                        memcpy(d + q, &w, 8);
                    }
                }
                else {
                    uint8_t *d = (uint8_t *)dst + (i0 + ii) * c + j0;
                    for (npy_intp jj = 0; jj < nj; jj++) {
                        d[jj] = t1[jj][ii];
                    }
                }
            }
        }
    }
}

/* the strips on the pool's threads: each takes the next TRANSPOSE_STRIP
 * columns (every element is a copy: any split gives the same bytes) */
#define TRANSPOSE_STRIP 128
typedef struct {
    npy_intp sz, cs, r, c;
    const char *src;
    char *dst;
    npy_intp next;
} transpose_job;

static void
transpose_worker(void *ctx, int w)
{
    (void)w;
    transpose_job *J = (transpose_job *)ctx;
    for (;;) {
        npy_intp j0 = __atomic_fetch_add(&J->next, TRANSPOSE_STRIP, __ATOMIC_RELAXED);
        if (j0 >= J->c) {
            return;
        }
        npy_intp j1 = J->c - j0 < TRANSPOSE_STRIP ? J->c : j0 + TRANSPOSE_STRIP;
        transpose_strip(J->sz, J->src, J->cs, J->r, J->c, j0, j1, J->dst);
    }
}

/* copy an (r x c) matrix of codes with element strides into a contiguous one */
static void
pack_codes(const mf_format *f, const char *src, npy_intp rs, npy_intp cs,
           npy_intp r, npy_intp c, char *dst)
{
    npy_intp sz = f->itemsize;
    if (rs == sz && cs != sz && (sz == 2 || sz == 1) && r >= 16 && c >= 16) {
        /* the transpose of a C-ordered matrix (a @ b.T, a column-major
         * operand): from 1 MiB on the threads too (on one thread it was
         * 10% of a 2048^3 product's time, the other threads waiting) */
        transpose_job J = {sz, cs, r, c, src, dst, 0};
        int T = mf_get_num_threads();
        if (T > 1 && r * c * sz >= ((npy_intp)1 << 20)) {
            npy_intp strips = (c + TRANSPOSE_STRIP - 1) / TRANSPOSE_STRIP;
            if (mf_pool_run(transpose_worker, &J, T > strips ? (int)strips : T) > 0) {
                return;
            }
        }
        transpose_worker(&J, 0);
        return;
    }
    for (npy_intp i = 0; i < r; i++) {
        const char *row = src + i * rs;
        if (cs == sz) {
            memcpy(dst + i * c * sz, row, c * sz);
        }
        else if (sz == 2) {
            /* typed copies: a strided column (np.dot's per-element dotfunc
             * calls gather one for every output) */
            uint16_t *d = (uint16_t *)(dst + i * c * sz);
            for (npy_intp j = 0; j < c; j++) {
                uint16_t v;
                memcpy(&v, row + j * cs, 2);
                d[j] = v;
            }
        }
        else if (sz == 1) {
            uint8_t *d = (uint8_t *)(dst + i * c);
            for (npy_intp j = 0; j < c; j++) {
                d[j] = (uint8_t)row[j * cs];
            }
        }
        else {
            for (npy_intp j = 0; j < c; j++) {
                memcpy(dst + (i * c + j) * sz, row + j * cs, sz);
            }
        }
    }
}

/* does an (r x c) operand with element strides rs, cs hold a NaN / an inf? */
static void
scan_specials(const mf_format *f, const char *p, npy_intp rs, npy_intp cs, npy_intp r,
              npy_intp c, int *has_nan, int *has_inf)
{
    for (npy_intp i = 0; i < r; i++) {
        for (npy_intp j = 0; j < c; j++) {
            uint32_t code = mf_load_code(f, p + i * rs + j * cs);
            *has_nan |= mf_code_isnan(f, code);
            *has_inf |= mf_code_isinf(f, code);
        }
    }
}

/* where the epilogue puts the rounded results, and what it saw */
typedef struct {
    const mf_format *f;
    char *C;
    npy_intp c_n, c_m;         /* byte strides of the output */
    int nan, inf, ovf;         /* set (to 1) from any thread */
    int f32;                   /* the output is float32: no rounding */
} mm_out;

/* the side of the blocks the epilogue transposes */
#define MM_TB 64

/* finished float32 results -> codes; runs in the gemm's threads */
static void
mm_epilogue(void *vctx, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols, float *vals,
            mf_intp ldv)
{
    mm_out *o = (mm_out *)vctx;
    const mf_format *f = o->f;
    const npy_intp sz = f->itemsize;
    const uint32_t qnan = 0x7FC00000u;
    int nan = 0, inf = 0, ovf = 0;
    const npy_intp osz = o->f32 ? 4 : sz;
    if (o->c_n == osz && o->c_m != osz && rows > 1) {
        /* the gemm's columns are the output's rows (x @ W.T computed as
         * (W @ x.T).T): the block goes through transposed, MM_TB x MM_TB at
         * a time, so that the rows below are written whole (element by
         * element through the strides: 0.3-0.6 ms of a 64-row product with
         * a (4096, 4096) W, Zen 4) */
        float t[MM_TB * MM_TB];
        mm_out to = *o;
        to.c_n = o->c_m;
        to.c_m = o->c_n;
        to.nan = to.inf = to.ovf = 0;
        for (mf_intp ib = 0; ib < rows; ib += MM_TB) {
            const mf_intp rb = rows - ib < MM_TB ? rows - ib : MM_TB;
            for (mf_intp jb = 0; jb < cols; jb += MM_TB) {
                const mf_intp cb = cols - jb < MM_TB ? cols - jb : MM_TB;
                for (mf_intp j = 0; j < cb; j++) {
                    for (mf_intp i = 0; i < rb; i++) {
                        t[j * MM_TB + i] = vals[(ib + i) * ldv + jb + j];
                    }
                }
                mm_epilogue(&to, j0 + jb, i0 + ib, cb, rb, t, MM_TB);
            }
        }
        nan = to.nan;
        inf = to.inf;
        ovf = to.ovf;
    }
    else if (o->f32) {
        /* float32 output: the chains themselves, NaNs made +qNaN */
        for (mf_intp i = 0; i < rows; i++) {
            char *crow = o->C + (i0 + i) * o->c_n + j0 * o->c_m;
            const uint32_t *row = (const uint32_t *)(vals + i * ldv);
            for (mf_intp j = 0; j < cols; j++) {
                uint32_t u = row[j], a = u & 0x7FFFFFFFu;
                nan |= a > 0x7F800000u;
                inf |= a == 0x7F800000u;
                u = a > 0x7F800000u ? qnan : u;
                memcpy(crow + j * o->c_m, &u, 4);
            }
        }
    }
    else if (f->id == MF_BFLOAT16 && o->c_m == 2) {
        /* round to nearest even, NaN -> 0x7FC0, in one vectorisable pass */
        uint32_t any_nan = 0, any_inf = 0, any_ovf = 0;
        for (mf_intp i = 0; i < rows; i++) {
            const uint32_t *row = (const uint32_t *)(vals + i * ldv);
            char *crow = o->C + (i0 + i) * o->c_n + j0 * 2;
            uint16_t tmp[256];
            int aligned = ((uintptr_t)crow & 1u) == 0;
            for (mf_intp j0b = 0; j0b < cols; j0b += 256) {
                mf_intp nb = cols - j0b < 256 ? cols - j0b : 256;
                uint16_t *dst = aligned ? (uint16_t *)crow + j0b : tmp;
                for (mf_intp j = 0; j < nb; j++) {
                    uint32_t u = row[j0b + j];
                    uint32_t a = u & 0x7FFFFFFFu;
                    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
                    uint32_t isnan = a > 0x7F800000u;
                    uint32_t isinf = a == 0x7F800000u;
                    any_nan |= isnan;
                    any_inf |= isinf;
                    any_ovf |= ((r & 0x7FFFu) == 0x7F80u) & (a < 0x7F800000u);
                    dst[j] = (uint16_t)(isnan ? 0x7FC0u : r);
                }
                if (!aligned) {
                    memcpy(crow + 2 * j0b, tmp, 2 * (size_t)nb);
                }
            }
        }
        nan = any_nan != 0;
        inf = any_inf != 0;
        ovf = any_ovf != 0;
    }
    else {
        /* a vectorisable look for inf/NaN first: they are rare; an exponent
         * field of all ones carries into bit 31 */
        uint32_t any = 0;
        for (mf_intp i = 0; i < rows; i++) {
            const uint32_t *row = (const uint32_t *)(vals + i * ldv);
            for (mf_intp j = 0; j < cols; j++) {
                any |= (row[j] & 0x7F800000u) + 0x00800000u;
            }
        }
        if (any & 0x80000000u) {
            for (mf_intp i = 0; i < rows; i++) {
                float *row = vals + i * ldv;
                for (mf_intp j = 0; j < cols; j++) {
                    uint32_t u;
                    memcpy(&u, &row[j], 4);
                    if ((u & 0x7F800000u) == 0x7F800000u) {
                        if (u & 0x007FFFFFu) {
                            memcpy(&row[j], &qnan, 4);      /* the canonical NaN */
                            nan = 1;
                        }
                        else {
                            inf = 1;
                        }
                    }
                }
            }
        }
        feclearexcept(FE_OVERFLOW);
        for (mf_intp i = 0; i < rows; i++) {
            char *crow = o->C + (i0 + i) * o->c_n + j0 * o->c_m;
            const float *row = vals + i * ldv;
            if (o->c_m == sz && ((uintptr_t)crow % (uintptr_t)sz) == 0) {
                mf_k->encode_f32(f, row, crow, cols);
            }
            else {
                for (mf_intp j = 0; j < cols; j++) {
                    mf_store_code(f, crow + j * o->c_m, mf_enc1(f, row[j]));
                }
            }
        }
        ovf = fetestexcept(FE_OVERFLOW) != 0;
    }
    if (nan) {
        MF_ATOMIC_OR(&o->nan, 1);
    }
    if (inf) {
        MF_ATOMIC_OR(&o->inf, 1);
    }
    if (ovf) {
        MF_ATOMIC_OR(&o->ovf, 1);
    }
}

/*
 * C = A @ B for one format: the gemm's canonical float32 chains (see
 * kernels/gemm/serial.c), rounded once per element into the format by the
 * epilogue, in the gemm's threads.  Every NaN result is stored as the
 * format's canonical NaN.  The floating-point flags do not depend on the
 * kernel level or the number of threads: the gemm's own flags are dropped;
 * "invalid" is raised when a NaN comes out of NaN-free operands, "overflow"
 * when an inf comes out of inf-free operands or the rounding into the format
 * overflows.
 */
typedef struct {
    const mf_format *f;
    int out_f32;
    npy_intp k, sa, sb, sc;
    const char *a0, *b0;
    char *c0;
    int ovf;
} dots_job;

/* a dot's result into out: float32, or rounded once into the format (NaN:
 * the canonical one) */
static inline void
store_dot(const mf_format *f, int out_f32, double d, char *c, int *ovf)
{
    if (out_f32) {
        float v = (float)d;
        memcpy(c, &v, 4);
    }
    else if (isnan(d)) {
        mf_store_code(f, c, mf_nan_code(f, 0));
    }
    else {
        mf_store_code(f, c, mf_encode_f64_ovf(f, d, ovf));
    }
}

/* outputs [start, start + len) of contiguous, aligned rows */
static void
dots_range(void *ctx, mf_intp start, mf_intp len)
{
    dots_job *J = (dots_job *)ctx;
    int ovf = 0;
    for (npy_intp o = start; o < start + len; o++) {
        double d = mf_k->dot(J->f, J->a0 + o * J->sa, J->b0 + o * J->sb, J->k);
        store_dot(J->f, J->out_f32, d, J->c0 + o * J->sc, &ovf);
    }
    if (ovf) {
        MF_ATOMIC_OR(&J->ovf, 1);
    }
}

/*
 * out[o] = dot(a[o, :], b[o, :]) for o < N, k terms each, in the dot kernels'
 * order; a[o, p] at a0 + o*sa + p*sak, likewise b and out[o] at c0 + o*sc.
 * np.vecdot, and matmul products with a single output.  NaN results are the
 * format's canonical NaN (as matmul's); out_f32 stores the float32 result.
 */
int
mf_strided_dots(const mf_format *f, int out_f32, npy_intp N, npy_intp k,
             const char *a0, npy_intp sa, npy_intp sak, const char *b0, npy_intp sb, npy_intp sbk,
             char *c0, npy_intp sc)
{
    npy_intp sz = f->itemsize;
    /* packing buffers, only when an operand is strided or misaligned */
    char *pa = NULL, *pb = NULL;
    int pack_a = sak != sz || (uintptr_t)a0 % (uintptr_t)sz || (uintptr_t)sa % (uintptr_t)sz;
    int pack_b = sbk != sz || (uintptr_t)b0 % (uintptr_t)sz || (uintptr_t)sb % (uintptr_t)sz;
    if (!pack_a && !pack_b && N > 1 && k * sz < MF_PAR_MIN_REDUCE_BYTES) {
        /* many short rows (np.vecdot of two matrices): the rows on the
         * threads, each dot the kernel's whole; counted as one operand's
         * bytes, so that they split from 1 MiB of input, as sums do */
        dots_job J = {f, out_f32, k, sa, sb, sc, a0, b0, c0, 0};
        mf_par_range(dots_range, &J, N, 1, k * sz);
        if (J.ovf) {
            mf_raise_overflow();
        }
        return 0;
    }
    if ((pack_a && (pa = PyMem_RawMalloc((size_t)(k * sz) + 1)) == NULL)
            || (pack_b && (pb = PyMem_RawMalloc((size_t)(k * sz) + 1)) == NULL)) {
        PyMem_RawFree(pa);
        NPY_ALLOW_C_API_DEF
        NPY_ALLOW_C_API
        PyErr_NoMemory();
        NPY_DISABLE_C_API
        return -1;
    }
    int ovf = 0;
    for (npy_intp o = 0; o < N; o++) {
        const char *a = a0 + o * sa;
        const char *b = b0 + o * sb;
        if (pack_a) {
            pack_codes(f, a, 0, sak, 1, k, pa);
            a = pa;
        }
        if (pack_b) {
            pack_codes(f, b, 0, sbk, 1, k, pb);
            b = pb;
        }
        store_dot(f, out_f32, mf_par_dot(f, a, b, k), c0 + o * sc, &ovf);
    }
    PyMem_RawFree(pa);
    PyMem_RawFree(pb);
    if (ovf) {
        mf_raise_overflow();
    }
    return 0;
}

/* x @ W.T with at most this many rows in x (or the level's
 * gemm_thin_cols, where more) is computed as (W @ x.T).T on every level
 * (the thin kernels read W in place) */
#define MM_SWAP_ROWS 16

/* one np.matmul loop call: N products of (n x k) @ (k x m) */
typedef struct {
    const mf_format *f;
    int out_f32, a_direct, b_direct;
    int swap;                   /* C.T = B.T @ A.T (B.T read in place: mm_swap) */
    int thin_cols;              /* the level's gemm_thin_cols(f), 0 for none */
    npy_intp N, n, k, m;
    char *const *data;
    const npy_intp *strides;
    npy_intp next;              /* the next product (threads over the stack) */
    int raise_invalid, raise_overflow, nomem;
} mm_job;

/* product o, then product nx (< 0: none) on this thread; apack, bpack:
 * scratch for operands not read in place */
static void
mm_item(mm_job *J, npy_intp o, npy_intp nx, char *apack, char *bpack, int *raise_invalid,
        int *raise_overflow)
{
    const mf_format *f = J->f;
    const npy_intp *strides = J->strides;
    npy_intp n = J->n, k = J->k, m = J->m, sz = f->itemsize;
    npy_intp a_n = strides[3], a_k = strides[4], b_k = strides[5], b_m = strides[6];
    npy_intp c_n = strides[7], c_m = strides[8];
    const char *A0 = J->data[0] + o * strides[0];
    const char *B0 = J->data[1] + o * strides[1];
    const char *A = A0, *B = B0;
    npy_intp lda = a_n / sz, ldb = b_k / sz;
    npy_intp rows = n, cols = m, oc_n = c_n, oc_m = c_m;     /* the gemm's C */
    /* with swap, the thin kernels take A.T as its transpose (A's rows,
     * where they are contiguous); else it is packed below (through
     * gemm_f32acc_bt's blocked path, float8 without a thin kernel had
     * taken 7.5 -> 9.9 ms for 8 rows @ (4096, 4096).T, Zen 4, two threads) */
    const int swap_bt = J->swap && n <= J->thin_cols && a_k == sz && a_n % sz == 0
                        && (uintptr_t)A0 % (uintptr_t)sz == 0 && mf_k->gemm_f32acc_bt != NULL;
    if (J->swap) {
        /* C.T (m x n) = B.T (m x k, rows in place) @ A.T (k x n) */
        A = B0;
        lda = b_m / sz;
        rows = m;
        cols = n;
        oc_n = c_m;
        oc_m = c_n;
    }
    else if (!J->a_direct) {
        pack_codes(f, A0, a_n, a_k, n, k, apack);
        A = apack;
        lda = k;
    }
    /* B the transpose of a C-ordered matrix (a @ b.T, as many rows in a as
     * in b or more): the gemm packs its panels from b's rows, where it has
     * a way to (gemm_f32acc_bt); else B is transposed first, below */
    const int bt = !J->b_direct && !J->swap && b_k == sz && b_m % sz == 0
                   && (uintptr_t)B0 % (uintptr_t)sz == 0 && mf_k->gemm_f32acc_bt != NULL;
    mm_out out = {f, J->data[2] + o * strides[2], oc_n, oc_m, 0, 0, 0, J->out_f32};
    int bf16_flags = 0;
    mf_gemm_epilogue ep = {mm_epilogue, &out, NULL, 0, &bf16_flags, {NULL, NULL}, {0, 0}};
    if (nx >= 0 && !J->swap && J->a_direct && J->b_direct && a_k == sz && b_m == sz && a_n == k * sz
            && b_k == m * sz) {
        /* the next product's operands, whole blocks: the kernels fetch them
         * into L2 as they go (from L3 the packing of B stalled on its
         * loads: 8% of a stack of 128x256 @ 256x128 products) */
        ep.next[0] = J->data[0] + nx * strides[0];
        ep.next_bytes[0] = (size_t)(n * k * sz);
        ep.next[1] = J->data[1] + nx * strides[1];
        ep.next_bytes[1] = (size_t)(k * m * sz);
    }
    if (!J->out_f32 && f->id == MF_BFLOAT16 && oc_m == 2 && oc_n % 2 == 0
            && (uintptr_t)out.C % 2 == 0) {
        ep.bf16_out = out.C;
        ep.bf16_rs = oc_n;
    }
    if (!(bt && mf_k->gemm_f32acc_bt(f, rows, cols, k, A, lda, B0, b_m / sz, NULL, 0, &ep) == 0)
            && !(swap_bt
                 && mf_k->gemm_f32acc_bt(f, rows, cols, k, A, lda, A0, a_n / sz, NULL, 0, &ep) == 0)) {
        if (J->swap) {
            pack_codes(f, A0, a_k, a_n, k, n, bpack);
            B = bpack;
            ldb = n;
        }
        else if (!J->b_direct) {
            pack_codes(f, B0, b_k, b_m, k, m, bpack);
            B = bpack;
            ldb = m;
        }
        mf_k->gemm_f32acc(f, rows, cols, k, A, lda, B, ldb, NULL, 0, &ep);
    }
    out.nan |= (bf16_flags & 1) != 0;
    out.inf |= (bf16_flags & 2) != 0;
    out.ovf |= (bf16_flags & 4) != 0;
    if (out.nan || out.inf) {
        int in_nan = 0, in_inf = 0;
        scan_specials(f, A0, a_n, a_k, n, k, &in_nan, &in_inf);
        scan_specials(f, B0, b_k, b_m, k, m, &in_nan, &in_inf);
        *raise_invalid |= out.nan && !in_nan;
        *raise_overflow |= out.inf && !in_inf;
    }
    *raise_overflow |= out.ovf;
}

/* threads over a stack of products too small to be threaded one by one:
 * each product on one thread (its gemm finds the pool busy), the same bits */
static void
mm_worker(void *ctx, int w)
{
    (void)w;
    mm_job *J = (mm_job *)ctx;
    npy_intp sz = J->f->itemsize;
    char *apack = J->a_direct ? NULL : malloc((size_t)(J->n * J->k * sz) + 1);
    char *bpack = J->b_direct ? NULL : malloc((size_t)(J->k * (J->swap ? J->n : J->m) * sz) + 1);
    int inv = 0, ovf = 0;
    if ((!J->a_direct && apack == NULL) || (!J->b_direct && bpack == NULL)) {
        /* the others take the products; the caller's thread must not fail */
        if (w == 0) {
            __atomic_store_n(&J->nomem, 1, __ATOMIC_RELAXED);
        }
    }
    else {
        /* each product is taken before the one before it starts, which
         * then knows what comes next on this thread */
        npy_intp o = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        while (o < J->N) {
            npy_intp nx = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
            mm_item(J, o, nx < J->N ? nx : -1, apack, bpack, &inv, &ovf);
            o = nx;
        }
    }
    free(apack);
    free(bpack);
    if (inv) {
        __atomic_fetch_or(&J->raise_invalid, 1, __ATOMIC_RELAXED);
    }
    if (ovf) {
        __atomic_fetch_or(&J->raise_overflow, 1, __ATOMIC_RELAXED);
    }
}

static int
matmul_loop(PyArrayMethod_Context *context, char *const data[],
            npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *NPY_UNUSED(aux))
{
    const mf_format *f = mf_descr_format(context->descriptors[0]);
    const int out_f32 = context->descriptors[2]->type_num == NPY_FLOAT32;
    npy_intp N = dimensions[0], n = dimensions[1], k = dimensions[2], m = dimensions[3];
    npy_intp sz = f->itemsize;
    npy_intp a_n = strides[3], a_k = strides[4], b_k = strides[5], b_m = strides[6];
    if (N <= 0 || n <= 0 || m <= 0) {
        return 0;
    }
    if (n == 1 && m == 1) {
        /* one output per product (vector @ vector): a single float32 chain
         * cannot be spread over SIMD lanes, so the dot kernels' summation
         * order (np.vecdot's) is used, identical at every level */
        return mf_strided_dots(f, out_f32, N, k, data[0], strides[0], strides[4],
                            data[1], strides[1], strides[5], data[2], strides[2]);
    }
    /* operands the gemm can read in place: aligned, unit column stride, row
     * stride a multiple of the itemsize; others are copied into contiguous
     * blocks */
    mm_job J = {.f = f, .out_f32 = out_f32, .N = N, .n = n, .k = k, .m = m, .data = data,
                .strides = strides};
    J.thin_cols = mf_k->gemm_thin_cols != NULL ? mf_k->gemm_thin_cols(f) : 0;
    J.a_direct = (a_k == sz || k <= 1) && a_n % sz == 0
                 && (uintptr_t)data[0] % (uintptr_t)sz == 0 && strides[0] % sz == 0;
    J.b_direct = (b_m == sz || m <= 1) && b_k % sz == 0
                 && (uintptr_t)data[1] % (uintptr_t)sz == 0 && strides[1] % sz == 0;
    /* B the transpose of a C-ordered matrix (x @ W.T: a linear layer) with
     * fewer rows in A than columns in B: C.T = W @ x.T, W's rows read in
     * place (the thin products' kernels for up to 16 rows of x; at
     * avx512bf16 up to 128 where W has MF_GEMM_THIN_MIN_ROWS rows) and x.T
     * taken from x's rows (mm_item), not B's k * m codes gathered down its
     * columns (4096x4096: 120 ms).  Every gemm path computes each output as
     * the same chain, so the bits do not change.  Past those rows the
     * levels with gemm_f32acc_bt pack W's panels from its rows instead
     * (mm_item): the swap packed all of x.T first and wrote C through
     * swapped strides ((2048, 8192) @ (4096, 8192).T, Zen 5, two threads:
     * 179-187 ms swapped, 145-149 as a @ b). */
    J.swap = !J.b_direct && b_k == sz && b_m % sz == 0 && k > 1 && n < m
             && (uintptr_t)data[1] % (uintptr_t)sz == 0 && strides[1] % sz == 0
             && (n <= MM_SWAP_ROWS || mf_k->gemm_f32acc_bt == NULL
                 || (n <= J.thin_cols && m >= MF_GEMM_THIN_MIN_ROWS));
    if (J.swap) {
        J.a_direct = 1;         /* A is read by the packing of A.T */
    }
    fexcept_t flags;
    fegetexceptflag(&flags, FE_ALL_EXCEPT);
    /* a stack of products each below the gemm's own threading, 2^20
     * multiply-adds or more in all: the products on the threads */
    double work = (double)n * (double)m * (double)k;
    int T = mf_get_num_threads();
    if (N > 1 && T > 1 && work < MF_GEMM_THREADED_WORK && work * (double)N >= (double)(1 << 20)
            && mf_pool_run(mm_worker, &J, T > N ? (int)N : T) > 0 && !J.nomem) {
        /* done */
    }
    else {
        char *apack = J.a_direct ? NULL : PyMem_RawMalloc((size_t)(n * k * sz) + 1);
        char *bpack = J.b_direct ? NULL : PyMem_RawMalloc((size_t)(k * (J.swap ? n : m) * sz) + 1);
        if ((!J.a_direct && apack == NULL) || (!J.b_direct && bpack == NULL)) {
            PyMem_RawFree(apack);
            PyMem_RawFree(bpack);
            NPY_ALLOW_C_API_DEF
            NPY_ALLOW_C_API
            PyErr_NoMemory();
            NPY_DISABLE_C_API
            return -1;
        }
        /* the products the threads left (all of them when they did not run) */
        for (npy_intp o = J.next; o < N; o++) {
            mm_item(&J, o, o + 1 < N ? o + 1 : -1, apack, bpack, &J.raise_invalid,
                    &J.raise_overflow);
        }
        PyMem_RawFree(apack);
        PyMem_RawFree(bpack);
    }
    /* the flags of the gemm (and of the epilogue in this thread) are
     * dropped; those of the rules above are raised */
    fesetexceptflag(&flags, FE_ALL_EXCEPT);
    if (J.raise_invalid) {
        feraiseexcept(FE_INVALID);
    }
    if (J.raise_overflow) {
        mf_raise_overflow();
    }
    return 0;
}

static int
vecdot_loop(PyArrayMethod_Context *context, char *const data[],
            npy_intp const dimensions[], npy_intp const strides[], NpyAuxData *NPY_UNUSED(aux))
{
    return mf_strided_dots(mf_descr_format(context->descriptors[0]), 0, dimensions[0], dimensions[1],
                        data[0], strides[0], strides[3], data[1], strides[1], strides[4],
                        data[2], strides[2]);
}

/*
 * _core._gemm_f32acc(format_name, A, B, C): C += A @ B with the active
 * level's gemm_f32acc, in place.  A (m x k) and B (k x n) hold codes
 * (uint8 or uint16, as the format's itemsize), C is float32 (m x n); all
 * C-contiguous.  For tests: the float32 accumulation before the rounding.
 */
PyObject *
mf_py_gemm_f32acc(PyObject *NPY_UNUSED(self), PyObject *args)
{
    const char *name;
    PyArrayObject *a, *b, *c;
    if (!PyArg_ParseTuple(args, "sO!O!O!", &name, &PyArray_Type, &a, &PyArray_Type, &b,
                          &PyArray_Type, &c)) {
        return NULL;
    }
    const mf_format *f = NULL;
    for (int i = 0; i < MF_NUM_PUBLIC_FORMATS; i++) {
        if (strcmp(mf_formats[i].name, name) == 0 && mf_formats[i].kind == MF_KIND_FLOAT) {
            f = &mf_formats[i];
        }
    }
    if (f == NULL) {
        PyErr_Format(PyExc_ValueError, "not a float format: %s", name);
        return NULL;
    }
    int code_type = f->itemsize == 2 ? NPY_UINT16 : NPY_UINT8;
    if (PyArray_NDIM(a) != 2 || PyArray_NDIM(b) != 2 || PyArray_NDIM(c) != 2
            || PyArray_TYPE(a) != code_type || PyArray_TYPE(b) != code_type
            || PyArray_TYPE(c) != NPY_FLOAT32
            || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_IS_C_CONTIGUOUS(b)
            || !PyArray_IS_C_CONTIGUOUS(c) || !PyArray_ISALIGNED(a) || !PyArray_ISALIGNED(b)
            || !PyArray_ISALIGNED(c) || !PyArray_ISWRITEABLE(c)) {
        PyErr_SetString(PyExc_TypeError,
                        "_gemm_f32acc needs C-contiguous 2-D code arrays of the format's "
                        "itemsize and a writeable C-contiguous 2-D float32 C");
        return NULL;
    }
    npy_intp m = PyArray_DIM(a, 0), k = PyArray_DIM(a, 1), n = PyArray_DIM(b, 1);
    if (PyArray_DIM(b, 0) != k || PyArray_DIM(c, 0) != m || PyArray_DIM(c, 1) != n) {
        PyErr_SetString(PyExc_ValueError, "_gemm_f32acc: shapes do not match");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    mf_k->gemm_f32acc(f, m, n, k, PyArray_DATA(a), k, PyArray_DATA(b), n,
                      (float *)PyArray_DATA(c), n, NULL);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* _core._set_gemm_bpack_limit(nbytes) -> previous: the most packed B one
 * GEMM job holds (tests: the paths of a B wider than one packing) */
PyObject *
mf_py_set_gemm_bpack_limit(PyObject *NPY_UNUSED(self), PyObject *arg)
{
    Py_ssize_t v = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (v < 4096) {
        PyErr_SetString(PyExc_ValueError, "_set_gemm_bpack_limit: at least 4096 bytes");
        return NULL;
    }
    size_t prev = mf_gemm_max_bpack;
    mf_gemm_max_bpack = (size_t)v;
    return PyLong_FromSize_t(prev);
}

static int
add_gufunc_loop(PyObject *umath, const char *name, PyArrayMethod_StridedLoop *loop,
                PyArray_DTypeMeta *F, PyArray_DTypeMeta *Out)
{
    PyObject *ufunc = PyObject_GetAttrString(umath, name);
    if (ufunc == NULL) {
        return -1;
    }
    PyArray_DTypeMeta *dtypes[3] = {F, F, Out};
    PyType_Slot slots[] = {
        {NPY_METH_strided_loop, (void *)loop},
        {0, NULL},
    };
    PyArrayMethod_Spec spec = {
        .name = "minifloat_gufunc",
        .nin = 2,
        .nout = 1,
        .casting = NPY_NO_CASTING,
        .flags = 0,
        .dtypes = dtypes,
        .slots = slots,
    };
    int r = PyUFunc_AddLoopFromSpec(ufunc, &spec);
    Py_DECREF(ufunc);
    return r;
}

int
mf_register_matmul(PyObject *umath)
{
    PyArray_Descr *f32 = PyArray_DescrFromType(NPY_FLOAT32);
    if (f32 == NULL) {
        return -1;
    }
    PyArray_DTypeMeta *f32_DType = NPY_DTYPE(f32);
    Py_INCREF(f32_DType);
    Py_DECREF(f32);
    for (int fid = 0; fid < MF_NUM_PUBLIC_FORMATS; fid++) {
        if (mf_formats[fid].kind != MF_KIND_FLOAT) {
            continue;
        }
        PyArray_DTypeMeta *F = &mf_dtypes[fid];
        /* (F, F) -> float32: matmul(a, b, dtype=float32) or a float32 out=
         * receive the float32 chains unrounded, as ml_dtypes computes in
         * float32 */
        if (add_gufunc_loop(umath, "matmul", matmul_loop, F, F) < 0
                || add_gufunc_loop(umath, "matmul", matmul_loop, F, f32_DType) < 0
                || add_gufunc_loop(umath, "vecdot", vecdot_loop, F, F) < 0) {
            Py_DECREF(f32_DType);
            return -1;
        }
    }
    Py_DECREF(f32_DType);
    return 0;
}
