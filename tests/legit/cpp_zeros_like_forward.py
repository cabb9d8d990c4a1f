# Idiom: the output allocated with torch.zeros_like in forward. The zero fill is redundant (the kernel writes every value) but common in generated code.
# Task: L1/12_LeakyReLU
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void leaky_relu(const float* x, float* y, int64_t n, float slope) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : x[i] * slope;
}
""")


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.zeros_like(x)
        _lib.leaky_relu(x, out, x.numel(), float(self.negative_slope))
        return out
