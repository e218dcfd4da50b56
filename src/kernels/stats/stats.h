/*
 * inspect's statistics: the lane layout every level shares (kernels.h,
 * mf_stats_block) and the driver that runs the block kernel over a chunk.
 */
#ifndef MF_STATS_H
#define MF_STATS_H

#include "../kernels.h"
#include "../blocks/blocks.h"

/* GCC's AddressSanitizer with detect_stack_use_after_return (the sanitizer
 * leg) moves escaping locals to a "fake stack" whose frames are 32-byte
 * aligned; GCC gives an AVX-512 function's lane arrays 64-byte alignment and
 * aligned moves, which fault there (SIGSEGV in the sanitized build only).
 * Such a function keeps its locals on the real stack: it is not
 * instrumented, and its results are checked bit for bit against the serial
 * oracle by the same tests. */
#if defined(__SANITIZE_ADDRESS__)
#define MF_REAL_STACK __attribute__((no_sanitize_address))
#else
#define MF_REAL_STACK
#endif

/* lane j with lane j + 4, then j + 2, then j + 1 */
static inline double
mf_stats_combine_sum(double *l)
{
    for (int w = MF_STATS_LANES / 2; w >= 1; w /= 2) {
        for (int j = 0; j < w; j++) {
            l[j] = l[j] + l[j + w];
        }
    }
    return l[0];
}

static inline float
mf_stats_combine_min(float *l)
{
    for (int w = MF_STATS_LANES / 2; w >= 1; w /= 2) {
        for (int j = 0; j < w; j++) {
            l[j] = l[j + w] < l[j] ? l[j + w] : l[j];
        }
    }
    return l[0];
}

static inline float
mf_stats_combine_max(float *l)
{
    for (int w = MF_STATS_LANES / 2; w >= 1; w /= 2) {
        for (int j = 0; j < w; j++) {
            l[j] = l[j + w] > l[j] ? l[j + w] : l[j];
        }
    }
    return l[0];
}

/* Running statistics of a tensor: the blocks merged (mean and m2 by Chan et
 * al.'s pairwise update, as minifloat/io/checkpoint.py did per chunk). */
typedef struct {
    int64_t n, nan, inf, finite, over, zeros_y, zeros_x, gt;
    double min, max, mean, m2, err2, ref2;
} mf_stats_acc;

void mf_stats_merge(mf_stats_acc *a, const mf_stats_block *b, mf_intp n);

/*
 * Bytes for the calling thread of mf_stats_run to write to fd while the
 * pool's workers start on the statistics (convert's previous chunk, written
 * as the next one is cast); NULL: none.  done: how many were written; the
 * writing stops at the first error or interruption (the caller writes the
 * rest, and reports the error or runs the signal handlers).
 */
typedef struct mf_write_req {
    int fd;
    const char *buf;
    size_t len, done;
} mf_write_req;
void mf_write_req_run(void *w);

/*
 * Statistics of n values at x into a: src is the values' float format
 * (decoded block by block with the active level's kernel; IEEE float16
 * included) or NULL for float32 values.  tgt: NULL, or the target format
 * (y = decode(encode(x)) with the kernels; MF_IEEE_FLOAT32: y = x).  With
 * codes_out (tgt a public format), the encoded codes are also stored there
 * (convert's cast and error in one pass).  moments == 0 (with tgt): only
 * n, err2 and ref2 are accumulated.  Raises no FP flags it did
 * not find raised.
 */
void mf_stats_run(mf_stats_acc *a, const mf_format *src, const void *x, mf_intp n,
                  const mf_format *tgt, double rel, void *codes_out, int moments,
                  mf_write_req *w);
/*
 * Statistics of the (rows, kk) values at x (src as above) against a
 * block-scaled target p (s_dec: NVFP4's tensor decode scale), blocked along
 * kk: each window of MF_STATS_BLOCK values decoded, quantized and
 * dequantized (mf_block_round_trip) and run through the level's stats_f32,
 * so the values are read once.  The windows restart at the chunks
 * minifloat/io/checkpoint.py's _block_chunks(..., chunk) cuts (chunk <= 0:
 * x is one chunk), so the result is bit for bit that of quantizing each
 * chunk, dequantizing it and mf_stats_run_f32y; the same on any number of
 * threads.  Returns -1 if memory ran out (a unchanged), else 0.
 */
int mf_stats_run_blocks(mf_stats_acc *a, const mf_format *src, const void *x, mf_intp rows,
                        mf_intp kk, mf_intp chunk, const mf_block_params *p, float s_dec,
                        double rel);
/* float64 values, y (or NULL) their round trip computed by the caller */
void mf_stats_run_f64(mf_stats_acc *a, const double *x, const double *y, mf_intp n, double rel);
/* float32 x with its round trip y given (block-scaled targets: y is the
 * dequantized tensor), by the active level's stats_f32, block by block */
void mf_stats_run_f32y(mf_stats_acc *a, const float *x, const float *y, mf_intp n, double rel);

/*
 * The ends of a level's stats_f32, shared by the levels: the values n8..n-1
 * (fewer than a vector) go into lanes i % 8 in the serial kernel's order,
 * then the lanes are combined into s.  _first takes the min/max/sum lanes
 * and the counts of x[0:n8], sets nan, inf, finite, min, max and sum, and
 * returns the mean; _second takes the m2 and target lanes and counts and
 * sets the rest (y NULL: no target).
 */
double mf_stats_finish_first(mf_stats_block *s, const float *x, mf_intp n8, mf_intp n,
                             float *mn, float *mx, double *l1, int64_t nan, int64_t fin);
void mf_stats_finish_second(mf_stats_block *s, const float *x, const float *y, mf_intp n8,
                            mf_intp n, double mean, double rel, double *l2, double *le,
                            double *lr, int64_t over, int64_t zy, int64_t zx, int64_t gt);

/*
 * How a level's cast_err reads its source: bfloat16 and IEEE float16 codes
 * are widened in registers, float32 values loaded.  Any other format is
 * decoded by the level's `decode` into xb (MF_STATS_BLOCK floats) and read
 * as float32 from there.  Sets *xs to the values to read; returns the kind.
 */
enum { MF_CE_F32, MF_CE_BF16, MF_CE_F16 };

static inline int
mf_cast_err_source(const mf_format *src, const void *x, mf_intp n, float *xb,
                   void (*decode)(const mf_format *, const void *, float *, mf_intp),
                   const void **xs)
{
    *xs = x;
    if (src == NULL) {
        return MF_CE_F32;
    }
    if (src->id == MF_BFLOAT16) {
        return MF_CE_BF16;
    }
    if (src->id == MF_IEEE_FLOAT16) {
        return MF_CE_F16;
    }
    decode(src, x, xb, n);
    *xs = xb;
    return MF_CE_F32;
}

/* RUN(SK, PATH) once per (source kind, target path) pair, each with both as
 * constants, so a level's loop is compiled for every pair and chosen here */
#define MF_CE_PATHS(SK, small_path, RUN)                                           \
    switch (small_path) {                                                         \
        case MF_SIMD_BF16:       RUN(SK, MF_SIMD_BF16); break;                    \
        case MF_SIMD_SMALL_IEEE: RUN(SK, MF_SIMD_SMALL_IEEE); break;              \
        case MF_SIMD_SMALL_FN:   RUN(SK, MF_SIMD_SMALL_FN); break;                \
        case MF_SIMD_SMALL_FNUZ: RUN(SK, MF_SIMD_SMALL_FNUZ); break;              \
        default:                 RUN(SK, MF_SIMD_SMALL_NONE); break;              \
    }
#define MF_CAST_ERR_DISPATCH(skind, small_path, RUN)                              \
    switch (skind) {                                                              \
        case MF_CE_BF16: MF_CE_PATHS(MF_CE_BF16, small_path, RUN) break;          \
        case MF_CE_F16:  MF_CE_PATHS(MF_CE_F16, small_path, RUN) break;           \
        default:         MF_CE_PATHS(MF_CE_F32, small_path, RUN) break;           \
    }

/*
 * The end of a level's cast_err (kernels.h), shared by the levels: le/lr
 * hold the eight float64 lanes of err2/ref2 after the first `done` of n
 * values; the tail (fewer than a vector) goes through the serial codecs into
 * the same lanes.  src: the source format of x, or NULL for float32 values
 * at x.  Returns 0 if a lane is not finite (an inf or NaN in x or in the
 * round trip: the block is left to the general route), else sets s->err2,
 * s->ref2 (the lanes combined by halving) and the zero counts (zy, zx: the
 * zeros of the round trip and of x among the first `done`, which the level
 * counted as float32 values == 0, the tail's counted here) and returns 1.
 */
int mf_cast_err_finish(mf_stats_block *s, double *le, double *lr, int64_t zy, int64_t zx,
                       const mf_format *src, const void *x, const mf_format *tgt, void *codes,
                       mf_intp done, mf_intp n);

#endif
