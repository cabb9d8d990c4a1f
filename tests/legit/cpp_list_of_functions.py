# Idiom: a list of kernel stages. RMSNorm as two kernels kept in a list and applied in order (per-row inverse RMS, then scale), with a small buffer between them.
# Task: L1/16_RMSNorm
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void row_inv_rms(const float* x, float* inv, int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * cols;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += row[c] * row[c];
        inv[r] = 1.f / std::sqrt(s / cols + eps);
    }
}
extern "C" void scale_rows(const float* x, const float* inv, const float* w, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float k = inv[r];
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * k * w[c];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.stages = [lib.row_inv_rms, lib.scale_rows]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        inv = torch.empty(rows, dtype=x.dtype)
        y = torch.empty_like(x)
        first, second = self.stages
        first(x, inv, rows, cols, float(self.eps))
        second(x, inv, self.weight.contiguous(), y, rows, cols)
        return y
