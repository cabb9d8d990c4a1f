import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void scale_bias_forward(const float* x, const float* w, const float* b, float* y, int64_t rows,
                                   int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * w[c] + b[c];
    }
}
// dx = g * w; dw = sum over rows of g * x; db = sum over rows of g (column sums, row by row: contiguous reads)
extern "C" void scale_bias_backward(const float* x, const float* w, const float* g, float* dx, float* dw,
                                    float* db, int64_t rows, int64_t cols) {
    for (int64_t c = 0; c < cols; ++c) { dw[c] = 0.0f; db[c] = 0.0f; }
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* gr = g + r * cols;
        float* dxr = dx + r * cols;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            dxr[c] = gr[c] * w[c];
            dw[c] += gr[c] * xr[c];
            db[c] += gr[c];
        }
    }
}
""")


class _ScaleBias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.scale_bias_forward(x, weight, bias, y, x.numel() // cols, cols)
        ctx.save_for_backward(x, weight)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        cols = x.shape[-1]
        dx = torch.empty_like(x)
        dw = torch.empty_like(weight)
        db = torch.empty_like(weight)
        _lib.scale_bias_backward(x, weight, grad, dx, dw, db, x.numel() // cols, cols)
        return dx, dw, db


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ScaleBias.apply(x, self.weight, self.bias)
