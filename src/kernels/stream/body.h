/*
 * The streaming kernels' loops, written once for every SIMD level: decode,
 * encode, the fused binary operations, sum and dot (and convert's fused
 * cast-and-error loop where a level has one), with their dispatch on the
 * format's path, the split into streamed and ordinary segments, the tails
 * and the sum/dot blocks in the order of kernels.h.
 *
 * An ISA file defines its vector types and primitives, then includes this
 * file, so that the loops are compiled once per level with that level's
 * flags and the primitives inline into them.  What it defines:
 *
 *   MF_ISA(name)       the level's entry point names (mf_<level>_##name)
 *   VL                 float32 lanes per vector
 *   DEC8_VECS          vectors dec8_n decodes at once (a load of
 *                      DEC8_VECS * VL byte codes)
 *   BODY_STREAM        1: large outputs with non-temporal stores
 *                      (stream_split, simd_params.h), fenced by stream_fence()
 *   BODY_SMALL_BY_RULE 1: the small formats' loops compiled once per
 *                      special-value rule (MF_SIMD_SMALL_<rule>); 0: once
 *                      (MF_SIMD_SMALL, the rule read from the registers)
 *   BODY_INT_PATHS     1: the integer formats decode with their own paths
 *                      (MF_SIMD_SINT/UINT); 0: as MF_SIMD_SMALL
 *   regs_t, regs_init  the format's parameters in registers
 *   vf_t, vi_t         float32 vector; vector of codes, one per lane
 *   ovf_t              overflow lanes: ovf_none(), ovf_any()
 *   bovf_t             the same for the bfloat16 encoder: bovf_none(),
 *                      bovf_merge(ovf_t *, bovf_t)
 *   load_f, store_f, splat_f
 *   dec_bf16_2(s, v)   2 VL bfloat16 codes -> v[0], v[1]
 *   dec8_n(r, path, s, v)   DEC8_VECS * VL byte codes -> v[]
 *   enc_v(r, path, x, &ovf)     byte codes of x (the small formats, e8m0)
 *   enc_bf16_v(r, x, &bovf)     bfloat16 codes of x, in the level's layout
 *   store_codes4(d, c, stream)  4 VL byte codes, in order
 *   store_bf16_2(d, h0, h1, stream)   2 VL bfloat16 codes, in order
 *   op_v, add_v, fma_acc         the float operations in serial's operand
 *                                order (which NaN comes out)
 *   combine32(acc)      the 32 sum lanes (MF_SUM_LANES / VL vectors) by halving
 *   add_total           a block's sum into the float64 total, total first
 * and optionally (each a macro naming the function):
 *   DEC_BF16_TAIL, DEC8_TAIL, ENC_BF16_TAIL, ENC8_TAIL, BINARY_BF16_TAIL,
 *   BINARY8_TAIL, CAST_ERR8_TAIL: vector loops over what is left after the
 *   main loop, returning how far they got (masked ones reach the end); the
 *   rest goes to the serial kernels.
 *   SUM_TAIL, DOT_TAIL: a block's last m < 32 values into the lanes (else
 *   through a buffer padded with values that leave the lanes as they are).
 *   HAVE_ENC_BF16_2, HAVE_BINARY_BF16_2: the level's own enc_bf16_2,
 *   binary_bf16_2 (else the ones below).
 *   HAVE_DEC_BF16_EO: dec_bf16_eo(s, v), 2 VL bfloat16 codes as the
 *   even-indexed ones in v[0] and the odd ones in v[1], and eo_lanes(acc),
 *   which puts the NACC lanes so filled back in index order: sum and dot of
 *   bfloat16 then keep each index's lane and order without widening shuffles.
 *   HAVE_LOAD_DEC: load_dec(r, path, src, i), VL codes from element i as
 *   float32, for sum and dot, one vector at a time (else they load all 32
 *   codes as the decode loop does).
 *   ENC_F16_RUN(src, d, n, stream, &ovf): IEEE float16 codes of whole
 *   vectors of float32 (the level's conversion instruction), the bits of
 *   mf_enc1: returns how far it got, sets ovf where a finite value
 *   overflowed, and leaves the FPU's flags as they were (the instruction
 *   raises underflow and invalid where mf_enc1 raises nothing).
 *   DEC_F16_RUN(s, d, n, stream): the same for decoding IEEE float16 codes
 *   (a NaN as mf_decode_f32 gives it: the quiet NaN of its sign).
 *   HAVE_CAST_ERR: compile MF_ISA(cast_err); it needs err_acc_t (the eight
 *   float64 lanes of err2 and ref2, and the counts of w == 0 and v == 0),
 *   err_init, err_acc(v, w, acc, q) (vector q of a group of four),
 *   err_store(acc, le, lr, &zy, &zx), load_src(skind, x, i), enc_small_w
 *   and bf16_value(h) (the float32 value of enc_bf16_v's codes).
 */
#ifndef MF_STREAM_BODY_H
#define MF_STREAM_BODY_H

#define NACC (MF_SUM_LANES / VL)

/* CALL(path) for every path with a SIMD kernel */
#if BODY_SMALL_BY_RULE
#define FOR_PATH(p, CALL, OTHERWISE)                                                   \
    switch ((p).small_path) {                                                         \
        case MF_SIMD_BF16:       CALL(MF_SIMD_BF16); break;                           \
        case MF_SIMD_E8M0:       CALL(MF_SIMD_E8M0); break;                           \
        case MF_SIMD_SMALL_IEEE: CALL(MF_SIMD_SMALL_IEEE); break;                     \
        case MF_SIMD_SMALL_FN:   CALL(MF_SIMD_SMALL_FN); break;                       \
        case MF_SIMD_SMALL_FNUZ: CALL(MF_SIMD_SMALL_FNUZ); break;                     \
        case MF_SIMD_SMALL_NONE: CALL(MF_SIMD_SMALL_NONE); break;                     \
        default:                 OTHERWISE; break;                                    \
    }
#else
#define FOR_PATH(p, CALL, OTHERWISE)                                                   \
    switch ((p).path) {                                                               \
        case MF_SIMD_BF16:  CALL(MF_SIMD_BF16); break;                                \
        case MF_SIMD_E8M0:  CALL(MF_SIMD_E8M0); break;                                \
        case MF_SIMD_SMALL: CALL(MF_SIMD_SMALL); break;                               \
        default:            OTHERWISE; break;                                         \
    }
#endif

/* [0, n) of an output: streamed and ordinary segments (stream_split), or
 * one ordinary segment where the level does not stream */
MF_INLINE segments
body_split(const void *out, mf_intp outsize, mf_intp n)
{
#if BODY_STREAM
    return stream_split(out, outsize, n, 64);
#else
    (void)out;
    (void)outsize;
    segments sg;
    sg.start[0] = 0;
    sg.len[0] = n;
    sg.stream[0] = 0;
    sg.count = 1;
    return sg;
#endif
}

MF_INLINE void
body_fence(int stream)
{
#if BODY_STREAM
    if (stream) {
        stream_fence();
    }
#else
    (void)stream;
#endif
}

/* ------------------------------------------------------- decode_f32 */

/* the codes of whole vectors -> float32; returns how many were done.  With
 * `stream`, n is a multiple of 64 and dst 64-byte aligned. */
MF_INLINE mf_intp
decode_run(const regs_t *r, mf_simd_path path, const void *src, float *dst, mf_intp n, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (; i + 2 * VL <= n; i += 2 * VL) {
            vf_t v[2];
            dec_bf16_2(s + i, v);
            store_f(dst + i, v[0], stream);
            store_f(dst + i + VL, v[1], stream);
        }
#ifdef DEC_BF16_TAIL
        i = DEC_BF16_TAIL(s, dst, i, n);
#endif
        return i;
    }
    const uint8_t *s = (const uint8_t *)src;
    for (; i + DEC8_VECS * VL <= n; i += DEC8_VECS * VL) {
        vf_t v[DEC8_VECS];
        dec8_n(r, path, s + i, v);
        for (int q = 0; q < DEC8_VECS; q++) {
            store_f(dst + i + VL * q, v[q], stream);
        }
    }
#ifdef DEC8_TAIL
    i = DEC8_TAIL(r, path, s, dst, i, n);
#endif
    return i;
}

MF_INLINE void
decode_path(const regs_t *r, mf_simd_path path, const mf_format *f, const void *src, float *dst,
            mf_intp n)
{
    mf_intp isz = f->itemsize;
    segments sg = body_split(dst, 4, n);
    for (int q = 0; q < sg.count; q++) {
        const char *s = (const char *)src + sg.start[q] * isz;
        float *d = dst + sg.start[q];
        mf_intp done = decode_run(r, path, s, d, sg.len[q], sg.stream[q]);
        body_fence(sg.stream[q]);
        if (done < sg.len[q]) {
            mf_serial_decode_f32(f, s + done * isz, d + done, sg.len[q] - done);
        }
    }
}

void
MF_ISA(decode_f32)(const mf_format *f, const void *src, float *dst, mf_intp n)
{
#ifdef DEC_F16_RUN
    if (f->id == MF_IEEE_FLOAT16) {
        /* IEEE float16 (NumPy's float16 casts), as decode_path */
        segments sg = body_split(dst, 4, n);
        for (int q = 0; q < sg.count; q++) {
            const uint16_t *s = (const uint16_t *)src + sg.start[q];
            float *d = dst + sg.start[q];
            mf_intp done = DEC_F16_RUN(s, d, sg.len[q], sg.stream[q]);
            body_fence(sg.stream[q]);
            if (done < sg.len[q]) {
                mf_serial_decode_f32(f, s + done, d + done, sg.len[q] - done);
            }
        }
        return;
    }
#endif
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
#define CALL(PATH) decode_path(&r, PATH, f, src, dst, n)
#if BODY_INT_PATHS
    if (p.path == MF_SIMD_SINT) {
        CALL(MF_SIMD_SINT);
        return;
    }
    if (p.path == MF_SIMD_UINT) {
        CALL(MF_SIMD_UINT);
        return;
    }
#else
    /* the integers' values are in the level's table: the small formats' loop */
    if (p.path == MF_SIMD_SINT || p.path == MF_SIMD_UINT) {
        p.path = p.small_path = MF_SIMD_SMALL;
    }
#endif
    FOR_PATH(p, CALL, mf_serial_decode_f32(f, src, dst, n))
#undef CALL
}

/* ------------------------------------------------------- colsum_f32 */

/* acc[j] = acc[j] + x_i[j] for the rows i in order (kernels.h); the columns
 * of whole vector groups, returns how many were done */
#ifndef COLSUM_REG_VECS
#define COLSUM_REG_VECS 8
#endif

/* the column operations: 0 sum (add_v), 1 max, 2 min (maxn_v, minn_v:
 * the larger or smaller, a column that meets a NaN ends NaN; which zero of
 * two is left to the level) */
MF_INLINE vf_t
col_op(const int OP, vf_t a, vf_t x)
{
    return OP == 0 ? add_v(a, x) : OP == 1 ? maxn_v(a, x) : minn_v(a, x);
}

/* the columns [j, j + NV VL) of every row in turn, their sums (maxima,
 * minima) in registers (NV and OP constants after inlining) */
MF_INLINE void
colsum_regs(const int OP, const int NV, const regs_t *r, mf_simd_path path,
            const char *const *rows, mf_intp nrows, float *acc, mf_intp j)
{
    vf_t a[COLSUM_REG_VECS];
    for (int q = 0; q < NV; q++) {
        a[q] = load_f(acc + j + VL * q);
    }
    for (mf_intp i = 0; i < nrows; i++) {
        /* a decode's vectors added at once: few registers besides the sums */
        vf_t v[2 > DEC8_VECS ? 2 : DEC8_VECS];
        if (NV == 1) {
#ifdef COLSUM_DEC1
            v[0] = COLSUM_DEC1(r, path, rows[i], j);
            a[0] = col_op(OP, a[0], v[0]);
#endif
        }
        else if (path == MF_SIMD_BF16) {
            for (int q = 0; q < NV; q += 2) {
                dec_bf16_2((const uint16_t *)rows[i] + j + VL * q, v);
                a[q] = col_op(OP, a[q], v[0]);
                a[q + 1] = col_op(OP, a[q + 1], v[1]);
            }
        }
        else {
            for (int q = 0; q < NV; q += DEC8_VECS) {
                dec8_n(r, path, (const uint8_t *)rows[i] + j + VL * q, v);
                for (int u = 0; u < DEC8_VECS; u++) {
                    a[q + u] = col_op(OP, a[q + u], v[u]);
                }
            }
        }
    }
    for (int q = 0; q < NV; q++) {
        store_f(acc + j + VL * q, a[q], 0);
    }
}

/* acc[j] = acc[j] + x_i[j] for the rows i in order (kernels.h); the columns
 * of whole vectors, returns how many were done.  Every column's additions
 * are the same in each of the three orders below; what differs is how the
 * input is read.  Several rows read side by side (several streams) ran at
 * half the speed of one stream from memory on a Zen 4, so rows are read one
 * at a time where that costs nothing. */
MF_INLINE mf_intp
colsum_run(const int OP, const regs_t *r, mf_simd_path path, const char *const *rows,
           mf_intp nrows, float *acc, mf_intp n, mf_intp itemsize)
{
    mf_intp j = 0;
    /* vectors one decode gives */
    const int unit = path == MF_SIMD_BF16 ? 2 : DEC8_VECS;
    if (n <= COLSUM_REG_VECS * VL) {
        /* narrow: each row's columns at once, the sums in registers */
        for (; j + COLSUM_REG_VECS * VL <= n; j += COLSUM_REG_VECS * VL) {
            colsum_regs(OP, COLSUM_REG_VECS, r, path, rows, nrows, acc, j);
        }
        for (int nv = COLSUM_REG_VECS / 2; nv >= unit; nv /= 2) {
            if (j + nv * VL <= n) {
                colsum_regs(OP, nv, r, path, rows, nrows, acc, j);
                j += nv * VL;
            }
        }
#ifdef COLSUM_DEC1
        if (j + VL <= n) {
            colsum_regs(OP, 1, r, path, rows, nrows, acc, j);
            j += VL;
        }
#endif
        return j;
    }
    const mf_intp step = path == MF_SIMD_BF16 ? 2 * VL : DEC8_VECS * VL;
    const mf_intp done = n / step * step;
    int adjacent = 1;
    for (mf_intp i = 1; i < nrows; i++) {
        adjacent &= rows[i] == rows[i - 1] + n * itemsize;
    }
    if (adjacent) {
        /* whole rows, one after the other: a row at a time, acc in L1 */
        for (mf_intp i = 0; i < nrows; i++) {
            for (j = 0; j < done; j += step) {
                vf_t v[2 > DEC8_VECS ? 2 : DEC8_VECS];
                if (path == MF_SIMD_BF16) {
                    dec_bf16_2((const uint16_t *)rows[i] + j, v);
                }
                else {
                    dec8_n(r, path, (const uint8_t *)rows[i] + j, v);
                }
                for (int q = 0; q < step / VL; q++) {
                    store_f(acc + j + VL * q, col_op(OP, load_f(acc + j + VL * q), v[q]), 0);
                }
            }
        }
        return done;
    }
    /* pieces of rows: groups of columns, 16 rows over each (more rows side
     * by side would be more streams) */
    for (mf_intp i = 0; i < nrows; i += 16) {
        const mf_intp cnt = nrows - i < 16 ? nrows - i : 16;
        j = 0;
        if (path == MF_SIMD_BF16) {
            for (; j + 4 * VL <= n; j += 4 * VL) {
                colsum_regs(OP, 4, r, path, rows + i, cnt, acc, j);
            }
            for (; j + 2 * VL <= n; j += 2 * VL) {
                colsum_regs(OP, 2, r, path, rows + i, cnt, acc, j);
            }
        }
        else {
            for (; j + DEC8_VECS * VL <= n; j += DEC8_VECS * VL) {
                colsum_regs(OP, DEC8_VECS, r, path, rows + i, cnt, acc, j);
            }
        }
    }
    return j;
}

/* column sums (OP 0), maxima (1), minima (2): whole vectors here, the
 * rest of the columns by the serial kernel */
MF_INLINE void
columns_f32(const int OP, const mf_format *f, const char *const *rows, mf_intp nrows,
            float *acc, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
    mf_intp done = 0;
#define CALL(PATH) done = colsum_run(OP, &r, PATH, rows, nrows, acc, n, f->itemsize)
    FOR_PATH(p, CALL, done = 0)
#undef CALL
    if (done < n) {
        const char *rest[MF_COLSUM_ROWS];
        for (mf_intp i = 0; i < nrows; i++) {
            rest[i] = rows[i] + done * f->itemsize;
        }
        if (OP == 0) {
            mf_serial_colsum_f32(f, rest, nrows, acc + done, n - done);
        }
        else {
            mf_serial_colmax_f32(f, rest, nrows, acc + done, n - done, OP == 2);
        }
    }
}

void
MF_ISA(colsum_f32)(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                   mf_intp n)
{
    columns_f32(0, f, rows, nrows, acc, n);
}

void
MF_ISA(colmax_f32)(const mf_format *f, const char *const *rows, mf_intp nrows, float *acc,
                   mf_intp n, int is_min)
{
    if (is_min) {
        columns_f32(2, f, rows, nrows, acc, n);
    }
    else {
        columns_f32(1, f, rows, nrows, acc, n);
    }
}

/* ------------------------------------------------------- encode_f32 */

#ifndef HAVE_ENC_BF16_2
/* 2 VL float32 -> bfloat16 codes */
MF_INLINE void
enc_bf16_2(const regs_t *r, const float *src, uint16_t *d, bovf_t *bo, int stream)
{
    vi_t h0 = enc_bf16_v(r, load_f(src), bo);
    vi_t h1 = enc_bf16_v(r, load_f(src + VL), bo);
    store_bf16_2(d, h0, h1, stream);
}
#endif

/* whole vectors of float32 -> codes; returns how many were done, ORs the
 * overflowed lanes into *ovf.  With `stream`, n is a multiple of 64 and dst
 * 64-byte aligned. */
MF_INLINE mf_intp
encode_run(const regs_t *r, mf_simd_path path, const float *src, void *dst, mf_intp n,
           ovf_t *ovf, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        uint16_t *d = (uint16_t *)dst;
        bovf_t bo = bovf_none();
        for (; i + 2 * VL <= n; i += 2 * VL) {
            enc_bf16_2(r, src + i, d + i, &bo, stream);
        }
#ifdef ENC_BF16_TAIL
        i = ENC_BF16_TAIL(r, src, d, i, n, &bo);
#endif
        bovf_merge(ovf, bo);
        return i;
    }
    uint8_t *d = (uint8_t *)dst;
    for (; i + 4 * VL <= n; i += 4 * VL) {
        vi_t c[4];
        for (int q = 0; q < 4; q++) {
            c[q] = enc_v(r, path, load_f(src + i + VL * q), ovf);
        }
        store_codes4(d + i, c, stream);
    }
#ifdef ENC8_TAIL
    i = ENC8_TAIL(r, path, src, d, i, n, ovf);
#endif
    return i;
}

MF_INLINE void
encode_path(const regs_t *r, mf_simd_path path, const mf_format *f, const float *src, void *dst,
            mf_intp n)
{
    mf_intp osz = f->itemsize;
    ovf_t ovf = ovf_none();
    segments sg = body_split(dst, osz, n);
    for (int q = 0; q < sg.count; q++) {
        const float *s = src + sg.start[q];
        char *d = (char *)dst + sg.start[q] * osz;
        mf_intp done = encode_run(r, path, s, d, sg.len[q], &ovf, sg.stream[q]);
        body_fence(sg.stream[q]);
        if (done < sg.len[q]) {
            mf_serial_encode_f32(f, s + done, d + done * osz, sg.len[q] - done);
        }
    }
    if (ovf_any(ovf)) {
        mf_raise_overflow();
    }
}

#ifdef ENC_F16_RUN
/* float32 -> IEEE float16 (NumPy's float16 casts), as encode_path */
MF_INLINE void
encode_f16(const mf_format *f, const float *src, void *dst, mf_intp n)
{
    int ovf = 0;
    segments sg = body_split(dst, 2, n);
    for (int q = 0; q < sg.count; q++) {
        const float *s = src + sg.start[q];
        uint16_t *d = (uint16_t *)dst + sg.start[q];
        mf_intp done = ENC_F16_RUN(s, d, sg.len[q], sg.stream[q], &ovf);
        body_fence(sg.stream[q]);
        if (done < sg.len[q]) {
            mf_serial_encode_f32(f, s + done, d + done, sg.len[q] - done);
        }
    }
    if (ovf) {
        mf_raise_overflow();
    }
}
#endif

void
MF_ISA(encode_f32)(const mf_format *f, const float *src, void *dst, mf_intp n)
{
#ifdef ENC_F16_RUN
    if (f->id == MF_IEEE_FLOAT16) {
        encode_f16(f, src, dst, n);
        return;
    }
#endif
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
#define CALL(PATH) encode_path(&r, PATH, f, src, dst, n)
    FOR_PATH(p, CALL, mf_serial_encode_f32(f, src, dst, n))
#undef CALL
}

/* ------------------------------------------------------- cast with error */

#ifdef HAVE_CAST_ERR
/* convert's fused loop (kernels.h, cast_err): the source values are loaded
 * as float32 (bfloat16 and float16 codes widened in registers), encoded to
 * the target with the value each code decodes to (enc_small_w, bf16_value),
 * and e = w - v, e^2 and v^2 go into the float64 lanes.  A float32 value's
 * square is exact in float64, so the FMA rounds once, as the documented
 * multiply-then-add does.  Whole vectors: returns how many values were done. */
MF_INLINE mf_intp
cast_err_run(const regs_t *r, int skind, mf_simd_path path, const void *x, void *dst, mf_intp n,
             err_acc_t *acc)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        bovf_t bo = bovf_none();        /* not reported: the caller drops flags */
        uint16_t *d = (uint16_t *)dst;
        for (; i + 2 * VL <= n; i += 2 * VL) {
            vf_t v0 = load_src(skind, x, i), v1 = load_src(skind, x, i + VL);
            vi_t h0 = enc_bf16_v(r, v0, &bo), h1 = enc_bf16_v(r, v1, &bo);
            err_acc(v0, bf16_value(h0), acc, 0);
            err_acc(v1, bf16_value(h1), acc, 1);
            store_bf16_2(d + i, h0, h1, 0);
        }
        return i;
    }
    uint8_t *d = (uint8_t *)dst;
    for (; i + 4 * VL <= n; i += 4 * VL) {
        vi_t c[4];
        for (int q = 0; q < 4; q++) {
            vf_t v = load_src(skind, x, i + VL * q), w;
            c[q] = enc_small_w(r, v, NULL, path, &w);
            err_acc(v, w, acc, q);
        }
        store_codes4(d + i, c, 0);
    }
#ifdef CAST_ERR8_TAIL
    i = CAST_ERR8_TAIL(r, skind, path, x, d, i, n, acc);
#endif
    return i;
}

#define CAST_ERR_RUN(SK, PATH) done = cast_err_run(&r, SK, PATH, xs, codes, n, &acc)

int
MF_ISA(cast_err)(mf_stats_block *s, const mf_format *src, const void *x, const mf_format *tgt,
                 void *codes, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(tgt);
    if (p.path != MF_SIMD_BF16 && p.path != MF_SIMD_SMALL) {
        return 0;
    }
    regs_t r;
    regs_init(&r, &p);
    err_acc_t acc;
    err_init(&acc);
    float xb[MF_STATS_BLOCK];
    const void *xs;
    int skind = mf_cast_err_source(src, x, n, xb, MF_ISA(decode_f32), &xs);
    mf_intp done = 0;
    MF_CAST_ERR_DISPATCH(skind, p.small_path, CAST_ERR_RUN)
    double le[MF_STATS_LANES], lr[MF_STATS_LANES];
    int64_t zy, zx;
    err_store(&acc, le, lr, &zy, &zx);
    return mf_cast_err_finish(s, le, lr, zy, zx, xs == xb ? NULL : src, xs, tgt, codes, done, n);
}
#undef CAST_ERR_RUN
#endif

/* ------------------------------------------------------- binary */

#ifndef HAVE_BINARY_BF16_2
/* 2 VL pairs of bfloat16 codes */
MF_INLINE void
binary_bf16_2(mf_binary_op op, const regs_t *r, const uint16_t *a, const uint16_t *b,
              uint16_t *out, bovf_t *bo, int stream)
{
    vf_t x[2], y[2];
    dec_bf16_2(a, x);
    dec_bf16_2(b, y);
    vi_t h0 = enc_bf16_v(r, op_v(op, x[0], y[0]), bo);
    vi_t h1 = enc_bf16_v(r, op_v(op, x[1], y[1]), bo);
    store_bf16_2(out, h0, h1, stream);
}
#endif

/* whole vectors of pairs; returns how many were done.  With `stream`, n is
 * a multiple of 64 and out 64-byte aligned. */
MF_INLINE mf_intp
binary_run(mf_binary_op op, const regs_t *r, mf_simd_path path, const void *a, const void *b,
           void *out, mf_intp n, ovf_t *ovf, int stream)
{
    mf_intp i = 0;
    if (path == MF_SIMD_BF16) {
        const uint16_t *pa = (const uint16_t *)a, *pb = (const uint16_t *)b;
        uint16_t *po = (uint16_t *)out;
        bovf_t bo = bovf_none();
        for (; i + 2 * VL <= n; i += 2 * VL) {
            binary_bf16_2(op, r, pa + i, pb + i, po + i, &bo, stream);
        }
#ifdef BINARY_BF16_TAIL
        i = BINARY_BF16_TAIL(op, r, pa, pb, po, i, n, &bo);
#endif
        bovf_merge(ovf, bo);
        return i;
    }
    const uint8_t *pa = (const uint8_t *)a, *pb = (const uint8_t *)b;
    uint8_t *po = (uint8_t *)out;
    for (; i + 4 * VL <= n; i += 4 * VL) {
        vi_t c[4];
        for (int g = 0; g < 4; g += DEC8_VECS) {
            vf_t x[DEC8_VECS], y[DEC8_VECS];
            dec8_n(r, path, pa + i + VL * g, x);
            dec8_n(r, path, pb + i + VL * g, y);
            for (int q = 0; q < DEC8_VECS; q++) {
                c[g + q] = enc_v(r, path, op_v(op, x[q], y[q]), ovf);
            }
        }
        store_codes4(po + i, c, stream);
    }
#ifdef BINARY8_TAIL
    i = BINARY8_TAIL(op, r, path, pa, pb, po, i, n, ovf);
#endif
    return i;
}

MF_INLINE void
binary_path(mf_binary_op op, const regs_t *r, mf_simd_path path, const mf_format *f,
            const void *a, const void *b, void *out, mf_intp n)
{
    mf_intp sz = f->itemsize;
    ovf_t ovf = ovf_none();
    segments sg = body_split(out, sz, n);
    for (int q = 0; q < sg.count; q++) {
        mf_intp at = sg.start[q] * sz, len = sg.len[q];
        const char *ca = (const char *)a + at, *cb = (const char *)b + at;
        char *co = (char *)out + at;
        mf_intp done = binary_run(op, r, path, ca, cb, co, len, &ovf, sg.stream[q]);
        body_fence(sg.stream[q]);
        if (done < len) {
            mf_serial_binary(op, f, ca + done * sz, cb + done * sz, co + done * sz, len - done);
        }
    }
    if (ovf_any(ovf)) {
        mf_raise_overflow();
    }
}

/* the operation a constant in each copy of the loop */
#define BINARY_PATH(PATH)                                                                  \
    switch (op) {                                                                         \
        case MF_OP_ADD: binary_path(MF_OP_ADD, &r, PATH, f, a, b, out, n); break;         \
        case MF_OP_SUB: binary_path(MF_OP_SUB, &r, PATH, f, a, b, out, n); break;         \
        case MF_OP_MUL: binary_path(MF_OP_MUL, &r, PATH, f, a, b, out, n); break;         \
        case MF_OP_DIV: binary_path(MF_OP_DIV, &r, PATH, f, a, b, out, n); break;         \
        case MF_OP_FLOOR: binary_path(MF_OP_FLOOR, &r, PATH, f, a, b, out, n); break;     \
        case MF_OP_CEIL: binary_path(MF_OP_CEIL, &r, PATH, f, a, b, out, n); break;       \
        case MF_OP_TRUNC: binary_path(MF_OP_TRUNC, &r, PATH, f, a, b, out, n); break;     \
        case MF_OP_RINT: binary_path(MF_OP_RINT, &r, PATH, f, a, b, out, n); break;       \
        case MF_OP_SQRT: binary_path(MF_OP_SQRT, &r, PATH, f, a, b, out, n); break;       \
        default: binary_path(MF_OP_RECIPROCAL, &r, PATH, f, a, b, out, n); break;         \
    }

void
MF_ISA(binary)(mf_binary_op op, const mf_format *f, const void *a, const void *b, void *out,
               mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
    FOR_PATH(p, BINARY_PATH, mf_serial_binary(op, f, a, b, out, n))
}
#undef BINARY_PATH

/* ------------------------------------------------------- sum, dot */

/* The order of kernels.h: element i of a block in lane i % 32 (vector
 * (i % 32) / VL), each lane from -0.0 in index order, the lanes combined by
 * halving (combine32), the blocks' sums added into a float64 total. */

/* SUM_VECS vectors of codes from element i of a run as float32: one with
 * the level's load_dec (HAVE_LOAD_DEC), else all 32 with the loads of the
 * decode loop */
#ifdef HAVE_LOAD_DEC
#define SUM_VECS 1
MF_INLINE void
load_dec_n(const regs_t *r, mf_simd_path path, const void *src, mf_intp i, vf_t v[1])
{
    v[0] = load_dec(r, path, src, i);
}
#else
#define SUM_VECS NACC
MF_INLINE void
load_dec_n(const regs_t *r, mf_simd_path path, const void *src, mf_intp i, vf_t v[NACC])
{
    if (path == MF_SIMD_BF16) {
        for (int q = 0; q < NACC; q += 2) {
            dec_bf16_2((const uint16_t *)src + i + VL * q, v + q);
        }
        return;
    }
    for (int q = 0; q < NACC; q += DEC8_VECS) {
        dec8_n(r, path, (const uint8_t *)src + i + VL * q, v + q);
    }
}
#endif

#if !defined(SUM_TAIL) || !defined(DOT_TAIL)
/* the last m < 32 codes of a block, decoded by the serial kernel into 32
 * lanes; the lanes past m hold `pad` */
MF_INLINE void
load_tail(const mf_format *f, const void *src, mf_intp i, mf_intp m, float pad, vf_t v[NACC])
{
    float buf[MF_SUM_LANES];
    for (int j = 0; j < MF_SUM_LANES; j++) {
        buf[j] = pad;
    }
    mf_serial_decode_f32(f, (const char *)src + i * f->itemsize, buf, m);
    for (int q = 0; q < NACC; q++) {
        v[q] = load_f(buf + VL * q);
    }
}
#endif

/* fetch the read run p's bytes pfd ahead (mf_read_prefetch; 0: nothing) */
#define PF_READ(pfd, p)                                                   \
    do {                                                                  \
        if (pfd) {                                                        \
            __builtin_prefetch((const char *)(p) + (pfd), 0, 3);          \
        }                                                                 \
    } while (0)

/* the block sums of R (1 or 2) runs of len codes at once, each in its own
 * lanes (two runs: twice the independent chains) */
MF_INLINE void
sum_blocks(const int R, const regs_t *r, mf_simd_path path, const mf_format *f,
           const void *const *src, mf_intp len, float *out)
{
    const mf_intp pfd = mf_read_prefetch, sz = f->itemsize;
    vf_t acc[2][NACC], v[NACC];
    for (int k = 0; k < R; k++) {
        for (int q = 0; q < NACC; q++) {
            acc[k][q] = splat_f(-0.0f);
        }
    }
    mf_intp i = 0;
#ifdef HAVE_DEC_BF16_EO
    if (path == MF_SIMD_BF16) {
        /* the even and odd codes in their own lanes, then in order */
        for (; i + MF_SUM_LANES <= len; i += MF_SUM_LANES) {
            for (int k = 0; k < R; k++) {
                PF_READ(pfd, (const uint16_t *)src[k] + i);
                for (int q = 0; q < NACC; q += 2) {
                    dec_bf16_eo((const uint16_t *)src[k] + i + VL * q, v + q);
                    acc[k][q] = add_v(acc[k][q], v[q]);
                    acc[k][q + 1] = add_v(acc[k][q + 1], v[q + 1]);
                }
            }
        }
        for (int k = 0; k < R; k++) {
            eo_lanes(acc[k]);
        }
    }
#endif
    for (; i + MF_SUM_LANES <= len; i += MF_SUM_LANES) {
        for (int k = 0; k < R; k++) {
            /* 32 codes: one 64-byte line, or half of one */
            PF_READ(pfd, (const char *)src[k] + i * sz);
            for (int g = 0; g < NACC; g += SUM_VECS) {
                load_dec_n(r, path, src[k], i + VL * g, v);
                for (int q = 0; q < SUM_VECS; q++) {
                    acc[k][g + q] = add_v(acc[k][g + q], v[q]);
                }
            }
        }
    }
    for (int k = 0; k < R; k++) {
        if (i < len) {
#ifdef SUM_TAIL
            SUM_TAIL(r, path, src[k], i, len, acc[k]);
#else
            /* -0.0 leaves every lane as it is */
            load_tail(f, src[k], i, len - i, -0.0f, v);
            for (int q = 0; q < NACC; q++) {
                acc[k][q] = add_v(acc[k][q], v[q]);
            }
#endif
        }
        out[k] = combine32(acc[k]);
    }
}

MF_INLINE float
sum_block(const regs_t *r, mf_simd_path path, const mf_format *f, const void *src, mf_intp len)
{
    float s;
    sum_blocks(1, r, path, f, &src, len, &s);
    return s;
}

MF_INLINE float
dot_block(const regs_t *r, mf_simd_path path, const mf_format *f, const void *a, const void *b,
          mf_intp len)
{
    const mf_intp pfd = mf_read_prefetch, sz = f->itemsize;
    vf_t acc[NACC], x[NACC], y[NACC];
    for (int q = 0; q < NACC; q++) {
        acc[q] = splat_f(-0.0f);
    }
    mf_intp i = 0;
#ifdef HAVE_DEC_BF16_EO
    if (path == MF_SIMD_BF16) {
        /* the even and odd codes in their own lanes, then in order */
        for (; i + MF_SUM_LANES <= len; i += MF_SUM_LANES) {
            PF_READ(pfd, (const uint16_t *)a + i);
            PF_READ(pfd, (const uint16_t *)b + i);
            for (int q = 0; q < NACC; q += 2) {
                dec_bf16_eo((const uint16_t *)a + i + VL * q, x + q);
                dec_bf16_eo((const uint16_t *)b + i + VL * q, y + q);
                acc[q] = fma_acc(x[q], y[q], acc[q]);
                acc[q + 1] = fma_acc(x[q + 1], y[q + 1], acc[q + 1]);
            }
        }
        eo_lanes(acc);
    }
#endif
    for (; i + MF_SUM_LANES <= len; i += MF_SUM_LANES) {
        PF_READ(pfd, (const char *)a + i * sz);
        PF_READ(pfd, (const char *)b + i * sz);
        for (int g = 0; g < NACC; g += SUM_VECS) {
            load_dec_n(r, path, a, i + VL * g, x);
            load_dec_n(r, path, b, i + VL * g, y);
            for (int q = 0; q < SUM_VECS; q++) {
                acc[g + q] = fma_acc(x[q], y[q], acc[g + q]);
            }
        }
    }
    if (i < len) {
#ifdef DOT_TAIL
        DOT_TAIL(r, path, a, b, i, len, acc);
#else
        /* padding products are (-0) * (+0) = -0: every lane stays as it is */
        load_tail(f, a, i, len - i, -0.0f, x);
        load_tail(f, b, i, len - i, 0.0f, y);
        for (int q = 0; q < NACC; q++) {
            acc[q] = fma_acc(x[q], y[q], acc[q]);
        }
#endif
    }
    return combine32(acc);
}

/* ------------------------------------------------------- dot_cols */

/* out[j] = dot(column j of B, v) for the columns of whole vector groups, in
 * the order of dot (element i of a block in lane i % 32, the lanes halved,
 * the blocks added into a float64 total): the columns in the vector lanes,
 * the 32 sum lanes of each column a row of `lanes`.  Rows go DOT_COLS_R at a
 * time through a lane (rows L, L + 32, ... of a group of 32 R): a lane's
 * row of `lanes` is loaded and stored once for R rows of B, which are still
 * added in their order.  Returns how many columns were done. */
#define DOT_COLS_R 4
#define DOT_COLS_PF_BYTES 128     /* of each row, fetched a group ahead */

/* lane row l += rows[t] * s[t] for t < R, in that order, columns [0, mv) */
MF_INLINE void
dot_cols_rows(const regs_t *r, mf_simd_path path, const int R, const char *const *rows,
              const vf_t *s, float *l, mf_intp mv, mf_intp gw)
{
    for (mf_intp j = 0; j < mv; j += gw) {
        vf_t acc[4];
        for (int q = 0; q < gw / VL; q++) {
            acc[q] = load_f(l + j + VL * q);
        }
        for (int t = 0; t < R; t++) {
            vf_t x[4];
            if (path == MF_SIMD_BF16) {
                dec_bf16_2((const uint16_t *)rows[t] + j, x);
            }
            else {
                dec8_n(r, path, (const uint8_t *)rows[t] + j, x);
            }
            for (int q = 0; q < gw / VL; q++) {
                acc[q] = fma_acc(x[q], s[t], acc[q]);
            }
        }
        for (int q = 0; q < gw / VL; q++) {
            store_f(l + j + VL * q, acc[q], 0);
        }
    }
}

MF_INLINE mf_intp
dot_cols_run(const regs_t *r, mf_simd_path path, const mf_format *f, const float *v,
             const char *B, mf_intp ldb, mf_intp n, mf_intp m, double *out, float *lanes)
{
    const mf_intp gw = (path == MF_SIMD_BF16 ? 2 : DEC8_VECS) * VL;
    const mf_intp mv = m / gw * gw;
    const mf_intp G = MF_SUM_LANES * DOT_COLS_R;
    if (mv == 0) {
        return 0;
    }
    float last[VL];
    for (mf_intp j = 0; j < mv; j++) {
        out[j] = -0.0;
    }
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        const mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        const char *blk = B + start * ldb;
        for (mf_intp q = 0; q < MF_SUM_LANES * mv; q += VL) {
            store_f(lanes + (q / mv) * MF_DOT_LANES_STRIDE + q % mv, splat_f(-0.0f), 0);
        }
        mf_intp i = 0;
        for (; i + G <= len; i += G) {
            for (int L = 0; L < MF_SUM_LANES; L++) {
                const char *rows[DOT_COLS_R];
                vf_t s[DOT_COLS_R];
                for (int t = 0; t < DOT_COLS_R; t++) {
                    mf_intp ri = i + L + MF_SUM_LANES * t;
                    rows[t] = blk + ri * ldb;
                    s[t] = splat_f(v[start + ri]);
                    /* the start of the row a group ahead: the hardware
                     * prefetchers take it from there, within its page */
                    if (start + ri + G < n) {
                        for (mf_intp b = 0; b < mv * f->itemsize && b < DOT_COLS_PF_BYTES; b += 64) {
                            __builtin_prefetch(rows[t] + G * ldb + b);
                        }
                    }
                }
                dot_cols_rows(r, path, DOT_COLS_R, rows, s, lanes + L * MF_DOT_LANES_STRIDE, mv, gw);
            }
        }
        for (; i < len; i++) {
            const char *row = blk + i * ldb;
            const vf_t s = splat_f(v[start + i]);
            dot_cols_rows(r, path, 1, &row, &s, lanes + (i % MF_SUM_LANES) * MF_DOT_LANES_STRIDE,
                          mv, gw);
        }
        for (int w = MF_SUM_LANES / 2; w >= 1; w /= 2) {
            for (int L = 0; L < w; L++) {
                float *a = lanes + L * MF_DOT_LANES_STRIDE, *b = lanes + (L + w) * MF_DOT_LANES_STRIDE;
                for (mf_intp j = 0; j < mv; j += VL) {
                    store_f(a + j, add_v(load_f(a + j), load_f(b + j)), 0);
                }
            }
        }
        for (mf_intp j = 0; j < mv; j += VL) {
            store_f(last, load_f(lanes + j), 0);
            for (int c = 0; c < VL; c++) {
                out[j + c] = add_total(out[j + c], last[c]);
            }
        }
    }
    return mv;
}

void
MF_ISA(dot_cols)(const mf_format *f, const float *v, const void *B, mf_intp ldb, mf_intp n,
                 mf_intp m, double *out, float *lanes)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
    mf_intp done = 0;
#define CALL(PATH) done = dot_cols_run(&r, PATH, f, v, (const char *)B, ldb, n, m, out, lanes)
    FOR_PATH(p, CALL, done = 0)
#undef CALL
    if (done < m) {
        mf_serial_dot_cols(f, v, (const char *)B + done * f->itemsize, ldb, n, m - done,
                           out + done, lanes);
    }
}

MF_INLINE double
sum_path(const regs_t *r, mf_simd_path path, const mf_format *f, const void *src, mf_intp n)
{
    double total = -0.0;
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        total = add_total(total, sum_block(r, path, f, (const char *)src + start * f->itemsize, len));
    }
    return total;
}

MF_INLINE double
dot_path(const regs_t *r, mf_simd_path path, const mf_format *f, const void *a, const void *b,
         mf_intp n)
{
    double total = -0.0;
    for (mf_intp start = 0; start < n; start += MF_SUM_BLOCK) {
        mf_intp len = n - start < MF_SUM_BLOCK ? n - start : MF_SUM_BLOCK;
        total = add_total(total, dot_block(r, path, f, (const char *)a + start * f->itemsize,
                                           (const char *)b + start * f->itemsize, len));
    }
    return total;
}

double
MF_ISA(sum)(const mf_format *f, const void *src, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
    double s = 0.0;
#define CALL(PATH) s = sum_path(&r, PATH, f, src, n)
    FOR_PATH(p, CALL, s = mf_serial_sum(f, src, n))
#undef CALL
    return s;
}

void
MF_ISA(sum_rows)(const mf_format *f, const char *const *rows, mf_intp nrows, mf_intp n,
                 double *out)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
    mf_intp i = 0;
    if (n <= MF_SUM_BLOCK
            && (p.path == MF_SIMD_BF16 || p.path == MF_SIMD_E8M0 || p.path == MF_SIMD_SMALL)) {
        /* one block a run: one run at a time, as sum_path adds it */
        for (; i < nrows; i++) {
            float s = 0.0f;
#define CALL(PATH) sum_blocks(1, &r, PATH, f, (const void *const *)&rows[i], n, &s)
            FOR_PATH(p, CALL, (void)0)
#undef CALL
            out[i] = add_total(-0.0, s);
        }
    }
    for (; i < nrows; i++) {
        out[i] = MF_ISA(sum)(f, rows[i], n);
    }
}

double
MF_ISA(dot)(const mf_format *f, const void *a, const void *b, mf_intp n)
{
    mf_simd_params p = mf_simd_params_of(f);
    regs_t r;
    regs_init(&r, &p);
    double s = 0.0;
#define CALL(PATH) s = dot_path(&r, PATH, f, a, b, n)
    FOR_PATH(p, CALL, s = mf_serial_dot(f, a, b, n))
#undef CALL
    return s;
}

#endif
