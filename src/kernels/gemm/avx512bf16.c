/*
 * GEMM with VDPBF16PS (AVX512_BF16): the canonical semantics of
 * serial.c is this instruction's, so this level is the reference the
 * others emulate.  A and B are packed as bfloat16 pairs (k = 2q in the low
 * half, 2q + 1 in the high half); a 12 x 32 register tile of C (24 zmm
 * accumulators) takes one VDPBF16PS per pair and 16 columns.
 */
#include <immintrin.h>
#include <cpuid.h>
#include <string.h>
#include "../kernels.h"
#include "../parallel.h"
#include "loops.h"
#include "../transpose_x86.h"

#define BF_MR 12
#define BF_NR 32

static inline __m512bh
as_bh(__m512i v)
{
    return (__m512bh)v;
}

/*
 * R rows (R <= 12) x 32 columns of C += A's pairs x a packed B panel, kq
 * pairs.  A is a packed panel ([q][12] dwords: `packed`) or R rows read in
 * place (bfloat16 codes, L bytes apart, each pair one dword: the driver
 * takes that for an even k where the rows fall in different sets of L1,
 * mf_gemm_rows_spread, which spares packing A: 12% of a stack of 128 x 256
 * @ 256 x 128 products on Zen 4).  In place, the rows are reached from three
 * pointers and the multiples L, 2L, 3L (a pointer for each of the twelve
 * rows did not fit in the general registers and spilled).
 */
static inline __attribute__((always_inline)) void
tile_12x32(const int R, const int packed, mf_intp kq, const char *ap, mf_intp L,
           const int32_t *b, float *c, mf_intp ldc, mf_gemm_pf *pfs,
           const int out, const mf_gemm_epilogue *ep, mf_intp i0, mf_intp j0, int cols)
{
    __m512 acc[BF_MR][2];
    /* the driver calls with kq >= 1 (a k of 0 never reaches a kernel); said
     * here, GCC keeps the accumulators of the epilogue in registers instead
     * of zeroing a copy of them on the stack for kq == 0 (24 stores a tile) */
    if (kq < 1) {
        __builtin_unreachable();
    }
    const int32_t *a = (const int32_t *)ap;
    const char *a0 = ap, *a4 = R > 4 ? ap + 4 * L : ap, *a8 = R > 8 ? ap + 8 * L : ap;
    const mf_intp L3 = 3 * L;
    for (int i = 0; i < R; i++) {
        /* into the epilogue (out): from zero, as the scratch would be */
        acc[i][0] = out ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc);
        acc[i][1] = out ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc + 16);
    }
    for (mf_intp q = 0; q < kq; q++) {
        mf_gemm_pf_step(pfs);
        __m512bh b0 = as_bh(_mm512_load_si512(b));
        __m512bh b1 = as_bh(_mm512_load_si512(b + 16));
        for (int i = 0; i < R; i++) {
            int32_t w;
            if (packed) {
                w = a[i];
            }
            else {
                const char *base = i < 4 ? a0 : i < 8 ? a4 : a8;
                const int j = i % 4;
                memcpy(&w, base + (j == 0 ? 0 : j == 1 ? L : j == 2 ? 2 * L : L3), 4);
            }
            __m512bh ai = as_bh(_mm512_set1_epi32(w));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
        if (packed) {
            a += BF_MR;
        }
        else {
            a0 += 4;
            a4 += 4;
            a8 += 4;
        }
        b += BF_NR;
    }
    if (!out) {
        for (int i = 0; i < R; i++) {
            _mm512_storeu_ps(c + i * ldc, acc[i][0]);
            _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
        }
        return;
    }
    /* the bfloat16 epilogue: mf_gemm_store_bf16's plain rounding in the
     * registers; a tile with a large magnitude (>= 0x7F7F8000: rounds to
     * infinity, or is infinite or NaN) goes through it for the NaN codes
     * and the flags */
    const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
    const __m512i bias = _mm512_set1_epi32(0x7FFF);
    __m512i big = _mm512_setzero_si512();
    for (int i = 0; i < R; i++) {
        big = _mm512_max_epu32(big, _mm512_and_si512(_mm512_castps_si512(acc[i][0]), mag));
        big = _mm512_max_epu32(big, _mm512_and_si512(_mm512_castps_si512(acc[i][1]), mag));
    }
    if (_mm512_cmpge_epu32_mask(big, _mm512_set1_epi32(0x7F7F8000)) != 0) {
        float t[BF_MR * BF_NR];
        for (int i = 0; i < R; i++) {
            _mm512_storeu_ps(t + i * BF_NR, acc[i][0]);
            _mm512_storeu_ps(t + i * BF_NR + 16, acc[i][1]);
        }
        mf_gemm_store_bf16(ep, i0, j0, R, cols, t, BF_NR);
        return;
    }
    const __mmask32 km = cols >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << cols) - 1u);
    for (int i = 0; i < R; i++) {
        __m256i h[2];
        for (int s = 0; s < 2; s++) {
            __m512i u = _mm512_castps_si512(acc[i][s]);
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
            h[s] = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), 16));
        }
        uint16_t *dst = (uint16_t *)(ep->bf16_out + (i0 + i) * ep->bf16_rs) + j0;
        _mm512_mask_storeu_epi16(dst, km, _mm512_inserti64x4(_mm512_castsi256_si512(h[0]), h[1], 1));
    }
}

static void
kernel_12x32(mf_intp kq, const void *ap, const void *bp, float *c, mf_intp ldc,
             const void *pf, mf_intp npf)
{
    mf_gemm_pf pfs = mf_gemm_pf_start(pf, npf, kq);
    tile_12x32(BF_MR, 1, kq, (const char *)ap, 0, (const int32_t *)bp, c, ldc, &pfs, 0, NULL, 0, 0, 0);
}

/* A's rows in place: the tile body unrolled for each count of rows (1-12),
 * into c (out 0) or into the bfloat16 epilogue (out 1) */
static inline __attribute__((always_inline)) void
tile_rows(const int out, mf_intp kq, const void *ap, mf_intp lda, const void *bp, float *c,
          mf_intp ldc, const void *pf, mf_intp npf, int rows, const mf_gemm_epilogue *ep,
          mf_intp i0, mf_intp j0, int cols)
{
    mf_gemm_pf pfs = mf_gemm_pf_start(pf, npf, kq);
    const char *a = (const char *)ap;
    const int32_t *b = (const int32_t *)bp;
    const mf_intp L = 2 * lda;
#define T(R) tile_12x32(R, 0, kq, a, L, b, c, ldc, &pfs, out, ep, i0, j0, cols)
    switch (rows) {
        case 1: T(1); break;
        case 2: T(2); break;
        case 3: T(3); break;
        case 4: T(4); break;
        case 5: T(5); break;
        case 6: T(6); break;
        case 7: T(7); break;
        case 8: T(8); break;
        case 9: T(9); break;
        case 10: T(10); break;
        case 11: T(11); break;
        default: T(12); break;
    }
#undef T
}

static void
kernel_12x32_rows(mf_intp kq, const void *ap, mf_intp lda, const void *bp, float *c, mf_intp ldc,
                  const void *pf, mf_intp npf, int rows)
{
    tile_rows(0, kq, ap, lda, bp, c, ldc, pf, npf, rows, NULL, 0, 0, 0);
}

/* kernel_12x32_rows for a k of one block, into the bfloat16 epilogue
 * (driver.h): the scratch's zeroing and the store pass over it are spared
 * (5% of a stack of 128x256 @ 256x128 products on one thread, Zen 4) */
static void
kernel_12x32_rows_bf16(mf_intp kq, const void *ap, mf_intp lda, const void *bp,
                       const mf_gemm_epilogue *ep, mf_intp i0, mf_intp j0, int cols,
                       const void *pf, mf_intp npf, int rows)
{
    tile_rows(1, kq, ap, lda, bp, NULL, 0, pf, npf, rows, ep, i0, j0, cols);
}

/* B panel of bfloat16 codes: interleave two rows with one permute per 16
 * columns; other formats and edges go through the generic packer */
static void
pack_b_bf16(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
            mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    if (c->f->itemsize != 2) {
        mf_gemm_pack_b_pairs(c, src, ld, r0, cnt, p0, kc, k, dst);
        return;
    }
    const mf_intp kq = (kc + 1) / 2;
    const __m512i idx_lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10,
                                            41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4,
                                            35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i idx_hi = _mm512_add_epi16(idx_lo, _mm512_set1_epi16(16));
    uint32_t *d = (uint32_t *)dst;
    const mf_intp np = cnt / BF_NR, full = np * BF_NR;
    /* row pair by row pair, each pair's panels in turn: B is read in order
     * (panel by panel, a panel's rows were a stride apart, and packing a
     * stack's B from L3 took 5-10% of its time) */
    for (mf_intp q = 0; q < kq; q++) {
        mf_intp plo = p0 + 2 * q, phi = plo + 1;
        const uint16_t *rlo = (const uint16_t *)src + plo * ld + r0;
        for (mf_intp p = 0; p < np; p++) {
            __m512i lo = _mm512_loadu_si512(rlo + p * BF_NR);
            __m512i hi = phi < k ? _mm512_loadu_si512(rlo + ld + p * BF_NR) : _mm512_setzero_si512();
            uint32_t *dp = d + (p * kq + q) * BF_NR;
            _mm512_store_si512(dp, _mm512_permutex2var_epi16(lo, idx_lo, hi));
            _mm512_store_si512(dp + 16, _mm512_permutex2var_epi16(lo, idx_hi, hi));
        }
    }
    d += np * kq * BF_NR;
    if (full < cnt) {
        mf_gemm_pack_b_pairs(c, src, ld, r0 + full, cnt - full, p0, kc, k, d);
    }
}

/* Panels of P rows' pairs: A's (P = BF_MR) and B's from its transpose (P =
 * BF_NR, driver.h: pack_bt; the rows of src are B's columns).  A bfloat16
 * row's pairs are already dwords, so a panel is a transpose, 16 x 16 dwords
 * at a time (a group of fewer rows filled with zeros); c->MR is P.  The
 * groups of 16 rows go through all of k one after the other (16 streams at
 * a time, not 32), each row's line fetched PACK_PF bytes ahead: a 4096^3
 * a @ b.T took 188-198 ms with B's 32 rows together and no prefetch,
 * 173-179 ms so (Zen 5, two threads; a @ b 172-184 in the same runs). */
#ifndef PACK_PF
#define PACK_PF 256
#endif
static inline __attribute__((always_inline)) void
pack_rows_bf16(const int P, const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0,
               mf_intp cnt, mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    const mf_intp kq = (kc + 1) / 2, qfull = kc / 2, qv = qfull / 16 * 16;
    if (c->f->itemsize != 2 || qfull < 16) {
        mf_gemm_pack_a_pairs(c, src, ld, r0, cnt, p0, kc, k, dst);
        return;
    }
    uint32_t *d = (uint32_t *)dst;
    for (mf_intp ir = 0; ir < cnt; ir += P, d += kq * P) {
        if (cnt - ir < P) {
            mf_gemm_pack_a_pairs(c, src, ld, r0 + ir, cnt - ir, p0, kc, k, d);
            break;
        }
        const uint16_t *rows = (const uint16_t *)src + (r0 + ir) * ld + p0;
        for (int h = 0; h < P; h += 16) {
            const int g = P - h < 16 ? P - h : 16;
            for (mf_intp q = 0; q < qv; q += 16) {
                __m512i r[16];
                for (int i = 0; i < g; i++) {
                    const uint16_t *at = rows + (h + i) * ld + 2 * q;
                    _mm_prefetch((const char *)at + PACK_PF, _MM_HINT_T0);
                    r[i] = _mm512_loadu_si512(at);
                }
                for (int i = g; i < 16; i++) {
                    r[i] = _mm512_setzero_si512();
                }
                mf_transpose16(r);
                for (int j = 0; j < 16; j++) {
                    _mm512_mask_storeu_epi32(d + (q + j) * P + h, (__mmask16)((1u << g) - 1), r[j]);
                }
            }
        }
        for (mf_intp q = qv; q < kq; q++) {
            for (int i = 0; i < P; i++) {
                const uint16_t *row = rows + i * ld;
                uint32_t lo = row[2 * q];
                uint32_t hi = (p0 + 2 * q + 1 < k) ? row[2 * q + 1] : 0;
                d[q * P + i] = lo | (hi << 16);
            }
        }
    }
}

static void
pack_a_bf16(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
            mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    pack_rows_bf16(BF_MR, c, src, ld, r0, cnt, p0, kc, k, dst);
}

static void
pack_bt_bf16(const mf_gemm_ctx *c, const void *src, mf_intp ld, mf_intp r0, mf_intp cnt,
             mf_intp p0, mf_intp kc, mf_intp k, void *dst)
{
    pack_rows_bf16(BF_NR, c, src, ld, r0, cnt, p0, kc, k, dst);
}

/*
 * A few columns (the driver's thin path): rows of A times B's pairs
 * (driver.h), R rows at a time, each row's chains in NV registers of 16
 * column lanes (up to 64 columns), each step NV VDPBF16PS a row with A's
 * pair broadcast (its two codes are one dword: nothing of A is transposed).
 * A is read once, however many columns: x @ W.T of 17-64 rows against a
 * (4096, 4096) W had packed all of W for the blocked kernel (Zen 4, two
 * threads: 32 rows 4.2 -> 2.8 ms, 64 rows 7.5 -> 5.6; torch 3.4 and 5.7).
 * 16 pairs of the R rows are first copied to a small buffer and broadcast
 * from there: rows a multiple of 4 KiB apart share one set of L1, and
 * broadcasting from the rows in place lost each line before its 16 steps
 * were done (Zen 4, one thread, 4096^2 @ 4096x16: 93 GF/s in place, 165
 * copied, avx512.c's transposing FMA kernel 94).  An odd k's last pair
 * takes a zero high half: the oracle's +0 * +0.
 */
/* how far ahead of the copied pairs (codes) a row is fetched into L2 */
#define GEMV_PF 128

/* the two codes at p as one dword (p need not be 4-byte aligned) */
static inline __attribute__((always_inline)) int32_t
load_dword(const uint16_t *p)
{
    int32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* 32 8-bit codes at p -> their bfloat16 bits (16 pairs) through lut: four
 * 64-entry VPERMT2W lookups, chosen by the codes' two top bits */
static inline __attribute__((always_inline)) __m512i
lut8_pairs(const uint8_t *p, const uint16_t *lut)
{
    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
    __m512i r[4];
    for (int t = 0; t < 4; t++) {
        r[t] = _mm512_permutex2var_epi16(_mm512_loadu_si512(lut + 64 * t), idx,
                                         _mm512_loadu_si512(lut + 64 * t + 32));
    }
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40));
    const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x80));
    return _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, r[0], r[1]),
                                   _mm512_mask_blend_epi16(b6, r[2], r[3]));
}

/* the pair at index q of a row (a: its first code), the high half +0 past
 * k (an odd k's last pair); lut: 8-bit codes' bfloat16 bits, else NULL */
static inline __attribute__((always_inline)) int32_t
row_pair(const void *a, mf_intp q, mf_intp k, const uint16_t *lut)
{
    if (lut != NULL) {
        const uint8_t *c = (const uint8_t *)a + 2 * q;
        return (int32_t)((uint32_t)lut[c[0]] | (2 * q + 1 < k ? (uint32_t)lut[c[1]] << 16 : 0u));
    }
    const uint16_t *c = (const uint16_t *)a + 2 * q;
    return 2 * q + 1 < k ? load_dword(c) : (int32_t)c[0];
}

static inline __attribute__((always_inline)) void
gemv_pairs_rows(const int R, const int NF, const int H, mf_intp k, const void *a0,
                mf_intp lda, const uint32_t *bp, __mmask16 cm, float *acc, mf_intp nb,
                const uint16_t *lut)
{
    /* A's codes: 16-bit, or with lut 8-bit */
    const mf_intp sz = lut != NULL ? 1 : 2;
    const char *a = (const char *)a0;
    /* R rows x NF vectors of 16 columns, and with H one of 8 (the last
     * vector's lanes cm) */
    __m512 c[16][4];
    __m256 ch[16];
    int32_t buf[2][16 * 16] __attribute__((aligned(64)));
    const mf_intp bw = 16 * (NF + H);   /* dwords of B a pair */
    const __mmask16 cmz = H ? (__mmask16)0xffff : cm;
    for (int i = 0; i < R; i++) {
        for (int v = 0; v < NF; v++) {
            c[i][v] = _mm512_maskz_loadu_ps(v + 1 < NF ? (__mmask16)0xffff : cmz,
                                            acc + i * nb + 16 * v);
        }
        if (H) {
            ch[i] = _mm256_maskz_loadu_ps((__mmask8)cm, acc + i * nb + 16 * NF);
        }
    }
#define GEMV_STEP(q_, W_)                                                        \
    do {                                                                         \
        __m512bh b_[4];                                                          \
        __m256bh bh_;                                                            \
        for (int v = 0; v < NF; v++) {                                           \
            b_[v] = as_bh(_mm512_load_si512(bp + bw * (q_) + 16 * v));           \
        }                                                                        \
        if (H) {                                                                 \
            bh_ = (__m256bh)_mm256_load_si256((const __m256i *)(bp + bw * (q_) + 16 * NF)); \
        }                                                                        \
        for (int i = 0; i < R; i++) {                                            \
            const __m512i wi_ = _mm512_set1_epi32(W_);                           \
            const __m512bh w_ = as_bh(wi_);                                      \
            for (int v = 0; v < NF; v++) {                                       \
                c[i][v] = _mm512_dpbf16_ps(c[i][v], b_[v], w_);                  \
            }                                                                    \
            if (H) {                                                             \
                ch[i] = _mm256_dpbf16_ps(ch[i], bh_,                             \
                                         (__m256bh)_mm512_castsi512_si256(wi_)); \
            }                                                                    \
        }                                                                        \
    } while (0)
    const mf_intp qf = k / 2;
    mf_intp q = 0;
    /* rows that start at the same offset in a cache line (NumPy's large
     * arrays: 16 bytes past one) take their pairs up to the next line one
     * at a time, so that each 16 pairs below are one line */
    if (((uintptr_t)a & (2 * sz - 1)) == 0 && (lda * sz) % 64 == 0) {
        mf_intp head = (mf_intp)((64 - ((uintptr_t)a & 63)) & 63) / (2 * sz);
        for (; q < head && q < qf; q++) {
            GEMV_STEP(q, row_pair(a + i * lda * sz, q, k, lut));
        }
    }
    /* the next 16 pairs are copied before this 16's steps: a dword loaded
     * right after its 64-byte store waits for it */
    if (q + 16 <= qf) {
        for (int i = 0; i < R; i++) {
            const char *ai = a + (i * lda + 2 * q) * sz;
            _mm512_store_si512(buf[0] + 16 * i, lut != NULL ? lut8_pairs((const uint8_t *)ai, lut)
                                                            : _mm512_loadu_si512(ai));
        }
    }
    for (int h = 0; q + 16 <= qf; q += 16, h ^= 1) {
        if (q + 32 <= qf) {
            for (int i = 0; i < R; i++) {
                const char *ai = a + (i * lda + 2 * q + 32) * sz;
                _mm_prefetch(ai + GEMV_PF * sz, _MM_HINT_T1);
                _mm512_store_si512(buf[h ^ 1] + 16 * i,
                                   lut != NULL ? lut8_pairs((const uint8_t *)ai, lut)
                                               : _mm512_loadu_si512(ai));
            }
        }
        const int32_t *w = buf[h];
        for (int s = 0; s < 16; s++) {
            GEMV_STEP(q + s, w[16 * i + s]);
        }
    }
    for (; q < (k + 1) / 2; q++) {
        GEMV_STEP(q, row_pair(a + i * lda * sz, q, k, lut));
    }
#undef GEMV_STEP
    for (int i = 0; i < R; i++) {
        for (int v = 0; v < NF; v++) {
            _mm512_mask_storeu_ps(acc + i * nb + 16 * v, v + 1 < NF ? (__mmask16)0xffff : cmz,
                                  c[i][v]);
        }
        if (H) {
            _mm256_mask_storeu_ps(acc + i * nb + 16 * NF, (__mmask8)cm, ch[i]);
        }
    }
}

/* R rows at a time, NF vectors of 16 columns and H of 8 a row: at most 24
 * accumulators; whole groups of R rows, then 4, then 1 */
static inline __attribute__((always_inline)) void
gemv_pairs_nv(const int R, const int NF, const int H, mf_intp rows, mf_intp k,
              const void *A, mf_intp lda, const uint32_t *bp, mf_intp nb, float *acc,
              const uint16_t *lut)
{
    const __mmask16 cm = (__mmask16)((1u << (nb - 16 * (NF + H - 1))) - 1u);
    const mf_intp rs = lda * (lut != NULL ? 1 : 2);     /* bytes a row */
    const char *a = (const char *)A;
    mf_intp r = 0;
    for (; r + R <= rows; r += R) {
        gemv_pairs_rows(R, NF, H, k, a + r * rs, lda, bp, cm, acc + r * nb, nb, lut);
    }
    for (; r + 4 <= rows; r += 4) {
        gemv_pairs_rows(4, NF, H, k, a + r * rs, lda, bp, cm, acc + r * nb, nb, lut);
    }
    for (; r < rows; r++) {
        gemv_pairs_rows(1, NF, H, k, a + r * rs, lda, bp, cm, acc + r * nb, nb, lut);
    }
}

/* the columns past the last 16 go in a vector of 8 where they fit (its
 * pair the low half of the 512-bit broadcast: a broadcast of its own
 * lost the gain): half the VDPBF16PS work on Zen 4, whose 512-bit
 * instructions take two of its 256-bit units.  x @ W.T against a (4096,
 * 4096) W, two threads, best of 100: 8 rows 1.60 -> 1.28 ms, 17 rows 2.81
 * -> 2.25, 24 rows 2.85 -> 2.31, 40 rows 4.01 -> 3.51, 56 rows 5.53 ->
 * 4.98 */
static inline __attribute__((always_inline)) void
gemv_pairs_any(mf_intp rows, mf_intp k, const void *A, mf_intp lda, const uint32_t *bp,
               mf_intp nb, float *acc, const uint16_t *lut)
{
    const int half = (nb - 1) % 16 < 8;
    switch ((nb + 15) / 16 * 2 - half) {
        case 1: gemv_pairs_nv(16, 0, 1, rows, k, A, lda, bp, nb, acc, lut); break;
        case 2: gemv_pairs_nv(16, 1, 0, rows, k, A, lda, bp, nb, acc, lut); break;
        case 3: gemv_pairs_nv(12, 1, 1, rows, k, A, lda, bp, nb, acc, lut); break;
        case 4: gemv_pairs_nv(12, 2, 0, rows, k, A, lda, bp, nb, acc, lut); break;
        case 5: gemv_pairs_nv(8, 2, 1, rows, k, A, lda, bp, nb, acc, lut); break;
        case 6: gemv_pairs_nv(8, 3, 0, rows, k, A, lda, bp, nb, acc, lut); break;
        case 7: gemv_pairs_nv(6, 3, 1, rows, k, A, lda, bp, nb, acc, lut); break;
        default: gemv_pairs_nv(6, 4, 0, rows, k, A, lda, bp, nb, acc, lut); break;
    }
}

static void
gemv_pairs(mf_intp rows, mf_intp k, const uint16_t *A, mf_intp lda, const uint32_t *bp,
           mf_intp nb, float *acc)
{
    gemv_pairs_any(rows, k, A, lda, bp, nb, acc, NULL);
}

/* A of 8-bit codes (the float8 formats): each 16 pairs of a row decoded
 * into the small buffer instead of copied */
static void
gemv_pairs8(mf_intp rows, mf_intp k, const uint8_t *A, mf_intp lda, const uint32_t *bp,
            mf_intp nb, float *acc, const uint16_t *lut)
{
    gemv_pairs_any(rows, k, A, lda, bp, nb, acc, lut);
}

static const mf_gemm_ops bf16_ops = {
    .MR = BF_MR,
    .NR = BF_NR,
    .KC = 512,
    .MC = 192,
    .NC = 2048,
    .pair_bytes = 4,
    .pack_a = pack_a_bf16,
    .pack_b = pack_b_bf16,
    .pack_bt = pack_bt_bf16,
    .kernel = kernel_12x32,
    .kernel_rows = kernel_12x32_rows,
    .kernel_rows_bf16 = kernel_12x32_rows_bf16,
    .store_bf16 = mf_gemm_store_bf16,
    .small = mf_gemm_small,
    .ftz_daz = 0,
    /* one column: avx512.c's FMA chain (the same canonical bits); the
     * driver runs it under FTZ|DAZ */
    .gemv = mf_avx512_gemv_bf16,
    .gevm = mf_avx512_gevm_bf16,
    /* from 7 columns: a step costs one VDPBF16PS a row (a 256-bit one up to
     * 8 columns), so fewer columns go to the FMA kernel, which reads A at
     * memory speed (4096^2 @ 4096xn, two threads on Zen 4, FMA against
     * pairs: n = 2 1.04 ms against 1.35, 5 1.29 against 1.39, 6 1.43 both,
     * 7 1.58 against 1.46) */
    .gemv_pairs = gemv_pairs,
    .gemv_pairs_min = 7,
    .gemv_pairs_max = 64,      /* wider B in blocks of 64 (driver.c) */
    .gemv_pairs8 = gemv_pairs8,
};

/*
 * The canonical step was measured on AMD Zen 4 and agrees with the SDM's
 * pseudocode, but this level only uses VDPBF16PS after checking, once per
 * process, that this CPU's instruction reproduces the serial oracle on
 * adversarial operands (tininess, pair order, signed zeros, overflow,
 * subnormal inputs); otherwise it runs the avx512 FMA emulation.
 */
static uint16_t
selftest_bf16(uint64_t *s, int regime)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    uint16_t sign = (uint16_t)((*s >> 40) & 0x8000u), mant = (uint16_t)((*s >> 20) & 0x7Fu);
    unsigned e;
    switch (regime) {
        case 0: return (uint16_t)(*s >> 24);                    /* any bits */
        case 1: e = 55 + (unsigned)((*s >> 8) % 17); break;     /* products near 2^-126 */
        case 2: e = 240 + (unsigned)((*s >> 8) % 15); break;    /* products overflow */
        case 3: e = 124 + (unsigned)((*s >> 8) % 8); break;     /* ordinary */
        default: e = (unsigned)((*s >> 8) % 255); break;        /* every exponent */
    }
    return (uint16_t)(sign | (e << 7) | mant);
}

static int
selftest_vdpbf16ps(void)
{
    enum { ROUNDS = 48 };
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < ROUNDS; r++) {
        uint16_t a[32], b[32];
        uint32_t acc_bits[16];
        float acc[16], out[16];
        for (int i = 0; i < 32; i++) {
            a[i] = selftest_bf16(&s, (r + i) % 5);
            b[i] = selftest_bf16(&s, (r / 5 + i) % 5);
        }
        for (int i = 0; i < 16; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            acc_bits[i] = (r % 3 == 0) ? 0u : (r % 3 == 1) ? (uint32_t)(s & 0x807FFFFFu)
                                                            : (uint32_t)((s >> 11) & 0x87FFFFFFu);
            memcpy(&acc[i], &acc_bits[i], 4);
        }
        if (r == 0) {
            /* fixed cases: 1 + 2^-24 + 2^-24 (order), tininess after rounding */
            a[0] = 0x3F80; a[1] = 0x3380; b[0] = 0x3F80; b[1] = 0x3F80; acc[0] = 0.0f;
            a[2] = 0; a[3] = 0x1980; b[2] = 0; b[3] = 0x9980; acc[1] = 0x1p-126f;
        }
        __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
        _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), as_bh(va), as_bh(vb)));
        for (int i = 0; i < 16; i++) {
            float want = acc[i];
            mf_serial_gemm_f32acc(&mf_formats[MF_BFLOAT16], 1, 1, 2, a + 2 * i, 2, b + 2 * i, 1,
                                  &want, 1, NULL);
            uint32_t w, g;
            memcpy(&w, &want, 4);
            memcpy(&g, &out[i], 4);
            int wnan = (w & 0x7FFFFFFFu) > 0x7F800000u, gnan = (g & 0x7FFFFFFFu) > 0x7F800000u;
            if (wnan != gnan || (!wnan && w != g)) {
                return 0;
            }
        }
    }
    return 1;
}

static int
vdpbf16ps_ok(void)
{
    static int state = 0;      /* 0 unknown, 1 ok, 2 differs */
    int st = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (st == 0) {
        /* the oracle's float arithmetic on overflowing and NaN operands
         * raises the status flags, which NumPy would report after the
         * caller's first product as its own overflow: the test runs in
         * the default environment (nearest, no FTZ/DAZ) and leaves the
         * caller's as it found it, flags included */
        unsigned int csr = _mm_getcsr();
        _mm_setcsr(0x1F80u);
        st = selftest_vdpbf16ps() ? 1 : 2;
        _mm_setcsr(csr);
        __atomic_store_n(&state, st, __ATOMIC_RELAXED);
    }
    return st == 1;
}

/*
 * Whether VDPBF16PS is the faster way here.  On an Intel core that also has
 * AMX-BF16 (Sapphire Rapids and later) it is not at low thread counts: a
 * 16-core Xeon of that kind ran a 2048^3 product at 118 GF/s on one thread
 * with the avx512 level's two FMAs per pair against 78 GF/s with VDPBF16PS,
 * and 2048^3 and 4096^3 1.15-1.3x faster on 4 threads; on 16 threads
 * VDPBF16PS was as fast or faster (docs/design.md).  The bits are the same.
 * So on such a CPU this level's gemm is the avx512 one up to 4 threads.  AMD
 * Zen 4 has no AMX and keeps VDPBF16PS.  -1: decide so; 0 or 1: forced (the
 * kernel harness checks the VDPBF16PS kernel on every CPU that has it).
 */
int mf_avx512bf16_gemm_dp = -1;

#define FMA_PAIRS_MAX_THREADS 4

static int
amx_bf16_cpu(void)
{
    static int state = 0;      /* 0 unknown, 1 yes, 2 no */
    int st = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (st == 0) {
        unsigned a, b, c, d;
        st = (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22))) ? 1 : 2;
        __atomic_store_n(&state, st, __ATOMIC_RELAXED);
    }
    return st == 1;
}

static int
use_vdpbf16ps(void)
{
    int forced = __atomic_load_n(&mf_avx512bf16_gemm_dp, __ATOMIC_RELAXED);
    if (forced < 0) {
        forced = !(amx_bf16_cpu() && mf_get_num_threads() <= FMA_PAIRS_MAX_THREADS);
    }
    return forced && vdpbf16ps_ok();
}

void
mf_avx512bf16_gemm_f32acc(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                          const void *A, mf_intp lda, const void *B, mf_intp ldb,
                          float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    if (!use_vdpbf16ps()) {
        mf_avx512_gemm_f32acc(f, m, n, k, A, lda, B, ldb, C, ldc, ep);
        return;
    }
    mf_gemm_run(&bf16_ops, f, m, n, k, A, lda, B, ldb, C, ldc, ep);
}

int
mf_avx512bf16_gemm_thin_cols(const mf_format *f)
{
    return use_vdpbf16ps() ? mf_gemm_thin_cols(&bf16_ops, f) : mf_avx512_gemm_thin_cols(f);
}

int
mf_avx512bf16_gemm_f32acc_bt(const mf_format *f, mf_intp m, mf_intp n, mf_intp k,
                             const void *A, mf_intp lda, const void *Bt, mf_intp ldbt,
                             float *C, mf_intp ldc, const mf_gemm_epilogue *ep)
{
    if (!use_vdpbf16ps()) {
        return mf_avx512_gemm_f32acc_bt(f, m, n, k, A, lda, Bt, ldbt, C, ldc, ep);
    }
    return mf_gemm_run_bt(&bf16_ops, f, m, n, k, A, lda, Bt, ldbt, C, ldc, ep);
}
