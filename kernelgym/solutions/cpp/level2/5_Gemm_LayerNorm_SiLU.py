import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# silu(layer_norm(x @ W^T + b)) in one kernel call. Phase 1 writes the GEMM tiles (bias included) with
# register-blocked panels of W; after a barrier, phase 2 normalizes each row while it is still in cache and
# applies the affine transform and SiLU in the same sweep.
_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <omp.h>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));
constexpr int MR = 12;       // rows of x per register tile
constexpr int NR = 2 * VL;   // output features per register tile (two vectors)

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf splat(float s) { return vf{} + s; }

// In-register transpose of a VL x VL block: stage D swaps bit D of the row index with bit D of the column.
template <int D>
static inline void transpose_stage(vf* r) {
    vi lo, hi;
    #pragma GCC unroll 16
    for (int j = 0; j < VL; ++j) {
        lo[j] = (j & D) ? VL + j - D : j;
        hi[j] = (j & D) ? VL + j : j + D;
    }
    #pragma GCC unroll 16
    for (int i = 0; i < VL; ++i) {
        if (i & D) continue;
        const vf a = r[i], b = r[i + D];
        r[i] = __builtin_shuffle(a, b, lo);
        r[i + D] = __builtin_shuffle(a, b, hi);
    }
}

static inline void transpose_block(vf* r) {
    if constexpr (VL >= 16) transpose_stage<8>(r);
    transpose_stage<4>(r);
    transpose_stage<2>(r);
    transpose_stage<1>(r);
}

// dst[k * NR + jj] = W[(j0 + jj) * K + k] for the NR rows of W from j0 (zero past N): one K-major panel.
static void pack_panel(const float* W, float* dst, int64_t j0p, int64_t N, int64_t K) {
    const int64_t kv = K / VL * VL;
    for (int half = 0; half < NR; half += VL) {
        const int64_t j0 = j0p + half;
        for (int64_t k0 = 0; k0 < kv; k0 += VL) {
            vf r[VL];
            if (j0 + VL <= N) {
                #pragma GCC unroll 16
                for (int i = 0; i < VL; ++i) r[i] = ld(W + (j0 + i) * K + k0);
            } else {
                for (int i = 0; i < VL; ++i) r[i] = j0 + i < N ? ld(W + (j0 + i) * K + k0) : vf{};
            }
            transpose_block(r);
            #pragma GCC unroll 16
            for (int i = 0; i < VL; ++i) st(dst + (k0 + i) * NR + half, r[i]);
        }
        for (int64_t k = kv; k < K; ++k)
            for (int i = 0; i < VL; ++i) dst[k * NR + half + i] = j0 + i < N ? W[(j0 + i) * K + k] : 0.0f;
    }
}

// tile[r * NR + jj] = sum_k A[r * lda + k] * Bp[k * NR + jj] for r < ROWS, accumulated in registers.
template <int ROWS>
static inline void micro_tile(const float* A, int64_t lda, const float* Bp, int64_t K, float* tile) {
    vf c0[ROWS], c1[ROWS];
    #pragma GCC unroll 16
    for (int r = 0; r < ROWS; ++r) { c0[r] = vf{}; c1[r] = vf{}; }
    for (int64_t k = 0; k < K; ++k) {
        const vf b0 = ld(Bp + k * NR), b1 = ld(Bp + k * NR + VL);
        #pragma GCC unroll 16
        for (int r = 0; r < ROWS; ++r) {
            const float a = A[r * lda + k];
            c0[r] += a * b0;
            c1[r] += a * b1;
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < ROWS; ++r) { st(tile + r * NR, c0[r]); st(tile + r * NR + VL, c1[r]); }
}

static void tile_dispatch(int rows, const float* A, int64_t lda, const float* Bp, int64_t K, float* tile) {
    switch (rows) {
        case 12: micro_tile<12>(A, lda, Bp, K, tile); break;
        case 11: micro_tile<11>(A, lda, Bp, K, tile); break;
        case 10: micro_tile<10>(A, lda, Bp, K, tile); break;
        case 9: micro_tile<9>(A, lda, Bp, K, tile); break;
        case 8: micro_tile<8>(A, lda, Bp, K, tile); break;
        case 7: micro_tile<7>(A, lda, Bp, K, tile); break;
        case 6: micro_tile<6>(A, lda, Bp, K, tile); break;
        case 5: micro_tile<5>(A, lda, Bp, K, tile); break;
        case 4: micro_tile<4>(A, lda, Bp, K, tile); break;
        case 3: micro_tile<3>(A, lda, Bp, K, tile); break;
        case 2: micro_tile<2>(A, lda, Bp, K, tile); break;
        default: micro_tile<1>(A, lda, Bp, K, tile); break;
    }
}

// y-tiles of x (M x K) times W^T (W is N x K, as nn.Linear stores it). Panels of NR rows of W are the outer
// (parallel) loop: each is transposed once into a per-thread buffer that stays in cache while every row
// block of x is multiplied with it; epi(tile, i0, rows, j0, cols) consumes each finished register tile.
// Must be called inside an OpenMP parallel region (the panel loop is an omp for).
template <class Epilogue>
static void gemm_tiles(const float* x, const float* W, int64_t M, int64_t K, int64_t N, Epilogue epi) {
    const int64_t panels = (N + NR - 1) / NR;
    const int64_t mblocks = (M + MR - 1) / MR;
    float* buf = (float*)std::aligned_alloc(64, (size_t)(K * NR * sizeof(float) + 63) / 64 * 64);
    alignas(64) float tile[MR * NR];
    #pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
        const int64_t j0 = p * NR;
        const int cols = (int)(N - j0 < NR ? N - j0 : NR);
        pack_panel(W, buf, j0, N, K);
        for (int64_t ib = 0; ib < mblocks; ++ib) {
            const int64_t i0 = ib * MR;
            const int rows = (int)(M - i0 < MR ? M - i0 : MR);
            tile_dispatch(rows, x + i0 * K, K, buf, K, tile);
            epi(tile, i0, rows, j0, cols);
        }
    }
    std::free(buf);
}

// exp for a vector: Cody-Waite range reduction to [-ln2/2, ln2/2] and a degree-6 polynomial (~1 ulp);
// inputs are clamped to [-87, 88] so the result stays a normal float.
static inline vf v_exp(vf x) {
    x = x < splat(88.0f) ? x : splat(88.0f);
    x = x > splat(-87.0f) ? x : splat(-87.0f);
    const vf n = (x * splat(1.44269504088896341f) + splat(12582912.0f)) - splat(12582912.0f);
    vf r = x - n * splat(0.693359375f);
    r = r - n * splat(-2.12194440e-4f);
    vf p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * r * r + r + splat(1.0f);
    const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    vf scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline vf v_sigmoid(vf x) { return splat(1.0f) / (splat(1.0f) + v_exp(-x)); }

static inline vf v_tanh(vf x) {
    const vf ax = x < splat(0.0f) ? -x : x;
    const vf t = v_exp(ax * splat(-2.0f));
    const vf r = (splat(1.0f) - t) / (splat(1.0f) + t);
    return x < splat(0.0f) ? -r : r;
}
extern "C" void gemm_layernorm_silu(const float* x, const float* W, const float* bias, const float* gamma,
                                    const float* beta, float* y, int64_t M, int64_t K, int64_t N, float eps) {
    #pragma omp parallel
    {
        gemm_tiles(x, W, M, K, N, [&](const float* tile, int64_t i0, int rows, int64_t j0, int cols) {
            for (int r = 0; r < rows; ++r) {
                float* out = y + (i0 + r) * N + j0;
                const float* t = tile + r * NR;
                #pragma omp simd
                for (int jj = 0; jj < cols; ++jj) out[jj] = t[jj] + bias[j0 + jj];
            }
        });
        // (the omp for inside gemm_tiles ends with a barrier: every row is complete here)
        const int64_t nv = N / VL * VL;
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            float* row = y + i * N;
            vf acc = vf{};
            float sum = 0.0f;
            for (int64_t j = 0; j < nv; j += VL) acc += ld(row + j);
            for (int l = 0; l < VL; ++l) sum += acc[l];
            for (int64_t j = nv; j < N; ++j) sum += row[j];
            const float mean = sum / (float)N;
            vf acc2 = vf{};
            float sq = 0.0f;
            for (int64_t j = 0; j < nv; j += VL) { const vf d = ld(row + j) - mean; acc2 += d * d; }
            for (int l = 0; l < VL; ++l) sq += acc2[l];
            for (int64_t j = nv; j < N; ++j) { const float d = row[j] - mean; sq += d * d; }
            const float inv = 1.0f / std::sqrt(sq / (float)N + eps);
            for (int64_t j = 0; j < nv; j += VL) {
                const vf v = (ld(row + j) - mean) * inv * ld(gamma + j) + ld(beta + j);
                st(row + j, v * v_sigmoid(v));
            }
            for (int64_t j = nv; j < N; ++j) {
                const float v = (row[j] - mean) * inv * gamma[j] + beta[j];
                row[j] = v / (1.0f + std::exp(-v));
            }
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype)
        _lib.gemm_layernorm_silu(x, w, self.linear.bias.contiguous(), self.norm.weight.contiguous(),
                                 self.norm.bias.contiguous(), y, x.shape[0], x.shape[1], w.shape[0],
                                 float(self.norm.eps))
        return y
