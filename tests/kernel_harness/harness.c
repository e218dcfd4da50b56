/*
 * C-level kernel harness: every kernel of every level this CPU (or the
 * emulated CPU, under qemu-user) supports, against the serial oracle, bit
 * for bit, flags included.  No Python, no NumPy: it links the kernel
 * sources directly (see build.sh), so it cross-compiles for aarch64 and runs
 * under qemu-aarch64 with QEMU_CPU choosing the emulated CPU's features.
 *
 *   harness [--quick]      exit 0: every level agrees with serial
 *
 * What it checks, per float format (and decode of the integer formats):
 * decode of every code (or 64K random codes for bfloat16), encode of
 * float32 inputs from every exponent and the edges (ties, overflow, NaN
 * payloads, signalling NaNs, subnormals) with the FP flags serial raises,
 * the four binary operations on random and special codes (flags too), sum
 * (one run and several a call) and dot over lengths that cross the vector widths and the 4096-element
 * block, the column sums and np.vecmat's column dots (NaN: NaN,
 * of any sign), inspect's statistics block kernel (every field), argmax and
 * argmin of sign-magnitude codes (also against a plain loop), and gemm_f32acc on shapes around the micro-tile and blocking edges,
 * with adversarial operands whose products underflow (the FZ-before-rounding
 * case of docs/design.md), C with subnormals, and the bfloat16 epilogue.
 */
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"
#include "core/codec.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static int failures = 0;
static int quick = 0;
#define FLAGS (FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW)

static void
fail(const char *level, const char *fmt, const char *what, long at, uint64_t got, uint64_t want)
{
    if (failures < 40) {
        printf("  MISMATCH level=%s format=%s %s at %ld: got %#llx want %#llx\n", level, fmt, what,
               at, (unsigned long long)got, (unsigned long long)want);
    }
    failures++;
}

static uint32_t f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static uint64_t d2u(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }

/* random code of a format (mostly in range, some specials) */
static uint32_t
rcode(const mf_format *f)
{
    uint32_t mask = f->bits >= 32 ? 0xFFFFFFFFu : ((1u << f->bits) - 1u);
    if (f->id == MF_BFLOAT16) {
        uint32_t r = rnd() % 16;
        if (r == 0) return 0x7F80u | (rnd() & 0x807Fu);          /* inf / NaN */
        if (r == 1) return rnd() & 0x807Fu;                      /* zero / subnormal */
        if (r < 8) {                                             /* moderate exponents */
            uint32_t e = 110 + rnd() % 36;
            return (rnd() & 0x807Fu) | (e << 7);
        }
        return rnd() & 0xFFFFu;
    }
    return rnd() & mask;
}

static void
fill_codes(const mf_format *f, void *p, long n)
{
    for (long i = 0; i < n; i++) {
        uint32_t c = rcode(f);
        if (f->itemsize == 2) ((uint16_t *)p)[i] = (uint16_t)c;
        else ((uint8_t *)p)[i] = (uint8_t)c;
    }
}

/* ------------------------------------------------------------ decode/encode */

static void
check_decode(const char *lv, const mf_kernels *k, const mf_format *f)
{
    long n = f->itemsize == 2 ? 65536 + 13 : 256 * 3 + 7;
    void *src = malloc((size_t)n * 2);
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    for (long i = 0; i < n; i++) {
        if (f->itemsize == 2) ((uint16_t *)src)[i] = (uint16_t)i;
        else ((uint8_t *)src)[i] = (uint8_t)i;
    }
    feclearexcept(FE_ALL_EXCEPT);
    mf_serial_decode_f32(f, src, a, n);
    int fl_serial = fetestexcept(FLAGS);
    feclearexcept(FE_ALL_EXCEPT);
    k->decode_f32(f, src, b, n);
    int fl = fetestexcept(FLAGS);
    if (fl != fl_serial) {
        fail(lv, f->name, "decode flags", n, fl, fl_serial);
    }
    for (long i = 0; i < n; i++) {
        if (f2u(a[i]) != f2u(b[i])) {
            fail(lv, f->name, "decode", i, f2u(b[i]), f2u(a[i]));
        }
    }
    free(src); free(a); free(b);
}

static float
rfloat(void)
{
    uint32_t r = rnd() % 8;
    uint32_t u = rnd() ^ (rnd() << 16);
    switch (r) {
        case 0: return u2f(u);                                        /* any bits */
        case 1: return u2f((u & 0x80000000u) | 0x7F800000u | (u & 0x7FFFFFu)); /* inf/NaN */
        case 2: return u2f((u & 0x807FFFFFu));                        /* subnormal */
        case 3: return u2f((u & 0x80000000u) | ((u & 0xFFFF0000u) >> 1 & 0x7FFF0000u) | 0x7FFFu); /* ties-ish */
        case 4: return u2f((u & 0x807FFFFFu) | ((100u + rnd() % 60) << 23));
        default: return u2f((u & 0x807FFFFFu) | ((115u + rnd() % 25) << 23));
    }
}

static void
check_encode(const char *lv, const mf_kernels *k, const mf_format *f)
{
    long n = quick ? 20000 : 200000;
    float *x = malloc((size_t)n * 4);
    void *a = malloc((size_t)n * 2), *b = malloc((size_t)n * 2);
    static const uint32_t edge[] = {0x7F7F8000u, 0x7F7F7FFFu, 0x7F7FFFFFu, 0x7F800000u, 0x7F800001u,
                                    0x7FC00000u, 0xFFC00001u, 0xFF800001u, 0x00000001u, 0x80000001u,
                                    0x00800000u, 0x007FFFFFu, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu,
                                    /* float16's: 65520 (overflows), just below, 65504; half and
                                     * 1.5 of its smallest subnormal; its smallest normal less a
                                     * half ulp; signaling NaNs with payloads */
                                    0x477FF000u, 0x477FEFFFu, 0x477FE000u, 0x33000000u, 0x33000001u,
                                    0x33C00000u, 0x387FF000u, 0x7F800001u, 0xFFA00000u, 0x7FBFFFFFu};
    const long nedge = (long)(sizeof(edge) / sizeof(edge[0]));
    for (long i = 0; i < n; i++) {
        x[i] = (i < nedge) ? u2f(edge[i]) : rfloat();
    }
    for (long len = 1; len <= n; len = len < 100 ? len + 1 : len * 3 + 1) {
        for (int run = 0; run < 2; run++) {
            const mf_kernels *kk = run ? k : &mf_kernels_serial;
            void *out = run ? b : a;
            memset(out, 0xA5, (size_t)n * 2);
            feclearexcept(FE_ALL_EXCEPT);
            kk->encode_f32(f, x, out, len);
            int fl = fetestexcept(FLAGS);
            static int fl_serial;
            if (!run) fl_serial = fl;
            else if (fl != fl_serial) fail(lv, f->name, "encode flags", len, fl, fl_serial);
        }
        if (memcmp(a, b, (size_t)n * f->itemsize) != 0) {
            for (long i = 0; i < n; i++) {
                uint32_t ca = f->itemsize == 2 ? ((uint16_t *)a)[i] : ((uint8_t *)a)[i];
                uint32_t cb = f->itemsize == 2 ? ((uint16_t *)b)[i] : ((uint8_t *)b)[i];
                if (ca != cb) { fail(lv, f->name, "encode", i, cb, ca); break; }
            }
        }
    }
    free(x); free(a); free(b);
}

/* ------------------------------------------------------------ binary */

static void
check_binary(const char *lv, const mf_kernels *k, const mf_format *f)
{
    long n = quick ? 5000 : 40000;
    size_t sz = (size_t)f->itemsize;
    char *x = malloc(n * sz), *y = malloc(n * sz), *a = malloc(n * sz), *b = malloc(n * sz);
    fill_codes(f, x, n);
    fill_codes(f, y, n);
    for (int op = 0; op < MF_NUM_BINARY_OPS; op++) {
        for (long len = 1; len <= n; len = len < 70 ? len + 1 : len * 4 + 3) {
            int fls[2];
            for (int run = 0; run < 2; run++) {
                const mf_kernels *kk = run ? k : &mf_kernels_serial;
                feclearexcept(FE_ALL_EXCEPT);
                kk->binary((mf_binary_op)op, f, x, y, run ? b : a, len);
                fls[run] = fetestexcept(FLAGS);
            }
            if (fls[0] != fls[1]) fail(lv, f->name, "binary flags", op * 1000000 + len, fls[1], fls[0]);
            if (memcmp(a, b, len * sz) != 0) {
                for (long i = 0; i < len; i++) {
                    if (memcmp(a + i * sz, b + i * sz, sz)) {
                        uint32_t ca = 0, cb = 0;
                        memcpy(&ca, a + i * sz, sz);
                        memcpy(&cb, b + i * sz, sz);
                        static const char *const names[MF_NUM_BINARY_OPS] = {
                            "add", "sub", "mul", "div", "floor", "ceil", "trunc", "rint",
                            "sqrt", "reciprocal"};
                        fail(lv, f->name, names[op], i, cb, ca);
                        break;
                    }
                }
            }
        }
    }
    free(x); free(y); free(a); free(b);
}

/* ------------------------------------------------------------ sum, dot */

static void
check_reduce(const char *lv, const mf_kernels *k, const mf_format *f)
{
    long n = 9000;
    size_t sz = (size_t)f->itemsize;
    char *x = malloc(n * sz), *y = malloc(n * sz);
    for (int trial = 0; trial < (quick ? 2 : 6); trial++) {
        /* with and without the software prefetch of what they read (it
         * changes nothing; its distance runs past the buffers' ends) */
        mf_read_prefetch = trial % 3 == 1 ? 16384 : 0;
        fill_codes(f, x, n);
        fill_codes(f, y, n);
        if (trial % 2 == 0) {
            /* finite, moderate values: sums that are not simply NaN */
            float tmp;
            for (long i = 0; i < n; i++) {
                for (int t = 0; t < 100; t++) {
                    mf_serial_decode_f32(f, x + i * sz, &tmp, 1);
                    if (isfinite(tmp)) break;
                    fill_codes(f, x + i * sz, 1);
                }
                for (int t = 0; t < 100; t++) {
                    mf_serial_decode_f32(f, y + i * sz, &tmp, 1);
                    if (isfinite(tmp)) break;
                    fill_codes(f, y + i * sz, 1);
                }
            }
        }
        for (long len = 0; len <= n; len = len < 80 ? len + 1 : len * 2 + 37) {
            int fl0, fl1;
            feclearexcept(FE_ALL_EXCEPT);
            double s0 = mf_serial_sum(f, x, len);
            fl0 = fetestexcept(FLAGS);
            feclearexcept(FE_ALL_EXCEPT);
            double s1 = k->sum(f, x, len);
            fl1 = fetestexcept(FLAGS);
            if (d2u(s0) != d2u(s1)) fail(lv, f->name, "sum", len, d2u(s1), d2u(s0));
            if (fl0 != fl1) fail(lv, f->name, "sum flags", len, fl1, fl0);
            /* several runs a call: runs of len // 3 from three places */
            {
                long m3 = len / 3;
                const char *rows[3] = {x, x + m3 * sz, x + 2 * m3 * sz};
                double r0[3], r1[3];
                feclearexcept(FE_ALL_EXCEPT);
                mf_serial_sum_rows(f, rows, 3, m3, r0);
                fl0 = fetestexcept(FLAGS);
                feclearexcept(FE_ALL_EXCEPT);
                k->sum_rows(f, rows, 3, m3, r1);
                fl1 = fetestexcept(FLAGS);
                for (int q = 0; q < 3; q++) {
                    if (d2u(r0[q]) != d2u(r1[q])) fail(lv, f->name, "sum_rows", m3, d2u(r1[q]), d2u(r0[q]));
                }
                if (fl0 != fl1) fail(lv, f->name, "sum_rows flags", m3, fl1, fl0);
            }
            feclearexcept(FE_ALL_EXCEPT);
            s0 = mf_serial_dot(f, x, y, len);
            fl0 = fetestexcept(FLAGS);
            feclearexcept(FE_ALL_EXCEPT);
            s1 = k->dot(f, x, y, len);
            fl1 = fetestexcept(FLAGS);
            if (d2u(s0) != d2u(s1)) fail(lv, f->name, "dot", len, d2u(s1), d2u(s0));
            if (fl0 != fl1) fail(lv, f->name, "dot flags", len, fl1, fl0);
        }
    }
    mf_read_prefetch = 0;
    free(x); free(y);
}

/* ------------------------------------------------------------ colsum */

/* column sums (op 0), maxima (1) and minima (2) of up to MF_COLSUM_ROWS
 * rows of random and special codes at widths that cross the vector groups,
 * the rows W apart and one after the other (the kernels read those in
 * another order): float32 bits (sums: and flags) as serial's, except which
 * NaN a NaN column holds and, for maxima and minima, which zero a zero
 * column holds (the callers redo those) */
static void
check_columns(const char *lv, const mf_kernels *k, const mf_format *f)
{
    enum { W = 300 };
    static const char *const what[3] = {"colsum", "colmax", "colmin"};
    size_t sz = (size_t)f->itemsize;
    char *x = malloc(MF_COLSUM_ROWS * W * sz);
    float a0[W], a1[W];
    const char *rows[MF_COLSUM_ROWS];
    for (int trial = 0; trial < (quick ? 2 : 6); trial++) {
        fill_codes(f, x, MF_COLSUM_ROWS * W);
        for (long n = 0; n <= W; n = n < (quick ? 36 : 70) ? n + 1 : n + (quick ? 67 : 23)) {
          for (int adjacent = 0; adjacent < 2; adjacent++) {
            for (int i = 0; i < MF_COLSUM_ROWS; i++) {
                rows[i] = x + (size_t)i * (size_t)(adjacent ? n : W) * sz;
            }
            for (int nr = 1; nr <= MF_COLSUM_ROWS; nr += (nr < 3 ? 1 : nr < 20 ? 5 : 13)) {
              for (int op = 0; op < 3; op++) {
                for (long j = 0; j < n; j++) {
                    a0[j] = a1[j] = (float)(j % 7) - 3.0f;
                }
                int fl0, fl1;
                feclearexcept(FE_ALL_EXCEPT);
                if (op == 0) {
                    mf_serial_colsum_f32(f, rows, nr, a0, n);
                }
                else {
                    mf_serial_colmax_f32(f, rows, nr, a0, n, op == 2);
                }
                fl0 = fetestexcept(FLAGS);
                feclearexcept(FE_ALL_EXCEPT);
                if (op == 0) {
                    k->colsum_f32(f, rows, nr, a1, n);
                }
                else {
                    k->colmax_f32(f, rows, nr, a1, n, op == 2);
                }
                fl1 = fetestexcept(FLAGS);
                for (long j = 0; j < n; j++) {
                    uint32_t u0, u1;
                    memcpy(&u0, a0 + j, 4);
                    memcpy(&u1, a1 + j, 4);
                    int bad = a0[j] != a0[j] ? a1[j] == a1[j]
                              : (op != 0 && a0[j] == 0.0f) ? a1[j] != 0.0f : u0 != u1;
                    if (bad) {
                        fail(lv, f->name, what[op], n * 1000 + j, u1, u0);
                        break;
                    }
                }
                if (op == 0 && fl0 != fl1) {
                    fail(lv, f->name, "colsum flags", n * 100 + nr, fl1, fl0);
                }
              }
            }
          }
        }
    }
    free(x);
}

/* NumPy's pairwise sums (mean/var/std): runs of lengths around the
 * leaves' and the tree's edges, plain and as squared deviations from a
 * mean; float32 bits (a NaN: a NaN) and flags as serial's */
static void
check_pairwise(const char *lv, const mf_kernels *k, const mf_format *f)
{
    enum { N = 5000 };
    static const long lens[] = {0, 1, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 136, 200,
                                255, 256, 257, 263, 264, 1000, 1031, 4096, 4097, N};
    char *x = malloc((size_t)N * (size_t)f->itemsize + 1);
    for (int trial = 0; trial < (quick ? 2 : 6); trial++) {
        fill_codes(f, x + (trial & 1), N);              /* odd addresses too */
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            for (int dev = 0; dev < 2; dev++) {
                float m = dev ? (float)(trial % 5) * 0.75f - 1.0f : 0.0f;
                feclearexcept(FE_ALL_EXCEPT);
                float r0 = mf_serial_pairwise_f32(f, x + (trial & 1), lens[li], m, dev);
                int fl0 = fetestexcept(FLAGS);
                feclearexcept(FE_ALL_EXCEPT);
                float r1 = k->pairwise_f32(f, x + (trial & 1), lens[li], m, dev);
                int fl1 = fetestexcept(FLAGS);
                if (r0 != r0 ? r1 == r1 : f2u(r0) != f2u(r1)) {
                    fail(lv, f->name, dev ? "pairwise dev" : "pairwise", lens[li], f2u(r1), f2u(r0));
                }
                if (fl0 != fl1) {
                    fail(lv, f->name, "pairwise flags", lens[li], fl1, fl0);
                }
            }
        }
    }
    free(x);
}

/* argmax / argmin of 8- and 16-bit sign-magnitude codes (arg_extreme8/16)
 * against serial and against a plain loop over the codes' values: the first
 * NaN (a magnitude above lim), else the first extreme, -0 == +0.  Codes from
 * a few values around zero (many ties, both zeros), all codes, NaNs placed
 * early, late or not at all; lengths around the vector widths and blocks. */
static long
arg_reference(const void *c, int bytes, long n, int lim, int want_max)
{
    long best = -1;
    int bk = 0;
    for (long i = 0; i < n; i++) {
        int x = bytes == 2 ? ((const uint16_t *)c)[i] : ((const uint8_t *)c)[i];
        int sbit = bytes == 2 ? 0x8000 : 0x80, mag = x & (sbit - 1);
        if (mag > lim) {
            return i;
        }
        int k = (x & sbit) ? -mag : mag;
        if (best < 0 || (want_max ? k > bk : k < bk)) {
            best = i;
            bk = k;
        }
    }
    return best < 0 ? 0 : best;
}

/* the key of argkey.h computed another way: the value order of a sign-
 * magnitude code (NaN: above everything) */
static long
key_reference(uint32_t x, int bytes, int lim)
{
    const uint32_t sbit = bytes == 2 ? 0x8000u : 0x80u;
    const long mag = (long)(x & (sbit - 1));
    if (mag > lim) return 1L << 20;
    return (x & sbit) ? -mag : mag;
}

/* float64 -> float32 rounded to odd (f64_to_f32_odd, where a level has
 * one): every level against codec.h's serial step, bit for bit, on random
 * bit patterns of every exponent, the boundaries of float32's range, its
 * subnormals, NaNs and infinities, at lengths 0..40 (the tails) */
static void
check_f64_odd(const char *lv, const mf_kernels *k)
{
    if (k->f64_to_f32_odd == NULL) return;
    enum { N = 8192 };
    double *src = malloc(N * sizeof(double));
    float *got = malloc((N + 16) * sizeof(float));
    static const double edges[] = {0.0, -0.0, 1.0, -1.0, 0x1p128, -0x1p128, 0x1.fffffep127,
                                   0x1.ffffffp127, 0x1p-126, 0x1p-149, 0x1p-150, 0x1.8p-150,
                                   0x1p-1074, 0x1.fffffep-127, 0x1.000001p-126, 3.0e38, 1e300};
    for (int trial = 0; trial < (quick ? 4 : 16); trial++) {
        for (long i = 0; i < N; i++) {
            uint64_t u = ((uint64_t)rnd() << 32) ^ (uint64_t)rnd();
            if (i % 3 == 0) {
                /* exponents near float32's range */
                u = (u & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(1023 - 160 + rnd() % 320) << 52);
            }
            if (i % 97 == 0) u |= 0x7FF0000000000000ull;                 /* NaN or inf */
            if (i % 89 == 0) u &= 0x800FFFFFFFFFFFFFull;                 /* subnormal */
            memcpy(&src[i], &u, 8);
            if (i % 50 == 1) src[i] = edges[(i / 50) % (sizeof edges / sizeof edges[0])];
            if (i % 100 == 1) src[i] = -src[i];
        }
        for (long n = 0; n <= N; n = n < 40 ? n + 1 : n * 4) {
            memset(got, 0x5A, (N + 16) * sizeof(float));
            feclearexcept(FE_ALL_EXCEPT);
            k->f64_to_f32_odd(src, got, n);
            /* the serial step is integer work: no flag, inexact included */
            if (fetestexcept(FE_ALL_EXCEPT)) fail(lv, "f64_to_f32_odd", "raised a flag", n, (uint64_t)fetestexcept(FE_ALL_EXCEPT), 0);
            for (long i = 0; i < n; i++) {
                float w = mf_f64_to_f32_odd(src[i]);
                uint32_t gb, wb;
                memcpy(&gb, &got[i], 4);
                memcpy(&wb, &w, 4);
                if (gb != wb) {
                    uint64_t u;
                    memcpy(&u, &src[i], 8);
                    fail(lv, "f64_to_f32_odd", "bits", (long)(u >> 32), gb, wb);
                    break;
                }
            }
            uint32_t past;
            memcpy(&past, &got[n], 4);
            if (past != 0x5A5A5A5Au) fail(lv, "f64_to_f32_odd", "wrote past n", n, past, 0x5A5A5A5Au);
        }
    }
    free(src); free(got);
}

/* 8-bit codes through a table of 256 entries (lut8): every level's bytes
 * and flag byte against serial's and against the table read directly, at
 * every length up to 300 (the tails) and offsets */
static void
check_lut8(const char *lv, const mf_kernels *k)
{
    enum { N = 4096 };
    uint16_t t[256];
    uint8_t *in = malloc(N + 64), *o0 = malloc(N + 64), *o1 = malloc(N + 64);
    for (int trial = 0; trial < (quick ? 4 : 16); trial++) {
        for (int c = 0; c < 256; c++) {
            /* a flag byte on some entries (none on most, as in a ufunc's) */
            t[c] = (uint16_t)((rnd() & 0xFF) | (rnd() % 7 == 0 ? (rnd() & 0xF) << 8 : 0));
        }
        for (long i = 0; i < N + 64; i++) in[i] = (uint8_t)rnd();
        for (long n = 0; n <= N; n = n < 300 ? n + 1 : n * 2) {
            const long off = (long)(rnd() % 33);
            memset(o0, 0x5A, N + 64);
            memset(o1, 0x5A, N + 64);
            const uint32_t f0 = mf_serial_lut8(in + off, o0 + off, t, n);
            const uint32_t f1 = k->lut8(in + off, o1 + off, t, n);
            uint32_t fw = 0;
            for (long i = 0; i < n; i++) {
                fw |= (uint32_t)(t[in[off + i]] >> 8);
                if (o0[off + i] != (uint8_t)t[in[off + i]]) {
                    fail("serial", "lut8", "codes", n * 100 + i, o0[off + i], (uint8_t)t[in[off + i]]);
                    break;
                }
            }
            if (f0 != fw) fail("serial", "lut8", "flags", n, f0, fw);
            if (f1 != f0) fail(lv, "lut8", "flags", n, f1, f0);
            if (memcmp(o0, o1, N + 64) != 0) fail(lv, "lut8", "codes (or bytes past n)", n, 0, 0);
        }
    }
    free(in); free(o0); free(o1);
}

/* np.maximum / minimum / clip by keys (stream/keyed.h): every level's flag
 * and results against serial's, and the results against the keys' order */
static void
check_keyed(const char *lv, const mf_kernels *k)
{
    enum { N = 3000 };
    static const long lens[] = {1, 7, 16, 31, 32, 33, 64, 100, 255, 256, 257, 1000, N};
    static const int lims[2] = {0x7E, 0x7F80};
    uint16_t *a = malloc(2 * N * 3), *b = malloc(2 * N * 3), *c = malloc(2 * N * 3);
    uint16_t *r0 = malloc(2 * N), *r1 = malloc(2 * N);
    for (int bytes = 1; bytes <= 2; bytes++) {
        const int lim = lims[bytes - 1];
        const uint32_t sbit = bytes == 2 ? 0x8000u : 0x80u;
        for (int trial = 0; trial < (quick ? 12 : 48); trial++) {
            /* any codes but NaN; with a NaN; with zeros of both signs */
            const int mode = trial % 3;
            uint16_t *arr[3] = {a, b, c};
            for (int q = 0; q < 3; q++) {
                for (long i = 0; i < 3 * N; i++) {
                    uint32_t x = rnd() % (2 * sbit);
                    if ((long)(x & (sbit - 1)) > lim) x &= sbit | 0x3u;
                    if (mode == 2 && rnd() % 97 == 0) x = rnd() & 1 ? sbit : 0;
                    if (bytes == 2) arr[q][i] = (uint16_t)x;
                    else ((uint8_t *)arr[q])[i] = (uint8_t)x;
                }
            }
            if (mode == 1) {
                long at = (long)(rnd() % N);
                uint32_t nan = (uint32_t)lim + 1u | (rnd() & 1 ? sbit : 0);
                if (bytes == 2) a[at] = (uint16_t)nan;
                else ((uint8_t *)a)[at] = (uint8_t)nan;
            }
            /* (op, sa, sb, sc): array-scalar, two arrays, clip by scalars,
             * clip by arrays, strided */
            static const int lay[][4] = {{1, 1, 0, 0}, {2, 1, 0, 0}, {1, 1, 1, 0}, {2, 1, 1, 0},
                                         {3, 1, 0, 0}, {3, 1, 1, 1}, {1, 3, 2, 0}, {3, 2, 0, 1}};
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const long n = lens[li];
                for (size_t y = 0; y < 2 * sizeof lay / sizeof lay[0]; y++) {
                    /* each layout without and with MF_KEYED_TIES */
                    const size_t ly = y % (sizeof lay / sizeof lay[0]);
                    const int ties = y >= sizeof lay / sizeof lay[0];
                    const int op = lay[ly][0] | (ties ? MF_KEYED_TIES : 0);
                    const mf_intp sa = lay[ly][1], sb = lay[ly][2], sc = lay[ly][3];
                    int f0, f1;
                    memset(r0, 0xA5, 2 * N);
                    memset(r1, 0xA5, 2 * N);
                    if (bytes == 2) {
                        f0 = mf_serial_keyed16(op, (int16_t)lim, a, sa, b, sb, c, sc, r0, n);
                        f1 = k->keyed16(op, (int16_t)lim, a, sa, b, sb, c, sc, r1, n);
                    }
                    else {
                        f0 = mf_serial_keyed8(op, (int8_t)lim, (uint8_t *)a, sa, (uint8_t *)b, sb,
                                              (uint8_t *)c, sc, (uint8_t *)r0, n);
                        f1 = k->keyed8(op, (int8_t)lim, (uint8_t *)a, sa, (uint8_t *)b, sb,
                                       (uint8_t *)c, sc, (uint8_t *)r1, n);
                    }
                    const char *what = bytes == 2 ? "keyed16" : "keyed8";
                    if (f0 != f1) fail(lv, "codes", what, (long)y * 100000 + n, (uint64_t)f1, (uint64_t)f0);
                    /* the flag: a NaN operand or (without MF_KEYED_TIES) two compared zeros */
                    int fw = 0;
                    for (long i = 0; i < n; i++) {
                        uint32_t v[3];
                        for (int q = 0; q < 3; q++) {
                            const uint16_t *arr = q == 0 ? a : q == 1 ? b : c;
                            const mf_intp st = q == 0 ? sa : q == 1 ? sb : sc;
                            v[q] = bytes == 2 ? arr[i * st] : ((const uint8_t *)arr)[i * st];
                        }
                        const int m = lay[ly][0] == 3 ? 3 : 2;
                        for (int q = 0; q < m; q++) {
                            fw |= key_reference(v[q], bytes, lim) == 1L << 20;
                            for (int w = q + 1; w < m && !ties; w++) {
                                fw |= (v[q] & (sbit - 1)) == 0 && (v[w] & (sbit - 1)) == 0;
                            }
                        }
                    }
                    if (f0 != fw) fail("serial", "codes", what, (long)y * 100000 + n, (uint64_t)f0, (uint64_t)fw);
                    if (f0) continue;
                    for (long i = 0; i < n; i++) {
                        uint32_t x, p, q, g0, g1;
                        if (bytes == 2) {
                            x = a[i * sa]; p = b[i * sb]; q = c[i * sc]; g0 = r0[i]; g1 = r1[i];
                        }
                        else {
                            x = ((uint8_t *)a)[i * sa]; p = ((uint8_t *)b)[i * sb];
                            q = ((uint8_t *)c)[i * sc]; g0 = ((uint8_t *)r0)[i];
                            g1 = ((uint8_t *)r1)[i];
                        }
                        const long kx = key_reference(x, bytes, lim), kp = key_reference(p, bytes, lim);
                        const long kq = key_reference(q, bytes, lim);
                        /* of equal keys the second operand (NumPy's loop's choice) */
                        const int o = lay[ly][0];
                        uint32_t want = o == 1 ? (kx > kp ? x : p) : o == 2 ? (kx < kp ? x : p)
                                        : ((kx > kp ? kx : kp) < kq ? (kx > kp ? x : p) : q);
                        if (g0 != want) {
                            fail("serial", "codes", what, (long)y * 100000 + i, g0, want);
                            break;
                        }
                        if (g1 != g0) {
                            fail(lv, "codes", what, (long)y * 100000 + i, g1, g0);
                            break;
                        }
                    }
                }
            }
        }
    }
    free(a); free(b); free(c); free(r0); free(r1);
}

static void
check_arg_extreme(const char *lv, const mf_kernels *k)
{
    enum { N = 9000 };
    static const long lens[] = {1, 2, 15, 31, 32, 33, 63, 64, 65, 511, 512, 513, 1023, 1024, 1025,
                                2047, 2048, 2049, 4096, 5000, N};
    static const int lims[2][3] = {{0x7E, 0x7C, 0x78}, {0x7F80, 0x7C00, 0x7F80}};
    uint16_t *c = malloc(sizeof(uint16_t) * N);
    for (int bytes = 1; bytes <= 2; bytes++) {
        const int sbit = bytes == 2 ? 0x8000 : 0x80;
        for (int trial = 0; trial < (quick ? 18 : 72); trial++) {
            const int lim = lims[bytes - 1][trial % 3];
            /* near zero, any code, a NaN late, a NaN early, at most zero
             * (-0 and +0 its largest), at least zero (its smallest) */
            const int mode = (trial / 3) % 6;
            for (long i = 0; i < N; i++) {
                int x;
                if (mode == 0) {
                    x = (int)(rnd() % 5) | (rnd() & 1 ? sbit : 0);
                }
                else if (mode == 4) {        /* -0 and below; +0 only late */
                    x = (int)(rnd() % 3) | sbit;
                    x = (i > N / 2 && rnd() % 64 == 0) ? 0 : x;
                }
                else if (mode == 5) {        /* +0 and above, a few -0 */
                    x = (int)(rnd() % 3);
                    x = rnd() % 64 == 0 ? sbit : x;
                }
                else {
                    x = (int)(rnd() % (uint32_t)(sbit * 2));
                    if ((x & (sbit - 1)) > lim) {
                        x &= ~(sbit - 1);            /* no NaN but where placed below */
                    }
                }
                if (bytes == 2) c[i] = (uint16_t)x;
                else ((uint8_t *)c)[i] = (uint8_t)x;
            }
            if (mode == 2 || mode == 3) {
                long at = mode == 2 ? N - 1 - (long)(rnd() % 3000) : (long)(rnd() % 600);
                int nan = lim + 1 + (int)(rnd() % (uint32_t)(sbit - 1 - lim)) | (rnd() & 1 ? sbit : 0);
                if (bytes == 2) c[at] = (uint16_t)nan;
                else ((uint8_t *)c)[at] = (uint8_t)nan;
            }
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const long n = lens[li];
                for (int want_max = 0; want_max < 2; want_max++) {
                    long want = arg_reference(c, bytes, n, lim, want_max);
                    long got0 = bytes == 2 ? (long)mf_serial_arg_extreme16(c, n, (int16_t)lim, want_max)
                                           : (long)mf_serial_arg_extreme8((const uint8_t *)c, n,
                                                                          (int8_t)lim, want_max);
                    long got = bytes == 2 ? (long)k->arg_extreme16(c, n, (int16_t)lim, want_max)
                                          : (long)k->arg_extreme8((const uint8_t *)c, n, (int8_t)lim,
                                                                  want_max);
                    const char *what = want_max ? (bytes == 2 ? "argmax16" : "argmax8")
                                                : (bytes == 2 ? "argmin16" : "argmin8");
                    if (got0 != want) {
                        fail("serial", "codes", what, n, (uint64_t)got0, (uint64_t)want);
                    }
                    if (got != got0) {
                        fail(lv, "codes", what, n, (uint64_t)got, (uint64_t)got0);
                    }
                }
            }
        }
    }
    free(c);
}

/* random codes of magnitude 1/16 .. 16 (or zero), from the format's list
 * of them (every format has some): sums whose rounding depends on their
 * order */
static void
fill_moderate(const mf_format *f, char *x, long n)
{
    size_t sz = (size_t)f->itemsize;
    uint32_t ncodes = sz == 2 ? 65536u : 256u;
    uint32_t *ok = malloc(sizeof(uint32_t) * ncodes);
    long cnt = 0;
    for (uint32_t c = 0; c < ncodes; c++) {
        float tmp;
        uint16_t c16 = (uint16_t)c;
        uint8_t c8 = (uint8_t)c;
        mf_serial_decode_f32(f, sz == 2 ? (const void *)&c16 : (const void *)&c8, &tmp, 1);
        if (tmp == 0.0f || (fabsf(tmp) >= 0.0625f && fabsf(tmp) <= 16.0f)) {
            ok[cnt++] = c;
        }
    }
    for (long i = 0; i < n && cnt > 0; i++) {
        uint32_t c = ok[rnd() % (uint32_t)cnt];
        if (sz == 2) ((uint16_t *)x)[i] = (uint16_t)c;
        else ((uint8_t *)x)[i] = (uint8_t)c;
    }
    free(ok);
}

/* np.vecmat's columns side by side (dot_cols) against serial's, and
 * against dot of each gathered column: float64 bits and flags (NaN: NaN) */
static void
check_dot_cols(const char *lv, const mf_kernels *k, const mf_format *f)
{
    /* --quick (every qemu leg of CI): the lengths that cross a lane group
     * and a 4096-block, on a smaller matrix */
    static const long ns_all[] = {1, 31, 33, 100, 4097, 8300}, ns_quick[] = {33, 4097};
    static const long ms_all[] = {1, 17, 33, 64, 100, 300}, ms_quick[] = {1, 33, 100};
    const long *ns = quick ? ns_quick : ns_all, *ms = quick ? ms_quick : ms_all;
    const int nn = quick ? 2 : 6, nm = quick ? 3 : 6;
    const long W = quick ? 100 : 300, N = quick ? 4097 : 8300;
    size_t sz = (size_t)f->itemsize;
    char *b = malloc(N * W * sz), *col = malloc(N * sz), *vc = malloc(N * sz);
    float *v = malloc(N * sizeof(float));
    float *lanes = malloc(sizeof(float) * MF_DOT_SCRATCH);
    double o0[300], o1[300];
    for (int trial = 0; trial < (quick ? 2 : 3); trial++) {
        fill_codes(f, b, N * W);
        fill_codes(f, vc, N);
        if (trial != 1) {
            /* moderate values: dots that are not simply NaN or inf */
            fill_moderate(f, b, N * W);
            fill_moderate(f, vc, N);
        }
        mf_serial_decode_f32(f, vc, v, N);
        for (int a = 0; a < nn; a++) {
            for (int c = 0; c < nm; c++) {
                long n = ns[a], m = ms[c];
                int fl0, fl1;
                feclearexcept(FE_ALL_EXCEPT);
                mf_serial_dot_cols(f, v, b, W * (long)sz, n, m, o0, lanes);
                fl0 = fetestexcept(FLAGS);
                feclearexcept(FE_ALL_EXCEPT);
                k->dot_cols(f, v, b, W * (long)sz, n, m, o1, lanes);
                fl1 = fetestexcept(FLAGS);
                if (fl0 != fl1) fail(lv, f->name, "dot_cols flags", n * 1000 + m, fl1, fl0);
                for (long j = 0; j < m; j++) {
                    double d = o0[j];
                    if (j % 7 == 0) {
                        for (long i = 0; i < n; i++) {
                            memcpy(col + i * sz, b + (i * W + j) * sz, sz);
                        }
                        d = mf_serial_dot(f, col, vc, n);
                        if (d == d ? d2u(d) != d2u(o0[j]) : o0[j] == o0[j]) {
                            fail("serial", f->name, "dot_cols vs dot", n * 1000 + j, d2u(o0[j]), d2u(d));
                        }
                    }
                    if (o0[j] == o0[j] ? d2u(o0[j]) != d2u(o1[j]) : o1[j] == o1[j]) {
                        fail(lv, f->name, "dot_cols", n * 1000 + j, d2u(o1[j]), d2u(o0[j]));
                        break;
                    }
                }
            }
        }
    }
    free(b); free(col); free(vc); free(v); free(lanes);
}

/* ------------------------------------------------------------ stats */

/* two results of inspect's block kernel, every field a kernel defines */
static void
stats_same(const char *lv, const char *fn, const char *what, long at, const mf_stats_block *s0,
           const mf_stats_block *s1, int moments, int has_y)
{
    char w[64];
#define WHAT(field) (snprintf(w, sizeof w, "%s %s", what, field), w)
    if (d2u(s0->err2) != d2u(s1->err2)) fail(lv, fn, WHAT("err2"), at, d2u(s1->err2), d2u(s0->err2));
    if (d2u(s0->ref2) != d2u(s1->ref2)) fail(lv, fn, WHAT("ref2"), at, d2u(s1->ref2), d2u(s0->ref2));
    if (!moments) return;
    if (s0->nan != s1->nan || s0->inf != s1->inf || s0->finite != s1->finite)
        fail(lv, fn, WHAT("counts"), at, (uint64_t)s1->finite, (uint64_t)s0->finite);
    if (d2u(s0->min) != d2u(s1->min)) fail(lv, fn, WHAT("min"), at, d2u(s1->min), d2u(s0->min));
    if (d2u(s0->max) != d2u(s1->max)) fail(lv, fn, WHAT("max"), at, d2u(s1->max), d2u(s0->max));
    if (d2u(s0->sum) != d2u(s1->sum)) fail(lv, fn, WHAT("sum"), at, d2u(s1->sum), d2u(s0->sum));
    if (d2u(s0->m2) != d2u(s1->m2)) fail(lv, fn, WHAT("m2"), at, d2u(s1->m2), d2u(s0->m2));
    if (has_y && (s0->over != s1->over || s0->zeros_y != s1->zeros_y
                  || s0->zeros_x != s1->zeros_x || s0->gt != s1->gt))
        fail(lv, fn, WHAT("target counts"), at, (uint64_t)s1->gt, (uint64_t)s0->gt);
#undef WHAT
}

/* inspect's block kernel (stats_f32) on decoded codes of f (specials and
 * all), with and without a target round trip (through float8_e4m3fn), at
 * every length up to a block: every field, bits */
static void
check_stats(const char *lv, const mf_kernels *k, const mf_format *f)
{
    long n = MF_STATS_BLOCK;
    size_t sz = (size_t)f->itemsize;
    const mf_format *t = &mf_formats[MF_FLOAT8_E4M3FN];
    char *codes = malloc(n * sz);
    unsigned char *tc = malloc(n);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (int trial = 0; trial < (quick ? 4 : 8); trial++) {
        fill_codes(f, codes, n);
        mf_serial_decode_f32(f, codes, x, n);
        if (trial % 4 != 1) {            /* mostly finite: the SIMD levels' unmasked loops */
            for (long i = 0; i < n; i++) {
                if (!isfinite(x[i]) && i % 512 != 7) x[i] = (float)(i % 13) - 6.0f;
            }
        }
        if (trial % 4 >= 2) {            /* no negative values, zeros of both signs:
                                          * min's lanes meet +0 and -0 in both orders */
            for (long i = 0; i < n; i++) {
                x[i] = fabsf(x[i]);
                if (i % 24 < 16) x[i] = (i / 8) % 2 ? -0.0f : 0.0f;
                if (trial % 4 == 2 && !isfinite(x[i])) x[i] = 1.0f;   /* the unmasked loops */
            }
            if (trial % 4 == 3) x[20] = NAN;                         /* the masked loops */
        }
        mf_serial_encode_f32(t, x, tc, n);
        mf_serial_decode_f32(t, tc, y, n);
        for (long len = 0; len <= n; len = len < 40 ? len + 1 : len * 2 + 37) {
            if (len > n) len = n;
            for (int mode = 0; mode < 3; mode++) {
                const float *yy = mode ? y : NULL;
                int moments = mode != 2;
                mf_stats_block s0, s1;
                memset(&s0, 0, sizeof s0);
                memset(&s1, 0, sizeof s1);
                mf_serial_stats_f32(&s0, x, yy, 0.25, len, moments);
                k->stats_f32(&s1, x, yy, 0.25, len, moments);
                long at = len * 10 + mode;
                stats_same(lv, f->name, "stats", at, &s0, &s1, moments, yy != NULL);
                if (k->stats_f32_2 != NULL) {
                    /* two windows at once: the first len values and the
                     * last len, each against the oracle */
                    mf_stats_block t0[2], t1[2];
                    memset(t0, 0, sizeof t0);
                    memset(t1, 0, sizeof t1);
                    const float *xs[2] = {x, x + (n - len)};
                    const float *ys[2] = {yy, yy != NULL ? yy + (n - len) : NULL};
                    mf_stats_block *ps[2] = {&t1[0], &t1[1]};
                    k->stats_f32_2(ps, xs, ys, 0.25, len, moments);
                    for (int w = 0; w < 2; w++) {
                        mf_serial_stats_f32(&t0[w], xs[w], ys[w], 0.25, len, moments);
                        stats_same(lv, f->name, "stats_2", at * 2 + w, &t0[w], &t1[w], moments,
                                   yy != NULL);
                    }
                }
            }
            if (len == n) break;
        }
    }
    free(codes); free(tc); free(x); free(y);
}

/* convert's fused loop (cast_err, optional) with f as the target: the
 * codes and err2/ref2 against the serial route (encode, decode, stats), on
 * the decoded values of every float format (mostly finite, so the fused
 * loop keeps most blocks; a returned 0 hands the block to that route) */
static void
check_cast_err(const char *lv, const mf_kernels *k, const mf_format *f)
{
    if (k->cast_err == NULL) return;
    long n = MF_STATS_BLOCK;
    size_t sz = (size_t)f->itemsize;
    char *c0 = malloc(n * sz), *c1 = malloc(n * sz), *codes = malloc(n * 2);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (int id = 0; id <= MF_IEEE_FLOAT16; id++) {       /* IEEE float16 as a source too */
        const mf_format *src = &mf_formats[id];
        if (src->kind != MF_KIND_FLOAT || src->itemsize > 2) continue;
        for (int trial = 0; trial < 2; trial++) {
            fill_codes(src, codes, n);
            mf_serial_decode_f32(src, codes, x, n);
            for (long i = 0; i < n; i++) {
                if (!isfinite(x[i]) && (trial == 0 || i % 512 != 7)) x[i] = (float)(i % 13) - 6.0f;
                if (trial == 0 && fabsf(x[i]) > 65536.0f) x[i] = x[i] > 0 ? 40.0f - (float)(i % 80) * 0.25f : 7.5f;
            }
            /* the codes of the values (rounded to the source where it must) */
            mf_serial_encode_f32(src, x, codes, n);
            mf_serial_decode_f32(src, codes, x, n);
            for (long len = 0; len <= n; len = len < 40 ? len + 1 : len * 2 + 37) {
                if (len > n) len = n;
                mf_stats_block s0, s1;
                memset(&s0, 0, sizeof s0);
                memset(&s1, 0, sizeof s1);
                mf_serial_encode_f32(f, x, c0, len);
                mf_serial_decode_f32(f, c0, y, len);
                mf_serial_stats_f32(&s0, x, y, 1.0, len, 0);
                /* convert's zeros: values == 0 (a subnormal is not one) */
                int64_t zy = 0, zx = 0;
                for (long i = 0; i < len; i++) {
                    zy += y[i] == 0.0f;
                    zx += x[i] == 0.0f;
                }
                long at = len * 10 + trial;
                /* from the source's codes, and from its float32 values */
                int ok = k->cast_err(&s1, src, codes, f, c1, len);
                if (ok) {
                    if (memcmp(c0, c1, len * sz) != 0) fail(lv, f->name, "cast_err codes", at, 0, 0);
                    if (d2u(s0.err2) != d2u(s1.err2)) fail(lv, f->name, "cast_err err2", at, d2u(s1.err2), d2u(s0.err2));
                    if (d2u(s0.ref2) != d2u(s1.ref2)) fail(lv, f->name, "cast_err ref2", at, d2u(s1.ref2), d2u(s0.ref2));
                    if (s1.zeros_y != zy) fail(lv, f->name, "cast_err zeros_y", at, (uint64_t)s1.zeros_y, (uint64_t)zy);
                    if (s1.zeros_x != zx) fail(lv, f->name, "cast_err zeros_x", at, (uint64_t)s1.zeros_x, (uint64_t)zx);
                }
                memset(&s1, 0, sizeof s1);
                if (k->cast_err(&s1, NULL, x, f, c1, len) != ok) fail(lv, f->name, "cast_err f32 vs codes", at, 0, 0);
                if (ok) {
                    if (memcmp(c0, c1, len * sz) != 0) fail(lv, f->name, "cast_err codes", at, 0, 0);
                    if (d2u(s0.err2) != d2u(s1.err2)) fail(lv, f->name, "cast_err err2", at, d2u(s1.err2), d2u(s0.err2));
                    if (d2u(s0.ref2) != d2u(s1.ref2)) fail(lv, f->name, "cast_err ref2", at, d2u(s1.ref2), d2u(s0.ref2));
                    if (s1.zeros_y != zy) fail(lv, f->name, "cast_err f32 zeros_y", at, (uint64_t)s1.zeros_y, (uint64_t)zy);
                    if (s1.zeros_x != zx) fail(lv, f->name, "cast_err f32 zeros_x", at, (uint64_t)s1.zeros_x, (uint64_t)zx);
                }
                else if (s0.finite == len && s0.over == 0
                         && (f->id == MF_BFLOAT16 || f->itemsize == 1) && f->id != MF_FLOAT8_E8M0FNU) {
                    /* a finite block of a format with a fused loop stays in it */
                    fail(lv, f->name, "cast_err left a finite block", at, 0, 0);
                }
                if (len == n) break;
            }
        }
    }
    free(c0); free(c1); free(codes); free(x); free(y);
}

/* ------------------------------------------------------------ gemm */

typedef struct { float *vals; long ld; } ep_sink;

static void
ep_fn(void *ctx, mf_intp i0, mf_intp j0, mf_intp rows, mf_intp cols, float *vals, mf_intp ldv)
{
    ep_sink *s = (ep_sink *)ctx;
    for (mf_intp i = 0; i < rows; i++) {
        memcpy(s->vals + (i0 + i) * s->ld + j0, vals + i * ldv, sizeof(float) * (size_t)cols);
    }
}

/* bfloat16 code of a value kind: 0 ordinary, 1 tiny (products underflow) */
static uint16_t
gemm_code(int mode)
{
    uint32_t r = rnd();
    uint16_t s = (uint16_t)(r & 0x8000u);
    switch (mode) {
        case 0: return s | (uint16_t)(((120u + rnd() % 16) << 7) | (rnd() & 0x7Fu));
        case 1: {
            /* exponents around 2^-63: products near 2^-126 */
            uint32_t e = 60u + rnd() % 8;
            return s | (uint16_t)((e << 7) | (rnd() & 0x7Fu));
        }
        default: {
            uint32_t t = rnd() % 20;
            if (t == 0) return s | 0x7F80u;          /* inf */
            if (t == 1) return 0x7FC1u;              /* NaN */
            if (t == 2) return s | (rnd() & 0x7Fu);  /* zero / subnormal */
            return s | (uint16_t)(((100u + rnd() % 60) << 7) | (rnd() & 0x7Fu));
        }
    }
}

static int
same_f32(float a, float b)
{
    return f2u(a) == f2u(b) || (isnan(a) && isnan(b));
}

static void
check_gemm_one(const char *lv, const mf_kernels *k, const mf_format *f, long m, long n, long kk,
               int mode)
{
    size_t sz = (size_t)f->itemsize;
    char *A = malloc(m * kk * sz + 1), *B = malloc(kk * n * sz + 1);
    float *C0 = malloc(sizeof(float) * m * n + 4), *C1 = malloc(sizeof(float) * m * n + 4);
    if (f->id == MF_BFLOAT16) {
        for (long i = 0; i < m * kk; i++) ((uint16_t *)A)[i] = gemm_code(mode);
        for (long i = 0; i < kk * n; i++) ((uint16_t *)B)[i] = gemm_code(mode);
    }
    else {
        fill_codes(f, A, m * kk);
        fill_codes(f, B, kk * n);
    }
    for (long i = 0; i < m * n; i++) {
        uint32_t t = rnd() % 8;
        C0[i] = t == 0 ? u2f(rnd() & 0x807FFFFFu)                  /* subnormal C */
                : t == 1 ? 0.0f : u2f((rnd() & 0x807FFFFFu) | ((100u + rnd() % 40) << 23));
        if (mode == 1 && t >= 2) C0[i] = u2f((rnd() & 0x807FFFFFu) | ((1u + rnd() % 6) << 23));
    }
    float *Cin = malloc(sizeof(float) * m * n + 4);
    memcpy(Cin, C0, sizeof(float) * m * n);
    memcpy(C1, C0, sizeof(float) * m * n);
    mf_serial_gemm_f32acc(f, m, n, kk, A, kk, B, n, C0, n, NULL);
    k->gemm_f32acc(f, m, n, kk, A, kk, B, n, C1, n, NULL);
    for (long i = 0; i < m * n; i++) {
        if (!same_f32(C0[i], C1[i])) {
            char what[96];
            snprintf(what, sizeof what, "gemm %ldx%ldx%ld mode %d", m, n, kk, mode);
            fail(lv, f->name, what, i, f2u(C1[i]), f2u(C0[i]));
            break;
        }
    }
    if (k->gemm_f32acc_bt != NULL) {
        /* B given transposed (the panels packed from its rows, where the
         * level takes the product): the same chains */
        char *Bt = malloc(kk * n * sz + 1);
        for (long p = 0; p < kk; p++) {
            for (long j = 0; j < n; j++) {
                memcpy(Bt + (j * kk + p) * sz, B + (p * n + j) * sz, sz);
            }
        }
        memcpy(C1, Cin, sizeof(float) * m * n);
        if (k->gemm_f32acc_bt(f, m, n, kk, A, kk, Bt, kk, C1, n, NULL) == 0) {
            for (long i = 0; i < m * n; i++) {
                if (!same_f32(C0[i], C1[i])) {
                    char what[96];
                    snprintf(what, sizeof what, "gemm B.T %ldx%ldx%ld mode %d", m, n, kk, mode);
                    fail(lv, f->name, what, i, f2u(C1[i]), f2u(C0[i]));
                    break;
                }
            }
        }
        free(Bt);
    }
    free(Cin);
    /* the epilogue (chains from +0) and the bfloat16 shortcut */
    ep_sink s0 = {C0, n}, s1 = {C1, n};
    mf_gemm_epilogue e0 = {ep_fn, &s0, NULL, 0, NULL}, e1 = {ep_fn, &s1, NULL, 0, NULL};
    mf_serial_gemm_f32acc(f, m, n, kk, A, kk, B, n, NULL, 0, &e0);
    k->gemm_f32acc(f, m, n, kk, A, kk, B, n, NULL, 0, &e1);
    for (long i = 0; i < m * n; i++) {
        if (!same_f32(C0[i], C1[i])) {
            fail(lv, f->name, "gemm epilogue", i, f2u(C1[i]), f2u(C0[i]));
            break;
        }
    }
    uint16_t *h0 = malloc(2 * m * n + 2), *h1 = malloc(2 * m * n + 2);
    int fl0 = 0, fl1 = 0;
    mf_gemm_epilogue b0 = {NULL, NULL, (char *)h0, 2 * n, &fl0}, b1 = {NULL, NULL, (char *)h1, 2 * n, &fl1};
    mf_serial_gemm_f32acc(f, m, n, kk, A, kk, B, n, NULL, 0, &b0);
    k->gemm_f32acc(f, m, n, kk, A, kk, B, n, NULL, 0, &b1);
    if (memcmp(h0, h1, 2 * m * n) != 0 || fl0 != fl1) {
        fail(lv, f->name, "gemm bf16 epilogue", m * 10000 + kk, fl1, fl0);
    }
    free(h0); free(h1);
    free(A); free(B); free(C0); free(C1);
}

static void
check_gemm(const char *lv, const mf_kernels *k, const mf_format *f)
{
    static const long shapes[][3] = {
        {1, 1, 1}, {3, 5, 7}, {8, 12, 2}, {9, 13, 3}, {16, 24, 33}, {40, 40, 40}, {33, 47, 257},
        {64, 64, 64}, {121, 50, 300}, {7, 200, 513}, {130, 37, 64}, {96, 96, 96},
        /* last panels of 7, 11, 6 rows (read in place where k is even) */
        {67, 40, 64}, {59, 33, 128}, {42, 64, 70},
        /* a few rows or columns: the vector-matrix and matrix-vector kernels */
        {1, 300, 257}, {2, 300, 99}, {3, 130, 129}, {4, 41, 600}, {300, 1, 257}, {70, 16, 99},
        {37, 16, 1001}, {300, 7, 258}, {131, 12, 64}, {64, 8, 130},
        /* 17-64 columns (VDPBF16PS's thin kernel: 1-4 vectors of 16 a row
         * and one of 8) */
        {300, 17, 257}, {130, 32, 200}, {77, 40, 1001}, {200, 64, 130}, {61, 50, 64},
        {99, 45, 300}, {50, 57, 129},
        /* from 1024 rows: 17-128 columns (in blocks of 64) */
        {1030, 20, 33}, {1100, 64, 70}, {1024, 100, 33}, {1050, 128, 17},
    };
    int ns = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < ns; s++) {
        /* --quick (CI, and under qemu) leaves out the 1024-row shapes:
         * the thin blocks past 64 columns are x86's, and pytest checks them */
        if (quick && (s % 3 != 0 || shapes[s][0] >= 1024)) continue;
        for (int mode = 0; mode < 3; mode++) {
            if (f->id != MF_BFLOAT16 && mode > 0) break;
            check_gemm_one(lv, k, f, shapes[s][0], shapes[s][1], shapes[s][2], mode);
        }
    }
}

/* the case where flushing before rounding (Arm FPCR.FZ) and after rounding
 * (x86 FTZ, the oracle) differ: c = 2^-126 + 2^-149, a*b = -1.25 * 2^-149,
 * exact sum 2^-126 - 2^-151 rounds to 2^-126 (kept); and its neighbour
 * a*b = -1.5 * 2^-149 gives 2^-126 - 2^-150, tiny: 0 */
static void
check_gemm_edge(const char *lv, const mf_kernels *k)
{
    const mf_format *f = &mf_formats[MF_BFLOAT16];
    enum { M = 40, N = 40, K = 40 };
    static uint16_t A[M * K], B[K * N];
    static float C0[M * N], C1[M * N];
    memset(A, 0, sizeof A);
    memset(B, 0, sizeof B);
    for (int i = 0; i < M; i++) {
        /* k = 1 (the odd member of the first pair: the first step) */
        A[i * K + 1] = (i % 2) ? 0x9CC0u : 0x9CA0u;     /* -1.5 * 2^-70, -1.25 * 2^-70 */
    }
    for (int j = 0; j < N; j++) {
        B[1 * N + j] = (j % 3 == 0) ? 0x1800u : (j % 3 == 1) ? 0x1880u : 0x17C0u; /* 2^-79, 2^-78, 1.5*2^-80 */
    }
    for (int i = 0; i < M * N; i++) {
        C0[i] = C1[i] = u2f(0x00800001u + (uint32_t)(i % 3));
    }
    mf_serial_gemm_f32acc(f, M, N, K, A, K, B, N, C0, N, NULL);
    k->gemm_f32acc(f, M, N, K, A, K, B, N, C1, N, NULL);
    int kept = 0;
    for (int i = 0; i < M * N; i++) {
        if (f2u(C0[i]) == 0x00800000u) kept++;
        if (!same_f32(C0[i], C1[i])) {
            fail(lv, "bfloat16", "gemm FZ edge", i, f2u(C1[i]), f2u(C0[i]));
            break;
        }
    }
    if (kept == 0) {
        printf("  note: the FZ edge case produced no 2^-126 result (test data)\n");
    }
}

/* inspect's statistics of n float32 values x against their round trip y
 * ("stats"), or convert's cast of n bfloat16 codes h to f with its error
 * ("cast_err": the fused loop where the level has one, else the block
 * route), a block at a time as the driver runs them */
static void
count_stats(const mf_kernels *k, const char *kern, const mf_format *f, const float *x,
            const float *y, const uint16_t *h, long n)
{
    static float v[MF_STATS_BLOCK], w[MF_STATS_BLOCK];
    static unsigned char c[MF_STATS_BLOCK * 4];
    const mf_format *bf = &mf_formats[MF_BFLOAT16];
    for (long i = 0; i < n; i += MF_STATS_BLOCK) {
        long len = n - i < MF_STATS_BLOCK ? n - i : MF_STATS_BLOCK;
        mf_stats_block s;
        if (!strcmp(kern, "stats")) {
            k->stats_f32(&s, x + i, y + i, 0.25, len, 1);
        }
        else if (k->cast_err == NULL || !k->cast_err(&s, bf, h + i, f, c, len)) {
            k->decode_f32(bf, h + i, v, len);
            k->encode_f32(f, v, c, len);
            k->decode_f32(f, c, w, len);
            k->stats_f32(&s, v, w, 1.0, len, 0);
        }
    }
}

/* --count LEVEL KERNEL FORMAT N: run one kernel $MF_COUNT_REPS times (1) on
 * N elements (gemm: N x N x N), for instruction counting under qemu
 * (insn_counts.py) */
static int
count_mode(char **argv)
{
    int lv = mf_level_from_name(argv[2]);
    if (lv < 0 || mf_set_level((mf_level)lv) != 0) {
        fprintf(stderr, "level %s not available\n", argv[2]);
        return 2;
    }
    const char *kern = argv[3];
    const mf_format *f = NULL;
    for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
        if (strcmp(mf_formats[id].name, argv[4]) == 0) f = &mf_formats[id];
    }
    long n = atol(argv[5]);
    if (f == NULL || n < 0) return 2;
    long cnt = strcmp(kern, "gemm") == 0 ? n * n : n;
    size_t sz = (size_t)f->itemsize;
    char *a = calloc(cnt + 64, sz), *b = calloc(cnt + 64, sz), *o = calloc(cnt + 64, sz);
    float *x = calloc(cnt + 64, 4), *c = calloc(cnt + 64, 4);
    for (long i = 0; i < cnt; i++) {
        /* ordinary finite values: 1 <= |x| < 4 */
        uint32_t code = f->id == MF_BFLOAT16 ? (0x3F80u | (rnd() & 0x80FFu)) : (rnd() & 0x33u) | 0x30u;
        code &= f->itemsize == 2 ? 0xFFFFu : (uint32_t)((1u << f->bits) - 1u);
        memcpy(a + i * sz, &code, sz);
        memcpy(b + i * sz, &code, sz);
        x[i] = 1.0f + (float)(rnd() % 1000) / 1000.0f;
    }
    /* the statistics' inputs: x's round trip through f, x as bfloat16 */
    float *y = calloc(cnt + 64, 4);
    uint16_t *h = calloc(cnt + 64, 2);
    mf_serial_encode_f32(f, x, o, n);
    mf_serial_decode_f32(f, o, y, n);
    mf_serial_encode_f32(&mf_formats[MF_BFLOAT16], x, h, n);
    const mf_kernels *k = mf_k;
    volatile double sink = 0;
    const char *reps_env = getenv("MF_COUNT_REPS");
    int reps = reps_env ? atoi(reps_env) : 1;
    for (int r = 0; r < reps; r++) {
    if (!strcmp(kern, "decode")) k->decode_f32(f, a, x, n);
    else if (!strcmp(kern, "encode")) k->encode_f32(f, x, o, n);
    else if (!strcmp(kern, "add")) k->binary(MF_OP_ADD, f, a, b, o, n);
    else if (!strcmp(kern, "mul")) k->binary(MF_OP_MUL, f, a, b, o, n);
    else if (!strcmp(kern, "sum")) sink = k->sum(f, a, n);
    else if (!strcmp(kern, "dot")) sink = k->dot(f, a, b, n);
    else if (!strcmp(kern, "gemm")) k->gemm_f32acc(f, n, n, n, a, n, b, n, c, n, NULL);
    else if (!strcmp(kern, "stats") || !strcmp(kern, "cast_err")) count_stats(k, kern, f, x, y, h, n);
    else return 2;
    }
    (void)sink;
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--count") == 0) {
        mf_init_luts();
        return count_mode(argv);
    }
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    mf_init_luts();
#ifdef MF_HAVE_AVX512BF16
    /* the VDPBF16PS gemm itself, also on CPUs where the level runs the avx512
     * one (which the avx512 level checks) */
    mf_avx512bf16_gemm_dp = 1;
#endif
    int checked = 0;
    printf("kernel levels here:");
    for (int l = 0; l < MF_NUM_LEVELS; l++) {
        if (mf_level_supported((mf_level)l)) printf(" %s", mf_level_name((mf_level)l));
    }
    printf(" (best: %s)\n", mf_level_name(mf_best_level()));
    for (int l = 1; l < MF_NUM_LEVELS; l++) {
        if (!mf_level_supported((mf_level)l)) continue;
        mf_set_level((mf_level)l);
        const mf_kernels *k = mf_k;
        const char *lv = mf_level_name((mf_level)l);
        int before = failures;
        for (int id = 0; id < MF_NUM_PUBLIC_FORMATS; id++) {
            const mf_format *f = &mf_formats[id];
            if (f->itemsize > 2) continue;
            check_decode(lv, k, f);
            if (f->kind != MF_KIND_FLOAT) continue;
            check_encode(lv, k, f);
            check_binary(lv, k, f);
            check_reduce(lv, k, f);
            check_columns(lv, k, f);
            check_pairwise(lv, k, f);
            check_dot_cols(lv, k, f);
            check_stats(lv, k, f);
            check_cast_err(lv, k, f);
            check_gemm(lv, k, f);
        }
        /* IEEE float16 (NumPy's float16 casts go through the kernels) */
        check_decode(lv, k, &mf_formats[MF_IEEE_FLOAT16]);
        check_encode(lv, k, &mf_formats[MF_IEEE_FLOAT16]);
        check_gemm_edge(lv, k);
        check_arg_extreme(lv, k);
        check_keyed(lv, k);
        check_lut8(lv, k);
        check_f64_odd(lv, k);
        printf("level %-10s vs serial: %s\n", lv, failures == before ? "bit-identical" : "MISMATCH");
        checked++;
    }
    if (checked == 0) {
        printf("no SIMD level on this CPU: nothing to compare\n");
    }
    return failures ? 1 : 0;
}
