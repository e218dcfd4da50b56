/*
 * inspect's statistics: the lane layout every level shares (kernels.h,
 * mf_stats_block) and the driver that runs the block kernel over a chunk.
 */
#ifndef MF_STATS_H
#define MF_STATS_H

#include "kernels.h"

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
 * al.'s pairwise update, as minifloat/checkpoint.py did per chunk). */
typedef struct {
    int64_t n, nan, inf, finite, over, zeros_y, zeros_x, gt;
    double min, max, mean, m2, err2, ref2;
} mf_stats_acc;

void mf_stats_merge(mf_stats_acc *a, const mf_stats_block *b, mf_intp n);

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
                  const mf_format *tgt, double rel, void *codes_out, int moments);
/* float64 values, y (or NULL) their round trip computed by the caller */
void mf_stats_run_f64(mf_stats_acc *a, const double *x, const double *y, mf_intp n, double rel);
/* float32 x with its round trip y given (block-scaled targets: y is the
 * dequantized tensor), by the active level's stats_f32, block by block */
void mf_stats_run_f32y(mf_stats_acc *a, const float *x, const float *y, mf_intp n, double rel);

#endif
