# Idiom: the kernel library kept on the module. `self.op = lib` in __init__, then `self.op.relu_forward(...)` in forward.
# Task: L1/1_ReLU
# Backend: cpp
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

relu_lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = relu_lib

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        self.op.relu_forward(x, out, x.numel())
        return out
