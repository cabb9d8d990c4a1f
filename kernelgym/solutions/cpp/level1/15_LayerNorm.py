import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

# Layer norm over the last dimension, one row per step: a vectorized two-pass mean and variance (the row
# stays in L1 between passes, and subtracting the mean first keeps the variance exact for shifted inputs),
# then one sweep that normalizes and applies the affine weight and bias.
_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __AVX512F__
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * 4)));

static inline vf ld(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void st(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf splat(float s) { return vf{} + s; }

// Horizontal sum by halving (log2(VL) steps of pairwise adds instead of a serial chain over the lanes).
static inline float hsum(vf v) {
    float a[VL];
    st(a, v);
    for (int w = VL / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) a[l] += a[l + w];
    return a[0];
}

// Sum of in[0..cv) (cv a multiple of VL) with four independent accumulators.
template <class F>
static inline float row_sum(int64_t cv, F term) {
    vf a0 = vf{}, a1 = vf{}, a2 = vf{}, a3 = vf{};
    int64_t j = 0;
    for (; j + 4 * VL <= cv; j += 4 * VL) {
        a0 += term(j); a1 += term(j + VL); a2 += term(j + 2 * VL); a3 += term(j + 3 * VL);
    }
    for (; j < cv; j += VL) a0 += term(j);
    return hsum((a0 + a1) + (a2 + a3));
}

extern "C" void layer_norm_rows(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
                                int64_t cols, float eps) {
    const int64_t cv = cols / VL * VL;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float sum = row_sum(cv, [&](int64_t j) { return ld(in + j); });
        for (int64_t k = cv; k < cols; ++k) sum += in[k];
        const float mean = sum / (float)cols;
        const vf vm = splat(mean);
        float sq = row_sum(cv, [&](int64_t j) { const vf d = ld(in + j) - vm; return d * d; });
        for (int64_t k = cv; k < cols; ++k) { const float d = in[k] - mean; sq += d * d; }
        const float inv = 1.0f / std::sqrt(sq / (float)cols + eps);
        const vf vi = splat(inv);
        for (int64_t j = 0; j < cv; j += VL)
            st(out + j, (ld(in + j) - vm) * vi * ld(gamma + j) + ld(beta + j));
        for (int64_t k = cv; k < cols; ++k) out[k] = (in[k] - mean) * inv * gamma[k] + beta[k];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)  # holds the affine weight and bias, initialized as the reference's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        weight, bias = self.norm.weight.contiguous(), self.norm.bias.contiguous()
        _lib.layer_norm_rows(x, weight, bias, y, x.numel() // cols, cols, float(self.norm.eps))
        return y
