import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
// y = x * r * w with r = 1 / sqrt(mean(x^2) + eps) per row; r is kept for the backward
extern "C" void rmsnorm_forward(const float* x, const float* w, float* y, float* r_out, int64_t rows,
                                int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float ss = 0.0f;
        #pragma omp simd reduction(+:ss)
        for (int64_t c = 0; c < cols; ++c) ss += xr[c] * xr[c];
        const float inv = 1.0f / std::sqrt(ss / cols + eps);
        r_out[r] = inv;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
    }
}
// dx = r * w * g - x * r^3 * sum(w * g * x) / cols;  dw = sum over rows of g * x * r
extern "C" void rmsnorm_backward(const float* x, const float* w, const float* rs, const float* g, float* dx,
                                 float* dw, int64_t rows, int64_t cols) {
    for (int64_t c = 0; c < cols; ++c) dw[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* gr = g + r * cols;
        float* dxr = dx + r * cols;
        const float inv = rs[r];
        float dot = 0.0f;
        #pragma omp simd reduction(+:dot)
        for (int64_t c = 0; c < cols; ++c) dot += w[c] * gr[c] * xr[c];
        const float k = inv * inv * inv * dot / cols;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            dxr[c] = inv * w[c] * gr[c] - xr[c] * k;
            dw[c] += gr[c] * xr[c] * inv;
        }
    }
}
""")


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x, weight = x.contiguous(), weight.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty_like(x)
        rs = torch.empty(rows, dtype=x.dtype, device=x.device)
        _lib.rmsnorm_forward(x, weight, y, rs, rows, cols, float(eps))
        ctx.save_for_backward(x, weight, rs)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, rs = ctx.saved_tensors
        grad = grad.contiguous()
        cols = x.shape[-1]
        dx = torch.empty_like(x)
        dw = torch.empty_like(weight)
        _lib.rmsnorm_backward(x, weight, rs, grad, dx, dw, x.numel() // cols, cols)
        return dx, dw, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNorm.apply(x, self.weight, self.eps)
