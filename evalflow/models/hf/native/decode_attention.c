/* Decode-step attention for evalflow's continuous-batching loop (see ../native_attention.py).
 *
 * For every (row, key/value head): softmax(q k^T * scale) v over the columns each query may see,
 * with the log-sum-exp of the scores, in one pass over the keys and values (online softmax over
 * blocks of BLOCK columns). A query sees the columns [0, visible) of its row: a decode row's
 * filled columns, and for a draft token the ones up to its own. Columns past a row's own length
 * are never read, so short rows cost what they hold, not what the longest row holds.
 *
 * Built per head size (HEAD_DIM, a multiple of 8) for x86-64 with AVX2 and FMA; the caller
 * checks both. fp32 throughout; equal to the plain computation up to summation order and the
 * 1e-7 relative error of exp8. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#define NV (HEAD_DIM / 8) /* 8-float vectors per head vector */
#define BLOCK 64          /* columns per softmax block: its scores and values stay in L1 */
#ifndef MAX_Q
#define MAX_Q 64 /* queries per (row, head), set by the build; more: the caller uses torch's kernel */
#endif
#define UNROLL _Pragma("GCC unroll 32")

static inline float hsum(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

/* exp(x) for x <= 0 (scores minus their running max); below -87 it is 0. */
static inline __m256 exp8(__m256 x) {
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

/* Scores of query qi against the block's columns [0, n), four columns per pass over q. */
static void block_scores(const __m256 *qi, const float *k, int64_t k_col, int64_t n, float scale, float *s) {
    int64_t c = 0;
    for (; c + 4 <= n; c += 4) {
        const float *k0 = k + c * k_col;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        UNROLL for (int d = 0; d < NV; d++) {
            a0 = _mm256_fmadd_ps(qi[d], _mm256_loadu_ps(k0 + 8 * d), a0);
            a1 = _mm256_fmadd_ps(qi[d], _mm256_loadu_ps(k0 + k_col + 8 * d), a1);
            a2 = _mm256_fmadd_ps(qi[d], _mm256_loadu_ps(k0 + 2 * k_col + 8 * d), a2);
            a3 = _mm256_fmadd_ps(qi[d], _mm256_loadu_ps(k0 + 3 * k_col + 8 * d), a3);
        }
        __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        __m128 four = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        _mm_storeu_ps(s + c, _mm_mul_ps(four, _mm_set1_ps(scale)));
    }
    for (; c < n; c++) {
        __m256 a = _mm256_setzero_ps();
        UNROLL for (int d = 0; d < NV; d++) a = _mm256_fmadd_ps(qi[d], _mm256_loadu_ps(k + c * k_col + 8 * d), a);
        s[c] = hsum(a) * scale;
    }
}

/* One (row, head): queries q[i * q_tok], keys/values at column stride k_col/v_col. */
static void one_head(const float *q, int64_t q_tok, const float *k, int64_t k_col, const float *v, int64_t v_col,
                     const int64_t *visible, int64_t nq, float scale, float *out, float *lse) {
    float m[MAX_Q], l[MAX_Q], s[BLOCK] __attribute__((aligned(32)));
    __m256 acc[MAX_Q][NV];
    int64_t width = 0;
    for (int64_t i = 0; i < nq; i++) {
        m[i] = -INFINITY, l[i] = 0.f;
        UNROLL for (int d = 0; d < NV; d++) acc[i][d] = _mm256_setzero_ps();
        width = visible[i] > width ? visible[i] : width;
    }
    for (int64_t c0 = 0; c0 < width; c0 += BLOCK) {
        for (int64_t i = 0; i < nq; i++) {
            int64_t seen = visible[i] - c0; /* columns of this block query i sees */
            if (seen <= 0) continue;
            seen = seen < BLOCK ? seen : BLOCK;
            __m256 qi[NV];
            UNROLL for (int d = 0; d < NV; d++) qi[d] = _mm256_loadu_ps(q + i * q_tok + 8 * d);
            block_scores(qi, k + c0 * k_col, k_col, seen, scale, s);
            float top = m[i];
            for (int64_t c = 0; c < seen; c++) top = s[c] > top ? s[c] : top;
            float rescale = m[i] == -INFINITY ? 0.f : expf(m[i] - top), sum = 0.f;
            int64_t c = 0;
            for (; c + 8 <= seen; c += 8) {
                __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + c), _mm256_set1_ps(top)));
                _mm256_storeu_ps(s + c, e);
                sum += hsum(e);
            }
            for (; c < seen; c++) sum += (s[c] = expf(s[c] - top));
            l[i] = l[i] * rescale + sum, m[i] = top;
            __m256 a[NV];
            UNROLL for (int d = 0; d < NV; d++) a[d] = _mm256_mul_ps(acc[i][d], _mm256_set1_ps(rescale));
            for (c = 0; c < seen; c++) {
                __m256 p = _mm256_set1_ps(s[c]);
                const float *vc = v + (c0 + c) * v_col;
                UNROLL for (int d = 0; d < NV; d++) a[d] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vc + 8 * d), a[d]);
            }
            UNROLL for (int d = 0; d < NV; d++) acc[i][d] = a[d];
        }
    }
    for (int64_t i = 0; i < nq; i++) {
        __m256 inv = _mm256_set1_ps(l[i] > 0.f ? 1.f / l[i] : 0.f);
        UNROLL for (int d = 0; d < NV; d++) _mm256_storeu_ps(out + i * HEAD_DIM + 8 * d, _mm256_mul_ps(acc[i][d], inv));
        lse[i] = l[i] > 0.f ? m[i] + logf(l[i]) : -INFINITY;
    }
}

/* q [rows, heads, nq, HEAD_DIM], k/v [rows, heads, columns, HEAD_DIM] (strides in floats, the last
 * dimension contiguous), visible [rows, nq]; writes out [rows, heads, nq, HEAD_DIM] and lse
 * [rows, heads, nq], contiguous. Returns 0, or 1 when nq exceeds MAX_Q (nothing written). */
int evalflow_decode_attention(const float *q, const int64_t *q_strides, const float *k, const int64_t *k_strides,
                              const float *v, const int64_t *v_strides, const int64_t *visible, int64_t rows,
                              int64_t heads, int64_t nq, float scale, float *out, float *lse, int threads) {
    if (nq > MAX_Q) return 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t t = 0; t < rows * heads; t++) {
        int64_t r = t / heads, h = t % heads;
        one_head(q + r * q_strides[0] + h * q_strides[1], q_strides[2], k + r * k_strides[0] + h * k_strides[1],
                 k_strides[2], v + r * v_strides[0] + h * v_strides[1], v_strides[2], visible + r * nq, nq, scale,
                 out + t * nq * HEAD_DIM, lse + t * nq);
    }
    return 0;
}
