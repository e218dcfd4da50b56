/*
 * The blocked, threaded GEMM of the SIMD levels (driver.c, compiled once,
 * without ISA flags) and what each level gives it (gemm/<level>.c, compiled
 * with the level's flags): an ops table with its packing routines, its
 * micro-kernel and its small-product loop.  The driver calls them through
 * the table: one indirect call per packed panel and per micro-tile, which
 * keeps every inner loop in the level's own code.
 *
 * Layout: the k values are packed in pairs (2q, 2q+1), an odd k padded with
 * one zero member.  For a range of NC columns, B is packed once for the whole
 * depth, as KC x NR micro-panels (by all threads together when the threads
 * split the rows and it is larger than 2 MiB; a smaller one by each thread
 * for itself); then for each block of MC rows, the float32 results live
 * in a scratch block (rows and columns padded to whole MR x NR tiles, so the
 * micro-kernel never sees an edge), A is packed into MR-row micro-panels
 * (or read in place by ops->kernel_rows) and the micro-kernel updates MR x
 * NR tiles of the scratch.  A is packed (or read in place) for all of k at
 * once where that fits, and then the scratch is gone
 * through in column chunks of about 128 KiB, each through all of k (it
 * stays in L2); else KC at a time, each k block over the whole scratch.
 * The kernels prefetch the next B panel as they go (on one thread whose
 * packed B stays in L2, the caller's hint instead: mf_gemm_epilogue.next).  When the block is
 * finished it goes to the epilogue (or back into C).  KC is even, so pairs
 * never straddle blocks and every output element is exactly the canonical
 * chain of serial.c, in any of these orders.
 */
#ifndef MF_GEMM_DRIVER_H
#define MF_GEMM_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include "../kernels.h"

/* what the packers read: the format, the level's tile and, for the 8-bit
 * formats, each code's bfloat16 bits (exact: <= 7 mantissa bits) */
typedef struct {
    const mf_format *f;
    int MR, NR;
    uint16_t bf16[256];
} mf_gemm_ctx;

/* pack rows/cols [r0, r0+cnt) of the k range [p0, p0+kc) into micro-panels
 * (cnt padded with zeros to a multiple of MR or NR); k is the full depth */
typedef void (*mf_gemm_pack_fn)(const mf_gemm_ctx *ctx, const void *src, mf_intp ld,
                                mf_intp r0, mf_intp cnt, mf_intp p0, mf_intp kc, mf_intp k,
                                void *dst);
/* C[MR x NR] (row stride ldc) += packed A panel * packed B panel, kq pairs;
 * on the way, the npf 64-byte lines from pf (the next B panel's piece, for
 * this tile to fetch; NULL: none) go to L2, spread over the k steps
 * (mf_gemm_pf below) */
typedef void (*mf_gemm_kernel_fn)(mf_intp kq, const void *a, const void *b, float *c,
                                  mf_intp ldc, const void *pf, mf_intp npf);

/* the same with A's rows (1 <= rows <= MR; C's other rows are not touched)
 * read in place: bfloat16 codes from a (row stride lda elements), an even
 * number of k values; NULL: none */
typedef void (*mf_gemm_kernel_rows_fn)(mf_intp kq, const void *a, mf_intp lda, const void *b,
                                       float *c, mf_intp ldc, const void *pf, mf_intp npf,
                                       int rows);

/* the same, for a k of one block with the bfloat16 epilogue: the tile
 * starts from zero, and rows x cols (cols <= NR) of it go straight to
 * ep->bf16_out at (i0, j0), rounded as mf_gemm_store_bf16 rounds them (a
 * tile holding a value that rounds to infinity, or is infinite or NaN,
 * through mf_gemm_store_bf16 itself); NULL: none */
typedef void (*mf_gemm_kernel_rows_bf16_fn)(mf_intp kq, const void *a, mf_intp lda,
                                            const void *b, const mf_gemm_epilogue *ep,
                                            mf_intp i0, mf_intp j0, int cols, const void *pf,
                                            mf_intp npf, int rows);

/* the kernels' prefetch: one line every `every` k steps.  A software
 * prefetch occupies a fill buffer until its line arrives; many at once
 * stall the kernel's own loads */
typedef struct {
    const char *p, *end;
    mf_intp every, cnt;
} mf_gemm_pf;

static inline mf_gemm_pf
mf_gemm_pf_start(const void *pf, mf_intp npf, mf_intp steps)
{
    mf_gemm_pf s;
    s.p = (const char *)pf;
    s.end = pf != NULL ? s.p + 64 * npf : s.p;
    s.every = (npf > 0 && steps > npf) ? steps / npf : 1;
    s.cnt = 1;
    return s;
}

static inline void
mf_gemm_pf_step(mf_gemm_pf *s)
{
    if (--s->cnt == 0) {
        s->cnt = s->every;
        if (s->p < s->end) {
            __builtin_prefetch(s->p, 0, 2);
            s->p += 64;
        }
    }
}
/* gemm_f32acc's contract without packing or threads (loops.h's mf_gemm_small) */
typedef void (*mf_gemm_small_fn)(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                                 const void *A, mf_intp lda, const void *B, mf_intp ldb,
                                 float *C, mf_intp ldc, const mf_gemm_epilogue *ep);

/* bfloat16 matrix times a few columns: acc[i * nb + j] = the canonical
 * chain (serial.c) of row i of A (codes, row stride lda) with column j of b
 * (float32 values, [k][nb]) starting from acc[i * nb + j], for i < rows,
 * j < nb; called in the kernels' FP environment */
typedef void (*mf_gemm_gemv_fn)(mf_intp rows, mf_intp k, const uint16_t *A, mf_intp lda,
                                const float *b, mf_intp nb, float *acc);
void mf_avx512_gevm_bf16(int rows, mf_intp k, const uint16_t *A, mf_intp lda,
                         const uint16_t *B, mf_intp ldb, mf_intp n, float *acc, mf_intp na);

/* a few bfloat16 rows times B (v @ B): acc[i * na + j] = the canonical
 * chain of row i of A (codes, row stride lda) with column j of B (codes,
 * row stride ldb) from acc[i * na + j], for i < rows <= MF_GEVM_MAX_ROWS,
 * j < n; called in the kernels' FP environment (gemm/gevm.h) */
#define MF_GEVM_MAX_ROWS 4
typedef void (*mf_gemm_gevm_fn)(int rows, mf_intp k, const uint16_t *A, mf_intp lda,
                                const uint16_t *B, mf_intp ldb, mf_intp n, float *acc,
                                mf_intp na);

/* the same with B as bfloat16 pairs, the operand of VDPBF16PS: bp[q * bw +
 * j] holds column j's codes at k = 2q (low half) and 2q + 1 (high half; +0
 * past an odd k), zeros for nb <= j < bw, where bw = MF_GEMV_PAIRS_WIDTH(nb)
 * dwords; called in the kernels' FP environment */
#define MF_GEMV_PAIRS_WIDTH(nb) (((nb) + 15) / 16 * 16)
typedef void (*mf_gemm_gemv_pairs_fn)(mf_intp rows, mf_intp k, const uint16_t *A, mf_intp lda,
                                      const uint32_t *bp, mf_intp nb, float *acc);

/* the same with A of 8-bit codes, lut[code] their bfloat16 bits
 * (mf_gemm_ctx.bf16) */
typedef void (*mf_gemm_gemv_pairs8_fn)(mf_intp rows, mf_intp k, const uint8_t *A, mf_intp lda,
                                       const uint32_t *bp, mf_intp nb, float *acc,
                                       const uint16_t *lut);

/* the AVX-512 ones (gemm/avx512.c), which the AVX512_BF16 level uses too */
void mf_avx512_gemv_bf16(mf_intp rows, mf_intp k, const uint16_t *A, mf_intp lda,
                         const float *b, mf_intp nb, float *acc);

typedef struct {
    int MR, NR;
    mf_intp KC, MC, NC;        /* KC even; MC, NC multiples of MR, NR */
    size_t pair_bytes;         /* bytes of one packed k pair of one row/column */
    mf_gemm_pack_fn pack_a;    /* A panel: [q][MR] */
    mf_gemm_pack_fn pack_b;    /* B panel: [q][NR] */
    /* NULL, or pack_b's panels from B's transpose (its rows are B's columns),
     * called with a context whose MR is NR (mf_gemm_run_bt) */
    mf_gemm_pack_fn pack_bt;
    mf_gemm_kernel_fn kernel;
    mf_gemm_kernel_rows_fn kernel_rows;   /* NULL, or bfloat16 A in place */
    mf_gemm_kernel_rows_bf16_fn kernel_rows_bf16;   /* NULL, or that into bf16_out */
    mf_gemm_small_fn small;    /* small products, and k too deep to pack */
    int ftz_daz;               /* run in the kernels' FP environment (driver.c) */
    mf_gemm_gemv_fn gemv;      /* NULL, or bfloat16 products with few columns */
    mf_gemm_gevm_fn gevm;      /* NULL, or bfloat16 products with few rows */
    mf_gemm_gemv_pairs_fn gemv_pairs;  /* NULL, or gemv's products of */
    int gemv_pairs_min, gemv_pairs_max;  /* this many columns, from B's pairs */
    mf_gemm_gemv_pairs8_fn gemv_pairs8;  /* NULL, or the same for the 8-bit
                                          * formats (any 1 to gemv_pairs_max
                                          * columns) */
    /* the epilogue's bfloat16 shortcut (common.h) built with the level's
     * flags: the driver's own copy has only the baseline ISA's vectors */
    void (*store_bf16)(const mf_gemm_epilogue *ep, mf_intp i0, mf_intp j0, mf_intp rows,
                       mf_intp cols, const float *vals, mf_intp ldv);
} mf_gemm_ops;

/* products of at most this many multiply-adds go to ops->small */
#define MF_GEMM_SMALL_WORK (32.0 * 32.0 * 32.0)

static inline mf_intp mf_gemm_min(mf_intp a, mf_intp b) { return a < b ? a : b; }
static inline mf_intp mf_gemm_max(mf_intp a, mf_intp b) { return a > b ? a : b; }

/*
 * A level's gemm_f32acc (kernels.h) with its ops: tiny products on the
 * serial oracle, small ones on ops->small, the rest on the blocked kernels
 * on up to mf_get_num_threads() threads, falling back to ops->small (k too
 * deep to pack) or the oracle (no memory) when the driver cannot.
 */
void mf_gemm_run(const mf_gemm_ops *ops, const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                 const void *A, mf_intp lda, const void *B, mf_intp ldb,
                 float *C, mf_intp ldc, const mf_gemm_epilogue *ep);

/*
 * The same product with B given as its transpose: B[p][j] at Bt[j * ldbt + p]
 * (a @ b.T with b C-ordered).  The blocked kernels pack their B panels from
 * Bt's rows (ops->pack_bt), so the bits are mf_gemm_run's.  Returns 0 when
 * done, -1 when it did nothing (no pack_bt, a product for another path, no
 * memory): the caller then transposes B and calls mf_gemm_run.
 */
/* what the level's gemm_thin_cols reports for these ops (kernels.h) */
int mf_gemm_thin_cols(const mf_gemm_ops *ops, const mf_format *f);
int mf_gemm_run_bt(const mf_gemm_ops *ops, const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                   const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                   float *C, mf_intp ldc, const mf_gemm_epilogue *ep);

#endif
