import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# The whole three-layer MLP in one native call. Activations are kept "feature-major" in panels of 32 batch
# rows: act[panel][feature][32]. A layer is then out^T = W . act^T, computed in 12 x 32 register tiles that
# broadcast weight scalars (rows of nn.Linear's weight, used in place: no repacking) against two 16-wide
# vectors of activations. Bias and ReLU are applied to each tile in registers and the tile is stored
# straight into the next layer's panel layout; the last layer transposes its tiles into the row-major output.
_lib = load_cpp(r"""
#include <cstdint>
#include <cstring>
#include <array>
#include <utility>

typedef float vf __attribute__((vector_size(64)));  // 16 floats: one zmm register with AVX-512
constexpr int PW = 32;  // batch rows per panel (two vectors)
constexpr int MR = 12;  // output features per register tile (24 accumulators)

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

// c[r] (two vectors each) = sum_k W[r * K + k] * P[k * PW + 0..31] for r < R.
template <int R>
static inline void tile(const float* W, const float* P, int64_t K, vf* c0, vf* c1) {
    #pragma GCC unroll 12
    for (int r = 0; r < R; ++r) { c0[r] = vf{}; c1[r] = vf{}; }
    for (int64_t k = 0; k < K; ++k) {
        const vf b0 = ld(P + k * PW), b1 = ld(P + k * PW + 16);
        #pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
            const float a = W[r * K + k];
            c0[r] += a * b0;
            c1[r] += a * b1;
        }
    }
}

// One layer over all panels. relu: apply max(0, .). If y is null the result goes to out[panel][N][32],
// else to the row-major y[M][N] (rows past M are dropped).
template <int R>
static void layer_block(const float* in, const float* W, const float* b, float* out, float* y,
                        int64_t panels, int64_t M, int64_t K, int64_t N, int64_t j0, bool relu) {
    for (int64_t p = 0; p < panels; ++p) {
        vf c0[MR], c1[MR];
        tile<R>(W + j0 * K, in + p * K * PW, K, c0, c1);
        for (int r = 0; r < R; ++r) {
            const float bias = b ? b[j0 + r] : 0.0f;
            c0[r] += bias; c1[r] += bias;
            if (relu) {
                const vf z = vf{};
                c0[r] = c0[r] > z ? c0[r] : z;
                c1[r] = c1[r] > z ? c1[r] : z;
            }
        }
        if (!y) {
            float* o = out + (p * N + j0) * PW;
            for (int r = 0; r < R; ++r) { st(o + r * PW, c0[r]); st(o + r * PW + 16, c1[r]); }
        } else {
            alignas(64) float t[MR][PW];
            for (int r = 0; r < R; ++r) { st(t[r], c0[r]); st(t[r] + 16, c1[r]); }
            const int64_t i0 = p * PW;
            const int rows = (int)(M - i0 < PW ? M - i0 : PW);
            for (int i = 0; i < rows; ++i)
                for (int r = 0; r < R; ++r) y[(i0 + i) * N + j0 + r] = t[r][i];
        }
    }
}

using BlockFn = void (*)(const float*, const float*, const float*, float*, float*, int64_t, int64_t, int64_t,
                        int64_t, int64_t, bool);
template <std::size_t... I>
static constexpr auto block_table(std::index_sequence<I...>) {
    return std::array<BlockFn, sizeof...(I)>{(I == 0 ? nullptr : &layer_block<(int)(I == 0 ? 1 : I)>)...};
}
static constexpr auto kBlocks = block_table(std::make_index_sequence<MR + 1>{});  // kBlocks[rows], rows 1..MR

static void layer(const float* in, const float* W, const float* b, float* out, float* y,
                  int64_t M, int64_t K, int64_t N, bool relu) {
    const int64_t panels = (M + PW - 1) / PW;
    const int64_t blocks = (N + MR - 1) / MR;
    #pragma omp parallel for schedule(static)
    for (int64_t jb = 0; jb < blocks; ++jb) {
        const int64_t j0 = jb * MR;
        const int rows = (int)(N - j0 < MR ? N - j0 : MR);
        kBlocks[rows](in, W, b, out, y, panels, M, K, N, j0, relu);
    }
}

// x[M][K] -> xp[panel][K][32], zero rows past M.
static void pack_rows(const float* x, float* xp, int64_t M, int64_t K) {
    const int64_t panels = (M + PW - 1) / PW;
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
        float* dst = xp + p * K * PW;
        for (int i = 0; i < PW; ++i) {
            const int64_t row = p * PW + i;
            if (row < M) {
                const float* src = x + row * K;
                for (int64_t k = 0; k < K; ++k) dst[k * PW + i] = src[k];
            } else {
                for (int64_t k = 0; k < K; ++k) dst[k * PW + i] = 0.0f;
            }
        }
    }
}

extern "C" void mlp3_forward(const float* x, const float* w1, const float* b1, const float* w2,
                             const float* b2, const float* w3, const float* b3, float* xp, float* h1,
                             float* h2, float* y, int64_t M, int64_t K0, int64_t N1, int64_t N2, int64_t N3) {
    pack_rows(x, xp, M, K0);
    layer(xp, w1, b1, h1, nullptr, M, K0, N1, true);
    layer(h1, w2, b2, h2, nullptr, M, N1, N2, true);
    layer(h2, w3, b3, nullptr, y, M, N2, N3, false);
}
""")

_PW = 32


class ModelNew(nn.Module):
    def __init__(self, input_size: int, hidden1: int, hidden2: int, output_size: int):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m, k0 = x.shape
        n1, n2, n3 = self.fc1.out_features, self.fc2.out_features, self.fc3.out_features
        rows = (m + _PW - 1) // _PW * _PW
        xp = torch.empty(rows * k0, dtype=x.dtype)
        h1 = torch.empty(rows * n1, dtype=x.dtype)
        h2 = torch.empty(rows * n2, dtype=x.dtype)
        y = torch.empty(m, n3, dtype=x.dtype)
        _lib.mlp3_forward(x, self.fc1.weight.contiguous(), self.fc1.bias.contiguous(),
                          self.fc2.weight.contiguous(), self.fc2.bias.contiguous(),
                          self.fc3.weight.contiguous(), self.fc3.bias.contiguous(),
                          xp, h1, h2, y, m, k0, n1, n2, n3)
        return y
