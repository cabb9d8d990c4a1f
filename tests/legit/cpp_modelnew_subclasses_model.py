# Idiom: `class ModelNew(Model)` that overrides forward. The reference class is restated in the module, ModelNew inherits its __init__ (the nn.LayerNorm as weight holder) and replaces forward with a native kernel.
# Task: L1/15_LayerNorm
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void layer_norm_rows(const float* x, const float* w, const float* b, float* y,
                                int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += in[c];
        const float mean = s / cols;
        float v = 0.f;
        #pragma omp simd reduction(+:v)
        for (int64_t c = 0; c < cols; ++c) { const float d = in[c] - mean; v += d * d; }
        const float inv = 1.f / std::sqrt(v / cols + eps);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) out[c] = (in[c] - mean) * inv * w[c] + b[c];
    }
}
""")


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        y = torch.empty_like(x)
        _lib.layer_norm_rows(x, self.norm.weight.contiguous(), self.norm.bias.contiguous(), y,
                             x.numel() // cols, cols, float(self.norm.eps))
        return y
