/*
 * Kernel table.  Every kernel has a serial version (serial.c), the oracle;
 * SIMD versions (one file per ISA) must return bit-identical results and are
 * chosen at run time from the CPU's features (dispatch.c).  The environment
 * variable MINIFLOAT_KERNEL_LEVEL (serial, avx2, avx512, avx512bf16, neon,
 * neon_bf16) or
 * minifloat._core.set_kernel_level() forces a level for tests and benchmarks.
 *
 * All kernels work on contiguous data; the ufunc and cast loops gather
 * strided operands into blocks.
 *
 * Summation order (sum, dot): element i goes to lane i % 32; each lane adds
 * in float32 in index order, starting from -0.0; the 32 lanes are combined
 * by halving (lane j += lane j+16, then j+8, 4, 2, 1).  Runs longer than
 * MF_SUM_BLOCK are summed block by block and the block results are added in
 * float64.  SIMD kernels reproduce this order exactly.
 */
#ifndef MF_KERNELS_H
#define MF_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "../core/format_table.h"

typedef ptrdiff_t mf_intp;

typedef enum {
    MF_LEVEL_SERIAL = 0,
    MF_LEVEL_AVX2 = 1,
    MF_LEVEL_AVX512 = 2,
    MF_LEVEL_AVX512BF16 = 3,
    MF_LEVEL_NEON = 4,          /* aarch64: Advanced SIMD (every aarch64 CPU) */
    MF_LEVEL_NEON_BF16 = 5,     /* aarch64: + FEAT_BF16 (Armv8.6) */
    MF_NUM_LEVELS
} mf_level;

typedef enum {
    MF_OP_ADD = 0,
    MF_OP_SUB,
    MF_OP_MUL,
    MF_OP_DIV,
    /* one-operand operations, run by the same kernels with b = a (b is not
     * read for its values): op(a, b) is f(a), NumPy's float32 loop of the
     * ufunc of that name on a's value (round-to-integer operations without
     * the inexact flag, reciprocal as 1 / a); square is MF_OP_MUL of a, a */
    MF_OP_FLOOR,
    MF_OP_CEIL,
    MF_OP_TRUNC,
    MF_OP_RINT,
    MF_OP_SQRT,
    MF_OP_RECIPROCAL,
    MF_NUM_BINARY_OPS
} mf_binary_op;

#define MF_SUM_LANES 32
#define MF_SUM_BLOCK 4096

/*
 * Receives finished results of gemm_f32acc: rows [i0, i0 + rows) x columns
 * [j0, j0 + cols), element (i, j) at vals[(i - i0) * ldv + (j - j0)].  Every
 * element is handed over exactly once; calls may come from several threads
 * at once (on disjoint blocks), with round-to-nearest and no FTZ/DAZ, but
 * floating-point flags raised in other threads than the caller's are lost:
 * fn reports what it must through ctx.  fn may overwrite vals.
 */
/* gemm_f32acc runs products of at least this many multiply-adds on several
 * threads (fewer: on the calling thread) */
#define MF_GEMM_THREADED_WORK ((double)(1 << 23))

/* gemm_thin_cols (below): the thin kernels of gemm/<isa>.c take up to
 * MF_GEMM_THIN_COLS columns (ops->gemv), avx512bf16's up to
 * MF_GEMM_THIN_COLS_MAX (gemv_pairs, in blocks of 64), past
 * MF_GEMM_THIN_COLS only for products of MF_GEMM_THIN_MIN_ROWS rows or more
 * (fewer rows leave the threads' tasks of 128 rows uneven: the blocked
 * kernels are faster) */
#define MF_GEMM_THIN_COLS 16
#define MF_GEMM_THIN_COLS_MAX 128
#define MF_GEMM_THIN_MIN_ROWS 1024

typedef struct mf_gemm_epilogue {
    void (*fn)(void *ctx, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols,
               float *vals, mf_intp ldv);
    void *ctx;
    /* Optional shortcut for bfloat16 results, which a kernel may take
     * instead of calling fn: when bf16_out is not NULL, element (i, j) is
     * stored rounded to nearest even (every NaN as 0x7FC0) at
     * bf16_out + i * bf16_rs + 2 * j (bytes, 2-aligned), and the bits
     * 1 (a NaN), 2 (an inf), 4 (rounding overflowed) are or-ed atomically
     * into *bf16_flags. */
    char *bf16_out;
    mf_intp bf16_rs;
    int *bf16_flags;
    /* Optional hint: up to two ranges of memory the caller reads next (the
     * next product of a stack, its A and B).  A one-thread blocked product
     * whose packed B stays in L2 fetches them into L2 on its way, a few
     * lines a tile; nothing else changes.  Zero-initialized: none. */
    const char *next[2];
    size_t next_bytes[2];
} mf_gemm_epilogue;

/*
 * Statistics of one block of at most MF_STATS_BLOCK values (inspect's
 * kernel).  x: the values; y (or NULL): the same values cast to a target
 * format and back.  Over the finite x: count, min, max, sum, and the sum of
 * squares about the block's own mean sum/finite (a centred second pass over
 * the block, which is in cache); with y, over the finite x: `over` counts
 * non-finite y, and over those with y finite too: zeros_y (y == 0), zeros_x
 * (x == 0), gt (|y - x| > rel |x| in float64, y - x taken in the values'
 * type), err2 = sum (y - x)^2, ref2 = sum x^2 (float64).
 * Order (every level reproduces it bit for bit): element i goes to lane
 * i % MF_STATS_LANES; float64 lanes start at +0 and add in index order (a
 * value that does not count adds +0); min/max lanes start at +inf/-inf and
 * take m = x < m ? x : m (x > m ? x : m); the lanes are combined by halving
 * (lane j with lane j + 4, then j + 2, then j + 1, as in stats_combine).
 * Products are rounded before they are added (no FMA).
 * With moments == 0 (and y given), only err2 and ref2 are defined: the
 * rest may be anything, and a level may skip their work (convert needs
 * only the cast's error).
 */
/* the most rows one colsum_f32 (or sum_rows) call takes */
#define MF_COLSUM_ROWS 64

/* the keyed operations of mf_kernels.keyed8/keyed16 (stream/keyed.h); with
 * MF_KEYED_TIES or'ed in, two zeros of different signs take the second
 * operand instead of being flagged */
enum { MF_KEYED_MAX = 1, MF_KEYED_MIN = 2, MF_KEYED_CLIP = 3, MF_KEYED_TIES = 8 };
/* the most columns one dot_cols call takes, and the floats of its scratch:
 * 32 rows of sum lanes, their stride 64 bytes past a multiple of 4 KiB (a
 * store to one row and a load from the next must not look alike to the
 * CPU's 4K-aliasing check) */
#define MF_DOT_COLS 2048
#define MF_DOT_LANES_STRIDE (MF_DOT_COLS + 16)
#define MF_DOT_SCRATCH (MF_SUM_LANES * MF_DOT_LANES_STRIDE)
#define MF_STATS_LANES 8
#define MF_STATS_BLOCK 2048

typedef struct {
    int64_t nan, inf, finite;
    double min, max, sum, m2;
    int64_t over, zeros_y, zeros_x, gt;
    double err2, ref2;
} mf_stats_block;

typedef struct {
    const char *name;
    /* codes -> float32, exact */
    void (*decode_f32)(const mf_format *f, const void *src, float *dst, mf_intp n);
    /* float32 -> codes, round to nearest even, the cast's overflow/NaN rules */
    void (*encode_f32)(const mf_format *f, const float *src, void *dst, mf_intp n);
    /* out = round(a op b) computed in float32: correctly rounded for the
     * formats here (float32 has more than 2p+2 bits); the one-operand ops
     * round f(a) once the same way */
    void (*binary)(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                   void *out, mf_intp n);
    /*
     * acc[j] = acc[j] + x_i[j] for j < n, for the nrows <= MF_COLSUM_ROWS
     * rows of codes x_i in order: each column's float32 chain (a reduction
     * along an outer axis).  Only a NaN's sign and payload may differ from
     * NumPy's float32 add loop (which operand's NaN comes out); finite and
     * infinite results are its bits.
     */
    /*
     * NumPy's pairwise float32 sum (its float loops' pairwise_sum) of the n
     * values of format f at x, or with dev of (v - m) * (v - m) (float32
     * subtract, then square): the float32 sums of mean/var/std
     * (stream/pairwise.h).  Every level does the same operations: the bits
     * are serial's, NaN payloads included.
     */
    float (*pairwise_f32)(const mf_format *f, const void *x, mf_intp n, float m, int dev);
    /*
     * NumPy's argmax (argmin without want_max) of n 8- or 16-bit sign-
     * magnitude codes whose magnitudes order as their values do, a magnitude
     * above lim a NaN: the first NaN's index if there is one, else the first
     * extreme's (stream/argext.h; every level returns the same index).
     */
    mf_intp (*arg_extreme8)(const uint8_t *c, mf_intp n, int8_t lim, int want_max);
    mf_intp (*arg_extreme16)(const uint16_t *c, mf_intp n, int16_t lim, int want_max);
    /*
     * np.maximum / np.minimum / np.clip (op: MF_KEYED_*) of such codes, the
     * operands chosen by their keys into r; nonzero where a NaN or (without
     * MF_KEYED_TIES) a zero tie leaves the choice to NumPy's loop
     * (stream/keyed.h).  Strides in elements.
     */
    int (*keyed8)(int op, int8_t lim, const uint8_t *a, mf_intp sa, const uint8_t *b, mf_intp sb,
                  const uint8_t *c, mf_intp sc, uint8_t *r, mf_intp n);
    int (*keyed16)(int op, int16_t lim, const uint16_t *a, mf_intp sa, const uint16_t *b,
                   mf_intp sb, const uint16_t *c, mf_intp sc, uint16_t *r, mf_intp n);
    /*
     * out[i] = the low byte of t[in[i]] for i < n (8-bit codes through a
     * table of 256 entries, contiguous); returns the or of the high bytes of
     * the entries met (a ufunc's table: the result's code and its flags).
     */
    uint32_t (*lut8)(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n);
    /* dst[i] = codec.h's mf_f64_to_f32_odd(src[i]): float64 rounded to odd
     * in a float32 (the first step of a float64 -> format cast); no flags.
     * NULL: the caller loops over mf_f64_to_f32_odd */
    void (*f64_to_f32_odd)(const double *src, float *dst, mf_intp n);
    void (*colsum_f32)(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                       mf_intp n);
    /*
     * acc[j] = max(acc[j], x_i[j]) (min with is_min) for j < n, over the
     * nrows <= MF_COLSUM_ROWS rows in order: a column that meets a NaN ends
     * NaN (any NaN), and of two equal zeros either may stay; every other
     * result is the column's largest (smallest) value, whatever the order.
     */
    void (*colmax_f32)(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                       mf_intp n, int is_min);
    /* sum of n codes in the summation order above */
    double (*sum)(const mf_format *f, const void *src, mf_intp n);
    /* out[i] = sum(rows[i], n) for i < nrows <= MF_COLSUM_ROWS: several
     * runs a call (a reduction along the last axis), each sum's bits */
    void (*sum_rows)(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                     double *out);
    /* sum of products of n pairs of codes, same order */
    double (*dot)(const mf_format *f, const void *a, const void *b, mf_intp n);
    /*
     * out[j] = dot(column j of B, v) for j < m <= MF_DOT_COLS, bit for bit
     * (flags too) the result of dot on the column's codes and v's: B's
     * element (i, j) at B + i * ldb bytes + j * itemsize, v the n vector
     * values as float32 (np.vecmat of a C-ordered matrix); lanes: scratch
     * of MF_DOT_SCRATCH floats.  NaN results may differ in sign
     * and payload (the callers store the canonical NaN).
     */
    void (*dot_cols)(const mf_format *f, const float *v, const void *B, mf_intp ldb, mf_intp n,
                     mf_intp m, double *out, float *lanes);
    /*
     * C[m x n] (float32, row stride ldc) += A[m x k] * B[k x n] where A and B
     * hold codes with row strides lda, ldb (in elements) and unit column
     * stride.  Every output element is the canonical float32 chain of
     * gemm/serial.c (k pairs, odd index first, DAZ/FTZ: VDPBF16PS), the same
     * at every level and for any number of threads.
     * With ep != NULL, the chains start from +0 instead, C is not used (may
     * be NULL) and the finished results are handed to ep in blocks.
     * The SIMD levels run products of MF_GEMM_THREADED_WORK or more
     * multiply-adds on up to
     * mf_get_num_threads() threads of the persistent pool (parallel.h);
     * call with the GIL released.
     */
    void (*gemm_f32acc)(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                        const void *A, mf_intp lda, const void *B, mf_intp ldb,
                        float *C, mf_intp ldc, const struct mf_gemm_epilogue *ep);
    /* Optional (may be NULL): the same with B given as its transpose, B[p][j]
     * at Bt + (j * ldbt + p) * itemsize (a @ b.T of a C-ordered b), the
     * same bits; returns 0 when done, -1 when it did nothing (the product is
     * for another path: the caller transposes B and calls gemm_f32acc) */
    int (*gemm_f32acc_bt)(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                          const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                          float *C, mf_intp ldc, const struct mf_gemm_epilogue *ep);
    /* Optional (may be NULL: none): the most columns of a B of format f
     * for which gemm_f32acc and gemm_f32acc_bt read A in place (the thin
     * kernels; past MF_GEMM_THIN_COLS only with MF_GEMM_THIN_MIN_ROWS rows
     * of A or more), 0 for none: x @ W.T with up to this many rows of x is
     * computed as (W @ x.T).T with x's rows as B's transpose
     * (umath/matmul.c) */
    int (*gemm_thin_cols)(const mf_format *f);
    /* inspect's statistics of n <= MF_STATS_BLOCK float32 values (above) */
    void (*stats_f32)(mf_stats_block *s, const float *x, const float *y, double rel,
                      mf_intp n, int moments);
    /* Optional (may be NULL): two windows of n values at once, s[w] the
     * result of stats_f32(s[w], x[w], y[w], rel, n, moments) bit for bit;
     * y[0] and y[1] both NULL or neither */
    void (*stats_f32_2)(mf_stats_block *const *s, const float *const *x,
                        const float *const *y, double rel, mf_intp n, int moments);
    /*
     * Optional (may be NULL): convert's cast and its error in one pass.
     * x: n <= MF_STATS_BLOCK values of format src (NULL: float32 values).
     * Encodes their float32 values to tgt into codes (the bits encode_f32
     * stores) and sets s->err2 and s->ref2 to what stats_f32(s, x, y, rel,
     * n, 0) gives for y = decode(codes), bit for bit (the rest of s is
     * undefined).  Returns 0 where it leaves the block to that general
     * route: a target it has no fused loop for, or an x or a round trip
     * that is not finite in the block (then s is undefined and codes may be
     * partly written).  Raises FP flags freely: its caller (mf_stats_run)
     * restores them.
     */
    int (*cast_err)(mf_stats_block *s, const mf_format *src, const void *x,
                    const mf_format *tgt, void *codes, mf_intp n);
} mf_kernels;

extern const mf_kernels mf_kernels_serial;
/* the serial kernels, callable from the SIMD files for what they leave out */
void mf_serial_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n);
void mf_serial_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_serial_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                      void *out, mf_intp n);
double mf_serial_sum(const mf_format *f, const void *src, mf_intp n);
void mf_serial_sum_rows(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                        double *out);
float mf_serial_pairwise_f32(const mf_format *f, const void *x, mf_intp n, float m, int dev);
mf_intp mf_serial_arg_extreme8(const uint8_t *c, mf_intp n, int8_t lim, int want_max);
mf_intp mf_serial_arg_extreme16(const uint16_t *c, mf_intp n, int16_t lim, int want_max);
int mf_serial_keyed8(int op, int8_t lim, const uint8_t *a, mf_intp sa, const uint8_t *b,
                     mf_intp sb, const uint8_t *c, mf_intp sc, uint8_t *r, mf_intp n);
int mf_serial_keyed16(int op, int16_t lim, const uint16_t *a, mf_intp sa, const uint16_t *b,
                      mf_intp sb, const uint16_t *c, mf_intp sc, uint16_t *r, mf_intp n);
uint32_t mf_serial_lut8(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n);
void mf_serial_colsum_f32(const mf_format *f, const char *const *rows, mf_intp nrows,
                          float *acc, mf_intp n);
void mf_serial_colmax_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                        mf_intp n, int is_min);
double mf_serial_dot(const mf_format *f, const void *a, const void *b, mf_intp n);
void mf_serial_dot_cols(const mf_format *f, const float *v, const void *B, mf_intp ldb,
                        mf_intp n, mf_intp m, double *out, float *lanes);
void mf_serial_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                           const void *A, mf_intp lda, const void *B, mf_intp ldb,
                           float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
void mf_serial_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel,
                         mf_intp n, int moments);
/* the same for float64 values (float64 sources; every level uses this one) */
void mf_serial_stats_f64(mf_stats_block *s, const double *x, const double *y, double rel,
                         mf_intp n);
int mf_avx2_cast_err(mf_stats_block *s, const mf_format *src, const void *x,
                     const mf_format *tgt, void *codes, mf_intp n);
void mf_avx2_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel,
                       mf_intp n, int moments);
int mf_avx512_cast_err(mf_stats_block *s, const mf_format *src, const void *x,
                       const mf_format *tgt, void *codes, mf_intp n);
void mf_avx512_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel,
                         mf_intp n, int moments);
void mf_avx512_stats_f32_2(mf_stats_block *const *s, const float *const *x,
                           const float *const *y, double rel, mf_intp n, int moments);
#ifdef MF_HAVE_AVX2
extern const mf_kernels mf_kernels_avx2;
#endif
#ifdef MF_HAVE_AVX512
extern const mf_kernels mf_kernels_avx512;
#endif
#ifdef MF_HAVE_AVX512BF16
extern const mf_kernels mf_kernels_avx512bf16;
#endif
#ifdef MF_HAVE_NEON
extern const mf_kernels mf_kernels_neon;
#endif
#ifdef MF_HAVE_NEON_BF16
extern const mf_kernels mf_kernels_neon_bf16;
#endif

/* Per-ISA entry points (src/kernels/stream/<isa>.c, gemm in gemm/<isa>.c); a level's
 * table may reuse a lower level's entries. */
void mf_avx2_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n);
void mf_avx2_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_avx2_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                      void *out, mf_intp n);
double mf_avx2_sum(const mf_format *f, const void *src, mf_intp n);
void mf_avx2_sum_rows(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                        double *out);
float mf_avx2_pairwise_f32(const mf_format *f, const void *x, mf_intp n, float m, int dev);
mf_intp mf_avx2_arg_extreme8(const uint8_t *c, mf_intp n, int8_t lim, int want_max);
mf_intp mf_avx2_arg_extreme16(const uint16_t *c, mf_intp n, int16_t lim, int want_max);
int mf_avx2_keyed8(int op, int8_t lim, const uint8_t *a, mf_intp sa, const uint8_t *b,
                   mf_intp sb, const uint8_t *c, mf_intp sc, uint8_t *r, mf_intp n);
int mf_avx2_keyed16(int op, int16_t lim, const uint16_t *a, mf_intp sa, const uint16_t *b,
                    mf_intp sb, const uint16_t *c, mf_intp sc, uint16_t *r, mf_intp n);
void mf_avx2_colsum_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                          mf_intp n);
void mf_avx2_colmax_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                        mf_intp n, int is_min);
double mf_avx2_dot(const mf_format *f, const void *a, const void *b, mf_intp n);
void mf_avx2_dot_cols(const mf_format *f, const float *v, const void *B, mf_intp ldb,
                        mf_intp n, mf_intp m, double *out, float *lanes);
void mf_avx2_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                           const void *A, mf_intp lda, const void *B, mf_intp ldb,
                           float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
int mf_avx2_gemm_thin_cols(const mf_format *f);
int mf_avx2_gemm_f32acc_bt(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                           const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                           float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
void mf_avx512_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n);
void mf_avx512_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_avx512_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                      void *out, mf_intp n);
double mf_avx512_sum(const mf_format *f, const void *src, mf_intp n);
void mf_avx512_sum_rows(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                        double *out);
float mf_avx512_pairwise_f32(const mf_format *f, const void *x, mf_intp n, float m, int dev);
mf_intp mf_avx512_arg_extreme8(const uint8_t *c, mf_intp n, int8_t lim, int want_max);
mf_intp mf_avx512_arg_extreme16(const uint16_t *c, mf_intp n, int16_t lim, int want_max);
int mf_avx512_keyed8(int op, int8_t lim, const uint8_t *a, mf_intp sa, const uint8_t *b,
                     mf_intp sb, const uint8_t *c, mf_intp sc, uint8_t *r, mf_intp n);
int mf_avx512_keyed16(int op, int16_t lim, const uint16_t *a, mf_intp sa, const uint16_t *b,
                      mf_intp sb, const uint16_t *c, mf_intp sc, uint16_t *r, mf_intp n);
uint32_t mf_avx512_lut8(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n);
void mf_avx512_f64_to_f32_odd(const double *src, float *dst, mf_intp n);
void mf_avx512_colsum_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                          mf_intp n);
void mf_avx512_colmax_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                        mf_intp n, int is_min);
double mf_avx512_dot(const mf_format *f, const void *a, const void *b, mf_intp n);
void mf_avx512_dot_cols(const mf_format *f, const float *v, const void *B, mf_intp ldb,
                        mf_intp n, mf_intp m, double *out, float *lanes);
void mf_avx512_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                           const void *A, mf_intp lda, const void *B, mf_intp ldb,
                           float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
int mf_avx512_gemm_thin_cols(const mf_format *f);
int mf_avx512_gemm_f32acc_bt(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                             const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                             float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
void mf_avx512bf16_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n);
void mf_avx512bf16_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_avx512bf16_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                      void *out, mf_intp n);
double mf_avx512bf16_sum(const mf_format *f, const void *src, mf_intp n);
double mf_avx512bf16_dot(const mf_format *f, const void *a, const void *b, mf_intp n);
/* the avx512bf16 gemm: -1 picks by CPU, 0 the avx512 kernel, 1 VDPBF16PS */
extern int mf_avx512bf16_gemm_dp;
void mf_avx512bf16_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                           const void *A, mf_intp lda, const void *B, mf_intp ldb,
                           float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
int mf_avx512bf16_gemm_thin_cols(const mf_format *f);
int mf_avx512bf16_gemm_f32acc_bt(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                                 const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                                 float *C, mf_intp ldc, const mf_gemm_epilogue *ep);

void mf_neon_decode_f32(const mf_format *f, const void *src, float *dst, mf_intp n);
void mf_neon_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_neon_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                    void *out, mf_intp n);
double mf_neon_sum(const mf_format *f, const void *src, mf_intp n);
void mf_neon_sum_rows(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                        double *out);
float mf_neon_pairwise_f32(const mf_format *f, const void *x, mf_intp n, float m, int dev);
mf_intp mf_neon_arg_extreme8(const uint8_t *c, mf_intp n, int8_t lim, int want_max);
mf_intp mf_neon_arg_extreme16(const uint16_t *c, mf_intp n, int16_t lim, int want_max);
int mf_neon_keyed8(int op, int8_t lim, const uint8_t *a, mf_intp sa, const uint8_t *b,
                   mf_intp sb, const uint8_t *c, mf_intp sc, uint8_t *r, mf_intp n);
int mf_neon_keyed16(int op, int16_t lim, const uint16_t *a, mf_intp sa, const uint16_t *b,
                    mf_intp sb, const uint16_t *c, mf_intp sc, uint16_t *r, mf_intp n);
uint32_t mf_neon_lut8(const uint8_t *in, uint8_t *out, const uint16_t *t, mf_intp n);
void mf_neon_f64_to_f32_odd(const double *src, float *dst, mf_intp n);
void mf_neon_colsum_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                          mf_intp n);
void mf_neon_colmax_f32(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                        mf_intp n, int is_min);
double mf_neon_dot(const mf_format *f, const void *a, const void *b, mf_intp n);
void mf_neon_dot_cols(const mf_format *f, const float *v, const void *B, mf_intp ldb,
                        mf_intp n, mf_intp m, double *out, float *lanes);
void mf_neon_stats_f32(mf_stats_block *s, const float *x, const float *y, double rel,
                       mf_intp n, int moments);
int mf_neon_cast_err(mf_stats_block *s, const mf_format *src, const void *x,
                     const mf_format *tgt, void *codes, mf_intp n);
void mf_neon_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                         const void *A, mf_intp lda, const void *B, mf_intp ldb,
                         float *C, mf_intp ldc, const mf_gemm_epilogue *ep);
void mf_neon_bf16_encode_f32(const mf_format *f, const float *src, void *dst, mf_intp n);
void mf_neon_bf16_binary(mf_binary_op op, const mf_format *f, const void *a, const void *b,
                         void *out, mf_intp n);
void mf_neon_bf16_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                              const void *A, mf_intp lda, const void *B, mf_intp ldb,
                              float *C, mf_intp ldc, const mf_gemm_epilogue *ep);

/*
 * Packed integer codes with a scale per group of columns (kernels/packed/
 * serial.c; no SIMD level: every caller uses this one).  rows x k fields of
 * `bits` (1..8) bits: row r's are a bit stream in words + r * ldw, field j
 * at bits j * bits .. j * bits + bits - 1, word i holding bits 32 i ..
 * 32 i + 31 lowest first (ldw >= ceil(k * bits / 32); nothing beyond is
 * read).  Field j of row r uses s[r * lds + j / group] (and z, the same
 * shape, or NULL for zeros); groups = ceil(k / group) <= lds.
 *   MF_AFFINE_ZP   (compressed-tensors):  out = R(R(float(u - offset) - z) * s)
 *   MF_AFFINE_BIAS (MLX affine):          out = R(R(s * float(u)) + z)
 * R rounds to the format rnd (the scale's dtype, as the references compute
 * in it), or is the identity when rnd is NULL (float32).  Results go to
 * out + r * ldo + j.
 */
typedef enum {
    MF_AFFINE_ZP = 0,
    MF_AFFINE_BIAS = 1,
} mf_affine_kind;

void mf_unpack_affine(const uint32_t *words, mf_intp ldw, mf_intp rows, mf_intp k, int bits,
                      mf_intp group, const float *s, const float *z, mf_intp lds,
                      mf_affine_kind kind, int32_t offset, const mf_format *rnd,
                      float *out, mf_intp ldo);

/*
 * Packed e2m1 codes (two per byte, element 2j in the low nibble) with a
 * float32 scale per block of `block` (even) elements of a row
 * (kernels/packed/serial.c): value = e2m1(code) * s[r * lds + j / block],
 * one float32 multiplication (MXFP4: s = 2**(e8m0 - 127), exact; NVFP4: the
 * block's scale as its reference computes it).  rows x k values (k even),
 * row r's codes at codes + r * ldc.  Written to out + r * ldo + j, or with
 * `transposed` to out + j * ldo + r (gpt-oss's experts, [K, N]).  Uses the
 * active level's block kernels (unpack4 and mul2; unpack4t8 for transposed
 * tiles of 8 rows when the block is a multiple of 8).
 */
void mf_unpack_e2m1(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k, mf_intp block,
                    const float *s, mf_intp lds, float *out, mf_intp ldo, int transposed);
/* The same values rounded once to bfloat16 codes (the cast's rounding);
 * -1 where its scratch cannot be allocated. */
int mf_unpack_e2m1_bf16(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k,
                        mf_intp block, const float *s, mf_intp lds, uint16_t *out, mf_intp ldo,
                        int transposed);
/* The float64 sum of the squares of the finite values mf_unpack_e2m1 gives. */
double mf_e2m1_ref2(const uint8_t *codes, mf_intp ldc, mf_intp rows, mf_intp k, mf_intp block,
                    const float *s, mf_intp lds);

/* the active table */
extern const mf_kernels *mf_k;
extern mf_level mf_active_level;

const char *mf_level_name(mf_level level);
int mf_level_from_name(const char *name);       /* -1 if unknown */
int mf_level_supported(mf_level level);         /* CPU and build */
mf_level mf_best_level(void);
int mf_set_level(mf_level level);               /* 0 ok, -1 unsupported */
/* how far ahead (bytes) sum and dot fetch the runs they read, 0: not at all;
 * the CPU's default (mf_default_read_prefetch: where it was measured to help)
 * or MINIFLOAT_READ_PREFETCH.  It changes no result. */
extern mf_intp mf_read_prefetch;
/* the most bytes of packed B one GEMM job holds (16 MiB; tests lower it) */
extern size_t mf_gemm_max_bpack;
mf_intp mf_default_read_prefetch(void);

/* 256-entry float32 value table of every 8-bit (or narrower) format,
 * filled from the codec at start-up; shared by the kernels */
extern float mf_lut8[MF_NUM_FORMATS][256];
void mf_init_luts(void);

#endif
