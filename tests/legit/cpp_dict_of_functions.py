# Idiom: a dict of kernel functions. The kernel is picked from a table keyed by the reduced dimension (middle or last), built once in __init__.
# Task: L1/23_Sum_Dim
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
// x is (outer, r, inner): sum over r, keeping inner contiguous so the adds vectorize across it.
extern "C" void sum_middle(const float* x, float* y, int64_t outer, int64_t r, int64_t inner) {
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        float* out = y + o * inner;
        const float* base = x + o * r * inner;
        #pragma omp simd
        for (int64_t j = 0; j < inner; ++j) out[j] = base[j];
        for (int64_t k = 1; k < r; ++k) {
            const float* row = base + k * inner;
            #pragma omp simd
            for (int64_t j = 0; j < inner; ++j) out[j] += row[j];
        }
    }
}
// x is (outer, r): sum of each contiguous row.
extern "C" void sum_last(const float* x, float* y, int64_t outer, int64_t r) {
    #pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t k = 0; k < r; ++k) s += x[o * r + k];
        y[o] = s;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.kernels = {"middle": lib.sum_middle, "last": lib.sum_last}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        shape = list(x.shape)
        r = shape[dim]
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = x.numel() // (outer * r)
        shape[dim] = 1
        y = torch.empty(shape, dtype=x.dtype)
        if inner == 1:
            self.kernels["last"](x, y, outer, r)
        else:
            self.kernels["middle"](x, y, outer, r, inner)
        return y
