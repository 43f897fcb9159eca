/* Attention for evalflow's continuous-batching loop, its decode steps and its prompts' prefill
 * (see ../native_attention.py).
 *
 * For every (row, key/value head): softmax(q k^T * scale) v over the columns each query may see,
 * with the log-sum-exp of the scores, in one pass over the keys and values (online softmax over
 * blocks of BLOCK columns). A query sees the columns [0, visible) of its row: a decode row's
 * filled columns, for a draft token the ones up to its own, for a prompt token the ones up to its
 * own (causal). Columns past the row's longest query are never read, so short rows cost what they
 * hold, not what the longest row holds.
 *
 * Both products are register-tiled like a GEMM micro-kernel, so each load feeds several FMAs:
 * - scores: the head's queries transposed once (lanes = queries, W per vector), so a key column's
 *   element is broadcast against two query vectors: tiles of SCORE_COLS columns x 2W queries, and
 *   the softmax (max, exp, sums) runs across queries in vector lanes, with no horizontal sums;
 * - values: tiles of VALUE_QUERIES queries x 2W head dimensions, a probability broadcast per query
 *   against two value vectors.
 * One source, two instruction sets, chosen by the build's -march=native: AVX-512 (W = 16, 32
 * vector registers, so wider score tiles) where the CPU has it, else AVX2 with FMA (W = 8). Each
 * score still sums its HEAD_DIM products in one chain in dimension order, and each output its
 * columns in column order, so both give the same floats. Built per head size (HEAD_DIM, a multiple
 * of 8; the caller checks it) for x86-64; fp32 throughout; equal to the plain computation up to
 * summation order and the 1e-7 relative error of the exp polynomial. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef MAX_Q
#define MAX_Q 64 /* queries per chunk (set by the build): the tiles' scratch space is sized by it */
#endif

#if defined(__AVX512F__) && HEAD_DIM % 16 == 0
#define W 16
#define SCORE_COLS 8 /* 8 x 2 accumulators of the 32 registers */
typedef __m512 vec;
typedef __mmask16 vmask;
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, x) _mm512_storeu_ps(p, x)
#define V_FMADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define V_EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define V_SELECT(m, if_false, if_true) _mm512_mask_blend_ps(m, if_false, if_true)
#define V_BROADCAST(p) _mm512_set1_ps(*(p))
#else
#define W 8
#define SCORE_COLS 4 /* 4 x 2 accumulators of the 16 registers */
typedef __m256 vec;
typedef __m256 vmask;
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, x) _mm256_storeu_ps(p, x)
#define V_FMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_LT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define V_EQ(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define V_SELECT(m, if_false, if_true) _mm256_blendv_ps(if_false, if_true, m)
#define V_BROADCAST(p) _mm256_broadcast_ss(p)
#endif

#define NV (HEAD_DIM / W)            /* vectors per head vector (HEAD_DIM a multiple of 8: with W = 16, see above) */
#define MAX_QV ((MAX_Q + W - 1) / W) /* query vectors per chunk */
#define BLOCK 32                     /* columns per softmax block (measured best of 16-128): its keys, values and scores stay in L1 */
#define VALUE_QUERIES 6              /* value tile: queries x (2 vectors of) head dimensions */
#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* exp(x) for x <= 0 (scores minus their running max); below -87 (and at -inf) it is 0: 2^n * p(f),
 * n = round(x log2 e), p the degree-6 Taylor polynomial of e^f, |f| <= ln2/2. */
INLINE vec vexp(vec x) {
#if W == 16
    __mmask16 alive = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    __m512 t = _mm512_maskz_mul_ps(alive, x, _mm512_set1_ps(1.44269504088896341f));
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    __m256 alive = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    __m256 t = _mm256_and_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), alive);
    __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#endif
    vec f = V_MUL(V_SUB(t, n), V_SET1(0.69314718055994531f));
    vec p = V_SET1(1.f / 720.f);
    p = V_FMADD(p, f, V_SET1(1.f / 120.f));
    p = V_FMADD(p, f, V_SET1(1.f / 24.f));
    p = V_FMADD(p, f, V_SET1(1.f / 6.f));
    p = V_FMADD(p, f, V_SET1(0.5f));
    p = V_FMADD(p, f, V_SET1(1.f));
    p = V_FMADD(p, f, V_SET1(1.f));
#if W == 16
    return _mm512_maskz_scalef_ps(alive, p, n); /* p * 2^n, exact as the AVX2 exponent bits are */
#else
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), alive);
#endif
}

/* Scores of columns [c, c + COLS) against query vectors [j, j + QVS) into s (s[col * nqv + j]: the
 * vector of queries jW..jW+W-1), each lane -inf where its query does not see the column; the block's
 * running max per query vector in top. qt: the scaled queries transposed (qt[d * nqv + j]). */
INLINE void score_tile(const vec *qt, int64_t nqv, const float *k, int64_t k_col, int64_t c, int64_t c0, int64_t j,
                       const vec *vis, vec *s, vec *top, int COLS, int QVS) {
    vec acc[SCORE_COLS * 2];
    UNROLL for (int x = 0; x < COLS * QVS; x++) acc[x] = V_ZERO();
    const float *kc = k + c * k_col;
    for (int d = 0; d < HEAD_DIM; d++) {
        vec q0 = qt[d * nqv + j], q1 = QVS > 1 ? qt[d * nqv + j + 1] : q0;
        __asm__("" : "+v"(q0), "+v"(q1)); /* in registers: one load each, not one per FMA (GCC folds them) */
        UNROLL for (int x = 0; x < COLS; x++) {
            vec key = V_BROADCAST(kc + x * k_col + d);
            acc[x * QVS] = V_FMADD(key, q0, acc[x * QVS]);
            if (QVS > 1) acc[x * QVS + 1] = V_FMADD(key, q1, acc[x * QVS + 1]);
        }
    }
    const vec hidden = V_SET1(-INFINITY);
    UNROLL for (int x = 0; x < COLS; x++) {
        vec column = V_SET1((float)(c0 + c + x));
        UNROLL for (int y = 0; y < QVS; y++) {
            vec score = V_SELECT(V_LT(column, vis[j + y]), hidden, acc[x * QVS + y]);
            s[(c + x) * nqv + j + y] = score;
            top[j + y] = V_MAX(top[j + y], score);
        }
    }
}

/* Ask for columns' cache lines ahead of use: the keys and values stream from memory (a decode
 * step reads every row's whole cache), and the tiles' strided passes defeat the hardware prefetcher. */
INLINE void prefetch_columns(const float *x, int64_t stride, int columns) {
    for (int c = 0; c < columns; c++)
        for (int d = 0; d < HEAD_DIM; d += 16) _mm_prefetch((const char *)(x + c * stride + d), _MM_HINT_T1);
}

/* Scores of the block's columns [0, n) (absolute columns c0 + ...) for every query. */
static void block_scores(const vec *qt, int64_t nqv, const float *k, int64_t k_col, const float *v, int64_t v_col,
                         int64_t c0, int64_t n, const vec *vis, vec *s, vec *top) {
    for (int64_t j = 0; j < nqv; j++) top[j] = V_SET1(-INFINITY);
    int64_t c = 0;
    for (; c + SCORE_COLS <= n; c += SCORE_COLS) {
        prefetch_columns(v + c * v_col, v_col, SCORE_COLS);           /* this block's values, used next */
        prefetch_columns(k + (c + BLOCK) * k_col, k_col, SCORE_COLS); /* the next block's keys */
        int64_t j = 0;
        for (; j + 2 <= nqv; j += 2) score_tile(qt, nqv, k, k_col, c, c0, j, vis, s, top, SCORE_COLS, 2);
        if (j < nqv) score_tile(qt, nqv, k, k_col, c, c0, j, vis, s, top, SCORE_COLS, 1);
    }
    for (; c < n; c++) {
        int64_t j = 0;
        for (; j + 2 <= nqv; j += 2) score_tile(qt, nqv, k, k_col, c, c0, j, vis, s, top, 1, 2);
        if (j < nqv) score_tile(qt, nqv, k, k_col, c, c0, j, vis, s, top, 1, 1);
    }
}

/* Online softmax step: scores s become probabilities (in place) against the new running max m; l
 * the running sums; rescale (per query) what earlier blocks' sums and outputs are worth now. */
static void block_softmax(int64_t nqv, int64_t n, const vec *top, vec *s, vec *m, vec *l, float *rescale) {
    for (int64_t j = 0; j < nqv; j++) {
        vec peak = V_MAX(m[j], top[j]);
        /* a lane that has seen nothing yet stays at -inf; subtract 0 there, not -inf (NaN) */
        vec shift = V_SELECT(V_EQ(peak, V_SET1(-INFINITY)), peak, V_ZERO());
        vec scaled = vexp(V_SUB(m[j], shift)), sum = V_ZERO();
        for (int64_t c = 0; c < n; c++) {
            vec p = vexp(V_SUB(s[c * nqv + j], shift));
            s[c * nqv + j] = p;
            sum = V_ADD(sum, p);
        }
        l[j] = V_FMADD(l[j], scaled, sum);
        m[j] = peak;
        V_STORE(rescale + j * W, scaled);
    }
}

/* out[i, d-vectors [dv, dv + VS)] = out * rescale[i] + sum over the block's columns of p[c, i] v[c],
 * for queries [i0, i0 + QS). */
INLINE void value_tile(const float *p, int64_t nqp, const float *v, int64_t v_col, int64_t n, const float *rescale,
                       float *out, int64_t i0, int dv, int QS, int VS) {
    vec acc[VALUE_QUERIES * 2];
    UNROLL for (int r = 0; r < QS; r++) {
        vec scaled = V_BROADCAST(rescale + i0 + r);
        UNROLL for (int x = 0; x < VS; x++)
            acc[r * VS + x] = V_MUL(V_LOAD(out + (i0 + r) * HEAD_DIM + (dv + x) * W), scaled);
    }
    for (int64_t c = 0; c < n; c++) {
        const float *vc = v + c * v_col + dv * W;
        vec v0 = V_LOAD(vc), v1 = VS > 1 ? V_LOAD(vc + W) : v0;
        UNROLL for (int r = 0; r < QS; r++) {
            vec pc = V_BROADCAST(p + c * nqp + i0 + r);
            acc[r * VS] = V_FMADD(pc, v0, acc[r * VS]);
            if (VS > 1) acc[r * VS + 1] = V_FMADD(pc, v1, acc[r * VS + 1]);
        }
    }
    UNROLL for (int r = 0; r < QS; r++)
        UNROLL for (int x = 0; x < VS; x++) V_STORE(out + (i0 + r) * HEAD_DIM + (dv + x) * W, acc[r * VS + x]);
}

#define VALUE_TILE(QS, VS) value_tile(p, nqp, v, v_col, n, rescale, out, i0, dv, QS, VS)
#define VALUE_TILES(VS)                                                                  \
    switch (nq - i0 < VALUE_QUERIES ? nq - i0 : VALUE_QUERIES) {                         \
        case 6: VALUE_TILE(6, VS); break;                                                \
        case 5: VALUE_TILE(5, VS); break;                                                \
        case 4: VALUE_TILE(4, VS); break;                                                \
        case 3: VALUE_TILE(3, VS); break;                                                \
        case 2: VALUE_TILE(2, VS); break;                                                \
        default: VALUE_TILE(1, VS); break;                                               \
    }

static void block_values(const float *p, int64_t nqp, const float *v, int64_t v_col, int64_t n, int64_t nq,
                         const float *rescale, float *out) {
    int dv = 0;
    for (; dv + 2 <= NV; dv += 2)
        for (int64_t i0 = 0; i0 < nq; i0 += VALUE_QUERIES) VALUE_TILES(2)
    if (dv < NV)
        for (int64_t i0 = 0; i0 < nq; i0 += VALUE_QUERIES) VALUE_TILES(1)
}

/* One chunk of a (row, head)'s queries: q[i * q_tok], keys/values at column stride k_col/v_col; out [nq, HEAD_DIM]. */
static void one_head(const float *q, int64_t q_tok, const float *k, int64_t k_col, const float *v, int64_t v_col,
                     const int64_t *visible, int64_t nq, float scale, float *out, float *lse) {
    vec qt[HEAD_DIM * MAX_QV], s[BLOCK * MAX_QV], vis[MAX_QV], top[MAX_QV], m[MAX_QV], l[MAX_QV];
    float lanes[MAX_QV * W], rescale[MAX_QV * W];
    int64_t nqv = (nq + W - 1) / W, width = 0;
    for (int64_t i = 0; i < nqv * W; i++) {
        int64_t seen = i < nq ? visible[i] : 0; /* a padding lane sees nothing */
        lanes[i] = (float)seen;
        width = seen > width ? seen : width;
        for (int d = 0; d < HEAD_DIM; d++) ((float *)qt)[(d * nqv + i / W) * W + i % W] = i < nq ? q[i * q_tok + d] * scale : 0.f;
    }
    for (int64_t j = 0; j < nqv; j++) {
        vis[j] = V_LOAD(lanes + j * W);
        m[j] = V_SET1(-INFINITY), l[j] = V_ZERO();
    }
    memset(out, 0, sizeof(float) * nq * HEAD_DIM);
    for (int64_t c0 = 0; c0 < width; c0 += BLOCK) {
        int64_t n = width - c0 < BLOCK ? width - c0 : BLOCK;
        block_scores(qt, nqv, k + c0 * k_col, k_col, v + c0 * v_col, v_col, c0, n, vis, s, top);
        block_softmax(nqv, n, top, s, m, l, rescale);
        block_values((const float *)s, nqv * W, v + c0 * v_col, v_col, n, nq, rescale, out);
    }
    float peak[MAX_QV * W], sums[MAX_QV * W];
    for (int64_t j = 0; j < nqv; j++) V_STORE(peak + j * W, m[j]), V_STORE(sums + j * W, l[j]);
    for (int64_t i = 0; i < nq; i++) {
        float inv = sums[i] > 0.f ? 1.f / sums[i] : 0.f;
        for (int d = 0; d < HEAD_DIM; d++) out[i * HEAD_DIM + d] *= inv;
        lse[i] = sums[i] > 0.f ? peak[i] + logf(sums[i]) : -INFINITY;
    }
}

/* q [rows, heads, nq, HEAD_DIM], k/v [rows, heads, columns, HEAD_DIM] (strides in floats, the last
 * dimension contiguous), visible [rows, nq]; writes out [rows, heads, nq, HEAD_DIM] and lse
 * [rows, heads, nq], contiguous. A (row, head)'s queries run in chunks of up to MAX_Q (a decode
 * step's 3 x 5 are one; a prompt's prefill, thousands, many), the chunks of all rows and heads in
 * parallel, later chunks first: in a prefill they see the most columns. */
void evalflow_decode_attention(const float *q, const int64_t *q_strides, const float *k, const int64_t *k_strides,
                              const float *v, const int64_t *v_strides, const int64_t *visible, int64_t rows,
                               int64_t heads, int64_t nq, float scale, float *out, float *lse, int threads) {
    int64_t chunks = (nq + MAX_Q - 1) / MAX_Q, pairs = rows * heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t u = 0; u < chunks * pairs; u++) {
        int64_t t = u % pairs, r = t / heads, h = t % heads, i0 = (chunks - 1 - u / pairs) * MAX_Q;
        int64_t n = nq - i0 < MAX_Q ? nq - i0 : MAX_Q;
        one_head(q + r * q_strides[0] + h * q_strides[1] + i0 * q_strides[2], q_strides[2],
                 k + r * k_strides[0] + h * k_strides[1], k_strides[2], v + r * v_strides[0] + h * v_strides[1],
                 v_strides[2], visible + r * nq + i0, n, scale, out + (t * nq + i0) * HEAD_DIM, lse + t * nq + i0);
    }
}

/* Floats per vector this build uses: 16 with AVX-512, 8 with AVX2 (for the tests and benchmarks). */
int evalflow_vector_width(void) { return W; }
