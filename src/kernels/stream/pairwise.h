/*
 * NumPy's pairwise summation of float32 values, the loop mean/var/std's
 * float32 sums use (src/umath/pairwise.c), written once and included by
 * each level's file (serial.c, avx2.c, avx512.c, neon.c), which defines
 * PW_NAME (the function's name) and PW_DECODE (its decode_f32) first.
 *
 * PW_NAME(f, x, n, m, dev) is pairwise(v_0 .. v_{n-1}) for the n codes of
 * format f at x, where v_i is the code's float32 value, or with dev the
 * float32 (v_i - m) * (v_i - m) (_var's subtract, then square).  pairwise
 * is NumPy's `pairwise_sum` of its float loops: under 8 values a sequential
 * sum from 0; up to 128, eight accumulators r[j] += v[i + j], added as
 * ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in
 * order; above 128, the halves split at n / 2 rounded down to a multiple
 * of 8.  The accumulators are the lanes of two 4-lane vectors (GCC/clang
 * vector types: SSE on x86, NEON on Arm, VEX-encoded on the AVX levels), so
 * every level does the same float32 operations in the same order: the bits
 * are the serial level's (the kernel harness compares them) and NumPy's
 * (tests/reductions/test_statistics_pairwise.py).
 * bfloat16 is widened in registers (a code is the top half of its
 * float32); other formats are decoded PW_WIN values at a time.
 */
#include <string.h>

#define PW_BLOCK 128                 /* NumPy's PW_BLOCKSIZE */
#define PW_WIN 4096                  /* values decoded at a time */

typedef float pw_f4 __attribute__((vector_size(16)));
typedef uint16_t pw_u16x8 __attribute__((vector_size(16)));

/* lane shuffles: clang's and GCC 12's builtin, older GCC's */
#if defined(__clang__) || __GNUC__ >= 12
#define PW_SHUF4(v, a, b, c, d) __builtin_shufflevector(v, v, a, b, c, d)
#define PW_SHUF8(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
typedef int32_t pw_i4 __attribute__((vector_size(16)));
typedef int16_t pw_i8 __attribute__((vector_size(16)));
#define PW_SHUF4(v, a, b, c, d) __builtin_shuffle(v, (pw_i4){a, b, c, d})
#define PW_SHUF8(x, y, ...) __builtin_shuffle(x, y, (pw_i8){__VA_ARGS__})
#endif

typedef struct {
    const mf_format *f;
    const char *x;                   /* the run's codes */
    mf_intp base, len;               /* buf holds values [base, base + len) */
    mf_intp n;                       /* the run's length */
    float m;                         /* dev: the run's mean */
    float buf[PW_WIN];
} pw_src;

/* values [i, i + k) of the run, k <= 2 PW_BLOCK; windows move forward only */
static const float *
pw_values(pw_src *s, mf_intp i, mf_intp k)
{
    if (i < s->base || i + k > s->base + s->len) {
        mf_intp len = s->n - i < PW_WIN ? s->n - i : PW_WIN;
        PW_DECODE(s->f, s->x + i * s->f->itemsize, s->buf, len);
        s->base = i;
        s->len = len;
    }
    return s->buf + (i - s->base);
}

static inline float
pw_bf16(uint16_t c)
{
    uint32_t b = (uint32_t)c << 16;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) of the lanes of lo, hi
 * in registers, each addition's operands in that order (lane 0 of a sum is
 * its first operand's lane 0 plus the shuffled lane 1, ...) */
static inline __attribute__((always_inline)) float
pw_tree8(pw_f4 lo, pw_f4 hi)
{
    lo += PW_SHUF4(lo, 1, 0, 3, 2);      /* r0 + r1, r2 + r3 */
    hi += PW_SHUF4(hi, 1, 0, 3, 2);      /* r4 + r5, r6 + r7 */
    lo += PW_SHUF4(lo, 2, 3, 0, 1);
    hi += PW_SHUF4(hi, 2, 3, 0, 1);
    return lo[0] + hi[0];
}

/* values i .. i + 7 as float32: bfloat16 codes widened (each code the top
 * half of a 32-bit lane), or the decoded window's */
static inline __attribute__((always_inline)) void
pw_load8(const uint16_t *c, const float *a, mf_intp i, const int bf16, pw_f4 *lo, pw_f4 *hi)
{
    if (bf16) {
        pw_u16x8 h, z = {0};
        memcpy(&h, c + i, sizeof h);
        pw_u16x8 l8 = PW_SHUF8(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
        pw_u16x8 h8 = PW_SHUF8(z, h, 4, 12, 5, 13, 6, 14, 7, 15);
        memcpy(lo, &l8, sizeof *lo);
        memcpy(hi, &h8, sizeof *hi);
    }
    else {
        memcpy(lo, a + i, sizeof *lo);
        memcpy(hi, a + i + 4, sizeof *hi);
    }
}


/* the eight accumulators, two 4-lane vectors.  (One 8-lane vector on the
 * AVX2 levels was slower: GCC widens eight codes with two 128-bit moves and
 * an insert, and the single chain of additions waits on its latency.) */
typedef struct {
    pw_f4 r0, r1;
} pw_acc;

/* the accumulators' first values, v[0 .. 7] */
static inline __attribute__((always_inline)) pw_acc
pw_first(const uint16_t *c, const float *a, const int bf16, const int dev, float m)
{
    pw_acc q;
    pw_load8(c, a, 0, bf16, &q.r0, &q.r1);
    if (dev) {
        q.r0 -= m;
        q.r1 -= m;
        q.r0 *= q.r0;
        q.r1 *= q.r1;
    }
    return q;
}

/* r[j] += v[i + j] */
static inline __attribute__((always_inline)) void
pw_step(pw_acc *q, const uint16_t *c, const float *a, mf_intp i, const int bf16, const int dev,
        float m)
{
    pw_f4 t0, t1;
    pw_load8(c, a, i, bf16, &t0, &t1);
    if (dev) {
        t0 -= m;
        t1 -= m;
        t0 *= t0;
        t1 *= t1;
    }
    q->r0 += t0;
    q->r1 += t1;
}

/* the accumulators' tree, then values [i, n) added in order */
static inline __attribute__((always_inline)) float
pw_finish(const pw_acc *q, const uint16_t *c, const float *a, mf_intp i, mf_intp n,
          const int bf16, const int dev, float m)
{
    float res = pw_tree8(q->r0, q->r1);
    for (; i < n; i++) {
        float v = bf16 ? pw_bf16(c[i]) : a[i];
        if (dev) {
            v -= m;
            v *= v;
        }
        res += v;
    }
    return res;
}

/* A leaf (n <= PW_BLOCK), two neighbouring leaves at once (their chains of
 * additions interleaved: each leaf's own order, twice the work in flight),
 * and the tree above them, for each (BF16, DEV). */
#define PW_LEAF(NAME, BF16, DEV)                                                        \
static float                                                                            \
NAME(pw_src *s, mf_intp i0, mf_intp n)                                                  \
{                                                                                       \
    const uint16_t *c = (const uint16_t *)(const void *)s->x + i0;                      \
    const float *a = BF16 ? NULL : pw_values(s, i0, n);                                 \
    const float m = s->m;                                                               \
    if (n < 8) {                                                                        \
        float res = 0.0f;                                                               \
        for (mf_intp i = 0; i < n; i++) {                                               \
            float v = BF16 ? pw_bf16(c[i]) : a[i];                                      \
            if (DEV) {                                                                  \
                v -= m;                                                                 \
                v *= v;                                                                 \
            }                                                                           \
            res += v;                                                                   \
        }                                                                               \
        return res;                                                                     \
    }                                                                                   \
    pw_acc q = pw_first(c, a, BF16, DEV, m);                                            \
    mf_intp e = n - n % 8;                                                              \
    for (mf_intp i = 8; i < e; i += 8) {                                                \
        pw_step(&q, c, a, i, BF16, DEV, m);                                             \
    }                                                                                   \
    return pw_finish(&q, c, a, e, n, BF16, DEV, m);                                     \
}                                                                                       \
/* leaves [i0, i0 + na) and [i0 + na, i0 + na + nb), 8 <= na, nb <= PW_BLOCK:        \
 * their sum lo + hi */                                                                 \
static float                                                                            \
NAME##_pair(pw_src *s, mf_intp i0, mf_intp na, mf_intp nb)                              \
{                                                                                       \
    const uint16_t *ca = (const uint16_t *)(const void *)s->x + i0, *cb = ca + na;      \
    const float *aa = BF16 ? NULL : pw_values(s, i0, na + nb), *ab = BF16 ? NULL : aa + na; \
    const float m = s->m;                                                               \
    pw_acc qa = pw_first(ca, aa, BF16, DEV, m), qb = pw_first(cb, ab, BF16, DEV, m);    \
    mf_intp ea = na - na % 8, eb = nb - nb % 8, e = ea < eb ? ea : eb, i;               \
    for (i = 8; i < e; i += 8) {                                                        \
        pw_step(&qa, ca, aa, i, BF16, DEV, m);                                          \
        pw_step(&qb, cb, ab, i, BF16, DEV, m);                                          \
    }                                                                                   \
    for (mf_intp j = i; j < ea; j += 8) {                                               \
        pw_step(&qa, ca, aa, j, BF16, DEV, m);                                          \
    }                                                                                   \
    for (mf_intp j = i; j < eb; j += 8) {                                               \
        pw_step(&qb, cb, ab, j, BF16, DEV, m);                                          \
    }                                                                                   \
    float lo = pw_finish(&qa, ca, aa, ea, na, BF16, DEV, m);                            \
    float hi = pw_finish(&qb, cb, ab, eb, nb, BF16, DEV, m);                            \
    return lo + hi;                                                                     \
}                                                                                       \
static float                                                                            \
NAME##_tree(pw_src *s, mf_intp i, mf_intp n)                                            \
{                                                                                       \
    if (n <= PW_BLOCK) {                                                                \
        return NAME(s, i, n);                                                           \
    }                                                                                   \
    mf_intp n2 = n / 2;                                                                 \
    n2 -= n2 % 8;                                                                       \
    if (n - n2 <= PW_BLOCK) {                                                           \
        return NAME##_pair(s, i, n2, n - n2);      /* n > 128: both at least 64 */      \
    }                                                                                   \
    float lo = NAME##_tree(s, i, n2);                                                   \
    float hi = NAME##_tree(s, i + n2, n - n2);                                          \
    return lo + hi;                                                                     \
}

PW_LEAF(pw_leaf, 0, 0)
PW_LEAF(pw_leaf_bf16, 1, 0)
PW_LEAF(pw_leaf_dev, 0, 1)
PW_LEAF(pw_leaf_bf16_dev, 1, 1)

float
PW_NAME(const mf_format *f, const void *x, mf_intp n, float m, int dev)
{
    pw_src s;
    s.f = f;
    s.x = (const char *)x;
    s.n = n;
    s.base = 0;
    s.len = 0;
    s.m = m;
    if (f->id == MF_BFLOAT16) {
        return dev ? pw_leaf_bf16_dev_tree(&s, 0, n) : pw_leaf_bf16_tree(&s, 0, n);
    }
    return dev ? pw_leaf_dev_tree(&s, 0, n) : pw_leaf_tree(&s, 0, n);
}
