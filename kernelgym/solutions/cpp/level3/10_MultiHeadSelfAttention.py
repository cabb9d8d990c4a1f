import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Multi-head self-attention in one native call, with every intermediate kept "feature-major" in panels of
# 32 tokens: t[panel][feature][32] (each batch's tokens padded up to a multiple of 32).
#  1. x is repacked into panels; the QKV projection writes q^T, k^T, v^T in that layout (bias fused).
#  2. Per (batch, head, 32-query panel): scores^T[key][query] = k . q (8 keys x 32 queries register tiles,
#     broadcasting k^T entries), then a column-wise softmax over the keys with a vectorised exp, then
#     out^T[d][query] = sum_key v^T[d][key] p[key][query]; the 1/sum normalisation is applied in registers
#     and the result lands directly in the panel layout the output projection reads. No (S x S) matrix
#     larger than one query panel's 32 columns is ever formed, and nothing is transposed in memory.
#  3. The output projection (bias fused) transposes its tiles into the row-major (B, S, E) result.
_lib = load_cpp(r"""
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

typedef float vf __attribute__((vector_size(64)));   // 16 floats
typedef int32_t vi __attribute__((vector_size(64)));
constexpr int PW = 32;  // tokens per panel
constexpr int MR = 12;  // output features per projection tile
constexpr int AR = 8;   // keys (scores) or head dims (p.v) per attention tile

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf splat(float s) { return vf{} + s; }
static inline vf vmax(vf a, vf b) { return a > b ? a : b; }

static inline vf vexp(vf x) {
    const vf lo = splat(-87.0f);
    x = x > lo ? x : lo;  // arguments here are <= 0 (max subtracted)
    const vf magic = splat(12582912.0f);
    const vf n = (x * 1.44269504088896341f + magic) - magic;
    vf r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vf p = splat(1.0f / 720.0f);
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const vi e = (__builtin_convertvector(n, vi) + 127) << 23;
    vf scale; std::memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

// c[r] += sum_k A[r * lda + k * ldk] * Bm[k * 32 + 0..31] for r < R.
template <int R>
static inline __attribute__((always_inline)) void tile_acc(const float* A, int64_t lda, int64_t ldk,
                                                           const float* Bm, int64_t K, vf* c0, vf* c1) {
    for (int64_t k = 0; k < K; ++k) {
        const vf b0 = ld(Bm + k * PW), b1 = ld(Bm + k * PW + 16);
        const float* a = A + k * ldk;
        #pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
            const float s = a[r * lda];
            c0[r] += s * b0; c1[r] += s * b1;
        }
    }
}

// Linear layer over panels: out = W[N][K] . in + b. y == nullptr: out[panel][N][32]; else row-major
// y[token][N] for the valid tokens (panel p holds batch p / ppb, tokens (p % ppb) * 32 + i < S).
template <int R>
__attribute__((noinline)) static void proj_block(const float* in, const float* W, const float* b, float* out,
                                                 float* y, int64_t panels, int64_t ppb, int64_t S, int64_t K,
                                                 int64_t N, int64_t j0) {
    for (int64_t p = 0; p < panels; ++p) {
        vf c0[R], c1[R];
        #pragma GCC unroll 12
        for (int r = 0; r < R; ++r) { c0[r] = splat(b[j0 + r]); c1[r] = c0[r]; }
        tile_acc<R>(W + j0 * K, K, 1, in + p * K * PW, K, c0, c1);
        if (!y) {
            float* o = out + (p * N + j0) * PW;
            #pragma GCC unroll 12
            for (int r = 0; r < R; ++r) { st(o + r * PW, c0[r]); st(o + r * PW + 16, c1[r]); }
        } else {
            alignas(64) float t[R][PW];
            for (int r = 0; r < R; ++r) { st(t[r], c0[r]); st(t[r] + 16, c1[r]); }
            const int64_t s0 = (p % ppb) * PW;
            const int n = (int)(S - s0 < PW ? S - s0 : PW);
            float* yb = y + ((p / ppb) * S + s0) * N + j0;
            for (int i = 0; i < n; ++i)
                for (int r = 0; r < R; ++r) yb[i * N + r] = t[r][i];
        }
    }
}

using ProjFn = void (*)(const float*, const float*, const float*, float*, float*, int64_t, int64_t, int64_t,
                        int64_t, int64_t, int64_t);
template <std::size_t... I>
static constexpr auto proj_table(std::index_sequence<I...>) {
    return std::array<ProjFn, sizeof...(I)>{(I == 0 ? nullptr : &proj_block<(int)(I == 0 ? 1 : I)>)...};
}
static constexpr auto kProj = proj_table(std::make_index_sequence<MR + 1>{});

static void project(const float* in, const float* W, const float* b, float* out, float* y, int64_t panels,
                    int64_t ppb, int64_t S, int64_t K, int64_t N) {
    #pragma omp parallel for schedule(static)
    for (int64_t jb = 0; jb < (N + MR - 1) / MR; ++jb) {
        const int64_t j0 = jb * MR;
        kProj[N - j0 < MR ? N - j0 : MR](in, W, b, out, y, panels, ppb, S, K, N, j0);
    }
}

// scores^T rows [k0, k0 + R) of one query panel: sc[key][32] = scale * k[key] . q[32 queries].
template <int R>
__attribute__((noinline)) static void score_rows(const float* kt, const float* qt, int64_t hd, float scale,
                                                 float* sc) {
    vf c0[R], c1[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) { c0[r] = vf{}; c1[r] = vf{}; }
    tile_acc<R>(kt, 1, PW, qt, hd, c0, c1);  // kt[d * 32 + r]: keys contiguous, dims 32 apart
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) { st(sc + r * PW, c0[r] * scale); st(sc + r * PW + 16, c1[r] * scale); }
}

// out^T rows [d0, d0 + R): sum over all keys of v^T[d][key] * p[key][32], times inv[32].
template <int R>
__attribute__((noinline)) static void pv_rows(const float* vbase, int64_t panel_stride, const float* sc,
                                              int64_t S, const float* inv, float* out) {
    vf c0[R], c1[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) { c0[r] = vf{}; c1[r] = vf{}; }
    for (int64_t k0 = 0, kp = 0; k0 < S; k0 += PW, ++kp) {
        const int64_t n = S - k0 < PW ? S - k0 : PW;
        tile_acc<R>(vbase + kp * panel_stride, PW, 1, sc + k0 * PW, n, c0, c1);  // v^T[d][key]: d 32 apart
    }
    const vf i0 = ld(inv), i1 = ld(inv + 16);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) { st(out + r * PW, c0[r] * i0); st(out + r * PW + 16, c1[r] * i1); }
}

using ScoreFn = void (*)(const float*, const float*, int64_t, float, float*);
using PvFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, float*);
template <std::size_t... I>
static constexpr auto score_table(std::index_sequence<I...>) {
    return std::array<ScoreFn, sizeof...(I)>{(I == 0 ? nullptr : &score_rows<(int)(I == 0 ? 1 : I)>)...};
}
template <std::size_t... I>
static constexpr auto pv_table(std::index_sequence<I...>) {
    return std::array<PvFn, sizeof...(I)>{(I == 0 ? nullptr : &pv_rows<(int)(I == 0 ? 1 : I)>)...};
}
static constexpr auto kScore = score_table(std::make_index_sequence<AR + 1>{});
static constexpr auto kPv = pv_table(std::make_index_sequence<AR + 1>{});

extern "C" void mhsa_forward(const float* x, const float* wqkv, const float* bqkv, const float* wo,
                             const float* bo, float* xp, float* qkv, float* op, float* y, int64_t B,
                             int64_t S, int64_t E, int64_t heads) {
    const int64_t ppb = (S + PW - 1) / PW;  // panels per batch
    const int64_t panels = B * ppb;
    const int64_t hd = E / heads;
    const float scale = 1.0f / std::sqrt((float)hd);

    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
        const int64_t b = p / ppb, s0 = (p % ppb) * PW;
        float* dst = xp + p * E * PW;
        for (int i = 0; i < PW; ++i) {
            const bool valid = s0 + i < S;
            const float* src = x + (b * S + s0 + i) * E;
            for (int64_t k = 0; k < E; ++k) dst[k * PW + i] = valid ? src[k] : 0.0f;
        }
    }
    project(xp, wqkv, bqkv, qkv, nullptr, panels, ppb, S, E, 3 * E);

    const int64_t pstride = 3 * E * PW;  // one panel of qkv
    #pragma omp parallel
    {
        std::vector<float> scbuf(ppb * PW * PW + 2 * PW);
        float* sc = scbuf.data();
        float* inv = sc + ppb * PW * PW;
        #pragma omp for collapse(3) schedule(static)
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t h = 0; h < heads; ++h) {
                for (int64_t qp = 0; qp < ppb; ++qp) {
                    const float* base = qkv + b * ppb * pstride;
                    const float* qt = base + qp * pstride + (h * hd) * PW;
                    for (int64_t k0 = 0; k0 < S; k0 += AR) {
                        const int64_t kp = k0 / PW;
                        const float* kt = base + kp * pstride + (E + h * hd) * PW + (k0 - kp * PW);
                        const int rows = (int)(S - k0 < AR ? S - k0 : AR);
                        kScore[rows](kt, qt, hd, scale, sc + k0 * PW);
                    }
                    for (int half = 0; half < 2; ++half) {
                        float* col = sc + 16 * half;
                        vf m = ld(col);
                        for (int64_t k = 1; k < S; ++k) m = vmax(m, ld(col + k * PW));
                        vf l = vf{};
                        for (int64_t k = 0; k < S; ++k) {
                            const vf e = vexp(ld(col + k * PW) - m);
                            st(col + k * PW, e);
                            l += e;
                        }
                        st(inv + 16 * half, 1.0f / l);
                    }
                    float* out = op + ((b * ppb + qp) * E + h * hd) * PW;
                    const float* vbase = base + (2 * E + h * hd) * PW;
                    for (int64_t d0 = 0; d0 < hd; d0 += AR) {
                        const int rows = (int)(hd - d0 < AR ? hd - d0 : AR);
                        kPv[rows](vbase + d0 * PW, pstride, sc, S, inv, out + d0 * PW);
                    }
                }
            }
        }
    }
    project(op, wo, bo, nullptr, y, panels, ppb, S, E, E);
}
""")

_PW = 32


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, s, e = x.shape
        tokens = b * ((s + _PW - 1) // _PW * _PW)
        xp = torch.empty(tokens * e, dtype=x.dtype)
        qkv = torch.empty(tokens * 3 * e, dtype=x.dtype)
        op = torch.empty(tokens * e, dtype=x.dtype)
        y = torch.empty(b, s, e, dtype=x.dtype)
        _lib.mhsa_forward(x, self.qkv.weight.contiguous(), self.qkv.bias.contiguous(),
                          self.out_proj.weight.contiguous(), self.out_proj.bias.contiguous(),
                          xp, qkv, op, y, b, s, e, self.num_heads)
        return y
