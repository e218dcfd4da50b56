/*
 * A few bfloat16 rows times a matrix (v @ B, a model's decode step seen from
 * the other side: m <= MF_GEVM_MAX_ROWS), written once for the x86 levels:
 * B's columns side by side in the lanes, read in place (a row of B is
 * contiguous across its columns, so nothing is packed or transposed), each
 * lane's chain the canonical one of serial.c (pairs, the odd member first;
 * an odd k's pad +0 * +0 first), FMA under the kernels' FTZ|DAZ
 * environment, which the driver sets.
 *
 * The including file defines, for its vector of GV_L float32 lanes:
 *   gv_t, gv_zero(), gv_set1(float), gv_fma(a, b, c) (a * b + c),
 *   gv_loadu(const float *), gv_storeu(float *, gv_t),
 *   gv_bf16(const uint16_t *)   GV_L bfloat16 codes as float32,
 *   GV_NV   vectors of columns at a time with one row of A (8 chains)
 * and includes this file once; it defines gevm_rows (below).
 */
#ifndef MF_GEMM_GEVM_H
#define MF_GEMM_GEVM_H

static inline float
gv_code(uint16_t c)
{
    uint32_t u = (uint32_t)c << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* R rows, NV vectors of columns from column 0 of B and acc, the pairs of
 * k in [p0, p1) (p0 even; p1 even or k, whose odd last pair has the pad) */
static inline __attribute__((always_inline)) void
gevm_block(const int R, const int NV, mf_intp p0, mf_intp p1, const uint16_t *A, mf_intp lda,
           const uint16_t *B, mf_intp ldb, float *acc, mf_intp na)
{
    gv_t c[MF_GEVM_MAX_ROWS][GV_NV];
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < NV; v++) {
            c[r][v] = gv_loadu(acc + r * na + v * GV_L);
        }
    }
    mf_intp p = p0;
    for (; p + 2 <= p1; p += 2) {
        const uint16_t *be = B + p * ldb, *bo = be + ldb;
        gv_t xe[GV_NV], xo[GV_NV];
        for (int v = 0; v < NV; v++) {
            xo[v] = gv_bf16(bo + v * GV_L);
            xe[v] = gv_bf16(be + v * GV_L);
        }
        for (int r = 0; r < R; r++) {
            const gv_t ao = gv_set1(gv_code(A[r * lda + p + 1]));
            const gv_t ae = gv_set1(gv_code(A[r * lda + p]));
            for (int v = 0; v < NV; v++) {
                c[r][v] = gv_fma(ao, xo[v], c[r][v]);
                c[r][v] = gv_fma(ae, xe[v], c[r][v]);
            }
        }
    }
    if (p < p1) {
        const gv_t z = gv_zero();
        for (int r = 0; r < R; r++) {
            const gv_t ae = gv_set1(gv_code(A[r * lda + p]));
            for (int v = 0; v < NV; v++) {
                c[r][v] = gv_fma(z, z, c[r][v]);
                c[r][v] = gv_fma(ae, gv_bf16(B + p * ldb + v * GV_L), c[r][v]);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < NV; v++) {
            gv_storeu(acc + r * na + v * GV_L, c[r][v]);
        }
    }
}

/* the last columns (fewer than a vector): one chain at a time */
static void
gevm_tail(int rows, mf_intp k, const uint16_t *A, mf_intp lda, const uint16_t *B, mf_intp ldb,
          mf_intp n, float *acc, mf_intp na)
{
    for (int r = 0; r < rows; r++) {
        for (mf_intp j = 0; j < n; j++) {
            float c = acc[r * na + j];
            mf_intp p = 0;
            for (; p + 2 <= k; p += 2) {
                c = fmaf(gv_code(A[r * lda + p + 1]), gv_code(B[(p + 1) * ldb + j]), c);
                c = fmaf(gv_code(A[r * lda + p]), gv_code(B[p * ldb + j]), c);
            }
            if (p < k) {
                c = fmaf(0.0f, 0.0f, c);
                c = fmaf(gv_code(A[r * lda + p]), gv_code(B[p * ldb + j]), c);
            }
            acc[r * na + j] = c;
        }
    }
}

/* acc[i * na + j] = the canonical chain of row i of A with column j of B,
 * from acc[i * na + j], for i < rows <= MF_GEVM_MAX_ROWS, j < n.  GEVM_KB
 * pairs at a time across all n columns (blocks of R rows x NV vectors, at
 * least 8 chains where the columns allow), the chains' state in acc
 * between them: B is read a few rows at a time, each from its start to its
 * end, which the hardware prefetchers follow (a block of columns down all of
 * k would read a short piece of each row, a page apart). */
#define GEVM_KB 8

static void
gevm_rows(int rows, mf_intp k, const uint16_t *A, mf_intp lda, const uint16_t *B, mf_intp ldb,
          mf_intp n, float *acc, mf_intp na)
{
    const mf_intp nv = rows == 1 ? GV_NV : rows == 2 ? GV_NV / 2 : 2;
    const mf_intp nvec = n / GV_L * GV_L;
    for (mf_intp p0 = 0; p0 < k; p0 += 2 * GEVM_KB) {
        const mf_intp p1 = k - p0 <= 2 * GEVM_KB ? k : p0 + 2 * GEVM_KB;
        mf_intp j = 0;
        for (; j + nv * GV_L <= nvec; j += nv * GV_L) {
            switch (rows) {
                case 1: gevm_block(1, GV_NV, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
                case 2: gevm_block(2, GV_NV / 2, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
                case 3: gevm_block(3, 2, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
                default: gevm_block(4, 2, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
            }
        }
        for (; j < nvec; j += GV_L) {
            switch (rows) {
                case 1: gevm_block(1, 1, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
                case 2: gevm_block(2, 1, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
                case 3: gevm_block(3, 1, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
                default: gevm_block(4, 1, p0, p1, A, lda, B + j, ldb, acc + j, na); break;
            }
        }
    }
    if (nvec < n) {
        gevm_tail(rows, k, A, lda, B + nvec, ldb, n - nvec, acc + nvec, na);
    }
}

#endif
