/* Attention for evalflow's continuous-batching loop, its decode steps and its prompts' prefill
 * (see ../native_attention.py).
 *
 * For every (row, key/value head): softmax(q k^T * scale) v over the columns each query may see,
 * with the log-sum-exp of the scores, in one pass over the keys and values (online softmax over
 * blocks of BLOCK columns). A query sees the columns [0, visible) of its row: a decode row's
 * filled columns, for a draft token the ones up to its own, for a prompt token the ones up to its
 * own (causal). Columns past the row's longest
 * query are never read, so short rows cost what they hold, not what the longest row holds.
 *
 * Both products are register-tiled like a GEMM micro-kernel, so each load feeds several FMAs:
 * - scores: the head's queries transposed once (lanes = queries, 8 per vector), so a key column's
 *   element is broadcast against two query vectors: tiles of 4 columns x 16 queries, and the
 *   softmax (max, exp, sums) runs across queries in vector lanes, with no horizontal sums;
 * - values: tiles of 6 queries x 16 head dimensions, a probability broadcast per query against
 *   two value vectors.
 * Built per head size (HEAD_DIM, a multiple of 8) for x86-64 with AVX2 and FMA; the caller checks
 * both. fp32 throughout; equal to the plain computation up to summation order and the 1e-7
 * relative error of exp8. */
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
#define W 8                          /* floats per vector */
#define NV (HEAD_DIM / W)            /* vectors per head vector */
#define MAX_QV ((MAX_Q + W - 1) / W) /* query vectors per chunk */
#define BLOCK 32                     /* columns per softmax block (measured best of 16-128): its keys, values and scores stay in L1 */
#define SCORE_COLS 4                 /* score tile: columns x (2 vectors of) queries */
#define VALUE_QUERIES 6              /* value tile: queries x (2 vectors of) head dimensions */
#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* exp(x) for x <= 0 (scores minus their running max); below -87 (and at -inf) it is 0. */
INLINE __m256 exp8(__m256 x) {
    __m256 alive = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    __m256 t = _mm256_and_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), alive); /* exp(x) = 2^t */
    __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_mul_ps(_mm256_sub_ps(t, n), _mm256_set1_ps(0.69314718055994531f)); /* |f| <= ln2/2 */
    __m256 p = _mm256_set1_ps(1.f / 720.f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f / 120.f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f / 24.f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f / 6.f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), alive);
}

/* Scores of columns [c, c + COLS) against query vectors [j, j + QVS) into s (s[col * nqv + j]: the
 * vector of queries 8j..8j+7), each lane -inf where its query does not see the column; the block's
 * running max per query vector in top. qt: the scaled queries transposed (qt[d * nqv + j]). */
INLINE void score_tile(const __m256 *qt, int64_t nqv, const float *k, int64_t k_col, int64_t c, int64_t c0, int64_t j,
                       const __m256 *vis, __m256 *s, __m256 *top, int COLS, int QVS) {
    __m256 acc[SCORE_COLS * 2];
    UNROLL for (int x = 0; x < COLS * QVS; x++) acc[x] = _mm256_setzero_ps();
    const float *kc = k + c * k_col;
    for (int d = 0; d < HEAD_DIM; d++) {
        __m256 q0 = qt[d * nqv + j], q1 = QVS > 1 ? qt[d * nqv + j + 1] : q0;
        __asm__("" : "+x"(q0), "+x"(q1)); /* in registers: one load each, not one per FMA (GCC folds them) */
        UNROLL for (int x = 0; x < COLS; x++) {
            __m256 key = _mm256_broadcast_ss(kc + x * k_col + d);
            acc[x * QVS] = _mm256_fmadd_ps(key, q0, acc[x * QVS]);
            if (QVS > 1) acc[x * QVS + 1] = _mm256_fmadd_ps(key, q1, acc[x * QVS + 1]);
        }
    }
    const __m256 hidden = _mm256_set1_ps(-INFINITY);
    UNROLL for (int x = 0; x < COLS; x++) {
        __m256 column = _mm256_set1_ps((float)(c0 + c + x));
        UNROLL for (int y = 0; y < QVS; y++) {
            __m256 seen = _mm256_cmp_ps(column, vis[j + y], _CMP_LT_OQ);
            __m256 score = _mm256_blendv_ps(hidden, acc[x * QVS + y], seen);
            s[(c + x) * nqv + j + y] = score;
            top[j + y] = _mm256_max_ps(top[j + y], score);
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
static void block_scores(const __m256 *qt, int64_t nqv, const float *k, int64_t k_col, const float *v, int64_t v_col,
                         int64_t c0, int64_t n, const __m256 *vis, __m256 *s, __m256 *top) {
    for (int64_t j = 0; j < nqv; j++) top[j] = _mm256_set1_ps(-INFINITY);
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
static void block_softmax(int64_t nqv, int64_t n, const __m256 *top, __m256 *s, __m256 *m, __m256 *l, float *rescale) {
    for (int64_t j = 0; j < nqv; j++) {
        __m256 peak = _mm256_max_ps(m[j], top[j]);
        /* a lane that has seen nothing yet stays at -inf; subtract 0 there, not -inf (NaN) */
        __m256 shift = _mm256_blendv_ps(peak, _mm256_setzero_ps(), _mm256_cmp_ps(peak, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
        __m256 scaled = exp8(_mm256_sub_ps(m[j], shift)), sum = _mm256_setzero_ps();
        for (int64_t c = 0; c < n; c++) {
            __m256 p = exp8(_mm256_sub_ps(s[c * nqv + j], shift));
            s[c * nqv + j] = p;
            sum = _mm256_add_ps(sum, p);
        }
        l[j] = _mm256_fmadd_ps(l[j], scaled, sum);
        m[j] = peak;
        _mm256_storeu_ps(rescale + j * W, scaled);
    }
}

/* out[i, d-vectors [dv, dv + VS)] = out * rescale[i] + sum over the block's columns of p[c, i] v[c],
 * for queries [i0, i0 + QS). */
INLINE void value_tile(const float *p, int64_t nqp, const float *v, int64_t v_col, int64_t n, const float *rescale,
                       float *out, int64_t i0, int dv, int QS, int VS) {
    __m256 acc[VALUE_QUERIES * 2];
    UNROLL for (int r = 0; r < QS; r++) {
        __m256 scaled = _mm256_broadcast_ss(rescale + i0 + r);
        UNROLL for (int x = 0; x < VS; x++)
            acc[r * VS + x] = _mm256_mul_ps(_mm256_loadu_ps(out + (i0 + r) * HEAD_DIM + (dv + x) * W), scaled);
    }
    for (int64_t c = 0; c < n; c++) {
        const float *vc = v + c * v_col + dv * W;
        __m256 v0 = _mm256_loadu_ps(vc), v1 = VS > 1 ? _mm256_loadu_ps(vc + W) : v0;
        UNROLL for (int r = 0; r < QS; r++) {
            __m256 pc = _mm256_broadcast_ss(p + c * nqp + i0 + r);
            acc[r * VS] = _mm256_fmadd_ps(pc, v0, acc[r * VS]);
            if (VS > 1) acc[r * VS + 1] = _mm256_fmadd_ps(pc, v1, acc[r * VS + 1]);
        }
    }
    UNROLL for (int r = 0; r < QS; r++)
        UNROLL for (int x = 0; x < VS; x++) _mm256_storeu_ps(out + (i0 + r) * HEAD_DIM + (dv + x) * W, acc[r * VS + x]);
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
    __m256 qt[HEAD_DIM * MAX_QV], s[BLOCK * MAX_QV], vis[MAX_QV], top[MAX_QV], m[MAX_QV], l[MAX_QV];
    float lanes[MAX_QV * W] __attribute__((aligned(32))), rescale[MAX_QV * W];
    int64_t nqv = (nq + W - 1) / W, width = 0;
    for (int64_t i = 0; i < nqv * W; i++) {
        int64_t seen = i < nq ? visible[i] : 0; /* a padding lane sees nothing */
        lanes[i] = (float)seen;
        width = seen > width ? seen : width;
        for (int d = 0; d < HEAD_DIM; d++) ((float *)qt)[(d * nqv + i / W) * W + i % W] = i < nq ? q[i * q_tok + d] * scale : 0.f;
    }
    for (int64_t j = 0; j < nqv; j++) {
        vis[j] = _mm256_load_ps(lanes + j * W);
        m[j] = _mm256_set1_ps(-INFINITY), l[j] = _mm256_setzero_ps();
    }
    memset(out, 0, sizeof(float) * nq * HEAD_DIM);
    for (int64_t c0 = 0; c0 < width; c0 += BLOCK) {
        int64_t n = width - c0 < BLOCK ? width - c0 : BLOCK;
        block_scores(qt, nqv, k + c0 * k_col, k_col, v + c0 * v_col, v_col, c0, n, vis, s, top);
        block_softmax(nqv, n, top, s, m, l, rescale);
        block_values((const float *)s, nqv * W, v + c0 * v_col, v_col, n, nq, rescale, out);
    }
    float peak[MAX_QV * W], sums[MAX_QV * W];
    for (int64_t j = 0; j < nqv; j++) _mm256_storeu_ps(peak + j * W, m[j]), _mm256_storeu_ps(sums + j * W, l[j]);
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
