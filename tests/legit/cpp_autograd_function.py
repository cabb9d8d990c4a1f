# Idiom: a torch.autograd.Function wrapping the kernel. forward calls `L2NormalizeFn.apply(x)`, whose static forward runs the native kernel.
# Task: L1/19_L2Normalize
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void l2_normalize_rows(const float* x, float* y, int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) s += in[c] * in[c];
        const float norm = std::sqrt(s);
        const float k = 1.f / (norm > eps ? norm : eps);
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) out[c] = in[c] * k;
    }
}
""")


class L2NormalizeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.l2_normalize_rows(x, y, x.shape[0], x.shape[1], 1e-12)
        return y

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("inference only")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return L2NormalizeFn.apply(x)
