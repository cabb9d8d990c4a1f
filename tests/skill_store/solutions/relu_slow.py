# Honest but slow ReLU (test fixture): correct every time, but it redoes the work eight times, so its
# speedup is far below any sensible threshold and the gate must reject it.
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu_slowly(const float* x, float* y, int64_t n) {
    for (int rep = 0; rep < 8; ++rep) {
        volatile float sink = 0.f;  // keeps g++ from folding the repeats into one pass
        for (int64_t i = 0; i < n; ++i) { y[i] = x[i] > 0.f ? x[i] : 0.f; sink = y[i]; }
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_slowly(x, y, x.numel())
        return y
