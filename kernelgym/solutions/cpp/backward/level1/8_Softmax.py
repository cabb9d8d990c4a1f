import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_forward(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
// dx = y * (g - sum(g * y)) per row
extern "C" void softmax_backward(const float* y, const float* g, float* dx, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* yr = y + r * cols;
        const float* gr = g + r * cols;
        float* dxr = dx + r * cols;
        float dot = 0.0f;
        #pragma omp simd reduction(+:dot)
        for (int64_t c = 0; c < cols; ++c) dot += gr[c] * yr[c];
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) dxr[c] = yr[c] * (gr[c] - dot);
    }
}
""")


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.softmax_forward(x, y, x.numel() // cols, cols)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        grad = grad.contiguous()
        dx = torch.empty_like(y)
        cols = y.shape[-1]
        _lib.softmax_backward(y, grad, dx, y.numel() // cols, cols)
        return dx


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Softmax.apply(x)
